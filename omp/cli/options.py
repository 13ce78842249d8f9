"""The options and arguments of omp's typer commands: every value a person types is checked
here, once, before the command runs. The commands with a fast path (`team status`, `team events`)
declare their options once in `omp.cli.grammar`: `declared` builds their typer parameters from
it; the fast path reads argv with the same declaration and checks the values in the domain.

Each parameter of each command carries one of the callbacks below (`tests/cli/test_fuzz_commands.py`
walks the command tree and fails on a parameter without one, then feeds every parameter odd
values). A value that does not fit is a usage error of click's (`BadValue`: exit 2, typer's
usage text, or with `--json` one object whose code is `invalid_input`) naming the option, never a
traceback, never a NaN or an Infinity carried into a result:

- `text`: any text that is valid Unicode (argv bytes that are not UTF-8 arrive as lone surrogates,
  which no file or JSON answer can hold), optionally with a length cap or as a usable path (no
  component over 255 bytes, 4095 in all);
- `seconds`: a finite number of seconds in a range;
- `count`: a whole number in a range;
- `duration`: `prune --older-than`'s `7d`, finite and at most a century;
- `tmux_socket`: a tmux server's socket name, as `tmux -L` takes it (`SocketOpt`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from omp.cli.grammar import JSON_HELP, WATCH_HELP, Grammar

# `as_json: bool = JsonOpt`: with it, stdout is exactly one JSON object (omp.cli.output).
JsonOpt: Any = typer.Option(False, "--json", help=JSON_HELP)

# `watch: bool = WatchOpt`: a read-only view redrawn until Ctrl-C (`omp.cli.watch`).
WatchOpt: Any = typer.Option(False, "--watch", "-w", help=WATCH_HELP)

MAX_SECONDS = 10 * 365 * 86400.0  # ten years: longer than anything omp waits for
MAX_COUNT = 1_000_000
MAX_TEXT = 1 << 20  # the cap of a `team api` input, for text typed on a command line
NAME_MAX = 255  # bytes of one path component (Linux, macOS)
PATH_MAX = 4095

Callback = Callable[[Any, Any, Any], Any]


def declared(grammar: Grammar, dest: str) -> Any:
    """The typer parameter of `dest` as `grammar` declares it (`omp.cli.grammar`: the commands
    with a fast path read the same declaration), with its check."""
    if dest == grammar.arg.name:
        a = grammar.arg
        return typer.Argument(... if a.required else None, help=a.help, callback=text())
    o = next(o for o in grammar.opts if o.dest == dest)
    if o.value:
        check = text() if o.max_len is None else text(max_len=o.max_len)
        return typer.Option(None, *o.names, metavar=o.metavar, help=o.help, callback=check)
    return typer.Option(False, *o.names, help=o.help)


def _checked(fn: Callback) -> Callback:
    fn.omp_check = True  # type: ignore[attr-defined]
    return fn


def is_checked(callback: Any) -> bool:
    """True for a callback made here (the fuzz test's check that every parameter has one)."""
    return getattr(callback, "omp_check", False) is True


class BadValue(typer.BadParameter):
    """A value omp refuses: click reports it as a usage error (exit 2), naming the parameter;
    `omp.cli._run_typer` gives it omp's code under `--json`."""

    omp_code = "invalid_input"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse(param: Any, why: str, value: Any) -> NoReturn:
    raise BadValue(f"{why}, got {_shown(value)}", param=param)


def text(*, max_len: int = MAX_TEXT, path: bool = False) -> Callback:
    """Text that is valid Unicode, at most `max_len` characters; with `path`, a usable path."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, os.PathLike):  # typer makes a `Path` before the callback sees it
            return Path(check(ctx, param, os.fspath(value)))
        if not isinstance(value, str):
            return value
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            _refuse(param, "is not valid UTF-8 text", value)
        if len(value) > max_len:
            _refuse(param, f"is longer than {max_len} characters", value)
        if "\x00" in value:
            _refuse(param, "holds a NUL character", value)
        if path and (
            len(data) > PATH_MAX or any(len(part) > NAME_MAX for part in data.split(b"/"))
        ):
            _refuse(param, f"is not a usable path (a name over {NAME_MAX} bytes)", value)
        return value

    return check


def path_text() -> Callback:
    return text(path=True)


def seconds(*, least: float = 0.0, positive: bool = False) -> Callback:
    """A finite number of seconds from `least` (above 0 with `positive`) to MAX_SECONDS."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        v = float(value)
        low_ok = v > 0 if positive else v >= least
        if not math.isfinite(v) or not low_ok or v > MAX_SECONDS:
            low = "above 0" if positive else f"from {least:g}"
            _refuse(param, f"takes a number of seconds {low} to {MAX_SECONDS:g}", value)
        return 0.0 if v == 0 else v  # -0 is 0

    return check


def count(*, least: int = 1, most: int = MAX_COUNT) -> Callback:
    """A whole number from `least` to `most`."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
            _refuse(param, f"takes a whole number from {least} to {most}", value)
        return value

    return check


def duration() -> Callback:
    """`prune --older-than`: a duration omp can measure (the domain parses it again)."""
    century = 100 * 365 * 86400.0

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        text(max_len=64)(ctx, param, value)
        from omp.errors import OmpError
        from omp.team.removal import parse_duration

        try:
            seconds_ = parse_duration(value)
        except OmpError:
            _refuse(param, "takes a duration like 30m, 12h, 7d or 2w (or 0 for all)", value)
        if not math.isfinite(seconds_) or seconds_ > century:
            _refuse(param, "is longer than a century", value)
        return value

    return check


def small_int(text_: str, max_digits: int = 6) -> int | None:
    """`text_` as a whole number when it is one written in ASCII digits (no `²`, no `١`, at
    most `max_digits`: `int()` refuses over 4300 digits with an error of its own); else None."""
    if text_.isascii() and text_.isdigit() and len(text_) <= max_digits:
        return int(text_)
    return None


def text_list(*, max_len: int = 256, most: int = 64) -> Callback:
    """Several texts (a variadic argument), each as `text(max_len=...)`, at most `most`."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        items = list(value)
        if len(items) > most:
            _refuse(param, f"takes at most {most} values", f"{len(items)} values")
        one = text(max_len=max_len)
        return [one(ctx, param, v) for v in items]

    return check


def choice(*allowed: str) -> Callback:
    """One of `allowed` (the domain checks again, with its own error code)."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        text(max_len=64)(ctx, param, value)
        if value not in allowed:
            _refuse(param, f"takes {' or '.join(allowed)}", value)
        return value

    return check


SOCKET_PATH_MAX = 107  # bytes of a unix socket's path: `sun_path` is 108 with its NUL (Linux)


def socket_name_problem(name: str) -> str | None:
    """Why `name` cannot be a tmux socket name (`tmux -L NAME`), or None when it can.

    tmux puts the socket at `<TMUX_TMPDIR or /tmp>/tmux-<uid>/NAME` and takes NAME as it is, so
    it must be one file name there: no `/` (tmux would try a directory below, or `../x` one
    above), not `.` or `..`, not empty (omp would then quietly take the default server). The
    whole path must fit a unix socket address, or tmux fails with "File name too long" after
    omp has begun. No control or format character and no blank: the name is printed in `tmux -L
    NAME attach` hints a person copies, and one that hides in a terminal is a mistake anyway;
    and no leading `-`, which reads as an option on every command line it is printed into.
    """
    if not name:
        return "is empty: give a tmux socket name (tmux -L NAME), or leave it out"
    if "/" in name:
        return "is a path: tmux -L takes a socket name, without '/'"
    if name in (".", ".."):
        return "names a directory, not a tmux socket"
    if name.startswith("-"):
        return "starts with '-', which reads as an option"
    if any(not ch.isprintable() or ch.isspace() for ch in name):
        return "holds a blank, control or format character"
    from omp.tmux.client import socket_file_for

    where = os.path.realpath(os.path.dirname(socket_file_for(name)))
    size = len(os.fsencode(os.path.join(where, name)))
    if size > SOCKET_PATH_MAX:
        return (
            f"is too long: its socket path in {where}/ takes {size} bytes, and a unix socket's "
            f"path holds at most {SOCKET_PATH_MAX}"
        )
    return None


def tmux_socket(*, deferred: bool = False) -> Callback:
    """A tmux server's socket name (`socket_name_problem`), from `--socket` or its variable.
    `deferred`: only the text is checked here, the name by the command where it uses it
    (`checked_socket`), so that a variable set for other commands does not stop one that
    ignores it."""

    @_checked
    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        text(max_len=PATH_MAX)(ctx, param, value)
        why = None if deferred else socket_name_problem(value)
        if why is not None:  # (click names the variable beside the option itself)
            _refuse(param, why, value)
        return value

    return check


def checked_socket(value: str | None) -> str | None:
    """A `DeferredSocketOpt`'s value where the command uses it: refused as `SocketOpt` refuses."""
    why = None if value is None else socket_name_problem(value)
    if why is not None:
        from omp.errors import OmpError

        raise OmpError("invalid_input", f"Invalid value for '--socket' / 'OMP_TMUX_SOCKET': {why}")
    return value


def _socket_option(*, deferred: bool, note: str = "") -> Any:
    return typer.Option(
        None,
        "--socket",
        envvar="OMP_TMUX_SOCKET",
        metavar="NAME",
        help=f"The tmux server by its socket name, as tmux -L NAME takes it{note}.",
        callback=tmux_socket(deferred=deferred),
    )


# `launch`, `resume` and `demo`: the tmux server, by its socket name.
SocketOpt: Any = _socket_option(deferred=False)
# `shutdown`, which uses it only with `--force`: the name is checked there (`checked_socket`).
DeferredSocketOpt: Any = _socket_option(deferred=True, note=" (used with --force)")

# `launch` and `add-worker`: where new workers work (docs/worktrees.md).
WorkspaceOpt: Any = typer.Option(
    None,
    "--workspace",
    metavar="worktree|shared",
    help="worktree: each worker in its own git worktree and branch omp/<team>/<worker>; shared: "
    "all in your checkout (default: worktree in a git repository with a commit, else shared; "
    "team.workspace in .omp/config.toml).",
    callback=choice("worktree", "shared"),
)
# `launch` and `create`: a backlog (docs/backlog.md).
TasksOpt: Any = typer.Option(
    None,
    "--tasks",
    metavar="FILE",
    help="A backlog: tasks from a TOML file (one task table each), a Markdown checklist or a "
    "GitHub issues export (gh issue list --json number,title,body,labels); each worker is "
    "handed the next ready task in turn (docs/backlog.md).",
    callback=path_text(),
)
HostOpt: Any = typer.Option(
    None,
    "--host",
    metavar="NAME:N",
    help="Place N of the workers on host NAME, reached over ssh without a password (a hosts.NAME "
    "table in .omp/config.toml, else an ssh destination); repeat for more hosts. Needs a store "
    "every host reaches (OMP_STORE). Default: the hosts tables' workers (docs/remote.md).",
    callback=text_list(max_len=256, most=64),
)
AddHostOpt: Any = typer.Option(
    None,
    "--host",
    metavar="NAME[:N]",
    help="Place N (default 1) of the new workers on host NAME, as launch --host does (a hosts.NAME "
    "table in .omp/config.toml, else an ssh destination; the team's recorded settings for a "
    "host it already uses); repeat for more hosts. Without a count N, the hosts' counts add up "
    "to N. Needs a store every host reaches (OMP_STORE) (docs/remote.md).",
    callback=text_list(max_len=256, most=64),
)
MergeOpt: Any = typer.Option(
    None,
    "--merge",
    metavar="auto|manual",
    help="With --tasks and worktrees: auto merges each task into your branch once done (its "
    "check passed); manual (default, or team.merge in .omp/config.toml) leaves it to omp team "
    "merge.",
    callback=choice("auto", "manual"),
)
CarryOpt: Any = typer.Option(
    False,
    "--carry-changes",
    help="Apply your uncommitted changes to tracked files to each new worktree.",
)

# `launch`, `add-worker` and `resume`: how panes are placed and how long each agent gets.
ReadyTimeoutOpt: Any = typer.Option(
    None,
    "--ready-timeout",
    help="Seconds to wait for each agent (default per profile).",
    callback=seconds(positive=True),
)
NewSessionOpt: Any = typer.Option(
    False, "--new-session", help="Use a new detached session even inside tmux."
)
