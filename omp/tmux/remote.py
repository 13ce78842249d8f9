"""A tmux server on another host, driven over ssh: the same `Tmux` client, one runner changed.

Every tmux command omp sends (the thin client's reads and typing, and the lifecycle's
libtmux objects, which run through the client's `_exec`) becomes `ssh <host> -- tmux -L <socket>
<args>` on the host's one multiplexed connection (`omp.tmux.ssh`). tmux's answers and errors are
the same words as locally, so callers read a remote pane exactly as a local one; a host that
does not answer is `host_unreachable`, never mistaken for "no server" (which would read as every
pane gone while the link alone is down).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.tmux import ssh
from omp.tmux.args import SEP
from omp.tmux.client import Tmux, _int
from omp.tmux.identity import PaneIdentity

# One line per pane of a host's server: its state, its session's name and the server's
# incarnation, in one `list-panes -a` (`RemoteTmux.remote_panes`)
_PANES = SEP.join(
    [
        "#{pane_id}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_in_mode}",
        "#{session_id}",
        "#{window_id}",
        "#{window_activity}",
        "#{pid}",
        "#{start_time}",
        "#{session_name}",
        "#{pane_dead_status}",
        "#{socket_path}",  # last: a path may hold anything
    ]
)
_FIELDS = 12


@dataclass(frozen=True)
class RemotePane:
    """One pane of a host's tmux server as one listing saw it (the monitor's `PaneLike`; what
    `status` and the board read of a remote worker's pane)."""

    pane_id: str
    dead: bool
    in_mode: bool
    session_id: str
    window_id: str
    activity: float | None
    session_name: str
    socket_path: str  # on the host
    server_pid: int
    server_started_at: int
    pid: int | None = None  # the host's process: never compared with a process here
    dead_status: int | None = None

    def identity(self) -> PaneIdentity:
        """What typing checks before every key (`type_line`'s `expected`)."""
        return PaneIdentity(
            self.socket_path,
            self.server_pid,
            self.server_started_at,
            self.session_id,
            self.window_id,
            self.pane_id,
        )

    def ident_json(self) -> dict[str, Any]:
        """As config.json's `tmuxIdentity` names a server and window (`policy.target_id`)."""
        return {k: v for k, v in self.identity().to_json().items() if k != "paneId"}


def parse_panes(out: str) -> dict[str, RemotePane]:
    found: dict[str, RemotePane] = {}
    for line in out.splitlines():
        f = line.split(SEP, _FIELDS - 1)
        if len(f) != _FIELDS:
            continue
        pid, started = _int(f[7]), _int(f[8])
        if pid is None or started is None:
            continue
        activity = _int(f[6])
        found[f[0]] = RemotePane(
            pane_id=f[0],
            pid=_int(f[1]),
            dead=f[2] == "1",
            in_mode=f[3] == "1",
            session_id=f[4],
            window_id=f[5],
            activity=float(activity) if activity is not None else None,
            server_pid=pid,
            server_started_at=started,
            session_name=f[9],
            dead_status=_int(f[10]),
            socket_path=f[11],
        )
    return found


class RemoteTmux(Tmux):
    """The tmux server `-L socket_name` of `host`'s user."""

    def __init__(
        self, host: ssh.Host, socket_name: str, *, timeout: float = 15.0, binary: str = "tmux"
    ) -> None:
        super().__init__(socket_name=socket_name, timeout=timeout, binary=binary)
        self.host = host
        # `-u`: the client speaks UTF-8 whatever the remote login's locale (often none under
        # ssh): without it tmux prints the unit separator of omp's formats as `_`
        self._base = ["-u", *self._base]

    def _run(self, args: Sequence[str], what: str) -> tuple[int, str, str]:
        result = ssh.run(
            self.host, [self.binary, *self._base, *args], timeout=self.timeout, check=False
        )
        if result.code == 127 and "not found" in result.err:
            raise OmpError(
                "tmux_not_found", f"{self.binary} is not installed on host {self.host.name}"
            )
        return result.code, result.out, result.err

    def remote_panes(self) -> dict[str, RemotePane] | None:
        """Every pane of the server by id; None when no server runs there. One ssh call."""
        out = self._query("list-panes", "-a", "-F", _PANES)
        return None if out is None else parse_panes(out)

    def is_available(self) -> bool:
        return self.version() is not None

    def kill_server(self) -> bool:
        info = self.server_identity()
        killed = info is not None and self._query("kill-server") is not None
        if info is not None:  # tmux leaves its socket file behind
            ssh.run(self.host, ["rm", "-f", "--", info["socket_path"]], check=False)
        return killed

    def lock_path(self, lock_dir: Path, pane_id: str) -> Path:
        """Typing into a remote pane is serialised by a local lock keyed on the host and the
        server, as a local pane's is on its socket file."""
        from omp.store.paths import pane_lock

        s = self.host.settings
        key = f"{self.host.destination}:{s.port}:{self.socket_name}"
        tag = "r" + hashlib.sha256(key.encode()).hexdigest()[:11]
        return pane_lock(lock_dir, tag, pane_id)
