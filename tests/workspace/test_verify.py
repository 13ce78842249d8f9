"""Verify runs: in the background with a state file (passed, failed, timed out, crashed and run
again) and in the foreground; the whole process group is stopped at the time limit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from omp import procs
from omp.workspace import create, verify
from tests.helpers import poll
from tests.workspace.gitrepo import write

# Real git in temporary repositories: dozens of git processes a test (the quick loop skips them).
pytestmark = pytest.mark.slow


def _worktree(repo: Path) -> Path:
    path = create.worktree_dir(repo, "t", "w1")
    with create.provisioned(repo, path, "omp/t/w1", "HEAD"):
        pass
    return path


def _done(run_dir: Path) -> verify.VerifyStatus:
    def probe() -> verify.VerifyStatus | None:
        st = verify.poll(run_dir)
        return st if st is not None and st.status != "running" else None

    return poll(probe, timeout=60, what="the verify run to finish")


def _state(run_dir: Path) -> dict[str, object]:
    data = json.loads((run_dir / verify.STATE).read_text())
    assert isinstance(data, dict)
    return data


def test_a_passing_check_in_a_worktree(repo: Path, tmp_path: Path) -> None:
    wt = _worktree(repo)
    run_dir = tmp_path / "state" / "task-1"
    started = verify.start(run_dir, wt, "pwd; test -f src/app.py && echo checked", 60)
    assert started.status == "running" and started.attempt == 1
    st = _done(run_dir)
    assert st.status == "passed" and st.exit == 0
    assert st.finished_at is not None and st.finished_at >= st.started_at
    assert verify.tail(st.log, 40).splitlines() == [str(wt), "checked"]
    assert st.log == run_dir / "verify.log"
    assert st.to_json()["status"] == "passed"


def test_a_failing_check_keeps_its_exit_code_and_output(repo: Path, tmp_path: Path) -> None:
    wt = _worktree(repo)
    run_dir = tmp_path / "run"
    verify.start(run_dir, wt, "echo one; echo two >&2; exit 3", 60)
    st = _done(run_dir)
    assert st.status == "failed" and st.exit == 3
    assert verify.tail(st.log, 40) == "one\ntwo"
    assert verify.tail(st.log, 1) == "two"


def test_the_command_does_not_inherit_gits_redirections(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    out = verify.run(
        repo, 'echo "dir=${GIT_DIR:-none}"; git rev-parse --show-toplevel', 60, tmp_path / "log"
    )
    assert out.status == "passed", verify.tail(out.log)
    assert verify.tail(out.log).splitlines() == ["dir=none", str(repo)]


def test_a_running_check_is_not_started_twice(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    gate = tmp_path / "gate"
    verify.start(run_dir, tmp_path, f"while [ ! -e {gate} ]; do sleep 0.05; done", 60)
    again = verify.start(run_dir, tmp_path, "exit 1", 60)
    assert again.status == "running" and again.attempt == 1
    gate.touch()
    st = _done(run_dir)
    assert st.status == "passed" and st.attempt == 1


def test_poll_without_a_run_and_a_hung_supervisor(tmp_path: Path) -> None:
    assert verify.poll(tmp_path / "never") is None
    run_dir = tmp_path / "run"
    gate = tmp_path / "gate"
    st = verify.start(run_dir, tmp_path, f"while [ ! -e {gate} ]; do sleep 0.05; done", 5)
    far = st.started_at + 5 + verify.KILL_GRACE + verify.OVERDUE + 1
    assert verify.poll(run_dir, now=far).status == "crashed"  # type: ignore[union-attr]
    gate.touch()
    _done(run_dir)


@pytest.mark.slow
def test_a_check_past_its_limit_is_stopped_with_its_whole_group(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    bg = tmp_path / "bg.pid"
    verify.start(
        run_dir, tmp_path, f"echo start; sleep 300 & echo $! > {bg}; sleep 300", 1, grace=1
    )
    st = _done(run_dir)
    assert st.status == "timed_out"
    assert "start" in verify.tail(st.log) and "time limit" in verify.tail(st.log)
    child = _state(run_dir)["childPid"]
    assert isinstance(child, int)
    for pid in (child, int(bg.read_text())):
        poll(lambda pid=pid: not procs.running(pid), what=f"pid {pid} to be stopped")  # type: ignore[misc]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_run_killed_midway_is_crashed_and_runs_again(tmp_path: Path, sig: int) -> None:
    run_dir = tmp_path / "run"
    verify.start(run_dir, tmp_path, "echo started; sleep 300", 600)
    state = poll(lambda: _state(run_dir) if "childPid" in _state(run_dir) else None, what="child")
    sup, child = state["supervisorPid"], state["childPid"]
    assert isinstance(sup, int) and isinstance(child, int)
    os.kill(sup, sig)
    crashed = poll(
        lambda: (s := verify.poll(run_dir)) is not None and s.status == "crashed" and s,
        what="the run to count as crashed",
    )
    assert crashed.exit is None and crashed.finished_at is None
    # started again: what is left of the old run is stopped first, the new run passes
    again = verify.start(run_dir, tmp_path, "echo again", 600)
    assert again.attempt == 2
    st = _done(run_dir)
    assert st.status == "passed" and verify.tail(st.log) == "again"
    poll(lambda: not procs.running(child), what="the old command to be stopped")


def test_foreground_runs_pass_fail_and_time_out(tmp_path: Path) -> None:
    log = tmp_path / "fg.log"
    ok = verify.run(tmp_path, "echo fine", 60, log)
    assert (ok.status, ok.exit) == ("passed", 0) and verify.tail(log) == "fine"
    bad = verify.run(tmp_path, "exit 7", 60, log)
    assert (bad.status, bad.exit) == ("failed", 7) and verify.tail(log) == ""
    late = verify.run(tmp_path, "sleep 300", 0.3, log, grace=0.5)
    assert late.status == "timed_out" and late.exit is not None and late.exit < 0  # stopped
    assert "time limit" in verify.tail(log)


def test_tail_reads_the_end_of_a_big_log(tmp_path: Path) -> None:
    log = write(tmp_path / "big.log", "".join(f"line {i}\n" for i in range(200_000)))
    assert verify.tail(log, 3) == "line 199997\nline 199998\nline 199999"
    assert verify.tail(tmp_path / "missing.log") == ""
    assert verify.tail(log, 0) == ""
