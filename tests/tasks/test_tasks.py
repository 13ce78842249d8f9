"""claim-task / transition-task-status: O_EXCL locks, claim tokens, outbox lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.tasks import tasks
from tests.helpers import (
    ISO_MS,
    call_api,
    isolate,
    make_project,
    make_team,
    records,
    snapshot_tree,
    tree_modes,
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 2, task="build it")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def tasks_dir(root: Path) -> Path:
    return root / ".omp" / "state" / "team" / "demo" / "tasks"


def claim(capsys: pytest.CaptureFixture[str], tid: str = "1", worker: str = "worker-1") -> Any:
    return call_api(capsys, "claim-task", {"team_name": "demo", "task_id": tid, "worker": worker})


def move(
    capsys: pytest.CaptureFixture[str], token: str | None, frm: str, to: str, **extra: Any
) -> Any:
    payload = {"team_name": "demo", "task_id": "1", "from": frm, "to": to, **extra}
    if token is not None:
        payload["claim_token"] = token
    return call_api(capsys, "transition-task-status", payload)


def test_team_create_writes_pending_tasks(root: Path) -> None:
    t = json.loads((tasks_dir(root) / "1.json").read_text())
    assert t["status"] == "pending" and t["id"] == "1"
    assert t["description"] == "build it (part 1/2)"
    assert ISO_MS.match(t["createdAt"])


def test_claim_takes_a_pending_task(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = claim(capsys)
    assert r.rc == 0, r
    task = r.json["task"]
    assert task["status"] == "in_progress" and task["owner"] == "worker-1"
    token = r.json["claimToken"]
    assert token and token == r.json["claim_token"] == task["claimToken"]
    assert token.startswith("worker-1-")
    assert ISO_MS.match(task["startedAt"])
    on_disk = json.loads((tasks_dir(root) / "1.json").read_text())
    assert on_disk["status"] == "in_progress" and on_disk["claimToken"] == token
    lock = tasks_dir(root) / "1.lock"
    assert lock.is_file()
    assert json.loads(lock.read_text())["owner"] == "worker-1"
    assert os.stat(lock).st_mode & 0o777 == 0o600


def test_a_second_claim_is_refused(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert claim(capsys).rc == 0
    before = snapshot_tree(tasks_dir(root))
    for who in ("worker-2", "worker-1"):
        r = claim(capsys, worker=who)
        assert r.rc == 1
        assert r.json["error"] == "task_not_pending"
        assert r.json["status"] == "in_progress"
        assert "worker-1" in r.json["message"]
    assert snapshot_tree(tasks_dir(root)) == before


def test_a_stale_lock_on_a_pending_task_is_taken_over(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tasks_dir(root) / "1.lock"
    lock.write_text('{"owner":"worker-2","pid":999999}\n')  # a claimer died before the task write
    lock.chmod(0o600)
    r = claim(capsys)
    assert r.rc == 0, r
    assert json.loads(lock.read_text())["owner"] == "worker-1"
    assert r.json["task"]["owner"] == "worker-1"


def test_a_wrong_or_missing_token_is_refused(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = claim(capsys).json["claimToken"]
    before = snapshot_tree(root / ".omp")
    for bad in ("worker-1-0-deadbeef", None, ""):
        r = move(capsys, bad, "in_progress", "completed")
        assert r.rc == 1, r
        assert r.json["error"] == "claim_token_mismatch"
    assert snapshot_tree(root / ".omp") == before
    assert move(capsys, token, "in_progress", "completed").rc == 0


def test_complete_removes_the_lock_stamps_and_reports_to_the_outbox(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = claim(capsys).json["claimToken"]
    r = move(capsys, token, "in_progress", "completed", result="done: 3 files")
    assert r.rc == 0, r
    task = r.json["task"]
    assert task["status"] == "completed" and ISO_MS.match(task["finishedAt"])
    assert task["result"] == "done: 3 files"
    assert not (tasks_dir(root) / "1.lock").exists()
    on_disk = json.loads((tasks_dir(root) / "1.json").read_text())
    assert on_disk["status"] == "completed" and on_disk["finishedAt"] == task["finishedAt"]
    outbox = root / ".omp" / "state" / "team" / "demo" / "workers" / "worker-1" / "outbox.jsonl"
    lines = records(outbox)
    assert len(lines) == 1
    assert lines[0]["type"] == "task_complete"
    assert lines[0]["taskId"] == "1" and lines[0]["status"] == "completed"
    assert lines[0]["result"] == "done: 3 files"
    assert ISO_MS.match(lines[0]["timestamp"])
    assert os.stat(outbox).st_mode & 0o777 == 0o600


def test_failed_reports_task_failed(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = claim(capsys).json["claimToken"]
    assert move(capsys, token, "in_progress", "failed").rc == 0
    outbox = root / ".omp" / "state" / "team" / "demo" / "workers" / "worker-1" / "outbox.jsonl"
    assert [r["type"] for r in records(outbox)] == ["task_failed"]
    assert not (tasks_dir(root) / "1.lock").exists()


def test_a_finished_task_cannot_be_claimed_or_moved_again(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = claim(capsys).json["claimToken"]
    assert move(capsys, token, "in_progress", "completed").rc == 0
    assert claim(capsys).json["error"] == "task_not_pending"
    r = move(capsys, token, "in_progress", "failed")
    assert r.rc == 1 and r.json["error"] == "status_mismatch"
    r = move(capsys, token, "completed", "in_progress")
    assert r.json["error"] == "invalid_transition"


@pytest.mark.parametrize(
    ("frm", "to", "code"),
    [
        ("pending", "completed", "status_mismatch"),  # the real answer: it is in_progress
        ("in_progress", "pending", "invalid_transition"),
        ("done", "completed", "invalid_input"),
        ("in_progress", "shipped", "invalid_input"),
    ],
)
def test_bad_transitions_are_refused(
    root: Path, capsys: pytest.CaptureFixture[str], frm: str, to: str, code: str
) -> None:
    token = claim(capsys).json["claimToken"]
    before = snapshot_tree(root / ".omp")
    r = move(capsys, token, frm, to)
    assert r.rc in (1, 2) and r.json["error"] == code
    assert snapshot_tree(root / ".omp") == before


@pytest.mark.parametrize("tid", ["../escape", "1/../../x", "..", "a.b", ""])
def test_a_bad_task_id_is_refused_before_any_file_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tid: str
) -> None:
    root = make_project(tmp_path / "p2")
    make_team(root, "demo", 2)  # no tasks dir yet
    monkeypatch.setenv("OMP_ROOT", str(root))
    before = snapshot_tree(root)
    r = call_api(capsys, "claim-task", {"team_name": "demo", "task_id": tid, "worker": "worker-1"})
    assert r.rc == 2
    assert r.json["error"] in ("invalid_task_id", "invalid_input")
    if tid:
        assert r.json["error"] == "invalid_task_id"
    r = call_api(
        capsys,
        "transition-task-status",
        {"team_name": "demo", "task_id": tid, "from": "in_progress", "to": "completed"},
    )
    assert r.rc == 2
    assert snapshot_tree(root) == before
    assert not (tmp_path / "escape").exists()


def test_unknown_worker_and_unknown_task(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = claim(capsys, worker="worker-9")
    assert r.rc == 1 and r.json["error"] == "unknown_worker"
    assert r.json["candidates"] == ["worker-1", "worker-2"]
    r = claim(capsys, tid="77")
    assert r.rc == 1 and r.json["error"] == "task_not_found"
    r = claim(capsys, worker="../escape")
    assert r.rc == 2 and r.json["error"] == "invalid_worker_name"
    assert not (tasks_dir(root) / "77.lock").exists()


def test_list_tasks_orders_numerically_and_is_read_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "p3")
    team = make_team(root, "demo", 1)
    for tid in ("10", "2", "b", "a"):
        tasks.create(team, tid, f"task {tid}")
    monkeypatch.setenv("OMP_ROOT", str(root))
    before = snapshot_tree(root / ".omp")
    r = call_api(capsys, "list-tasks", {"team_name": "demo"})
    assert [t["id"] for t in r.json["tasks"]] == ["2", "10", "a", "b"]
    assert snapshot_tree(root / ".omp") == before


def test_task_state_is_private(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = claim(capsys).json["claimToken"]
    move(capsys, token, "in_progress", "completed")
    modes = tree_modes(root / ".omp")
    assert modes, "no state written"
    for rel, mode in modes.items():
        want = 0o700 if (root / ".omp" / rel).is_dir() else 0o600
        assert mode == want, (rel, oct(mode))


def test_library_claim_and_transition_round_trip(root: Path) -> None:
    from omp.store.paths import StatePaths

    team = StatePaths(root).team("demo")
    task, token = tasks.claim(team, "2", "worker-2")
    assert task["status"] == "in_progress"
    with pytest.raises(OmpError) as exc:
        tasks.claim(team, "2", "worker-1")
    assert exc.value.code == "task_not_pending"
    done = tasks.transition(
        team, "2", worker=None, from_status="in_progress", to_status="completed", token=token
    )
    assert done["status"] == "completed"
    assert tasks.read(team, "2")["status"] == "completed"  # type: ignore[index]
    outbox = team.worker_dir("worker-2") / "outbox.jsonl"
    assert [r["type"] for r in records(outbox)] == ["task_complete"]


def test_a_refused_completion_changes_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = claim(capsys).json["claimToken"]
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    outbox = root / ".omp" / "state" / "team" / "demo" / "workers" / "worker-1" / "outbox.jsonl"
    os.symlink(outside, outbox)
    before = snapshot_tree(root / ".omp")
    r = move(capsys, token, "in_progress", "completed")
    assert outside.read_bytes() == b""
    if r.rc != 0:  # refused: then nothing may have changed
        assert r.json["error"] == "unsafe_path"
        assert snapshot_tree(root / ".omp") == before


def test_a_task_starts_only_through_a_claim(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_team(root, "hx", 2, task="job")
    r = call_api(
        capsys,
        "transition-task-status",
        {"team_name": "hx", "task_id": "2", "from": "pending", "to": "in_progress"},
    )
    assert r.rc == 1 and r.json["error"] == "invalid_transition"
    assert "claim-task" in r.json["message"]
    assert (tasks.read(StatePaths(root).team("hx"), "2") or {}).get("status") == "pending"
