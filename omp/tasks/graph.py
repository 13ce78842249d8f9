"""The task graph: which task is blocked, which is ready, and which ready task a free worker gets.

Plain functions over task records (the dicts of `tasks/<id>.json`), no I/O: the store's queue
(`omp.tasks.queue`), the monitor, `status` and the benchmarks all call them.

A backlog task (`"backlog": true`) may be blocked by others (`blockedBy`, a list of ids). It is
*ready* when every task it is blocked by is *done*: completed and, when it has a branch of its
own (`workspace` of kind worktree, or the `work` a worktree completion records), merged
(`mergedAt`). A task blocked, directly or through others, by a task that failed, was cancelled
or interrupted is *stuck*: it shows as blocked by that task and `wait` knows nothing more runs.

The queue: ready backlog tasks, higher `priority` first, then their `order` (the position in
the tasks file, or when added). A free worker gets the first one that fits it: no `agent` or its
own agent, no `model` or its own model (a model no worker of the team runs is only advice), and
not a task it already failed while another worker could take it (`retries`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    Task = dict[str, Any]

HELD = frozenset({"in_progress", "verifying"})  # a worker holding one of these is busy
FAILED = frozenset({"failed", "interrupted", "cancelled"})
# What `status` shows of a task (`state_of`).
STATES = ("blocked", "ready", "in_progress", "verifying", "to_merge", "done", "failed",
          "interrupted", "cancelled")  # fmt: skip


class Worker(NamedTuple):
    """A worker as the queue sees it."""

    name: str
    agent: str | None = None
    model: str | None = None


def blockers(task: Task) -> list[str]:
    found = task.get("blockedBy")
    return [str(b) for b in found if isinstance(b, str | int)] if isinstance(found, list) else []


def needs_merge(task: Task) -> bool:
    """The task's work is on a branch of its own: done only once merged."""
    ws = task.get("workspace")
    if isinstance(ws, dict) and ws.get("kind") == "worktree":
        return True
    return isinstance(task.get("work"), dict)


def is_done(task: Task) -> bool:
    return task.get("status") == "completed" and (
        not needs_merge(task) or bool(task.get("mergedAt"))
    )


def sort_id(tid: str) -> tuple[int, int, str]:
    """The store's order of ids: numbers numerically, then the others."""
    return (0, int(tid), "") if tid.isdigit() else (1, 0, tid)


def sort_key(task: Task) -> tuple[int, int, tuple[int, int, str]]:
    """The queue's order: higher priority first, then the order given, then the id."""
    prio = task.get("priority")
    order = task.get("order")
    tid = str(task.get("id"))
    return (
        -(prio if isinstance(prio, int) and not isinstance(prio, bool) else 0),
        order if isinstance(order, int) and not isinstance(order, bool) else 1 << 62,
        sort_id(tid),
    )


class Graph:
    """The tasks of one team, indexed once."""

    __slots__ = ("_stuck_by", "by_id", "tasks")

    def __init__(self, task_list: Iterable[Task]) -> None:
        self.tasks = list(task_list)
        self.by_id: dict[str, Task] = {str(t.get("id")): t for t in self.tasks}
        self._stuck_by: dict[str, list[str]] | None = None

    @property
    def stuck_by(self) -> dict[str, list[str]]:
        """(computed on first use: choosing a task does not need it)"""
        if self._stuck_by is None:
            self._stuck_by = self._stuck()
        return self._stuck_by

    def _stuck(self) -> dict[str, list[str]]:
        """pending task id -> the failed, cancelled or interrupted tasks that keep it from ever
        running (through any chain of blockers). Iterative: a chain may be thousands long."""
        by_id = self.by_id
        memo: dict[str, list[str]] = {}
        visiting: set[str] = set()
        for root, rt in by_id.items():
            if root in memo or rt.get("status") != "pending":
                continue
            stack = [(root, False)]
            while stack:
                tid, expanded = stack.pop()
                if tid in memo:
                    continue
                deps = [b for b in blockers(by_id[tid]) if b in by_id]
                if not expanded:
                    if tid in visiting:
                        continue  # a cycle (refused when tasks are added): cut it here
                    visiting.add(tid)
                    stack.append((tid, True))
                    stack += [(b, False) for b in deps if by_id[b].get("status") == "pending"]
                    continue
                out: list[str] = []
                for b in deps:
                    s = by_id[b].get("status")
                    if s in FAILED:
                        found = [b]
                    elif s == "pending":
                        found = memo.get(b, [])
                    else:
                        continue
                    out += [x for x in found if x not in out]
                memo[tid] = out
        return {tid: found for tid, found in memo.items() if found}

    def open_blockers(self, task: Task) -> list[str]:
        """The tasks `task` still waits for (unknown ids count as open: never run early)."""
        out = []
        for b in blockers(task):
            bt = self.by_id.get(b)
            if bt is None or not is_done(bt):
                out.append(b)
        return out

    def is_ready(self, task: Task) -> bool:
        return task.get("status") == "pending" and not self.open_blockers(task)

    def state_of(self, task: Task) -> str:
        s = task.get("status")
        if s == "pending":
            return "blocked" if self.open_blockers(task) else "ready"
        if s == "completed":
            return "done" if is_done(task) else "to_merge"
        return str(s)

    def queue(self) -> list[Task]:
        """Ready backlog tasks, in the order they are handed out."""
        ready = [t for t in self.tasks if t.get("backlog") is True and self.is_ready(t)]
        ready.sort(key=sort_key)
        return ready

    def held(self) -> dict[str, str]:
        """worker -> the task it holds (in progress or being verified)."""
        out: dict[str, str] = {}
        for t in self.tasks:
            owner = t.get("owner")
            if t.get("status") in HELD and isinstance(owner, str):
                out.setdefault(owner, str(t.get("id")))
        return out

    def finished(self) -> bool:
        """Nothing more can run: every task is done, failed, cancelled or interrupted, or
        waiting only for such a one (and at least one task)."""
        if not self.tasks:
            return False
        for t in self.tasks:
            s = t.get("status")
            if s in HELD:
                return False
            if s == "pending" and str(t.get("id")) not in self.stuck_by:
                return False
            if s == "completed" and not is_done(t):
                return False  # its merge is still to come: its dependents may run after
        return True


def fits(task: Task, w: Worker, models: frozenset[str], everyone: Sequence[Worker]) -> bool:
    """Whether `w` may take `task` (see the module docstring); `models`: those the team runs."""
    agent = task.get("agent")
    if isinstance(agent, str) and agent and agent != w.agent:
        return False
    model = task.get("model")
    if isinstance(model, str) and model in models and model != w.model:
        return False
    tried = task.get("triedBy")
    if isinstance(tried, list) and w.name in tried:
        # another worker that fits and has not failed it may take it: leave it to them
        return not any(
            o.name not in tried and fits({**task, "triedBy": None}, o, models, everyone)
            for o in everyone
        )
    return True


def choose(
    graph: Graph, free: Sequence[Worker], everyone: Sequence[Worker] | None = None
) -> list[tuple[Worker, Task]]:
    """Which free worker gets which ready task: each task in queue order to the first free
    worker (in `free`'s order) it fits; a worker gets one task at most."""
    team = list(everyone if everyone is not None else free)
    models = frozenset(w.model for w in team if w.model)
    left = list(free)
    out: list[tuple[Worker, Task]] = []
    if not left:
        return out
    for task in graph.queue():
        for i, w in enumerate(left):
            if fits(task, w, models, team):
                out.append((w, task))
                del left[i]
                break
        if not left:
            break
    return out


def validate(
    items: Sequence[tuple[str, Sequence[str], str]], existing: dict[str, list[str]] | None = None
) -> str | None:
    """What is wrong with new tasks `(id, blocked_by, where)` added beside `existing` ones
    (id -> blocked by), or None: a duplicate id, a task blocked by itself or by an id no task
    has, a cycle (named)."""
    known = existing or {}
    seen: dict[str, str] = {}
    for tid, _, where in items:
        if tid in seen or tid in known:
            first = seen.get(tid, "a task of the team")
            return f"duplicate id {tid}: {first} and {where}"
        seen[tid] = where
    for tid, blocked_by, where in items:
        for b in blocked_by:
            if b == tid:
                return f"{where} is blocked by itself"
            if b not in seen and b not in known:
                return f"{where} is blocked by {b}, which no task has as its id"
    edges = {k: list(v) for k, v in known.items()}
    edges.update({tid: list(b) for tid, b, _ in items})
    ring = find_cycle(edges)
    if ring:
        return f"the tasks are blocked by each other in a cycle: {' -> '.join(ring)}"
    return None


def find_cycle(edges: dict[str, list[str]]) -> list[str]:
    """A cycle of `edges` (task -> the tasks it is blocked by) as `[a, b, ..., a]`, or []."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(edges, white)
    for start in edges:
        if color[start] != white:
            continue
        path: list[str] = [start]
        color[start] = grey
        stack = [iter(edges.get(start, ()))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                color[path.pop()] = black
                stack.pop()
                continue
            state = color.get(nxt, black)  # an id outside `edges` has no blockers: no cycle
            if state == grey:
                return [*path[path.index(nxt) :], nxt]
            if state == white:
                color[nxt] = grey
                path.append(nxt)
                stack.append(iter(edges.get(nxt, ())))
    return []
