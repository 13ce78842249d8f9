"""The backlog's moves in the task store, each under the team's task guard (`tasks.guarded`).

- `add`: new backlog tasks, checked whole against the tasks there (ids, blockers, cycles)
  before the first is written;
- `handover`: free workers are given ready tasks, claimed for them (`in_progress`, owner, claim
  token) in the same hold of the guard that read the queue: two completions racing, in two
  processes, can never hand one task to two workers, nor two tasks to one worker;
- `release`: a hand-over that could not be finished (its worktree could not be made) gives the
  task back to the queue;
- `cancel`, `retry`, `requeue_failed`: the leader's and the `retries` setting's moves.

A worker's own `claim-task` of a backlog task is checked by `tasks.claim` (blocked, another
agent's).

The graph itself (what is ready, who gets what) is `omp.tasks.graph`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from omp import clock
from omp.errors import OmpError
from omp.record import history
from omp.store import fs, jsonl
from omp.store.paths import TeamPaths
from omp.tasks import graph as graphs
from omp.tasks import tasks
from omp.tasks.graph import Graph, Worker

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.record.config import TeamConfig

    Task = dict[str, Any]

BACKLOG_FIELDS = ("title", "blockedBy", "agent", "model", "verifyCommand", "priority", "retries")


def new_task(
    tid: str,
    title: str,
    description: str = "",
    *,
    blocked_by: Sequence[str] = (),
    agent: str | None = None,
    model: str | None = None,
    verify: str | None = None,
    priority: int = 0,
    retries: int = 0,
    created_by: str = "leader",
    source: str | None = None,
) -> Task:
    """A backlog task's record (not written). `description` keeps the TypeScript tool's
    meaning, the whole task text: the title, then its description."""
    rec: Task = {
        "id": tid,
        "description": title + (f"\n\n{description.strip()}" if description.strip() else ""),
        "status": "pending",
        "createdAt": clock.iso(),
        "backlog": True,
        "title": title,
        "blockedBy": list(blocked_by),
        "priority": priority,
        "retries": retries,
        "createdBy": created_by,
    }
    for key, value in (("agent", agent), ("model", model), ("verifyCommand", verify),
                       ("source", source)):  # fmt: skip
        if value:
            rec[key] = value
    return rec


RACY_SECONDS = 1.5  # a file changed this recently is read again (a coarse mtime may hide it)


class Reader:
    """A team's task records (the valid ones, as `tasks.list_all`), read again only where a
    file changed: one `lstat` a task for the rest. For a process that looks often (the
    monitor): a backlog may hold a thousand tasks, and reading them all costs tens of ms. A
    file's (inode, size, mtime_ns) changes with every write (they replace it), and one changed
    in the last `RACY_SECONDS` is not trusted. Callers get copies: they may change them."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._cache: dict[str, tuple[tuple[int, int, int], Task]] = {}

    def __call__(self, team: TeamPaths) -> list[Task]:
        from omp.store.paths import task_id_of_record

        if tasks.in_store(team):  # no files to stat: the store answers (`omp.tasks.stored`)
            return sorted(
                (dict(t) for t in tasks.read_all(team)),
                key=lambda t: graphs.sort_id(str(t.get("id"))),
            )
        base = team.tasks_dir
        try:
            if not team.project.check(base):
                return []
            names = os.listdir(base)
        except OSError:
            return []
        now = self._wall()
        fresh: dict[str, tuple[tuple[int, int, int], Task]] = {}
        out: list[Task] = []
        prefix = f"{team.project.root}\0{team.name}\0"
        where = str(base) + os.sep  # (strings: a Path per task costs more than its lstat)
        for name in names:
            tid = task_id_of_record(name)
            if tid is None:
                continue
            try:
                st = os.lstat(where + name)
            except FileNotFoundError:
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            hit = self._cache.get(prefix + tid)
            if hit is not None and hit[0] == key and now - st.st_mtime >= RACY_SECONDS:
                task = hit[1]
            else:
                try:
                    obj = fs.read_json(base / name)
                except OmpError as exc:
                    if exc.code != "corrupt_state":
                        raise
                    continue  # shown as broken by the read commands, skipped here
                if not isinstance(obj, dict) or tasks.problem(obj, tid) is not None:
                    continue
                task = obj
            fresh[prefix + tid] = (key, task)
            out.append(dict(task))
        for k in [k for k in self._cache if k.startswith(prefix)]:
            del self._cache[k]
        self._cache.update(fresh)
        out.sort(key=lambda t: graphs.sort_id(str(t.get("id"))))
        return out


def _write(team: TeamPaths, task: Task) -> None:
    tasks.write_task(team, task)


def _ids_and_blockers(team: TeamPaths) -> tuple[list[Task], dict[str, list[str]]]:
    found = tasks.read_all(team)
    known = {str(t["id"]): graphs.blockers(t) for t in found}
    for b in found.broken:  # a broken file still holds its id
        known.setdefault(str(b["id"]), [])
    return list(found), known


def add(team: TeamPaths, new: list[Task], *, source: str = "tasks") -> list[Task]:
    """Write `new` (records from `new_task`) if, together with the team's tasks, they make a
    graph that can run: else `invalid_tasks` and nothing is written. Each gets the next `order`
    (the queue's tie-break after priority)."""
    with tasks.guarded(team):
        existing, known = _ids_and_blockers(team)
        why = graphs.validate(
            [(str(t["id"]), graphs.blockers(t), f"task {t['id']}") for t in new], known
        )
        if why is not None:
            raise OmpError("invalid_tasks", f"{source}: {why}")
        top = max(
            (o for t in existing if isinstance(o := t.get("order"), int)),
            default=0,
        )
        written: list[Task] = []
        try:
            for i, task in enumerate(new, start=1):
                task["order"] = top + i
                owner = task.get("owner")
                if task.get("status") == "in_progress" and isinstance(owner, str):
                    # claimed for its worker already (a launch's first tasks): its lock too
                    tasks.take_lock(team, str(task["id"]), owner, replace=False)
                _write(team, task)
                written.append(task)
        except BaseException:
            for task in written:  # all or nothing
                tasks.delete_task(team, str(task["id"]))
            raise
        for task in written:
            history.task(team, None, task)
    return written


def _lock_body(owner: str) -> bytes:
    return jsonl.encode({"owner": owner, "pid": os.getpid(), "claimedAt": clock.iso()})


def claim_fields(task: Task, worker: str) -> Task:
    """`task` claimed for `worker` (in memory): in progress, its owner, a new claim token."""
    token = f"{worker}-{int(time.time() * 1000)}-{os.urandom(4).hex()}"
    now = clock.iso()
    task.update(status="in_progress", owner=worker, startedAt=now, claimToken=token,
                handedOverAt=now)  # fmt: skip
    task.pop("finishedAt", None)
    return task


def _take(team: TeamPaths, task: Task, worker: str, extra: dict[str, Any]) -> Task:
    """Claim `task` for `worker` (the guard held): its lock, a claim token, `in_progress`."""
    tid = str(task["id"])
    # a pending task holds no lock: one found there was left by a claimer that died
    tasks.take_lock(team, tid, worker, replace=True)
    claim_fields(task, worker)
    _write(team, task)
    history.task(team, "pending", task, extra)
    return task


def roster(team: TeamPaths) -> list[Worker]:
    """The team's workers as the queue sees them (its config read now)."""
    from omp.record import config as team_config

    return workers_of(team_config.load(team))


JOINING = "joiningSince"  # a new worker not told to read its inbox yet (`omp.team.backlog`)
JOINING_SECONDS = 600.0  # a launch that died before it cleared the mark: the worker may work


def workers_of(cfg: TeamConfig) -> list[Worker]:
    """The workers the queue may hand tasks to: not one still joining (its trigger not typed:
    omp's mail and nudge must not reach its pane before it)."""
    team_agent = cfg.raw.get("agent") or cfg.raw.get("role")
    out = []
    names = set(cfg.worker_names)
    now = time.time()
    for w in cfg.workers:
        name = w.get("name")
        if name not in names:
            continue
        since = clock.parse_iso(str(w.get(JOINING))) if w.get(JOINING) else None
        if since is not None and now - since < JOINING_SECONDS:
            continue
        agent = w.get("agent") or team_agent
        out.append(Worker(str(name), str(agent) if agent else None, _model_of(w)))
    return out


def _model_of(entry: dict[str, Any]) -> str | None:
    """The model a worker's recorded command line asks for (`--model X`, `-m X`,
    `--model=X`), or its entry's `model`."""
    model = entry.get("model")
    if isinstance(model, str) and model:
        return model
    cmd = entry.get("command")
    if not isinstance(cmd, list):
        return None
    for i, word in enumerate(cmd):
        if not isinstance(word, str):
            continue
        if word.startswith("--model="):
            return word.split("=", 1)[1] or None
        if word in ("--model", "-m") and i + 1 < len(cmd) and isinstance(cmd[i + 1], str):
            return str(cmd[i + 1])
    return None


def handover(
    team: TeamPaths,
    *,
    first: str | None = None,
    only: Sequence[str] | None = None,
    accept: Callable[[Task], bool] | None = None,
    read: Callable[[TeamPaths], list[Task]] | None = None,
) -> list[tuple[str, Task]]:
    """Give free workers ready tasks, each claimed for its worker in this one hold of the guard:
    (worker, its task now in progress). `first`: the worker served first (the one that just
    finished); `only`: serve these workers alone; `accept`: a task it refuses is not handed
    over now (the caller cannot give it cheaply: the monitor will); `read`: how the records
    are read (a `Reader`, in the monitor). A worker whose own task (the one its config names,
    not a backlog task) is still to be claimed is not free."""
    from omp.record import config as team_config

    out: list[tuple[str, Task]] = []
    with tasks.guarded(team):
        g = Graph((read or tasks.list_all)(team))
        if not any(t.get("backlog") is True for t in g.tasks):
            return out
        cfg = team_config.load(team)
        everyone = workers_of(cfg)
        held = g.held()
        reserved = set()
        for entry in cfg.workers:
            own = g.by_id.get(str(entry.get("taskId")))
            if own is not None and own.get("status") == "pending" and not own.get("backlog"):
                reserved.add(entry.get("name"))
        free = [
            w
            for w in everyone
            if w.name not in held and w.name not in reserved and (only is None or w.name in only)
        ]
        if first is not None:
            free.sort(key=lambda w: w.name != first)
        for w, task in graphs.choose(g, free, everyone):
            if accept is not None and not accept(task):
                continue
            out.append((w.name, _take(team, task, w.name, {"handover": True})))
    return out


def release(team: TeamPaths, tid: str, token: str, why: str) -> Task | None:
    """A hand-over that could not be finished: the task is pending again (only while it is
    still the one claimed with `token`)."""
    with tasks.guarded(team):
        task = tasks.read(team, tid)
        if task is None or task.get("status") != "in_progress" or task.get("claimToken") != token:
            return None
        for key in ("owner", "claimToken", "startedAt", "handedOverAt"):
            task.pop(key, None)
        task["status"] = "pending"
        task["handoverError"] = why
        _write(team, task)
        history.task(team, "in_progress", task, {"handover": "released"})
        _unlock(team, tid)
    return task


def _unlock(team: TeamPaths, tid: str) -> None:
    tasks.drop_lock(team, tid)


CANCELLABLE = ("pending", "in_progress", "verifying", "failed", "interrupted")
RETRYABLE = ("failed", "interrupted", "cancelled")


def _require(team: TeamPaths, tid: str) -> Task:
    task = tasks.read(team, tid)
    if task is None:
        known = [str(t["id"]) for t in tasks.list_all(team)]
        raise OmpError(
            "task_not_found",
            f"task {tid} not found; tasks of team {team.name}: {', '.join(known[:50]) or 'none'}",
            task_id=tid,
        )
    return task


def cancel(team: TeamPaths, tid: str, reason: str = "") -> tuple[Task, str]:
    """Take a task off: (the task, now `cancelled`; the status it had). Its dependents show as
    blocked by a cancelled task. A completed task cannot be cancelled (`invalid_transition`)."""
    with tasks.guarded(team):
        task = _require(team, tid)
        before = str(task.get("status"))
        if before not in CANCELLABLE:
            raise OmpError(
                "invalid_transition",
                f"task {tid} is {before}; only a task that is not completed (or cancelled "
                "already) can be cancelled",
                task_id=tid,
                status=before,
            )
        task["status"] = "cancelled"
        task["finishedAt"] = clock.iso()
        task["result"] = reason or task.get("result") or "cancelled by the leader"
        _write(team, task)
        history.task(team, before, task)
        _unlock(team, tid)
    return task, before


def retry(team: TeamPaths, tid: str) -> Task:
    """Queue a failed, interrupted or cancelled task again: pending, no owner."""
    with tasks.guarded(team):
        task = _require(team, tid)
        before = str(task.get("status"))
        if before not in RETRYABLE:
            raise OmpError(
                "invalid_transition",
                f"task {tid} is {before}; only a failed, interrupted or cancelled task can be "
                "retried",
                task_id=tid,
                status=before,
            )
        again(task, by_hand=True)
        _write(team, task)
        history.task(team, before, task, {"retry": "by hand"})
        _unlock(team, tid)
    return task


def again(task: Task, *, by_hand: bool) -> None:
    """What a task put back in the queue keeps (who tried it, how it ended) and drops."""
    tries = task.get("attempts")
    attempts = list(tries) if isinstance(tries, list) else []
    attempts.append(
        {k: task.get(k) for k in ("owner", "status", "result", "finishedAt") if task.get(k)}
    )
    task["attempts"] = attempts[-20:]
    owner = task.get("owner")
    tried = task.get("triedBy")
    tried_by = list(tried) if isinstance(tried, list) else []
    if isinstance(owner, str) and owner not in tried_by and not by_hand:
        tried_by.append(owner)
    task["triedBy"] = tried_by
    if not by_hand:
        task["retried"] = int(task.get("retried") or 0) + 1
    for key in ("owner", "claimToken", "startedAt", "handedOverAt", "finishedAt", "result",
                "verify", "verifyFailures"):  # fmt: skip
        task.pop(key, None)
    task["status"] = "pending"


def requeue_failed(team: TeamPaths) -> list[Task]:
    """Failed (or interrupted) backlog tasks with `retries` left go back to the queue, to be
    handed to another worker where one is free."""
    out: list[Task] = []
    found = tasks.list_all(team)
    due = [t for t in found if _retry_due(t)]
    if not due:
        return out
    with tasks.guarded(team):
        for t in due:
            task = tasks.read(team, str(t["id"]))
            if task is None or not _retry_due(task):
                continue
            before = str(task.get("status"))
            again(task, by_hand=False)
            _write(team, task)
            history.task(team, before, task, {"retry": task["retried"]})
            _unlock(team, str(task["id"]))
            out.append(task)
    return out


def _retry_due(task: Task) -> bool:
    retries = task.get("retries")
    return (
        task.get("backlog") is True
        and task.get("status") in ("failed", "interrupted")
        and isinstance(retries, int)
        and int(task.get("retried") or 0) < retries
    )
