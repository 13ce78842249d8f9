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
from pathlib import Path

from omp.errors import OmpError
from omp.tmux import ssh
from omp.tmux.client import Tmux


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
