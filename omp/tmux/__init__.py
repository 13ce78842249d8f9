"""Every tmux call omp makes: two doors onto one server, chosen by how often a path runs.

- `client.Tmux`, the thin client: one `tmux` process per call (`subprocess`, ~3 ms), checked
  (`OmpError("tmux_error", "<subcommand>: <stderr>")`) and bounded (`timeout`, 5 s). Used by
  every path that runs per call or per scan: `omp team api` and the nudge its send types,
  plain `omp team status`, `wait`'s unreachable check, `omp hook stop`, the monitor's scans
  (`capture_many`, `pane_states`, `server_identity`), `send_literal` / `send_key`.
- `lifecycle.Lifecycle`, libtmux's object API (`Server`, `Window`, `Pane`): what the leader does
  once per team: create the detached session or split the leader's window for each worker (env,
  cwd, command), select the layout, set pane options and titles, kill panes and sessions on
  shutdown, remove-worker and rollback. Callers reach it through the same `Tmux` methods
  (`new_session`, `split_pane`, `select_layout`, `set_pane_option`, `set_window_option`,
  `set_pane_title`, `kill_pane`, `kill_session`), which import it on first use.

Why two: importing libtmux costs far more than the work of a per-call path. Measured on this
machine (2 shared cores; `benchmarks/bench_tmux_import.py`, median of 15 fresh interpreters):
the interpreter alone ~20 ms; `import omp.tmux` (the thin client) +~10 ms over it; `import
libtmux` +~70-180 ms (the higher figure on a loaded machine). A launch already takes about a
second per worker, so libtmux's cost is noise there; on `omp team api` (called hundreds of times
by agents, ~3x the interpreter floor in total) it would more than double each call. A test pins
that the per-call paths never import libtmux (tests/team/test_events.py, tests/test_tmux.py).

`identity` holds the one tmux identity type (`TmuxIdentity`: a team's server incarnation,
session and window, as config.json's `tmuxIdentity` records it; `PaneIdentity`: one pane of it).
Typing a line into an agent (paste, pause, key, verify on screen) is not here: it is the team's
business, in `omp.team.typein`, built on this client's primitives.
"""

from omp.tmux.client import (
    MAX_LITERAL_BYTES,
    NO_SERVER,
    NO_TARGET,
    PaneInfo,
    PaneState,
    Tmux,
    check_literal,
    same_socket,
    socket_file_for,
)
from omp.tmux.identity import PaneIdentity, ServerInfo, TmuxIdentity

__all__ = [
    "MAX_LITERAL_BYTES",
    "NO_SERVER",
    "NO_TARGET",
    "PaneIdentity",
    "PaneInfo",
    "PaneState",
    "ServerInfo",
    "Tmux",
    "TmuxIdentity",
    "check_literal",
    "same_socket",
    "socket_file_for",
]
