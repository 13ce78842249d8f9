"""The thin tmux client: one `tmux` process per call, checked and bounded in time.

Every per-call path (captures, pane states, the server's identity, keys typed into a pane, the
monitor's scans) runs the `tmux` client directly: one fork/exec, ~3 ms, nothing heavy to import.
Each call raises `OmpError("tmux_error", "<subcommand>: <stderr>")` when tmux reports a failure,
and gives up after `timeout` seconds so a hung server cannot hang omp. The leader's once-per-team
pane lifecycle (`new_session`, `split_pane`, layouts, options, titles, kills) is on the same
class but goes through libtmux's object API (`omp.tmux.lifecycle`, imported only when used).

tmux quirks dodged here (tmux 3.3a, reproduced):
- an argument ending in `;` is a command separator even with `-l --`: the `;` is escaped;
- a literal starting with `-` is taken as a flag unless `--` precedes it;
- `has-session -t name` matches name prefixes: exact targets use `=name`;
- `display-message -t %N` for a missing pane prints an empty line and exits 0;
- the socket file outlives `kill-server`: it is unlinked.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omp.errors import OmpError
from omp.tmux.args import CONTROL, NO_SERVER, NO_TARGET, SEP
from omp.tmux.identity import PaneIdentity, ServerInfo

if TYPE_CHECKING:
    from omp.tmux.lifecycle import Lifecycle

MAX_LITERAL_BYTES = 4000  # tmux refuses a whole command over ~16 KB; omp types short lines only

_KEY = re.compile(r"(?:[CMS]-)*(?:[A-Za-z][A-Za-z0-9]*|[!-~])")
_PANE_ID = re.compile(r"%\d+")


@dataclass(frozen=True)
class PaneState:
    """One pane as `list-panes` sees it. `activity` is the window's last activity (epoch s)."""

    pane_id: str
    pid: int | None
    dead: bool
    dead_status: int | None
    in_mode: bool  # copy mode (or another mode): keys typed now would be lost
    current_command: str
    current_path: str
    session_id: str
    window_id: str
    activity: float | None


@dataclass(frozen=True)
class PaneInfo:
    """One pane as `display-message` sees it: its identity and whether keys may reach it."""

    identity: PaneIdentity
    dead: bool
    in_mode: bool
    current_command: str


_STATE_FMT = SEP.join(
    [
        "#{pane_id}",
        "#{pane_pid}",
        "#{pane_dead}",
        "#{pane_dead_status}",
        "#{pane_in_mode}",
        "#{session_id}",
        "#{window_id}",
        "#{window_activity}",
        "#{pane_current_command}",
        "#{pane_current_path}",  # last: a path may contain anything
    ]
)
_INFO_FMT = SEP.join(
    [
        "#{pane_id}",
        "#{session_id}",
        "#{window_id}",
        "#{pid}",
        "#{start_time}",
        "#{pane_dead}",
        "#{pane_in_mode}",
        "#{pane_current_command}",
        "#{socket_path}",
    ]
)


def check_literal(text: str) -> None:
    """Refuse what must never be typed: empty, multi-line, control characters, oversize."""
    if not text:
        raise OmpError("invalid_text", "refusing to type an empty line")
    if CONTROL.search(text):
        raise OmpError("invalid_text", "refusing to type text with a newline or control character")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise OmpError("invalid_text", "refusing to type text that is not valid UTF-8") from exc
    if size > MAX_LITERAL_BYTES:
        raise OmpError(
            "text_too_long",
            f"refusing to type {size} bytes into a pane (limit {MAX_LITERAL_BYTES})",
            size=size,
        )


def _escape_arg(text: str) -> str:
    # tmux ends a command at any argument that ends in ';', even after `-l --`; it reads a final
    # '\;' as a literal ';' and drops that one backslash, whatever precedes it.
    return text[:-1] + "\\;" if text.endswith(";") else text


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


class Tmux:
    """A tmux server: `socket_name` (-L) or `socket_path` (-S); neither = the user's default."""

    def __init__(
        self,
        socket_name: str | None = None,
        socket_path: str | None = None,
        *,
        config_file: str | None = None,
        timeout: float = 5.0,
        binary: str = "tmux",
    ) -> None:
        if socket_name and socket_path:
            raise ValueError("give socket_name or socket_path, not both")
        self.socket_name = socket_name
        self.socket_path = socket_path
        self.config_file = config_file
        self.timeout = timeout
        self.binary = binary
        self._life: Lifecycle | None = None
        self._base: list[str] = []
        if socket_name:
            self._base += ["-L", socket_name]
        if socket_path:
            self._base += ["-S", socket_path]
        if config_file:
            self._base += ["-f", config_file]

    # -- running commands -------------------------------------------------------------------------

    def _exec(self, args: Sequence[str]) -> tuple[int, str, str]:
        # Every argument is escaped: tmux splits commands at any argument ending in ';'.
        return self._run([_escape_arg(a) for a in args], args[0] if args else "tmux")

    def _run(self, args: Sequence[str], what: str) -> tuple[int, str, str]:
        """One tmux client process, bounded by `timeout`: (returncode, stdout, stderr)."""
        try:
            cp = subprocess.run(
                [self.binary, *self._base, *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            raise OmpError(
                "tmux_not_found", f"{self.binary} is not installed (apt-get install tmux)"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise OmpError(
                "tmux_error", f"{what}: no answer from tmux within {self.timeout:g}s"
            ) from exc
        return cp.returncode, cp.stdout, cp.stderr.strip()

    def cmd(self, *args: str) -> str:
        """Run one tmux command; its stdout, or `tmux_error` naming the subcommand."""
        rc, out, err = self._exec(args)
        if rc != 0 or err:
            raise OmpError(
                "tmux_error", f"{args[0]}: {err or f'exit status {rc}'}", subcommand=args[0]
            )
        return out

    def _query(self, *args: str) -> str | None:
        """Like `cmd`, but None when there is no server or the target does not exist."""
        rc, out, err = self._exec(args)
        if rc == 0 and not err:
            return out
        if any(s in err for s in NO_SERVER + NO_TARGET):
            return None
        raise OmpError("tmux_error", f"{args[0]}: {err or f'exit status {rc}'}", subcommand=args[0])

    # -- server -----------------------------------------------------------------------------------

    def version(self) -> str | None:
        """`3.3a` for tmux 3.3a; None if tmux is missing or does not answer."""
        try:
            rc, out, _ = self._exec(["-V"])
        except OmpError:
            return None
        parts = out.split()
        return parts[1] if rc == 0 and len(parts) == 2 else None

    def is_available(self) -> bool:
        return shutil.which(self.binary) is not None and self.version() is not None

    def server_identity(self) -> ServerInfo | None:
        out = self._query(
            "display-message", "-p", f"#{{pid}}{SEP}#{{start_time}}{SEP}#{{socket_path}}"
        )
        if not out:
            return None
        pid, started, path = out.rstrip("\n").split(SEP, 2)
        return {"socket_path": path, "server_pid": int(pid), "server_started_at": int(started)}

    def kill_server(self) -> bool:
        """Kill this (private) server and unlink its socket. False if no server was running."""
        if not (self.socket_name or self.socket_path):
            raise OmpError("tmux_error", "kill-server: refusing to kill the user's default server")
        info = self.server_identity()
        sock = info["socket_path"] if info else self._socket_file()
        killed = info is not None and self._query("kill-server") is not None
        with contextlib.suppress(OSError):
            st = os.lstat(sock)
            if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(sock)
        return killed

    def _socket_file(self) -> str:
        return self.socket_path or socket_file_for(self.socket_name)

    # -- sessions, windows, panes -----------------------------------------------------------------

    def has_session(self, name: str) -> bool:
        # `=name` matches exactly; a bare name would also match any session it is a prefix of.
        rc, _, err = self._exec(["has-session", "-t", f"={name}"])
        return rc == 0 and not err

    # The leader's once-per-team lifecycle: libtmux's object API (`omp.tmux.lifecycle`),
    # imported on first use only.

    def _lifecycle(self) -> Lifecycle:
        if self._life is None:
            from omp.tmux.lifecycle import Lifecycle

            self._life = Lifecycle(self)
        return self._life

    def new_session(
        self,
        name: str,
        *,
        cwd: str | Path,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        width: int = 240,
        height: int = 60,
    ) -> tuple[str, str, str]:
        """A detached session running `command`; returns (session_id, window_id, pane_id)."""
        return self._lifecycle().new_session(
            name, cwd=cwd, command=command, env=env, width=width, height=height
        )

    def split_pane(
        self,
        target_pane_id: str,
        *,
        cwd: str | Path,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        horizontal: bool = True,
        size: int | str | None = None,
    ) -> str:
        """Split `target_pane_id` (side by side if `horizontal`); focus stays put. The new id."""
        return self._lifecycle().split(
            target_pane_id, cwd=cwd, command=command, env=env, horizontal=horizontal, size=size
        )

    def select_layout(self, window_id: str, layout: str) -> None:
        self._lifecycle().select_layout(window_id, layout)

    def set_pane_title(self, pane_id: str, title: str) -> None:
        self._lifecycle().set_pane_title(pane_id, title)

    def set_window_option(self, window_id: str, name: str, value: str) -> None:
        self._lifecycle().set_option(window_id, name, value, window=True)

    def set_pane_option(self, pane_id: str, name: str, value: str) -> None:
        self._lifecycle().set_option(pane_id, name, value, window=False)

    def kill_pane(self, pane_id: str) -> bool:
        """False if the pane (or the server) was already gone."""
        return self._lifecycle().kill_pane(pane_id)

    def kill_session(self, name: str) -> bool:
        """False if the session (or the server) was already gone."""
        return self._lifecycle().kill_session(name)

    # -- reading ----------------------------------------------------------------------------------

    def pane_states(self, pane_ids: Sequence[str]) -> dict[str, PaneState | None]:
        """The state of each pane (None = gone), from one `list-panes -a` call."""
        found = self.all_panes()
        return {p: found.get(p) for p in pane_ids}

    def all_panes(self) -> dict[str, PaneState]:
        """Every pane of the server by id (empty when no server runs): one `list-panes -a`."""
        found: dict[str, PaneState] = {}
        out = self._query("list-panes", "-a", "-F", _STATE_FMT)
        for line in (out or "").splitlines():
            f = line.split(SEP, 9)
            if len(f) != 10:
                continue
            activity = _int(f[7])
            found[f[0]] = PaneState(
                pane_id=f[0],
                pid=_int(f[1]),
                dead=f[2] == "1",
                dead_status=_int(f[3]),
                in_mode=f[4] == "1",
                session_id=f[5],
                window_id=f[6],
                activity=float(activity) if activity is not None else None,
                current_command=f[8],
                current_path=f[9],
            )
        return found

    def capture(self, pane_id: str, lines: int = 40) -> list[str]:
        """The bottom `lines` rows of the visible screen, right-stripped, trailing blanks dropped.

        `-J` joins rows the terminal wrapped, so a long line reads as one.
        """
        out = self.cmd("capture-pane", "-p", "-J", "-t", pane_id)
        rows = [r.rstrip() for r in out.split("\n")]
        while rows and not rows[-1]:
            rows.pop()
        return rows[-lines:] if lines > 0 else []

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]:
        """`capture` of many panes through ONE tmux client (the monitor's scan: ~4 ms for 16
        panes instead of ~40). A pane that is gone is left out of the result.

        The commands are chained with bare `;` arguments (so this is the one call that does not
        escape them), each capture preceded by a marker line. The marker carries an index, not
        the pane id: display-message expands its text through strftime, which would eat `%3`.
        """
        if not pane_ids:
            return {}
        mark = f"omp-capture-{secrets.token_hex(6)}"
        args: list[str] = []
        for i, pane in enumerate(pane_ids):
            if not _PANE_ID.fullmatch(pane):
                raise OmpError("invalid_input", f"invalid pane id {pane!r}")
            args += ["display-message", "-p", f"{mark} {i}", ";"]
            args += ["capture-pane", "-p", "-J", "-t", pane, ";"]
            args += ["display-message", "-p", f"{mark} end", ";"]
        _, stdout, _ = self._run(args[:-1], "capture-pane")
        # tmux stops at the first failing command (a gone pane): what came before is good.
        out: dict[str, list[str]] = {}
        rows: list[str] = []
        current: str | None = None
        for row in stdout.split("\n"):
            if row == f"{mark} end":
                if current is not None:  # only a capture that ran to its end marker counts
                    out[current] = rows
                current = None
            elif row.startswith(mark + " "):
                current, rows = pane_ids[int(row[len(mark) + 1 :])], []
            elif current is not None:
                rows.append(row.rstrip())
        for rows in out.values():
            while rows and not rows[-1]:
                rows.pop()
            del rows[: max(0, len(rows) - lines)]
        return out

    def identity_of(self, pane_id: str) -> PaneIdentity | None:
        info = self.pane_info(pane_id)
        return info.identity if info else None

    def matches(self, identity: PaneIdentity) -> bool:
        """True if the pane id still names the same pane of the same server incarnation."""
        return self.identity_of(identity.pane_id) == identity

    def pane_info(self, pane_id: str) -> PaneInfo | None:
        """The pane's identity and state from one `display-message`; None if it is gone."""
        out = self._query("display-message", "-p", "-t", pane_id, _INFO_FMT)
        f = (out or "").rstrip("\n").split(SEP, 8)
        if len(f) != 9 or f[0] != pane_id:
            return None  # tmux 3.3a prints an empty line (exit 0) for a missing pane
        ident = PaneIdentity(
            socket_path=f[8],
            server_pid=int(f[3]),
            server_started_at=int(f[4]),
            session_id=f[1],
            window_id=f[2],
            pane_id=f[0],
        )
        return PaneInfo(ident, dead=f[5] == "1", in_mode=f[6] == "1", current_command=f[7])

    # -- typing -----------------------------------------------------------------------------------

    def send_literal(self, pane_id: str, text: str) -> None:
        """Type `text` as is (no key names, no Enter). One short line only."""
        check_literal(text)
        self.cmd("send-keys", "-t", pane_id, "-l", "--", text)

    def send_key(self, pane_id: str, key: str) -> None:
        """Press one named key: Enter, C-m, Escape, Tab, 1, ..."""
        if not _KEY.fullmatch(key) or key == ";":
            raise OmpError("invalid_key", f"{key!r} is not a tmux key name")
        self.cmd("send-keys", "-t", pane_id, key)

    def lock_path(self, lock_dir: Path, pane_id: str) -> Path:
        """The file whose flock serialises typing into `pane_id` of this server.

        Keyed on the resolved socket file, however the server was named (-L name, -S path or
        $TMUX), so a launch trigger and a nudge into the same pane take the same lock.
        """
        import hashlib  # here: ~1-6 ms that the reading paths do not need

        from omp.store.paths import pane_lock

        if self.socket_path or self.socket_name:
            server = self._socket_file()
        else:
            server = os.environ.get("TMUX", "").split(",")[0] or self._socket_file()
        tag = hashlib.sha256(os.path.realpath(server).encode()).hexdigest()[:12]
        return pane_lock(lock_dir, tag, pane_id)


def socket_file_for(name: str | None) -> str:
    """The socket file tmux uses for `-L name` (the default server for None)."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return os.path.join(base, f"tmux-{os.geteuid()}", name or "default")


def same_socket(a: str, b: str) -> bool:
    """Do two socket paths name one server (however it was named: -L, -S, $TMUX)?"""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
