"""One error path for typer's commands and the fast paths (omp.cli.output.guarded): Ctrl-C is
130 with one line and no traceback everywhere, and a failure a command body did not report
itself is reported as omp reports failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import pytest
import typer

from omp.cli import FAST_PATHS, _run_typer
from omp.errors import OmpError
from tests.helpers import call_api, isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 2, no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


def _ctrl_c(*_: Any, **__: Any) -> NoReturn:
    raise KeyboardInterrupt


def _exit_code(fn: Any) -> Any:
    with pytest.raises(SystemExit) as done:
        fn()
    return done.value.code


def test_the_fast_paths_are_one_table() -> None:
    assert set(FAST_PATHS) == {
        ("--version",),
        ("team", "api"),
        ("hook", "stop"),
        ("team", "status"),
        ("team", "events"),
    }


@pytest.mark.parametrize("as_json", [True, False])
def test_ctrl_c_in_an_api_call_is_130(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    from omp.api import operations as team_api

    monkeypatch.setitem(team_api.OPERATIONS, "list-tasks", _ctrl_c)
    r = call_api(capsys, "list-tasks", {"team_name": "t"}, as_json=as_json)
    assert (r.rc, r.stdout, r.stderr) == (130, "", "omp: interrupted\n")


def test_ctrl_c_in_a_fast_path_status_is_130(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp import cli
    from omp.views import status

    monkeypatch.setattr(status, "status", _ctrl_c)
    assert _exit_code(lambda: cli.main(["team", "status", "t"])) == 130
    assert capsys.readouterr().err == "omp: interrupted\n"


def _app(body: Any) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def go(as_json: bool = typer.Option(False, "--json")) -> None:
        body()

    @app.command()
    def other() -> None:  # two commands: `go` stays a subcommand
        pass

    return app


def test_ctrl_c_in_a_typer_command_is_130(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(lambda: _run_typer(_app(_ctrl_c), ["go"])) == 130
    assert "Traceback" not in capsys.readouterr().err


def test_an_error_escaping_a_typer_command_is_reported_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)  # the crash below writes its log under this HOME
    monkeypatch.chdir(tmp_path)

    def refuse() -> None:
        raise OmpError("unknown_team", "no team x here")

    assert _exit_code(lambda: _run_typer(_app(refuse), ["go", "--json"])) == 1
    out = json.loads(capsys.readouterr().out)
    assert out == {"ok": False, "error": "unknown_team", "message": "no team x here"}

    def crash() -> None:
        raise RuntimeError("kaboom")

    assert _exit_code(lambda: _run_typer(_app(crash), ["go"])) == 3
    err = capsys.readouterr().err
    assert "kaboom" in err and err.startswith("omp: internal error")
    assert f"omp: a crash log is in {tmp_path}/home/.local/state/omp/crash-" in err


def test_ctrl_c_stops_a_watch_with_130(capsys: pytest.CaptureFixture[str]) -> None:
    from omp.cli.watch import watch_loop

    assert _exit_code(lambda: watch_loop(_ctrl_c, str, interval=0, as_json=True)) == 130
    assert capsys.readouterr().err == "omp: interrupted\n"


def test_an_error_ending_in_commands_prints_them_as_lines_and_nothing_else_breaks_a_line() -> None:
    from omp.cli.output import human_error

    cmds = ["git -C /w add -A", "git -C '/w\nforged' commit -m 'task 1'"]
    err = OmpError(
        "uncommitted_changes",
        "worker-1's worktree /w has 1 uncommitted path(s): a\nb.txt. Commit:\n  "
        + "\n  ".join(cmds),
        commands=cmds,
    )
    text = human_error(err)
    lines = text.splitlines()
    assert lines[0].startswith("omp: worker-1's worktree") and lines[0].endswith(
        "[uncommitted_changes]"
    )
    assert "a\\nb.txt" in lines[0]  # a value's newline stays escaped on its line
    assert lines[1:] == ["  git -C /w add -A", "  git -C '/w\\nforged' commit -m 'task 1'"]
    # any other message keeps its newlines escaped on one line
    plain = human_error(OmpError("invalid_input", "one\ntwo"))
    assert plain == "omp: one\\ntwo [invalid_input]\n"


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`omp team events T | head -1`: no `internal error`, no crash log, exit 141 (SIGPIPE's)."""
    import subprocess
    import sys

    from tests.helpers import child_env, make_project, make_team

    root = make_project(tmp_path / "proj")
    team = make_team(root, "t", 3)
    line = '{"type":"member","worker":"worker-1","change":"joined","at":"2026-12-02T00:00:00.000Z"}'
    with open(team.events, "a") as f:  # far more than a pipe holds
        f.write((line + "\n") * 20_000)
    env = child_env(tmp_path / "home")
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "team", "events", "t"], cwd=root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after one line, as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141, err
    assert "internal" not in err and "Traceback" not in err
