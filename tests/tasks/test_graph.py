"""The task graph: readiness, stuck chains, the queue's order and who gets what (no I/O)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omp.tasks.graph import Graph, Worker, choose, find_cycle, validate


def t(tid: str, status: str = "pending", *blocked: str, **extra: Any) -> dict[str, Any]:
    return {"id": tid, "status": status, "backlog": True, "blockedBy": list(blocked),
            "order": int(tid) if tid.isdigit() else 99, **extra}  # fmt: skip


def test_ready_when_every_blocker_is_done_and_merged_when_it_has_a_branch() -> None:
    wt = {"kind": "worktree", "path": "/w", "branch": "omp/x/task-1", "base": "abc"}
    g = Graph([t("1", "completed", workspace=wt), t("2", "pending", "1"), t("3", "completed"),
               t("4", "pending", "3")])  # fmt: skip
    assert g.state_of(g.by_id["1"]) == "to_merge"
    assert g.state_of(g.by_id["2"]) == "blocked" and g.open_blockers(g.by_id["2"]) == ["1"]
    assert g.state_of(g.by_id["4"]) == "ready"
    g.by_id["1"]["mergedAt"] = "2026-01-01T00:00:00.000Z"
    assert Graph(g.tasks).state_of(g.by_id["2"]) == "ready"


def test_an_unknown_blocker_never_lets_a_task_start() -> None:
    g = Graph([t("2", "pending", "9")])
    assert not g.is_ready(g.by_id["2"])


def test_blocked_by_a_failed_task_through_a_chain() -> None:
    g = Graph([t("1", "failed"), t("2", "pending", "1"), t("3", "pending", "2"),
               t("4", "cancelled"), t("5", "pending", "4", "3"), t("6", "pending")])  # fmt: skip
    assert g.stuck_by == {"2": ["1"], "3": ["1"], "5": ["4", "1"]}
    assert not g.finished()  # task 6 can still run
    g.by_id["6"]["status"] = "completed"
    assert Graph(g.tasks).finished()


def test_a_long_chain_is_no_recursion_problem() -> None:
    chain = [t("1", "failed")] + [t(str(i), "pending", str(i - 1)) for i in range(2, 5000)]
    g = Graph(chain)
    assert g.stuck_by["4999"] == ["1"]


def test_queue_order_is_priority_then_order() -> None:
    g = Graph([t("1"), t("2", priority=5), t("3", priority=5, order=0), t("4", "pending", "1")])
    assert [x["id"] for x in g.queue()] == ["3", "2", "1"]


def test_non_backlog_tasks_are_never_handed_out() -> None:
    g = Graph([{"id": "1", "status": "pending", "description": "x (part 1/2)"}])
    assert g.queue() == []


def test_choose_by_agent_and_retries() -> None:
    g = Graph([t("1", agent="claude"), t("2"), t("3", triedBy=["w1"])])
    w1, w2 = Worker("w1", "copilot"), Worker("w2", "claude")
    picks = choose(g, [w1, w2])
    assert [(w.name, x["id"]) for w, x in picks] == [("w2", "1"), ("w1", "2")]
    # task 3 failed with w1: w2 may take it, so w1 does not (even when free)
    assert [(w.name, x["id"]) for w, x in choose(Graph([g.by_id["3"]]), [w1], [w1, w2])] == []
    # when no other worker fits, the one that tried it gets it again
    assert [(w.name, x["id"]) for w, x in choose(Graph([g.by_id["3"]]), [w1], [w1])] == [
        ("w1", "3")
    ]


def test_a_model_routes_only_when_the_team_runs_it() -> None:
    g = Graph([t("1", model="opus")])
    plain, opus = Worker("a", "claude"), Worker("b", "claude", "opus")
    assert choose(g, [plain], [plain, opus]) == []
    assert [w.name for w, _ in choose(g, [plain], [plain])] == ["a"]  # advice only


def test_validate_and_cycles() -> None:
    assert validate([("1", (), "a"), ("2", ("1",), "b")]) is None
    assert validate([("1", ("1",), "a")]) == "a is blocked by itself"
    assert "cycle: 1 -> 2 -> 1" in str(validate([("1", ("2",), "a"), ("2", ("1",), "b")]))
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) == []


def test_the_monitors_reader_sees_every_change_and_keeps_the_rest(tmp_path: Path) -> None:
    import os

    from omp.store.paths import StatePaths
    from omp.tasks import queue, tasks
    from omp.team.setup import create_team

    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    create_team(root, "t", 2, task="x")
    team = StatePaths(root).team("t")
    now = [0.0]
    reader = queue.Reader(lambda: now[0])
    assert reader(team) == tasks.list_all(team)
    now[0] = 4e9  # long after every write: the cache is trusted
    got = reader(team)
    got[0]["status"] = "changed by the caller"  # a copy: the cache keeps its own
    tasks.claim(team, "1", "worker-1")  # a real write: a new file
    seen = reader(team)
    assert seen == tasks.list_all(team) and seen[0]["owner"] == "worker-1"
    os.unlink(team.task("2"))
    assert [t["id"] for t in reader(team)] == ["1"]
    team.task("2").write_text("{broken")
    assert [t["id"] for t in reader(team)] == ["1"]  # skipped, as list_all skips it
