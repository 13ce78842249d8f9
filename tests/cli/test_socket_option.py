"""`--socket` is one option (`omp.cli.options.SocketOpt`) on every command that has it, with one
check: a tmux socket name as `tmux -L` takes it. A name that is not one is refused before the
command runs (`invalid_input`, exit 2, one JSON object under `--json`), from the option or from
`OMP_TMUX_SOCKET`, and nothing is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer.main

from omp.cli import options as opt
from omp.cli.options import SOCKET_PATH_MAX, socket_name_problem
from omp.tmux.client import socket_file_for
from tests.helpers import make_project, make_team, run_cli, snapshot_tree

# Each command with `--socket`, as it is called here: a team that exists for the refusals (the
# command would act on it), one that does not for the names accepted (each then fails for its
# own reason, with nothing started: no tmux on PATH).
COMMANDS: dict[tuple[str, ...], tuple[list[str], list[str]]] = {
    ("team", "launch"): (["team", "launch", "1:demo", "t"], ["team", "launch", "1:demo", "t"]),
    ("team", "resume"): (["team", "resume", "demo"], ["team", "resume", "nosuch"]),
    ("team", "shutdown"): (
        ["team", "shutdown", "--force", "demo"],
        ["team", "shutdown", "--force", "nosuch"],
    ),
    ("demo",): (["demo"], ["demo"]),
}
ACCEPTED_THEN = {  # the error each command reaches once the name passed
    ("team", "launch"): "tmux_not_found",
    ("team", "resume"): "unknown_team",
    ("team", "shutdown"): "unknown_team",
    ("demo",): "tmux_not_found",
}


def _name_room() -> int:
    """Bytes a socket name may have in this environment's socket directory."""
    where = os.path.realpath(os.path.dirname(socket_file_for("x")))
    return SOCKET_PATH_MAX - len(os.fsencode(where)) - 1


BAD = {
    "empty": "",
    "a path": "a/b",
    "an absolute path": "/tmp/omp.sock",
    "a path out": "../x",
    "the directory": ".",
    "its parent": "..",
    "a leading dash": "-L",
    "a blank": "my sock",
    "a tab": "a\tb",
    "a newline": "a\nb",
    "an escape": "a\x1b[31mb",
    "a DEL": "a\x7fb",
    "a bidi override": "\u202eevil",
    "a NUL": "a\x00b",
    "not UTF-8": "a\udcffb",
    "too long": "x" * 200,
}
GOOD = ["omp-test-1a2b3c4d", "0", "a.b_c+d@e", "ünï", "a-", "x.."]


# ---- the check ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD)
def test_socket_names_tmux_takes_pass(name: str) -> None:
    assert socket_name_problem(name) is None


@pytest.mark.parametrize("case", [k for k in BAD if k not in ("a NUL", "not UTF-8")])
def test_each_kind_of_bad_name_has_its_reason(case: str) -> None:
    assert socket_name_problem(BAD[case]) is not None, case


def test_the_length_is_that_of_the_socket_path_tmux_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`<TMUX_TMPDIR>/tmux-<uid>/NAME` must fit a unix socket address (107 bytes), with the
    directory resolved as tmux resolves it: a short symlink to a long directory is long."""
    monkeypatch.delenv("TMUX_TMPDIR", raising=False)
    room = _name_room()
    assert room == SOCKET_PATH_MAX - len(os.fsencode(os.path.realpath("/tmp"))) - len(
        f"/tmux-{os.geteuid()}/"
    )
    assert socket_name_problem("x" * room) is None
    assert socket_name_problem("x" * (room + 1)) is not None
    assert socket_name_problem("é" * (room // 2 + 1)) is not None  # bytes, not characters
    deep = tmp_path / "deeper" / "still"
    deep.mkdir(parents=True)
    (tmp_path / "s").symlink_to(deep)
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path / "s"))
    short = _name_room()
    assert short == SOCKET_PATH_MAX - len(os.fsencode(deep)) - len(f"/tmux-{os.geteuid()}/")
    assert short < SOCKET_PATH_MAX - len(os.fsencode(tmp_path / "s")) - len("/tmux-0/")
    if short < 1:
        pytest.skip(f"the temp directory {tmp_path} leaves no room for a socket name")
    assert socket_name_problem("x" * short) is None
    assert socket_name_problem("x" * (short + 1)) is not None


# ---- one option ---------------------------------------------------------------------------------


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    return [c for name, sub in subs.items() for c in _commands(sub, (*path, name))]


def _own_callback(p: Any) -> Any:
    """The callback typer wrapped (it keeps the given function in the wrapper's closure)."""
    for cell in getattr(p.callback, "__closure__", None) or ():
        if callable(cell.cell_contents) and getattr(cell.cell_contents, "omp_check", False):
            return cell.cell_contents
    return p.callback


def test_every_socket_option_is_the_shared_one() -> None:
    from omp.cli.app import app

    found = {}
    for path, cmd in _commands(typer.main.get_command(app)):
        for p in cmd.params:
            if "--socket" in getattr(p, "opts", []):
                found[path] = p
    assert set(found) == set(COMMANDS)
    for path, p in found.items():
        # shutdown uses the server only with --force, and checks the name there
        shared = opt.DeferredSocketOpt if path == ("team", "shutdown") else opt.SocketOpt
        assert _own_callback(p) is shared.callback, path
        assert p.help == shared.help and p.envvar == "OMP_TMUX_SOCKET", path
        assert p.metavar == "NAME" and p.default is None, path


def test_shutdown_without_force_is_not_stopped_by_a_variable_it_does_not_use(
    world: tuple[Path, dict[str, str]],
) -> None:
    """OMP_TMUX_SOCKET set for other commands: a plain shutdown never reads the server by it."""
    _, env = world
    r = run_cli("team", "shutdown", "nosuch", "--json", env={**env, "OMP_TMUX_SOCKET": "a/b"})
    assert r.rc == 1 and r.json["error"] == "unknown_team", r


# ---- on every command ---------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A project with a headless team `demo`, and an environment where nothing can start."""
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 1, task="t")
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "no-programs"
    empty.mkdir()
    env = {
        "HOME": str(home),
        "SHELL": "/bin/sh",
        "PATH": str(empty),
        "OMP_ROOT": str(root),
        "OMP_NO_MONITOR": "1",
    }
    return tmp_path, env


def _refused(r: Any, *, as_json: bool, via_env: bool = False) -> None:
    assert r.rc == 2, r
    assert "Traceback" not in r.stdout + r.stderr
    if as_json:
        assert r.stdout.count("\n") == 1, r.stdout
        assert r.json["ok"] is False and r.json["error"] == "invalid_input", r.json
        message = r.json["message"]
    else:
        assert r.stdout == ""
        message = r.stderr
    assert "--socket" in message, message
    if via_env:
        assert "OMP_TMUX_SOCKET" in message, message


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
@pytest.mark.parametrize("case", list(BAD))
def test_every_command_refuses_a_bad_name_and_writes_nothing(
    world: tuple[Path, dict[str, str]], command: tuple[str, ...], case: str
) -> None:
    where, env = world
    argv = COMMANDS[command][0]
    before = snapshot_tree(where)
    _refused(run_cli(*argv, f"--socket={BAD[case]}", "--json", env=env), as_json=True)
    _refused(run_cli(*argv, f"--socket={BAD[case]}", env=env), as_json=False)
    assert snapshot_tree(where) == before


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
def test_a_bad_name_from_the_variable_is_refused_alike(
    world: tuple[Path, dict[str, str]], command: tuple[str, ...]
) -> None:
    where, env = world
    before = snapshot_tree(where)
    r = run_cli(*COMMANDS[command][0], "--json", env={**env, "OMP_TMUX_SOCKET": "../elsewhere"})
    _refused(r, as_json=True, via_env=True)
    assert snapshot_tree(where) == before


@pytest.mark.parametrize("command", list(COMMANDS), ids=" ".join)
def test_every_command_takes_a_good_name(
    world: tuple[Path, dict[str, str]], command: tuple[str, ...]
) -> None:
    where, env = world
    before = snapshot_tree(where)
    longest = "x" * _name_room()
    for name in [*GOOD, longest]:
        r = run_cli(*COMMANDS[command][1], "--socket", name, "--json", env=env)
        assert r.rc == 1 and r.json["error"] == ACCEPTED_THEN[command], (name, r)
    r = run_cli(*COMMANDS[command][1], "--json", env={**env, "OMP_TMUX_SOCKET": longest})
    assert r.json["error"] == ACCEPTED_THEN[command], r
    assert snapshot_tree(where) == before
