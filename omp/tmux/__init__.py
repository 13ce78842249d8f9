"""Every tmux call omp makes: two doors onto one server, chosen by how often a path runs.

- `client.Tmux`, the thin client: one `tmux` process per call (`subprocess`, ~3 ms), checked
  (`OmpError("tmux_error", "<subcommand>: <stderr>")`) and bounded (`timeout`, 5 s). Used by
  every path that runs per call or per scan: `omp team api` and the nudge its send types,
  plain `omp team status`, `wait`'s unreachable check, `omp hook stop`, the monitor's scans
  (`capture_many`, `pane_states`, `server_identity`), `send_literal` / `send_key`.
- `lifecycle.Lifecycle`, libtmux's object API (`Server`, `Window`, `Pane`): what the leader does
  once per team: create the detached session or split the leader's window for each worker (env,
  cwd, command), select the layout, set pane options and titles, kill panes and sessions on
  shutdown, remove-worker and rollback (and the session of `omp doctor`'s throwaway check
  server, a step that takes about a second anyway). Callers reach it through the same `Tmux` methods
  (`new_session`, `split_pane`, `select_layout`, `set_pane_option`, `set_window_option`,
  `set_pane_title`, `kill_pane`, `kill_session`), which import it on first use.

Why two: importing libtmux costs far more than the work of a per-call path. Measured on this
machine (2 cores shared with other work; `benchmarks/bench_tmux_import.py --runs 21`, fresh
interpreters, the import alone, min / median, load average ~4): the thin client (`omp.tmux`)
37 / 45 ms, with typing (`omp.mail.typein`) 50 / 59 ms; `import libtmux` 74 / 85 ms, the
lifecycle module 81 / 103 ms (it loads libtmux's pane, window, session and options modules);
the interpreter itself starts in 11 / 14 ms. At load ~7 the same rows read 45 / 97, 62 / 127,
110 / 210 and 98 / 232 ms. A launch takes about a second (more per worker), so libtmux is
noise there; on `omp team api`, called hundreds of times by agents at ~3x the interpreter floor,
it would more than double every call. tests/tmux/test_lifecycle.py pins that the per-call paths
(the client's reads, typing, status, wait, the monitor) never import libtmux, and that libtmux's
own untimed runner never runs; tests/mail/test_events.py pins what an API call imports.

`identity` holds the one tmux identity type (`TmuxIdentity`: a team's server incarnation,
session and window, as config.json's `tmuxIdentity` records it; `PaneIdentity`: one pane of it).
Typing a line into an agent (paste, pause, key, verify on screen) is not here: it is the team's
business, in `omp.mail.typein`, built on this client's primitives.
"""

from omp.tmux.args import NO_SERVER, NO_TARGET
from omp.tmux.client import (
    MAX_LITERAL_BYTES,
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
