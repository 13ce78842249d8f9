"""The only door to tmux. Every call is checked and bounded in time.

Calls run the `tmux` client directly (one fork/exec, ~3 ms) rather than through libtmux: importing
libtmux costs ~70 ms on commands that must stay fast, its `send_keys` swallows tmux errors, and its
commands have no timeout. Each call here raises `OmpError("tmux_error", "<subcommand>: <stderr>")`
when tmux reports a failure, and gives up after `timeout` seconds so a hung server cannot hang omp.

tmux quirks dodged here (tmux 3.3a, reproduced):
- an argument ending in `;` is a command separator even with `-l --`: the `;` is escaped;
- a literal starting with `-` is taken as a flag unless `--` precedes it;
- `has-session -t name` matches name prefixes: exact targets use `=name`;
- `display-message -t %N` for a missing pane prints an empty line and exits 0;
- a detached session defaults to 80x24, where the 5th split fails: sessions are made 240x60;
- the socket file outlives `kill-server`: it is unlinked;
- text and Enter in one burst are taken as a paste by Codex and Gemini: `deliver` types, pauses,
  presses the submit key separately, then checks the screen.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from omp.agents import AgentProfile, classify_screen, input_region, squash, text_probe
from omp.errors import OmpError
from omp.store import fs

MAX_LITERAL_BYTES = 4000  # tmux refuses a whole command over ~16 KB; omp types short lines only
SHELLS = frozenset({"sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "csh", "tcsh", "login"})

_SEP = "\x1f"  # unit separator: cannot occur in ids, numbers or command names
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_KEY = re.compile(r"(?:[CMS]-)*(?:[A-Za-z][A-Za-z0-9]*|[!-~])")
_PANE_ID = re.compile(r"%\d+")
_SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")
_NO_SERVER = ("no server running on", "error connecting to", "server exited unexpectedly")
_NO_TARGET = ("can't find pane", "can't find window", "can't find session")


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
class PaneIdentity:
    """A pane id is only unique within one server's life: pin the server too."""

    socket_path: str
    server_pid: int
    server_started_at: int
    session_id: str
    window_id: str
    pane_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "socketPath": self.socket_path,
            "serverPid": self.server_pid,
            "serverStartedAt": self.server_started_at,
            "sessionId": self.session_id,
            "windowId": self.window_id,
            "paneId": self.pane_id,
        }

    @classmethod
    def from_json(cls, obj: object) -> PaneIdentity | None:
        """Parse `to_json()` output; None if anything is missing or malformed."""
        if not isinstance(obj, dict):
            return None
        try:
            strs = [obj[k] for k in ("socketPath", "sessionId", "windowId", "paneId")]
            pid, started = int(obj["serverPid"]), int(obj["serverStartedAt"])
        except (KeyError, TypeError, ValueError):
            return None
        if not all(isinstance(s, str) and s for s in strs):
            return None
        return cls(strs[0], pid, started, strs[1], strs[2], strs[3])


class ServerInfo(TypedDict):
    socket_path: str
    server_pid: int
    server_started_at: int


@dataclass(frozen=True)
class Delivery:
    """How a `deliver` ended. `ok` only when the screen showed the text leave the input box.

    reason: delivered | gone | dead | copy_mode | agent_not_running | not_ready | busy (with
    `only_idle`) | lock_timeout | no_echo (the text never showed in the input box) | unverified
    (still there after all rounds).
    """

    ok: bool
    reason: str
    rounds: int = 0
    elapsed: float = 0.0
    screen: str | None = None  # the classification when reason is "not_ready" or "busy"


@dataclass(frozen=True)
class _PaneInfo:
    identity: PaneIdentity
    dead: bool
    in_mode: bool
    current_command: str


_STATE_FMT = _SEP.join(
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
_IDS_FMT = _SEP.join(["#{session_id}", "#{window_id}", "#{pane_id}"])
_INFO_FMT = _SEP.join(
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
    if _CONTROL.search(text):
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
        self.timeout = timeout
        self._binary = binary
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
                [self._binary, *self._base, *args],
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
                "tmux_not_found", f"{self._binary} is not installed (apt-get install tmux)"
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
        if any(s in err for s in _NO_SERVER + _NO_TARGET):
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
        return shutil.which(self._binary) is not None and self.version() is not None

    def server_identity(self) -> ServerInfo | None:
        out = self._query(
            "display-message", "-p", f"#{{pid}}{_SEP}#{{start_time}}{_SEP}#{{socket_path}}"
        )
        if not out:
            return None
        pid, started, path = out.rstrip("\n").split(_SEP, 2)
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
        if not _SESSION_NAME.fullmatch(name):
            raise OmpError(
                "invalid_input",
                f"invalid tmux session name {name!r}: use letters, digits, '_' or '-'",
            )
        out = self.cmd(
            "new-session", "-d", "-P", "-F", _IDS_FMT, "-s", name,
            "-x", str(width), "-y", str(height), "-c", str(cwd),
            *_env_args(env), *_command_args(command, env),
        )  # fmt: skip
        sid, wid, pid = out.strip().split(_SEP)
        return sid, wid, pid

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
        args = ["split-window", "-d", "-P", "-F", "#{pane_id}", "-t", target_pane_id]
        args += ["-h" if horizontal else "-v", "-c", str(cwd)]
        if size is not None:
            args += ["-l", str(size)]
        return self.cmd(*args, *_env_args(env), *_command_args(command, env)).strip()

    def select_layout(self, window_id: str, layout: str) -> None:
        self.cmd("select-layout", "-t", window_id, layout)

    def set_pane_title(self, pane_id: str, title: str) -> None:
        # select-pane -T expands formats: '#' would start one.
        self.cmd("select-pane", "-t", pane_id, "-T", title.replace("#", "##"))

    def set_window_option(self, window_id: str, name: str, value: str) -> None:
        self.cmd("set-option", "-w", "-t", window_id, name, value)

    def set_pane_option(self, pane_id: str, name: str, value: str) -> None:
        self.cmd("set-option", "-p", "-t", pane_id, name, value)

    def kill_pane(self, pane_id: str) -> bool:
        """False if the pane (or the server) was already gone."""
        return self._query("kill-pane", "-t", pane_id) is not None

    def kill_session(self, name: str) -> bool:
        """False if the session (or the server) was already gone."""
        return self._query("kill-session", "-t", f"={name}") is not None

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
            f = line.split(_SEP, 9)
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
        info = self._pane_info(pane_id)
        return info.identity if info else None

    def matches(self, identity: PaneIdentity) -> bool:
        """True if the pane id still names the same pane of the same server incarnation."""
        return self.identity_of(identity.pane_id) == identity

    def _pane_info(self, pane_id: str) -> _PaneInfo | None:
        out = self._query("display-message", "-p", "-t", pane_id, _INFO_FMT)
        f = (out or "").rstrip("\n").split(_SEP, 8)
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
        return _PaneInfo(ident, dead=f[5] == "1", in_mode=f[6] == "1", current_command=f[7])

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

    def deliver(self, pane_id: str, text: str, profile: AgentProfile, **options: Any) -> bool:
        """Type `text` into an agent's input box and submit it; True only if verified on screen.

        The options are `deliver_result`'s, which also says why a delivery did not happen.
        """
        return self.deliver_result(pane_id, text, profile, **options).ok

    def deliver_result(
        self,
        pane_id: str,
        text: str,
        profile: AgentProfile,
        *,
        lock_dir: Path,
        expected: PaneIdentity | None = None,
        rounds: int = 3,
        poll: float = 0.03,
        echo_timeout: float = 1.0,
        round_timeout: float = 1.0,
        lock_timeout: float = 10.0,
        only_idle: bool = False,
    ) -> Delivery:
        """The verified submit used for nudges and triggers.

        Under a per-pane lock (so two senders never interleave keystrokes): refuse a gone or dead
        pane, a pane in copy mode (the user's scrollback is left alone), a pane whose agent exited
        to a shell, and a screen that is neither ready nor busy (a dialog, a restart). Then type
        the text, wait `profile.submit_delay` and until the text shows in the input box, press
        `profile.submit_key`, and poll until the text has left the input box, pressing the key
        again up to `rounds` times. Text an earlier unverified attempt left in the box is not
        typed twice.

        `only_idle`: type nothing unless the screen is `ready` (reason `busy` otherwise): keys that
        reach a busy agent disturb it (Copilot CLI backgrounds a running command, and replays
        queued lines as turns later).

        Raises `OmpError("pane_mismatch")` if `expected` is given and the pane id now belongs to
        another pane or server incarnation: the caller's record is stale, not just "not now".
        Raises `invalid_text` / `text_too_long` for text that must not be typed.
        """
        check_literal(text)
        t0 = time.monotonic()

        def done(ok: bool, reason: str, n: int = 0, screen: str | None = None) -> Delivery:
            return Delivery(ok, reason, n, time.monotonic() - t0, screen)

        probe = text_probe(text)

        def in_box(lines: Sequence[str]) -> bool:
            box = input_region(profile, lines)
            return box is not None and probe in squash("".join(box))

        with self._pane_lock(lock_dir, pane_id, lock_timeout) as locked:
            if not locked:
                return done(False, "lock_timeout")
            info = self._pane_info(pane_id)
            if info is None:
                return done(False, "gone")
            if expected is not None and info.identity != expected:
                raise OmpError(
                    "pane_mismatch",
                    f"pane {pane_id} is not the recorded pane any more "
                    "(its session, window or tmux server changed)",
                    pane_id=pane_id,
                )
            refused = _refusal(info, profile)
            if refused:
                return done(False, refused)
            try:
                lines = self.capture(pane_id, 200)
                screen = classify_screen(profile, lines)
                if screen not in ("ready", "busy"):
                    return done(False, "not_ready", screen=screen)
                if only_idle and screen != "ready":
                    return done(False, "busy", screen=screen)
                if not in_box(lines):
                    self.send_literal(pane_id, text)
                sent = time.monotonic()
                # Wait for the echo (bounded) and at least submit_delay, so the key does not
                # arrive in the same burst as the text.
                seen = in_box(self.capture(pane_id, 200))
                while not seen and time.monotonic() < sent + echo_timeout:
                    time.sleep(poll)
                    seen = in_box(self.capture(pane_id, 200))
                rest = sent + profile.submit_delay - time.monotonic()
                if rest > 0:
                    time.sleep(rest)
                for n in range(1, rounds + 1):
                    now = self._pane_info(pane_id)
                    if now is None or now.dead:
                        return done(False, "gone" if now is None else "dead", n - 1)
                    if now.in_mode:
                        return done(False, "copy_mode", n - 1)
                    self.send_key(pane_id, profile.submit_key)
                    end = time.monotonic() + round_timeout
                    while True:
                        time.sleep(poll)
                        if not in_box(self.capture(pane_id, 200)):
                            return done(seen, "delivered" if seen else "no_echo", n)
                        if time.monotonic() >= end:
                            break
                return done(False, "unverified", rounds)
            except OmpError as exc:
                if any(s in exc.message for s in _NO_TARGET + _NO_SERVER):
                    return done(False, "gone")
                raise

    @contextlib.contextmanager
    def _pane_lock(self, lock_dir: Path, pane_id: str, timeout: float) -> Iterator[bool]:
        """An exclusive flock per (server, pane); yields False if not had within `timeout`."""
        if not fs.check_entry(lock_dir, want_dir=True):
            try:  # the last component only: callers hand in a directory inside their own tree
                os.mkdir(lock_dir, fs.DIR_MODE)
            except FileExistsError:
                pass
            fs.check_entry(lock_dir, want_dir=True)
        # Key on the resolved socket file, however the server was named (-L name, -S path or
        # $TMUX), so a launch trigger and a nudge into the same pane take the same lock.
        if self.socket_path or self.socket_name:
            server = self._socket_file()
        else:
            server = os.environ.get("TMUX", "").split(",")[0] or self._socket_file()
        tag = hashlib.sha256(os.path.realpath(server).encode()).hexdigest()[:12]
        path = lock_dir / f"pane-{tag}-{pane_id.lstrip('%')}.lock"
        fd = fs.open_file(path, os.O_RDWR, create=True)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.01)
            yield True
        finally:
            os.close(fd)  # closing releases the flock


def _refusal(info: _PaneInfo, profile: AgentProfile) -> str | None:
    if info.dead:
        return "dead"
    if info.in_mode:
        return "copy_mode"
    # The agent exited and left a shell: typed text would run as a command.
    cmd = os.path.basename(info.current_command).lstrip("-")
    if cmd in SHELLS and os.path.basename(profile.program) not in SHELLS:
        return "agent_not_running"
    return None


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


def _env_args(env: Mapping[str, str] | None) -> list[str]:
    args: list[str] = []
    for key, value in (env or {}).items():
        if not key or "=" in key or _CONTROL.search(key):
            raise OmpError("invalid_input", f"invalid environment variable name {key!r}")
        args += ["-e", f"{key}={value}"]
    return args


def _command_args(command: Sequence[str] | None, env: Mapping[str, str] | None = None) -> list[str]:
    if not command:
        return []
    path = (env or {}).get("PATH")
    if path:
        # tmux 3.3a gives a new pane the PATH of the tmux client, whatever `-e PATH=` says, so the
        # command sets it itself (`env` execs the program: the pane's process is still the agent).
        # `env` by absolute path: it is looked up on the very PATH that may lack it.
        env_prog = "/usr/bin/env" if os.path.exists("/usr/bin/env") else "env"
        command = [env_prog, f"PATH={path}", *command]
    # tmux runs several arguments directly but a single one through the default shell: quote it
    # (a path with spaces stays one word) and exec it, or the pane's foreground process would be
    # the shell and the agent would look like it had exited.
    words = [f"exec {shlex.quote(command[0])}"] if len(command) == 1 else list(command)
    return ["--", *words]
