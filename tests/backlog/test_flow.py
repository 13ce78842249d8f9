"""A backlog without tmux: tasks from a file, the claim gate, hand-over on completion, retries,
cancel, retry, add, create-task and its limit, and the views."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.backlog import handover
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import queue, tasks
from tests.helpers import call_api, child_env, isolate, make_project, run_cli, snapshot_tree

TASKS = """
[[task]]
title = "Write the parser"
description = "Tokens first."

[[task]]
title = "The list command"
blocked_by = [1]

[[task]]
title = "The show command"
blocked_by = [1]
retries = 1

[[task]]
title = "Docs"
blocked_by = [2, 3]
priority = -1

[[task]]
title = "Unrelated cleanup"
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(proj))
    (proj / "tasks.toml").write_text(TASKS)
    return proj


def create(root: Path, workers: int = 2, name: str = "bl", file: str = "tasks.toml") -> Any:
    out = run_cli("team", "create", name, "--workers", str(workers), "--tasks", str(root / file),
                  "--json", cwd=root, env=child_env(OMP_ROOT=str(root)))  # fmt: skip
    return out


def team(root: Path, name: str = "bl") -> Any:
    return team_config.load(StatePaths(root).team(name))


def task(root: Path, tid: str) -> dict[str, Any]:
    found = tasks.read(StatePaths(root).team("bl"), tid)
    assert found is not None
    return found


def api(capsys: pytest.CaptureFixture[str], sub: str, **payload: Any) -> Any:
    return call_api(capsys, sub, {"team_name": "bl", **payload})


def complete(capsys: pytest.CaptureFixture[str], tid: str, worker: str, to: str = "completed",
             result: str = "done") -> Any:  # fmt: skip
    token = task_token(capsys, tid)
    return api(capsys, "transition-task-status", task_id=tid, worker=worker,
               claim_token=token, result=result, **{"from": "in_progress", "to": to})  # fmt: skip


def task_token(capsys: pytest.CaptureFixture[str], tid: str) -> str:
    out = api(capsys, "list-tasks")
    return str(next(t["claimToken"] for t in out.json["tasks"] if t["id"] == tid))


def mail(root: Path, worker: str) -> list[dict[str, Any]]:
    path = root / ".omp/state/team/bl/mailbox" / f"{worker}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if '"message"' in line]


def test_create_with_tasks_writes_the_backlog(root: Path) -> None:
    out = create(root)
    assert out.rc == 0 and out.json["tasks"] == 5, out
    t2 = task(root, "2")
    assert (t2["status"], t2["backlog"], t2["blockedBy"], t2["title"]) == (
        "pending",
        True,
        ["1"],
        "The list command",
    )
    assert task(root, "1")["description"] == "Write the parser\n\nTokens first."
    assert team(root).raw["backlog"]["merge"] == "manual"
    assert [w["taskId"] for w in team(root).workers] == [None, None]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[[task]]\ntitle="a"\nblocked_by=[2]\n[[task]]\ntitle="b"\nblocked_by=[1]\n', "cycle"),
        ('[[task]]\ntitle="a"\nid=1\n[[task]]\ntitle="b"\nid=1\n', "duplicate id 1"),
        ('[[task]]\ntitle="a"\nblocked_by=[9]\n', "blocked by 9"),
    ],
)
def test_a_bad_tasks_file_writes_nothing(root: Path, text: str, words: str) -> None:
    (root / "bad.toml").write_text(text)
    before = snapshot_tree(root)
    out = create(root, file="bad.toml")
    assert out.rc == 2 and out.json["error"] == "invalid_tasks" and words in out.json["message"]
    assert snapshot_tree(root) == before


def test_a_blocked_task_cannot_be_claimed(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create(root)
    out = api(capsys, "claim-task", task_id="2", worker="worker-1")
    assert out.rc == 1 and out.json["error"] == "task_blocked"
    assert "blocked by 1 (pending)" in out.json["message"]
    assert api(capsys, "claim-task", task_id="1", worker="worker-1").rc == 0


def test_completion_hands_the_worker_its_next_task(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create(root)
    handed = handover.run(team(root))
    # priority, then file order: 1 and 5 are ready (2, 3 wait for 1; 4 for 2 and 3)
    assert [(a["worker"], a["taskId"]) for a in handed] == [("worker-1", "1"), ("worker-2", "5")]
    first = mail(root, "worker-1")[-1]
    assert first["intent"] == "task_handover" and "Task ID: 1" in first["body"]
    assert '"claim_token":"worker-1-' in first["body"]  # filled in: nothing to claim
    out = complete(capsys, "1", "worker-1")
    assert out.rc == 0, out
    # both 2 and 3 are ready now; worker-1 (the one that finished) gets 2 at once
    assert out.json["next"] == {"taskId": "2", "how": "omp mailed it to you"}
    assert task(root, "2")["owner"] == "worker-1"
    assert task(root, "3")["status"] == "pending"
    out = complete(capsys, "5", "worker-2")
    assert out.json["next"]["taskId"] == "3"
    events = (root / ".omp/state/team/bl/events.jsonl").read_text()
    assert events.count('"type":"handover"') == 4


def test_a_failed_task_with_retries_goes_to_another_worker(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create(root)
    handover.run(team(root))
    complete(capsys, "1", "worker-1")  # worker-1 -> 2
    complete(capsys, "5", "worker-2")  # worker-2 -> 3
    out = complete(capsys, "3", "worker-2", to="failed", result="cannot")
    assert out.rc == 0
    t3 = task(root, "3")
    # retries = 1: queued again, not for worker-2 while worker-1 may take it
    assert (t3["status"], t3["triedBy"], t3["retried"]) == ("pending", ["worker-2"], 1)
    assert "next" not in out.json
    out = complete(capsys, "2", "worker-1")
    assert out.json["next"]["taskId"] == "3"
    out = complete(capsys, "3", "worker-1", to="failed")
    t3 = task(root, "3")
    assert t3["status"] == "failed"  # no retry left
    rows = run_cli("team", "task", "list", "bl", "--json", cwd=root).json
    four = next(r for r in rows["tasks"] if r["id"] == "4")
    assert four["state"] == "blocked" and four["blockedByFailed"] == ["3"]
    assert rows["summary"]["finished"] is True  # nothing more can run
    text = run_cli("team", "task", "list", "bl", cwd=root).stdout
    assert "blocked by failed 3" in text and "nothing more can run" in text


def test_cancel_and_retry_by_hand(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create(root, workers=1)
    handover.run(team(root))
    out = run_cli("team", "task", "cancel", "bl", "1", "--reason", "not needed", "--json",
                  cwd=root)  # fmt: skip
    assert out.rc == 0 and out.json["was"] == "in_progress" and out.json["told"] == "worker-1"
    assert "cancelled by the leader (not needed)" in mail(root, "worker-1")[-2]["body"]
    # the worker is free: it got the next ready task (5)
    assert [a["taskId"] for a in out.json["handedOver"]] == ["5"]
    assert task(root, "2")["status"] == "pending"
    assert run_cli("team", "task", "show", "bl", "2", "--json", cwd=root).json["blockers"] == [
        {"id": "1", "state": "cancelled"}
    ]
    again = run_cli("team", "task", "cancel", "bl", "1", "--json", cwd=root)
    assert again.rc == 1 and again.json["error"] == "invalid_transition"
    out = run_cli("team", "task", "retry", "bl", "1", "--json", cwd=root)
    assert out.rc == 0 and out.json["task"]["status"] == "pending"


def test_task_add_and_create_task(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create(root)
    out = run_cli("team", "task", "add", "bl", "Benchmarks", "--blocked-by", "4", "--priority",
                  "3", "--json", cwd=root)  # fmt: skip
    assert out.rc == 0 and out.json["task"]["id"] == "6", out
    assert out.json["task"]["blockedBy"] == ["4"] and out.json["task"]["createdBy"] == "leader"
    bad = run_cli("team", "task", "add", "bl", "x", "--blocked-by", "6", "--id", "6", "--json",
                  cwd=root)  # fmt: skip
    assert bad.rc == 2 and bad.json["error"] == "invalid_tasks"
    out = api(capsys, "create-task", title="Split part", worker="worker-1", blocked_by=[1])
    assert out.rc == 0 and out.json["task"]["createdBy"] == "worker-1", out
    (root / ".omp" / "config.toml").write_text("[backlog]\nmax_tasks_per_worker = 1\n")
    out = api(capsys, "create-task", title="Another", worker="worker-1")
    assert out.rc == 1 and out.json["error"] == "task_limit"
    assert "worker-1 made 1 task(s) already" in out.json["message"]


def test_the_queue_claims_under_the_guard(root: Path) -> None:
    create(root, workers=2)
    paths = StatePaths(root).team("bl")
    one = queue.handover(paths)
    two = queue.handover(paths)
    assert len(one) == 2 and two == []  # nobody free: nothing handed twice


def test_a_launch_with_a_bad_tasks_file_touches_nothing(root: Path) -> None:
    (root / "bad.toml").write_text('[[task]]\ntitle = "a"\nblocked_by = [1]\n')
    before = snapshot_tree(root)
    out = run_cli("team", "launch", "2", "--agent", "demo", "--tasks", str(root / "bad.toml"),
                  "--name", "x", "--json", cwd=root)  # fmt: skip
    assert out.rc == 2 and out.json["error"] == "invalid_tasks", out
    assert "blocked by itself" in out.json["message"]
    assert snapshot_tree(root) == before
    both = run_cli("team", "launch", "2", "some task", "--agent", "demo", "--tasks",
                   str(root / "tasks.toml"), "--json", cwd=root)  # fmt: skip
    assert both.rc == 2 and both.json["error"] == "usage"
    merge = run_cli("team", "launch", "2", "--agent", "demo", "--merge", "auto", "--json",
                    cwd=root)  # fmt: skip
    assert merge.rc == 2 and merge.json["error"] == "usage"
    assert snapshot_tree(root) == before


def test_wait_returns_when_nothing_more_can_run(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create(root)
    handover.run(team(root))
    complete(capsys, "1", "worker-1", to="failed")  # 2, 3, 4 wait for it
    out = run_cli("team", "wait", "bl", "--timeout", "0.1", "--json", cwd=root)
    assert out.json["event"] == "timeout"  # task 5 still runs (worker-2 holds it)
    complete(capsys, "5", "worker-2")
    out = run_cli("team", "wait", "bl", "--since", out.json["cursor"], "--timeout", "5",
                  "--json", cwd=root)  # fmt: skip
    assert out.json["event"] == "all_done" and out.json["allDone"] is True, out.json
    assert out.json["stuck"] == {"2": ["1"], "3": ["1"], "4": ["1"]}
    status = run_cli("team", "status", "bl", "--json", cwd=root).json["teams"][0]
    assert status["backlog"]["finished"] is True
    assert [t["state"] for t in status["tasks"]] == ["failed", "blocked", "blocked", "blocked",
                                                     "done"]  # fmt: skip


def test_a_worker_still_joining_is_handed_nothing(root: Path) -> None:
    """A new worker's pane must get its trigger before omp's mail and nudge: until the launch
    (or add-worker) clears the mark, the queue passes it by."""
    from omp import clock
    from omp.team.backlog import BacklogStart

    create(root)
    paths = StatePaths(root).team("bl")
    cfg = team(root)
    cfg.raw["workers"][0][queue.JOINING] = clock.iso()
    team_config.write(paths, cfg.raw)
    assert [a["worker"] for a in handover.run(team(root))] == ["worker-2"]
    start = BacklogStart.joining(team(root))
    assert start is not None
    start.joined(paths, ["worker-1"])
    assert queue.JOINING not in team(root).raw["workers"][0]
    assert [a["worker"] for a in handover.run(team(root))] == ["worker-1"]
