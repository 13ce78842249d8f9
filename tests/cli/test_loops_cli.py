from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from omp.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OMP_ROOT", str(proj))
    return proj


@pytest.fixture
def monitor(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A stand-in for omp.monitor.ctl that records each ensure_monitor call."""
    calls: list[Any] = []
    fake = types.ModuleType("omp.monitor.ctl")

    def ensure_monitor(paths: Any) -> None:
        calls.append(paths)

    fake.ensure_monitor = ensure_monitor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "omp.monitor.ctl", fake)
    return calls


def omp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def state(root: Path, mode: str) -> dict[str, Any]:
    data = json.loads((root / ".omp" / "state" / f"{mode}.json").read_text())
    assert isinstance(data, dict)
    return data


def test_ralph_start_status_cancel(
    root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any]
) -> None:
    code, out, _ = omp(capsys, "ralph", "start", "fix the flaky test", "--max-iterations", "3")
    assert code == 0
    assert out == 'ralph started: iteration 0/3 — "fix the flaky test"\n'
    assert state(root, "ralph")["maxIterations"] == 3

    code, out, _ = omp(capsys, "ralph", "status")
    assert (code, out) == (0, 'ralph active: iteration 0/3 — "fix the flaky test"\n')

    code, out, _ = omp(capsys, "ralph", "cancel")
    assert (code, out) == (0, "ralph cancelled\n")
    assert state(root, "ralph")["active"] is False

    code, out, _ = omp(capsys, "ralph", "status", "--json")
    got = json.loads(out)
    assert code == 0 and got["active"] is False and got["prompt"] == "fix the flaky test"

    code, out, _ = omp(capsys, "ralph", "cancel")
    assert (code, out) == (0, "no active ralph loop\n")


def test_start_json_is_one_object_even_if_the_monitor_prints(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("omp.monitor.ctl")
    fake.ensure_monitor = lambda paths: print("monitor chatter")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "omp.monitor.ctl", fake)
    code, out, err = omp(capsys, "ultrawork", "start", "ship it", "--task-count", "4", "--json")
    assert code == 0
    got = json.loads(out)  # exactly one JSON document on stdout
    assert got["ok"] is True and got["mode"] == "ultrawork" and got["taskCount"] == 4
    assert got["objective"] == "ship it" and got["projectPath"] == str(root)
    assert "monitor chatter" in err


@pytest.mark.parametrize(
    "args",
    [
        ("ralph", "start", "t"),
        ("ultrawork", "start", "o"),
        ("ultraqa", "start", "g"),
    ],
)
def test_every_start_ensures_the_monitor_once(
    root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any], args: tuple[str, ...]
) -> None:
    assert omp(capsys, *args)[0] == 0
    assert len(monitor) == 1 and monitor[0].root == root


def test_status_and_cancel_never_start_the_monitor(
    root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any]
) -> None:
    omp(capsys, "ultraqa", "status")
    omp(capsys, "ultraqa", "cancel")
    assert monitor == []


def test_a_failing_monitor_never_fails_start(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = types.ModuleType("omp.monitor.ctl")

    def boom(paths: Any) -> None:
        raise RuntimeError("tmux exploded")

    fake.ensure_monitor = boom  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "omp.monitor.ctl", fake)
    code, out, err = omp(capsys, "ultraqa", "start", "green", "--json")
    assert code == 0 and json.loads(out)["active"] is True
    assert "loop monitor not started: RuntimeError: tmux exploded" in err
    assert "Traceback" not in err


def test_status_without_a_loop_is_exit_0_and_creates_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for mode in ("ralph", "ultrawork", "ultraqa"):
        code, out, _ = omp(capsys, mode, "status", "--json")
        assert code == 0
        assert json.loads(out) == {"ok": True, "mode": mode, "active": False}
        assert omp(capsys, mode, "status")[1] == f"{mode} inactive\n"
    assert list(root.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("ralph", "start", ""),
        ("ralph", "start", "t", "--max-iterations", "0"),
        ("ultrawork", "start", "o", "--task-count", "-2"),
        ("ultraqa", "start", "g", "--max-cycles", "0"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any], args: tuple[str, ...]
) -> None:
    code, out, _ = omp(capsys, *args, "--json")
    assert code == 2
    assert json.loads(out)["error"] == "invalid_input"
    assert list(root.iterdir()) == [] and monitor == []


def test_ultraqa_cycle(root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any]) -> None:
    omp(capsys, "ultraqa", "start", "all green", "--max-cycles", "2")
    code, out, _ = omp(capsys, "ultraqa", "cycle", "fail")
    assert (code, out) == (
        0,
        'ultraqa verdict recorded: cycle 0/2, last verdict fail — "all green"\n',
    )
    code, out, _ = omp(capsys, "ultraqa", "cycle", "nope", "--json")
    assert code == 2
    assert json.loads(out) == {
        "ok": False,
        "error": "usage",
        "message": "ultraqa cycle expects pass|fail|pending, got nope",
    }
    assert state(root, "ultraqa")["lastVerdict"] == "fail"
    code, out, _ = omp(capsys, "ultraqa", "cycle", "pass")
    assert (code, out) == (0, 'ultraqa passed: loop ended — "all green"\n')
    assert state(root, "ultraqa")["active"] is False
    code, _, err = omp(capsys, "ultraqa", "cycle", "pass")
    assert code == 1 and "no active ultraqa loop" in err


def test_long_prompts_are_shortened_in_human_output(
    root: Path, capsys: pytest.CaptureFixture[str], monitor: list[Any]
) -> None:
    task = "first line " + "x" * 200 + "\nsecond line"
    _, out, _ = omp(capsys, "ralph", "start", task)
    assert len(out) < 100 and "second line" not in out and out.endswith('…"\n')
    assert state(root, "ralph")["prompt"] == task  # the file keeps it whole


def test_via_python_m_omp(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_ROOT": str(tmp_path), "HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "omp", "ralph", "start", "from a subprocess", "--json"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prompt"] == "from a subprocess"
    cmd = [sys.executable, "-m", "omp", "ralph", "status", "--json"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["active"] is True
    assert "Traceback" not in done.stderr
