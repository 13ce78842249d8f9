"""Concurrent requests to one worker: the guardian decides under the team's conversation lock, so
exactly one `task_req` is acknowledged and every other one is rejected as busy.

The senders are forked processes released together by a barrier, and each one's look at the
worker's status is slowed down, so without the lock they would all see it available."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import pytest

from omp.api import operations as team_api
from omp.conversations import availability
from omp.conversations import record as conversations
from omp.errors import OmpError
from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project, make_team, records

pytestmark = pytest.mark.slow  # racing processes

SENDERS = ["leader", "worker-2", "worker-3", "worker-4", "worker-5", "worker-6"]


def _sender(root: str, sender: str, barrier: Any, results: Any) -> None:
    os.environ["OMP_ROOT"] = root
    look = availability.member_states

    def slow_look(*args: Any, **kwargs: Any) -> Any:
        states = look(*args, **kwargs)
        time.sleep(0.05)  # widen the window between deciding and recording
        return states

    availability.member_states = slow_look
    inp = {"team_name": "t", "from": sender, "to": "worker-1", "body": f"job from {sender}"}
    barrier.wait(timeout=30)
    try:
        out: dict[str, Any] = team_api.send_message({**inp, "event": "task_req"}).result
    except OmpError as err:
        out = err.to_json()
    results.put(out)


def test_racing_requests_leave_exactly_one_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 6, no_limits=True)
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(SENDERS))
    results = ctx.Queue()
    procs = [ctx.Process(target=_sender, args=(str(root), s, barrier, results)) for s in SENDERS]
    for p in procs:
        p.start()
    outs = [results.get(timeout=60) for _ in SENDERS]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert all(o.get("ok") for o in outs), outs
    assert sorted(o["status"] for o in outs) == ["acknowledged"] + ["rejected"] * (len(SENDERS) - 1)
    winner = next(o for o in outs if o["status"] == "acknowledged")
    team = StatePaths(root).team("t")
    delivered = [r for r in records(team.mailbox("worker-1")) if r.get("type") == "message"]
    assert [m["id"] for m in delivered] == [winner["taskId"]]
    assert [c.task_id for c in conversations.open_conversations(team)] == [winner["taskId"]]
    for o in outs:
        if o["status"] == "rejected":
            assert o["reason"] == "busy" and winner["taskId"] in o["message"]
