"""What the views show of a backlog: every task's state (blocked, ready, in progress, verifying,
to merge, done, failed, interrupted, cancelled), what blocks it, its owner and its branch; the
graph as JSON; one task whole (`omp team task show`). Read-only: nothing here writes.

`status` adds `task_row(...)` to each task's row and `summary(...)` to each backlog team
(`omp.views.status`); `omp team task list|show` print these.
"""

from __future__ import annotations

from typing import Any

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.tasks import graph as graphs
from omp.tasks import tasks
from omp.tasks.graph import Graph

TITLE_WIDTH = 120


def title_of(t: dict[str, Any]) -> str:
    title = t.get("title")
    if isinstance(title, str) and title:
        return title
    first = str(t.get("description") or "").strip().splitlines()
    return first[0][:TITLE_WIDTH] if first else ""


def task_row(t: dict[str, Any], g: Graph) -> dict[str, Any]:
    """The backlog keys of one task's row (only what a task has: a plain task gets `state`)."""
    tid = str(t.get("id"))
    row: dict[str, Any] = {"state": g.state_of(t)}
    if t.get("backlog") is not True:
        return row
    row["title"] = title_of(t)
    blocked = graphs.blockers(t)
    if blocked:
        row["blockedBy"] = blocked
        if t.get("status") == "pending":
            row["waitingFor"] = g.open_blockers(t)
    stuck = g.stuck_by.get(tid)
    if stuck:
        row["blockedByFailed"] = stuck  # it cannot run: a task it waits for failed
    ws = t.get("workspace")
    if isinstance(ws, dict) and ws.get("kind") == "worktree":
        row["branch"] = ws.get("branch")
        row["worktree"] = ws.get("path")
    for key in ("priority", "agent", "model", "retried", "createdBy", "handedOverAt",
                "mergeConflict", "landError"):  # fmt: skip
        if t.get(key) not in (None, 0, ""):
            row[key] = t[key]
    return row


def summary(task_list: list[dict[str, Any]], g: Graph | None = None) -> dict[str, Any] | None:
    """Counts by state and whether anything more can run; None for a team with no backlog."""
    if not any(t.get("backlog") is True for t in task_list):
        return None
    g = g or Graph(task_list)
    counts: dict[str, int] = {}
    for t in task_list:
        s = g.state_of(t)
        counts[s] = counts.get(s, 0) + 1
    return {
        "states": counts,
        "ready": len(g.queue()),
        "finished": g.finished(),  # nothing more can run: all done, or only what waits for
        # a failed or cancelled task (`omp team wait` returns then)
        "stuck": [str(t.get("id")) for t in task_list if str(t.get("id")) in g.stuck_by],
    }


def graph_json(task_list: list[dict[str, Any]]) -> dict[str, Any]:
    """The graph: nodes (id, state, title, owner, branch) and edges (blocker -> task)."""
    g = Graph(task_list)
    nodes = []
    edges = []
    for t in task_list:
        row = {"id": t.get("id"), "status": t.get("status"), "owner": t.get("owner")}
        row.update(task_row(t, g))
        nodes.append(row)
        edges += [{"from": b, "to": t.get("id")} for b in graphs.blockers(t)]
    return {"nodes": nodes, "edges": edges}


def rows(cfg: TeamConfig) -> dict[str, Any]:
    """`omp team task list`: every task's row, in the queue's order of the file."""
    found = tasks.read_all(cfg.paths)
    g = Graph(found)
    out = []
    for t in found:
        row = {"id": t.get("id"), "status": t.get("status"), "owner": t.get("owner"),
               "result": t.get("result")}  # fmt: skip
        row.update(task_row(t, g))
        out.append(row)
    return {
        "ok": True,
        "team": cfg.name,
        "tasks": out + found.broken,
        "summary": summary(found, g),
        "edges": [{"from": b, "to": t.get("id")} for t in found for b in graphs.blockers(t)],
    }


def show(cfg: TeamConfig, tid: str) -> dict[str, Any]:
    """`omp team task show`: the task whole (its claim token left out), its blockers' states,
    the tasks that wait for it."""
    task = tasks.read(cfg.paths, tid)
    if task is None:
        known = [str(t["id"]) for t in tasks.list_all(cfg.paths)]
        raise OmpError(
            "task_not_found",
            f"task {tid} not found; tasks of team {cfg.name}: {', '.join(known[:50]) or 'none'}",
            task_id=tid,
        )
    found = tasks.list_all(cfg.paths)
    g = Graph(found)
    mine = g.by_id.get(tid, task)
    record = {k: v for k, v in mine.items() if k not in tasks.TOKEN_FIELDS}
    return {
        "ok": True,
        "team": cfg.name,
        "task": record,
        **task_row(mine, g),
        "blockers": [
            {"id": b, "state": g.state_of(g.by_id[b]) if b in g.by_id else "missing"}
            for b in graphs.blockers(mine)
        ],
        "dependents": [str(t["id"]) for t in found if tid in graphs.blockers(t)],
    }


def task_diff(cfg: TeamConfig, tid: str | None = None, *, stat: bool = False) -> dict[str, Any]:
    """`omp team diff TEAM --task ID` (or every task with a branch of its own that is not merged
    yet): the task's commits and diff since its base, as `omp team diff` shows a worker's."""
    from omp.backlog import worktrees as task_worktrees
    from omp.views.worktrees import branch_row, target_of, with_diff

    found = tasks.list_all(cfg.paths)
    if tid is not None:
        chosen = [t for t in found if str(t.get("id")) == tid]
        if not chosen:
            raise OmpError("task_not_found", f"task {tid} not found in team {cfg.name}",
                           task_id=tid)  # fmt: skip
        if task_worktrees.of(chosen[0]) is None:
            raise OmpError(
                "invalid_input",
                f"task {tid} has no branch of its own (it ran in a worker's checkout, or has not "
                "started yet)",
                task_id=tid,
            )
    else:
        chosen = [t for t in found if task_worktrees.of(t) is not None and not t.get("mergedAt")]
    top, current = target_of(cfg)
    out: list[dict[str, Any]] = []
    for t in chosen:
        wt = task_worktrees.of(t)
        assert wt is not None
        if top is None:
            raise OmpError("not_a_git_repo", f"{cfg.paths.project.root} is not in a git work tree")
        own = t.get("workspace")
        target = (own.get("target") if isinstance(own, dict) else None) or current
        label = str(t.get("owner") or f"task {t.get('id')}")
        row = branch_row(top, label, wt, target)
        row["taskId"] = t.get("id")
        row["title"] = title_of(t)
        out.append(with_diff(top, row, stat=stat))
    return {"ok": True, "team": cfg.name, "target": current, "stat": stat, "workers": out}
