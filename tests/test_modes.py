from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from omp import modes
from omp.errors import EXIT_REFUSED, EXIT_USAGE, OmpError
from omp.store.paths import StatePaths


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("OMP_ROOT", raising=False)


@pytest.fixture
def paths(tmp_path: Path) -> StatePaths:
    root = tmp_path / "proj"
    root.mkdir()
    return StatePaths(root)


def fixed() -> float:
    return 1_700_000_000.0  # 2023-11-14T22:13:20.000Z


def write_mode(paths: StatePaths, mode: str, content: Any) -> Path:
    paths.ensure(paths.state)
    path = paths.mode_file(mode)
    text = content if isinstance(content, str) else json.dumps(content)
    path.write_text(text)
    return path


def tree(paths: StatePaths) -> list[str]:
    return sorted(str(p.relative_to(paths.root)) for p in paths.root.rglob("*"))


# ---- start --------------------------------------------------------------------------------


def test_ralph_start_writes_the_ts_fields_as_private_pretty_json(paths: StatePaths) -> None:
    out = modes.start_ralph(paths, "fix the parser", now=fixed)
    path = paths.mode_file("ralph")
    text = path.read_text()
    assert json.loads(text) == {
        "active": True,
        "iteration": 0,
        "maxIterations": 10,
        "completedSlices": 0,
        "startedAt": "2023-11-14T22:13:20.000Z",
        "prompt": "fix the parser",
        "projectPath": str(paths.root),
    }
    assert text.startswith('{\n  "active": true,')  # 2-space pretty, as the TS tool writes
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert out["ok"] is True and out["mode"] == "ralph" and out["active"] is True
    # no temp file left (`.omp/.gitignore` keeps git out of it all)
    assert tree(paths) == [".omp", ".omp/.gitignore", ".omp/state", ".omp/state/ralph.json"]


def test_ultrawork_and_ultraqa_start_fields(paths: StatePaths) -> None:
    modes.start_ultrawork(paths, "ship v2", task_count=4, now=fixed)
    modes.start_ultraqa(paths, "tests green", now=fixed)
    assert json.loads(paths.mode_file("ultrawork").read_text()) == {
        "active": True,
        "objective": "ship v2",
        "startedAt": "2023-11-14T22:13:20.000Z",
        "projectPath": str(paths.root),
        "taskCount": 4,
        "iteration": 0,  # the stop hook's counter, capped at maxIterations
        "maxIterations": 20,
    }
    assert json.loads(paths.mode_file("ultraqa").read_text()) == {
        "active": True,
        "goal": "tests green",
        "cycleCount": 0,
        "maxCycles": 5,
        "startedAt": "2023-11-14T22:13:20.000Z",
        "projectPath": str(paths.root),
        "lastVerdict": "pending",
    }


def test_explicit_caps_are_kept(paths: StatePaths) -> None:
    assert modes.start_ralph(paths, "t", max_iterations=3)["maxIterations"] == 3
    assert modes.start_ultraqa(paths, "g", max_cycles=9)["maxCycles"] == 9
    assert modes.start_ultrawork(paths, "o")["taskCount"] == 0  # not given, as in the TS tool


@pytest.mark.parametrize(
    "call",
    [
        lambda p: modes.start_ralph(p, ""),
        lambda p: modes.start_ralph(p, "   \n"),
        lambda p: modes.start_ralph(p, "t", max_iterations=0),
        lambda p: modes.start_ralph(p, "t", max_iterations=-3),
        lambda p: modes.start_ultrawork(p, ""),
        lambda p: modes.start_ultrawork(p, "o", task_count=0),
        lambda p: modes.start_ultraqa(p, " "),
        lambda p: modes.start_ultraqa(p, "g", max_cycles=-1),
    ],
)
def test_bad_input_is_invalid_input_and_writes_nothing(paths: StatePaths, call: Any) -> None:
    with pytest.raises(OmpError) as err:
        call(paths)
    assert err.value.code == "invalid_input"
    assert err.value.exit_code == EXIT_USAGE
    assert tree(paths) == []


def test_restart_keeps_unknown_fields_but_resets_run_fields(paths: StatePaths) -> None:
    # As the TS agent-stop hook leaves an ultrawork loop: its own counters plus a session id.
    write_mode(
        paths,
        "ultrawork",
        {"active": False, "objective": "old", "iteration": 20, "maxIterations": 20,
         "sessionId": "s1", "futureField": {"x": 1}},
    )  # fmt: skip
    modes.start_ultrawork(paths, "new")
    state = json.loads(paths.mode_file("ultrawork").read_text())
    assert state["futureField"] == {"x": 1}
    assert state["objective"] == "new" and state["active"] is True
    assert "sessionId" not in state
    assert (state["iteration"], state["maxIterations"]) == (0, 20)  # reset, not carried over


# ---- is_loop_active / active_loops --------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "active"),
    [
        ({"active": True}, True),
        ('{"active":true,"prompt":"ts wrote me"}', True),  # TS style: compact, no newline
        ({"active": "true"}, False),
        ({"active": 1}, False),
        ({"active": False}, False),
        ({"active": None}, False),
        ({"prompt": "no active field"}, False),
        ([{"active": True}], False),
        ("true", False),
        ('{"active": tru', False),
        ("", False),
    ],
)
def test_only_a_boolean_true_is_active(paths: StatePaths, content: Any, active: bool) -> None:
    write_mode(paths, "ralph", content)
    assert modes.is_loop_active(paths) is active
    assert modes.active_loops(paths) == (["ralph"] if active else [])


def test_active_loops_lists_every_active_mode_in_order(paths: StatePaths) -> None:
    write_mode(paths, "ultraqa", {"active": True})
    write_mode(paths, "ralph", {"active": True})
    write_mode(paths, "ultrawork", {"active": False})
    write_mode(paths, "ponytail", {"active": True})  # not a loop
    assert modes.active_loops(paths) == ["ralph", "ultraqa"]


def test_reading_creates_nothing(paths: StatePaths) -> None:
    assert modes.is_loop_active(paths) is False
    assert modes.active_loops(paths) == []
    assert modes.status(paths, "ralph") == {"ok": True, "mode": "ralph", "active": False}
    assert tree(paths) == []


def test_reading_writes_nothing_when_state_exists(paths: StatePaths) -> None:
    path = write_mode(paths, "ralph", {"active": True, "prompt": "p"})
    os.utime(path, (1_000_000, 1_000_000))
    before = tree(paths)
    for _ in range(3):
        assert modes.is_loop_active(paths)
        modes.status(paths, "ralph")
    assert tree(paths) == before
    assert path.stat().st_mtime == 1_000_000


def test_symlinked_mode_file_is_never_followed(paths: StatePaths, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"active": true}')
    paths.ensure(paths.state)
    paths.mode_file("ralph").symlink_to(target)
    assert modes.is_loop_active(paths) is False  # the monitor's scan survives, fail-closed
    with pytest.raises(OmpError) as err:
        modes.status(paths, "ralph")
    assert err.value.code == "unsafe_path"
    with pytest.raises(OmpError):
        modes.start_ralph(paths, "t")
    assert target.read_text() == '{"active": true}'


def test_symlinked_state_dir_is_refused(paths: StatePaths, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ralph.json").write_text('{"active": true}')
    paths.omp_dir.mkdir()
    paths.state.symlink_to(elsewhere)
    assert modes.is_loop_active(paths) is False
    with pytest.raises(OmpError):
        modes.status(paths, "ralph")


# ---- status / cancel ----------------------------------------------------------------------


def test_status_reports_the_state_with_a_strict_active(paths: StatePaths) -> None:
    write_mode(paths, "ralph", {"active": "true", "prompt": "p", "iteration": 2})
    out = modes.status(paths, "ralph")
    assert out == {"ok": True, "mode": "ralph", "active": False, "prompt": "p", "iteration": 2}


def test_status_flags_an_unreadable_file(paths: StatePaths) -> None:
    write_mode(paths, "ultraqa", "{not json")
    out = modes.status(paths, "ultraqa")
    path = str(paths.mode_file("ultraqa"))
    why = out.pop("why")
    assert out == {"ok": True, "mode": "ultraqa", "active": False, "unreadable": True, "file": path}
    assert why.startswith(f"{path} is not valid JSON")
    assert paths.mode_file("ultraqa").read_text() == "{not json"  # shown, never repaired
    for damaged in ('{"active": true, "iteration": NaN}', "[1, 2]", "[" * 100 + "]" * 100):
        write_mode(paths, "ultraqa", damaged)
        out = modes.status(paths, "ultraqa")
        assert out["unreadable"] is True and out["active"] is False and path in out["why"]


def test_cancel_keeps_history_and_unknown_fields(paths: StatePaths) -> None:
    modes.start_ralph(paths, "task", now=fixed)
    state = json.loads(paths.mode_file("ralph").read_text())
    state["iteration"] = 4
    state["hookField"] = "kept"
    write_mode(paths, "ralph", state)
    out = modes.cancel(paths, "ralph", now=lambda: fixed() + 60)
    assert out["cancelled"] is True and out["active"] is False
    saved = json.loads(paths.mode_file("ralph").read_text())
    assert saved["active"] is False
    assert saved["cancelledAt"] == "2023-11-14T22:14:20.000Z"
    assert saved["iteration"] == 4 and saved["prompt"] == "task" and saved["hookField"] == "kept"
    assert not modes.is_loop_active(paths)


def test_cancel_without_a_loop_is_a_quiet_no_op(paths: StatePaths) -> None:
    out = modes.cancel(paths, "ultrawork")
    assert out == {"ok": True, "mode": "ultrawork", "active": False, "cancelled": False}
    assert tree(paths) == []
    path = write_mode(paths, "ultrawork", {"active": False, "objective": "o"})
    before = path.read_bytes()
    assert modes.cancel(paths, "ultrawork")["cancelled"] is False
    assert path.read_bytes() == before


def test_cancel_one_mode_leaves_the_others(paths: StatePaths) -> None:
    modes.start_ralph(paths, "r")
    modes.start_ultraqa(paths, "q")
    modes.cancel(paths, "ralph")
    assert modes.active_loops(paths) == ["ultraqa"]


# ---- ultraqa cycle ------------------------------------------------------------------------


def test_cycle_fail_and_pending_only_set_the_verdict(paths: StatePaths) -> None:
    modes.start_ultraqa(paths, "green")
    for verdict in ("fail", "pending"):
        out = modes.record_cycle(paths, verdict)
        saved = json.loads(paths.mode_file("ultraqa").read_text())
        assert saved["lastVerdict"] == verdict == out["lastVerdict"]
        assert saved["active"] is True and saved["cycleCount"] == 0  # the hook owns the counter


def test_cycle_pass_ends_the_loop(paths: StatePaths) -> None:
    modes.start_ultraqa(paths, "green")
    out = modes.record_cycle(paths, "pass", now=fixed)
    assert out["active"] is False
    saved = json.loads(paths.mode_file("ultraqa").read_text())
    assert saved["active"] is False and saved["lastVerdict"] == "pass"
    assert saved["completedAt"] == "2023-11-14T22:13:20.000Z"
    assert not modes.is_loop_active(paths)


def test_cycle_rejects_other_verdicts_before_reading(paths: StatePaths) -> None:
    with pytest.raises(OmpError) as err:
        modes.record_cycle(paths, "PASS")
    assert err.value.code == "usage" and err.value.exit_code == EXIT_USAGE
    assert "expects pass|fail|pending, got PASS" in err.value.message
    assert tree(paths) == []


def test_cycle_without_an_active_loop_is_refused(paths: StatePaths) -> None:
    with pytest.raises(OmpError) as err:
        modes.record_cycle(paths, "fail")
    assert err.value.code == "no_active_loop" and err.value.exit_code == EXIT_REFUSED
    assert tree(paths) == []
