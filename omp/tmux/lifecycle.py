"""The leader's pane lifecycle through libtmux's object API: done once per team, never per call.

Launch, add-worker, shutdown, rollback and the doctor's pane check create a detached session or
split the leader's window (one pane per worker, with its environment, directory and command),
lay the window out, set pane options and titles, and kill panes and sessions. They do it here,
on libtmux's `Server`, `Session`, `Window` and `Pane` objects. This module imports libtmux
(~75-230 ms measured here, see `omp.tmux`), so only `Tmux`'s lifecycle methods import it, when
first called: per-call paths never do.

omp's guarantees, kept on top of libtmux:
- bounded in time: `OmpServer.cmd` runs every command through the thin client's timed runner
  (`Tmux._exec`: the `timeout`, the `;` escaping, `tmux_not_found`). libtmux's own runner
  (`libtmux.common.tmux_cmd`) waits on tmux with no timeout, and its list queries
  (`Server.sessions`, `Pane.refresh`, `from_pane_id`, `Session.active_pane`, ...) call that runner
  directly, past `Server.cmd`: nothing here uses them, so no call can hang on a stuck server;
- one error: every libtmux exception becomes `OmpError("tmux_error", "<subcommand>: <stderr>")`;
  a target (or server) that is already gone is `False` for the kills, as before;
- creation takes the command as argv: tmux execs several arguments directly, so the pane's
  process is the agent itself. libtmux's `Server.new_session` / `Pane.split` take one shell string
  (run through the user's default shell) and look the new object up again afterwards (a lookup
  that fails when the agent exits at once, losing the pane id a rollback needs). So the new
  session and panes are made with `new-session` / `split-window` on the `Server` / `Pane` objects'
  own `cmd` (with `-P` printing the new ids), and the objects are built from those ids;
- `env PATH=...` prefixes the command: tmux 3.3a gives a new pane the tmux client's PATH
  whatever `-e PATH=` says (`_command_args`);
- session names are validated (`=name` targets match exactly); a detached session is made 240x60
  (at the default 80x24 the 5th split fails with "no space for new pane");
- a private server (tests, the doctor) keeps its `-f /dev/null` config: the client's `-f` is
  handed to libtmux's `Server(config_file=...)`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from libtmux import Server, exc
from libtmux.common import tmux_cmd
from libtmux.pane import Pane
from libtmux.window import Window

from omp.errors import OmpError
from omp.tmux.args import NO_SERVER, NO_TARGET, SEP, command_args, env_args


class Client(Protocol):
    """What the lifecycle needs of the thin client (`omp.tmux.client.Tmux`): its server and its
    timed runner. A protocol, so this module never imports the client that imports it."""

    socket_name: str | None
    socket_path: str | None
    config_file: str | None
    binary: str

    def _exec(self, args: Sequence[str]) -> tuple[int, str, str]: ...


_SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")
_IDS_FMT = SEP.join(["#{session_id}", "#{window_id}", "#{pane_id}"])


class _Ran(tmux_cmd):
    """A finished command in the shape libtmux reads (`stdout`/`stderr` lines, `returncode`),
    run by omp's timed client instead of `tmux_cmd.__init__`'s unbounded one."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str) -> None:
        self.cmd = argv
        self.returncode = returncode
        out = stdout.split("\n")
        while out and out[-1] == "":
            out.pop()
        self.stdout = out
        self.stderr = [line for line in stderr.split("\n") if line]


class OmpServer(Server):
    """libtmux's `Server` whose commands (its own, and every `Session`/`Window`/`Pane` object's
    made on it) run through omp's thin client: timed, escaped, the same socket and config."""

    def __init__(self, client: Client) -> None:
        super().__init__(
            socket_name=client.socket_name,
            socket_path=client.socket_path,
            config_file=client.config_file,
            tmux_bin=client.binary,
        )
        self.client = client

    def cmd(self, cmd: str, *args: Any, target: str | int | None = None) -> tmux_cmd:
        argv = [cmd, *(["-t", str(target)] if target is not None else []), *map(str, args)]
        rc, out, err = self.client._exec(argv)
        if rc != 0 and not err:
            err = f"exit status {rc}"
        return _Ran(argv, rc, out, err)


def _error(what: str, err: Exception) -> OmpError:
    text = str(err)
    if isinstance(err, exc.LibTmuxException) and err.subcommand:
        text = text.removeprefix(f"{err.subcommand}: ")
    return OmpError("tmux_error", f"{what}: {text or type(err).__name__}", subcommand=what)


def _gone(err: Exception) -> bool:
    return any(s in str(err) for s in NO_SERVER + NO_TARGET)


def _checked(proc: tmux_cmd, what: str) -> list[str]:
    if proc.stderr:
        detail = "\n".join(proc.stderr)
        raise OmpError("tmux_error", f"{what}: {detail}", subcommand=what)
    return list(proc.stdout)


class Lifecycle:
    """The pane lifecycle on one tmux server (the `Tmux` client's socket and config)."""

    def __init__(self, client: Client) -> None:
        self.server = OmpServer(client)

    def pane(self, pane_id: str) -> Pane:
        return Pane(server=self.server, pane_id=pane_id)

    def window(self, window_id: str) -> Window:
        return Window(server=self.server, window_id=window_id)

    def new_session(
        self,
        name: str,
        *,
        cwd: str | Path,
        command: Sequence[str] | None,
        env: Mapping[str, str] | None,
        width: int,
        height: int,
    ) -> tuple[str, str, str]:
        if not _SESSION_NAME.fullmatch(name):
            raise OmpError(
                "invalid_input",
                f"invalid tmux session name {name!r}: use letters, digits, '_' or '-'",
            )
        out = _checked(
            self.server.cmd(
                "new-session", "-d", "-P", "-F", _IDS_FMT, "-s", name,
                "-x", str(width), "-y", str(height), "-c", str(cwd),
                *env_args(env), *command_args(command, env),
            ),
            "new-session",
        )  # fmt: skip
        sid, wid, pid = (out[0] if out else "").split(SEP)
        return sid, wid, pid

    def split(
        self,
        target_pane_id: str,
        *,
        cwd: str | Path,
        command: Sequence[str] | None,
        env: Mapping[str, str] | None,
        horizontal: bool,
        size: int | str | None,
    ) -> str:
        args = ["-d", "-P", "-F", "#{pane_id}", "-h" if horizontal else "-v", "-c", str(cwd)]
        if size is not None:
            args += ["-l", str(size)]
        argv = [*args, *env_args(env), *command_args(command, env)]
        out = _checked(self.pane(target_pane_id).cmd("split-window", *argv), "split-window")
        return (out[0] if out else "").strip()

    def select_layout(self, window_id: str, layout: str) -> None:
        try:
            self.window(window_id).select_layout(layout)
        except exc.LibTmuxException as err:
            raise _error("select-layout", err) from None

    def set_pane_title(self, pane_id: str, title: str) -> None:
        # `Pane.set_title` reads the pane back with libtmux's untimed runner: the object's `cmd`
        # is used instead. select-pane -T expands formats: '#' would start one.
        proc = self.pane(pane_id).cmd("select-pane", "-T", title.replace("#", "##"))
        _checked(proc, "select-pane")

    def set_option(self, target: str, name: str, value: str, *, window: bool) -> None:
        obj: Pane | Window = self.window(target) if window else self.pane(target)
        try:
            obj.set_option(name, value)
        except exc.LibTmuxException as err:
            raise _error("set-option", err) from None

    def kill_pane(self, pane_id: str) -> bool:
        try:
            self.pane(pane_id).kill()
        except exc.LibTmuxException as err:
            if _gone(err):
                return False
            raise _error("kill-pane", err) from None
        return True

    def kill_session(self, name: str) -> bool:
        try:
            self.server.kill_session(f"={name}")
        except exc.LibTmuxException as err:
            if _gone(err):
                return False
            raise _error("kill-session", err) from None
        return True
