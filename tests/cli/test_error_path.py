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
