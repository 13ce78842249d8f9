"""Issue 21, class 6: no traceback, and no Infinity or NaN, from any argument of any command.

Every typer command of the app is found by walking the click tree (a new command is fuzzed
without a line here), and each of its options and arguments is given each odd value of `ODD` in
turn, the others kept at a plain value (`BASE`): empty, blanks, huge and non-finite numbers,
`-0`, Unicode digits, control characters, bidi, a lone surrogate, very long text, odd dates and
durations. Each call runs in this process (fast: no interpreter start), with `--json` and without:

- the exit code is one the CLI documents (0, 1, 2; `team wait` also 10-13), never 3 (a bug);
- no traceback, nothing but `SystemExit` escapes;
- with `--json`, stdout is exactly one JSON object (`team events`: JSON lines), NaN and Infinity
  refused by the parser; without, no byte a terminal would act on.

Nothing is started: each command runs in a project of its own with HOME pinned, TMUX unset,
OMP_NO_MONITOR=1 and a PATH holding no program at all (no tmux, no agent CLI), against a headless
team `fz` that holds unread leader mail (so `team wait` answers at once). `--watch`, `--follow`
and the demo agent run until stopped by design: they are never turned on (`STREAMING`).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from omp.errors import EXIT_INTERNAL
from tests.helpers import make_project, make_team

ODD = [
    "",
    " ",
    "0",
    "-0",
    "-1",
    "1e400",
    "-1e400",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "9" * 30,
    "9" * 400,
    "1" + "0" * 5000,
    "0x10",
    "1_000",
    "4.2",
    "²",
    "١٢",
    "🎉",
    "ünï",
    "\x1b[31mred\x1b]0;title\x07",
    "a\nb",
    "\r",
    "\t",
    "\u202eevil",
    "\udcff",  # a byte that is not UTF-8, as Python hands it over from argv
    "x" * 10_000,
    "-",
    "--",
    "@/dev/zero",
    "1970-01-01T00:00:00Z",
    "2026-13-45T99:99:99Z",
    "9999-12-31T23:59:59.999Z",
    "0001-01-01",
    "P1D",
    "1d",
    "99999999999999999999w",
    "1.5h",
    "0.0000001s",
    "7d ",
    "1=c,2=i",  # `team wait` cursors
    "1=",
    "=,=",
    "fz:1a2b3c4d:²",  # cursors that name a team and a log, with odd offsets
    "fz:1a2b3c4d:" + "9" * 30,
    "fz:-:0",
    "fz:1a2b3c4d:-0",
]

# A plain value for each parameter a command needs (the one being fuzzed gets `ODD` instead);
# by parameter name, else by type. A new command with a required parameter of a new name is
# fuzzed with the fallback.
BASE_BY_NAME = {
    "team": "fz",
    "name": "worker-1",
    "spec": "1",
    "task": "t",
    "objective": "o",
    "goal": "g",
    "verdict": "fail",
    "workers": "1",
    "token": "not-the-owner-token",
}
STREAMING = {"watch", "follow"}  # options that print until Ctrl-C
SKIP_COMMANDS = {
    ("demo-agent",): "the demo agent runs until its pane closes",
    # with its extra installed it serves until Ctrl-C; tests/board drive it and its bad options
    ("team", "board"): "the board serves until Ctrl-C",
}
EXTRA_EXIT_CODES: dict[tuple[str, ...], set[int]] = {("team", "wait"): {10, 11, 12, 13}}
JSON_LINES = {("team", "events")}


# typer vendors click; its objects are read here by click's public attributes only (`commands`,
# `params`, `param_type_name`, `opts`, `is_flag`, `required`, `type.name`).
Param = Any


class Command(NamedTuple):
    path: tuple[str, ...]
    cmd: Any  # a click command


def _commands() -> list[Command]:
    from typer.main import get_command

    from omp.cli.app import app

    found: list[Command] = []

    def walk(path: tuple[str, ...], cmd: Any) -> None:
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for name, sub in sorted(subs.items()):
                walk((*path, name), sub)
        else:
            found.append(Command(path, cmd))

    walk((), get_command(app))
    return found


COMMANDS = _commands()


def _is_flag(p: Param) -> bool:
    return p.param_type_name == "option" and bool(getattr(p, "is_flag", False))


def _base(p: Param, root: Path) -> str:
    name = p.name or ""
    if name == "root":
        return str(root)
    if name in BASE_BY_NAME:
        return BASE_BY_NAME[name]
    return "1" if p.type.name in ("integer", "float") else "x"


def _fuzzed(c: Command) -> list[Param]:
    """The parameters that take a value (flags are only switched on, in `_argvs`)."""
    return [p for p in c.cmd.params if p.name not in ("as_json", "help") and not _is_flag(p)]


def _argv(c: Command, root: Path, fuzz: Param | None, value: str) -> list[str]:
    args: list[str] = []
    opts: list[str] = []
    for p in _fuzzed(c):
        if p is fuzz:
            v = value
        elif p.required or p.param_type_name == "argument":
            v = _base(p, root)
        else:
            continue
        if p.param_type_name == "argument":
            args.append(v)
        else:
            opts += [p.opts[0], v]
    return [*c.path, *args, *opts]


def _argvs(c: Command, root: Path) -> Iterator[list[str]]:
    yield _argv(c, root, None, "")
    flags = [
        p.opts[0]
        for p in c.cmd.params
        if _is_flag(p) and p.name not in STREAMING | {"as_json", "version"}
    ]
    if flags:
        yield [*_argv(c, root, None, ""), *flags]
    for p in _fuzzed(c):
        for value in ODD:
            yield _argv(c, root, p, value)


class Outcome(NamedTuple):
    rc: int
    out: bytes
    err: str


def _call(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes]) -> Outcome:
    from omp.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    capsysbinary.readouterr()
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code
    else:  # pragma: no cover - main always exits
        code = 0
    finally:
        sys.stdin = old_stdin
        for s, h in handlers.items():
            signal.signal(s, h)
    out, err = capsysbinary.readouterr()
    rc = code if isinstance(code, int) else (0 if code is None else 1)
    return Outcome(rc, out, err.decode("utf-8", "replace"))


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} in JSON output")


def _check(c: Command, argv: list[str], o: Outcome, as_json: bool) -> None:
    where = f"omp {' '.join(repr(a)[:60] for a in argv)}"
    allowed = {0, 1, 2} | EXTRA_EXIT_CODES.get(c.path, set())
    assert o.rc != EXIT_INTERNAL, f"{where}: internal error: {o.out!r} {o.err}"
    assert o.rc in allowed, f"{where}: exit {o.rc}: {o.out!r} {o.err}"
    text = o.out.decode("utf-8", "replace") + o.err
    assert "Traceback" not in text, f"{where}: {text}"
    if as_json:
        lines = o.out.decode("utf-8").splitlines() if c.path in JSON_LINES else [o.out.decode()]
        for line in lines:
            try:
                obj = json.loads(line, parse_constant=_refuse_constant)
            except ValueError as exc:
                raise AssertionError(f"{where}: not one JSON object ({exc}): {o.out!r}") from None
            assert isinstance(obj, dict), f"{where}: {o.out!r}"
    else:
        for stream in (o.out, o.err.encode("utf-8", "replace")):
            assert b"\x1b" not in stream and b"\r" not in stream, f"{where}: {stream!r}"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a headless team `fz` holding unread leader mail; nothing can be started."""
    import typer.main

    # typer builds the click tree from the functions' signatures at every call (~30 ms); the
    # tree does not change between calls, so build it once per app here.
    built: dict[int, Any] = {}
    real = typer.main.get_command

    def get_command(app: Any) -> Any:
        if id(app) not in built:
            built[id(app)] = real(app)
        return built[id(app)]

    monkeypatch.setattr(typer.main, "get_command", get_command)
    home = tmp_path / "home"
    home.mkdir()
    for key in list(os.environ):
        if key.startswith(("OMP_", "TMUX", "COPILOT_", "CLAUDE", "CODEX_", "GEMINI_")):
            monkeypatch.delenv(key, raising=False)
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    monkeypatch.setenv("OMP_HOOK_BUDGET_MS", "2000")
    template = make_project(tmp_path / "template")
    team = make_team(template, "fz", 2, task="t")
    from omp.mail.mailbox import Mailbox, new_message

    Mailbox(team, "leader").append_messages([new_message("worker-1", "leader", "hi")])
    return template


def test_every_value_a_command_takes_is_checked_by_omp_cli_options() -> None:
    from omp.cli.options import is_checked

    unchecked = [
        f"omp {' '.join(c.path)} {p.name}"
        for c in COMMANDS
        for p in _fuzzed(c)
        if c.path not in SKIP_COMMANDS and not is_checked(_callback(p))
    ]
    assert unchecked == [], "give these a callback from omp.cli.options"


def _callback(p: Param) -> Any:
    """The callback typer wrapped (typer keeps the user's function in the wrapper's closure)."""
    cb = p.callback
    for cell in getattr(cb, "__closure__", None) or ():
        if callable(cell.cell_contents) and getattr(cell.cell_contents, "omp_check", False):
            return cell.cell_contents
    return cb


def test_the_walk_finds_every_command() -> None:
    paths = {c.path for c in COMMANDS}
    assert ("team", "events") in paths and ("team", "prune") in paths
    assert ("hooks", "install") in paths and ("ralph", "start") in paths
    assert ("team", "monitor-run") in paths  # hidden ones too
    for skipped in SKIP_COMMANDS:
        assert skipped in paths, f"SKIP_COMMANDS names {skipped}, which no longer exists"


@pytest.mark.slow
@pytest.mark.parametrize("c", COMMANDS, ids=lambda c: " ".join(c.path))
def test_no_argument_makes_a_command_fail_badly(
    c: Command,
    sandbox: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    if c.path in SKIP_COMMANDS:
        pytest.skip(SKIP_COMMANDS[c.path])
    root = tmp_path / "proj"
    shutil.copytree(sandbox, root, symlinks=True)
    monkeypatch.chdir(root)
    has_json = any(p.name == "as_json" for p in c.cmd.params)
    n = len(c.path)
    for argv in _argvs(c, root):
        for as_json in (True, False) if has_json else (False,):
            # --json first: a fuzzed `--` would make anything after it an argument.
            full = [*argv[:n], "--json", *argv[n:]] if as_json else argv
            _check(c, full, _call(full, capsysbinary), as_json)


# ---- the backstops ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_the_json_emitter_refuses_nan_and_infinity(
    value: float,
    capsysbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from omp.cli import output

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # its crash log goes there
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError):
        output.dumps({"x": value})
    with pytest.raises(SystemExit) as exc:
        output.emit_json({"ok": True, "x": [value]})
    assert exc.value.code == EXIT_INTERNAL
    out = capsysbinary.readouterr().out
    assert json.loads(out, parse_constant=_refuse_constant)["error"] == "internal"


@pytest.mark.parametrize("argv", [["team", "events", "t", "--json"], ["team", "status", "--json"]])
def test_a_fast_path_fails_like_every_command(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    import omp.cli.events_cmd
    import omp.cli.status_cmd

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(omp.cli.events_cmd, "events_loop", broken)
    monkeypatch.setattr(omp.cli.status_cmd, "status_once", broken)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.chdir(make_project(tmp_path / "proj"))
    (tmp_path / "proj" / ".omp").mkdir()
    o = _call(argv, capsysbinary)
    assert o.rc == EXIT_INTERNAL and "Traceback" not in o.err
    reply = json.loads(o.out)
    assert reply["message"].startswith("internal error: ValueError: a bug; a crash log is in ")
    assert Path(reply["crashLog"]).parent == tmp_path / "proj" / ".omp" / "logs"


def test_a_cursor_in_other_digits_is_refused_not_a_crash() -> None:
    from omp.errors import OmpError
    from omp.record.history import parse_cursor

    for odd in ("²", "١٢", "߁", "9" * 19):
        for cursor in (odd, f"t:1a2b3c4d:{odd}", f"t:-:{odd}"):
            with pytest.raises(OmpError) as exc:
                parse_cursor(cursor, "t")
            assert exc.value.code == "invalid_cursor"
