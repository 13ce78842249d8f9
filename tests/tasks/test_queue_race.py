"""Completions racing in separate processes: every task handed out once, no worker ever holding two
tasks, no task started before its blockers were done."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project, run_processes

WORKERS = 6
TASKS = 60


def racer(root: str, worker: str, out: str) -> None:
    """One worker's process: complete what it holds, then hand out work (to anyone: the
    processes race for the same tasks), until nothing is left."""
    from omp.backlog import handover
    from omp.record import config as team_config
    from omp.tasks import tasks

    team = StatePaths(Path(root)).team("race")
    cfg = team_config.load(team)
    done: list[str] = []
    idle = 0
    while idle < 400:
        found = tasks.list_all(team)
        mine = [t for t in found if t.get("owner") == worker and t["status"] == "in_progress"]
        if not mine:
            if all(t["status"] == "completed" for t in found):
                break
            handover.run(cfg)
            idle += 1
            continue
        idle = 0
        t = mine[0]
        tasks.transition(team, t["id"], worker=worker, from_status="in_progress",
                         to_status="completed", token=t["claimToken"])  # fmt: skip
        done.append(t["id"])
        handover.after_move(cfg, worker, "completed")
        handover.run(cfg)
    Path(out).write_text(json.dumps(done))


@pytest.mark.slow
def test_racing_completions_never_hand_one_task_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    lines = []
    for i in range(1, TASKS + 1):
        blocked = f"\nblocked_by = [{i - WORKERS}]" if i > WORKERS * 2 else ""
        lines.append(f'[[task]]\ntitle = "task {i}"{blocked}\n')
    (root / "t.toml").write_text("\n".join(lines))
    from omp.team.setup import create_team

    create_team(root, "race", WORKERS, tasks_file=root / "t.toml")
    outs = [tmp_path / f"done-{i}.json" for i in range(1, WORKERS + 1)]
    run_processes(
        racer, [(str(root), f"worker-{i}", str(outs[i - 1])) for i in range(1, WORKERS + 1)]
    )
    done = [tid for p in outs for tid in json.loads(p.read_text())]
    assert sorted(done, key=int) == [str(i) for i in range(1, TASKS + 1)]  # each exactly once
    events = [
        json.loads(line)
        for line in (root / ".omp/state/team/race/events.jsonl").read_text().splitlines()
    ]
    held: dict[str, str | None] = {}
    finished: set[str] = set()
    claims = 0
    for ev in events:
        if ev.get("type") != "task":
            continue
        w, tid = ev.get("owner"), str(ev.get("taskId"))
        if ev.get("from") == "pending" and ev.get("to") == "in_progress":
            claims += 1
            assert held.get(w) is None, f"{w} was handed {tid} while holding {held[w]}"
            n = int(tid)
            if n > WORKERS * 2:
                assert str(n - WORKERS) in finished, f"task {tid} started before its blocker"
            held[w] = tid
        elif ev.get("to") == "completed":
            assert held.get(w) == tid
            held[w] = None
            finished.add(tid)
    assert claims == TASKS
    assert os.listdir(root / ".omp/state/team/race/tasks")  # (the store is still there)
