"""`omp team board` without its extra says how to install it; `omp team board` with a bad
address says so; and no per-call command (nor `omp team --help`) loads the board or its web
framework."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import omp.board
from tests.helpers import child_env, isolate, make_project, make_team, run_cli


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 1)
    return r


def test_without_the_extra_it_says_how_to_install_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(omp.board, "REQUIRES", ("starlette", "omp_no_such_module_xyz"))
    r = run_cli("team", "board", cwd=root, env=child_env(Path.home()))
    assert r.rc == 1, r
    assert "pip install 'omp[board]'" in r.stderr
    assert "[board_not_installed]" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_a_bad_address_is_said(root: Path) -> None:
    pytest.importorskip("starlette")
    r = run_cli("team", "board", "--host", "not-an-address", cwd=root, env=child_env(Path.home()))
    assert r.rc == 2 and "[invalid_input]" in r.stderr, r


CHECK = """
import sys
from omp.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules
               if m.startswith(("omp.board", "starlette", "uvicorn", "anyio", "playwright")))
sys.__stderr__.write("LOADED " + ",".join(heavy) + "\\n")
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["team", "api", "send-message", "--input",
         '{"team_name":"t","from":"leader","to":"worker-1","body":"hi"}', "--json"],
        ["team", "status", "t", "--json"],
        ["team", "events", "t"],
        ["team", "answer", "t", "worker-1", "--json"],
        ["team", "--help"],
    ],
)  # fmt: skip
def test_per_call_commands_never_load_the_board(root: Path, argv: list[str]) -> None:
    env = child_env(Path.home(), OMP_NO_MONITOR="1")
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    loaded = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED")]
    assert loaded == ["LOADED "], proc.stderr
