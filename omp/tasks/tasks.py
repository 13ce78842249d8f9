"""The task store: `tasks/<id>.json` records, claimed through an O_EXCL `tasks/<id>.lock`.

Statuses move pending -> in_progress -> completed | failed (and, when the worker holding a task
dies, in_progress -> interrupted). A team that verifies completions (`--verify`) puts a check in
between: a completion becomes `verifying`, and omp alone moves it on, to `completed` when the
check passes or back to `in_progress` (same claimant, same token) when it fails
(`omp.monitor.verifying`). A merge conflict re-opens a completed worktree task the same way
(`reopen`). All changes of one team's tasks are serialized by a flock on
`tasks/.guard`, so a claim and a transition never interleave; the `.lock` files stay the
TypeScript tool's visible record of who holds what.
"""

from __future__ import annotations

import os
import time

from omp import clock
from omp.errors import OmpError
from omp.record import history
from omp.store import fs, jsonl, locks, project_config
from omp.store.layout import task_id_of_lock, task_id_of_record
from omp.store.names import MOVES as MOVES  # (re-exported: the task words' old home)
from omp.store.names import STATUSES as STATUSES
from omp.store.names import TERMINAL as TERMINAL
from omp.store.names import check_claimant, check_move, check_statuses
from omp.store.names import task_id as check_task_id

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.store.backend import Store
    from omp.store.layout import TeamFiles
    from omp.store.paths import TeamPaths
    from omp.tasks import stored

    Team = TeamPaths | TeamFiles

OUTBOX_EVENTS = {"completed": "task_complete", "failed": "task_failed"}


class guarded:  # (lower case: used as `with guarded(team):`, as the function it was)
    """The team's task guard held: its tasks directory exists, the lock file is flocked, and the
    team is still the one the caller loaded. A class, not `contextlib.contextmanager`: contextlib
    costs ~2 ms on the way of `omp team status`, which imports this module and never locks."""

    __slots__ = ("_fd", "_stored", "_team")

    def __init__(self, team: Team) -> None:
        self._team = team.files
        self._fd = -1
        self._stored: stored.Guard | None = None

    def __enter__(self) -> None:
        team = self._team
        if project_config.store_selected(team.project):
            # the store's lease stands for the flock: one writer of the team's tasks at a time,
            # on whichever host it runs (`omp.tasks.stored`)
            from omp.tasks import stored

            self._stored = stored.Guard(team)
            self._stored.__enter__()
            return
        team.ensure_in(team.tasks_dir)  # never makes the team's own directory (a deleted team)
        try:
            fd = fs.open_file(team.tasks_guard, os.O_RDWR, create=True)
        except FileNotFoundError:  # the team was deleted since
            raise team.gone() from None
        try:
            locks.acquire(fd)
            team.verify()  # still the team the caller loaded, not one made again under its name
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(self, *exc: object) -> None:
        if self._stored is not None:
            self._stored.__exit__()
            return
        os.close(self._fd)  # releases the flock


def problem(obj: Any, tid: str) -> str | None:
    """What is wrong with a task record read from `tasks/<tid>.json`, or None. A record omp cannot
    trust is never silently skipped nor read with defaults: it is shown as broken."""
    if obj is None:
        return "is not valid JSON"
    if not isinstance(obj, dict):
        return "is not a JSON object"
    if obj.get("id") != tid:
        return f"holds id {obj.get('id')!r}, not {tid!r} (its file name)"
    if obj.get("status") not in STATUSES:
        return f"has an unknown status {obj.get('status')!r}; statuses: {', '.join(STATUSES)}"
    for key in ("owner", "claimToken", "description"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return f"has a {key} that is not a string"
    return None


def read(team: Team, tid: str) -> dict[str, Any] | None:
    """The task, or None when there is none; `invalid_task` (naming the file) when it is broken."""
    team = team.files
    path = team.task(check_task_id(tid))
    try:
        obj = (
            fs.read_json(path) if (st := _store(team)) is None else st.doc(team.name, "tasks", tid)
        )
    except OmpError as exc:
        if exc.code != "corrupt_state":
            raise
        raise OmpError("invalid_task", exc.message, task_id=tid, file=str(path)) from None
    if obj is None:
        return None
    why = problem(obj, tid)
    if why is not None:
        raise OmpError("invalid_task", f"task file {path} {why}", task_id=tid, file=str(path))
    assert isinstance(obj, dict)
    return obj


if TYPE_CHECKING:
    _Tasks = list[dict[str, Any]]
else:
    _Tasks = list  # the same class at run time, without `typing`'s Any


class TaskList(_Tasks):
    """The readable tasks, ordered by id; `broken` the files that are not (`{id, file, error,
    message}` rows): every read command shows those too, a task never silently disappears."""

    broken: list[dict[str, Any]]


def read_all(team: Team) -> TaskList:
    """Every task file, ordered by id (numeric ids numerically): valid ones, and broken ones aside.
    Read-only."""
    team = team.files
    out = TaskList()
    out.broken = []
    if (st := _store(team)) is not None:
        for doc in st.docs(team.name, "tasks"):
            key = str(doc.get("id"))
            wrong = problem(doc, key)
            if wrong is None:
                out.append(doc)
            else:
                where = f"{st.url} tasks/{key}"
                out.broken.append(
                    {
                        "id": key,
                        "file": where,
                        "error": "invalid_task",
                        "message": f"{where} {wrong}",
                    }
                )
        return out
    try:
        if not team.project.check(team.tasks_dir):
            return out
        names = os.listdir(team.tasks_dir)
    except OSError:
        return out
    ids = [tid for n in names if (tid := task_id_of_record(n)) is not None]
    for tid in sorted(ids, key=_sort_key):
        path = team.task(tid)
        try:
            obj = fs.read_json(path)  # an unsafe entry raises unsafe_path: refused, never followed
        except OmpError as exc:
            if exc.code != "corrupt_state":
                raise
            message = f"task file {exc.message}"
        else:
            why = problem(obj, tid)
            if why is None and isinstance(obj, dict):
                out.append(obj)
                continue
            message = f"task file {path} {why}"
        out.broken.append(
            {"id": tid, "file": str(path), "error": "invalid_task", "message": message}
        )
    return out


def list_all(team: Team) -> list[dict[str, Any]]:
    """The valid tasks (see `read_all` for the broken ones too). Read-only."""
    team = team.files
    return read_all(team)


TOKEN_FIELDS = ("claimToken", "claim_token")


def shown_to(task_list: list[dict[str, Any]], viewer: str | None) -> list[dict[str, Any]]:
    """The tasks as `viewer` may see them: a claim token is a capability, shown only to the
    worker that claimed the task; `viewer` None (the leader, a person: no worker identity) sees
    everything."""
    if viewer is None:
        return task_list
    return [
        t if t.get("owner") == viewer else {k: v for k, v in t.items() if k not in TOKEN_FIELDS}
        for t in task_list
    ]


def _sort_key(tid: str) -> tuple[int, int, str]:
    return (0, int(tid), "") if tid.isdigit() else (1, 0, tid)


def _write(team: TeamFiles, task: dict[str, Any]) -> None:
    if (st := _store(team)) is not None:
        from omp.tasks import stored

        stored.write(st, team, task)
        return
    fs.write_json_atomic(team.task(task["id"]), task)


def in_store(team: Team) -> bool:
    """Are this team's tasks in a store rather than files (`omp.store.select`)?"""
    return project_config.store_selected(team.files.project)


def write_task(team: Team, task: dict[str, Any]) -> None:
    """Write a task as it is (the caller holds `guarded`): its file, or the store's doc. The one
    door of every module that keeps its own rules over the task store (`omp.tasks.queue`,
    `omp.backlog.landing`)."""
    _write(team.files, task)


def take_lock(team: Team, tid: str, owner: str, *, replace: bool) -> bool:
    """`tasks/<tid>.lock` for `owner` (see `_take_lock`); nothing in a store."""
    return _take_lock(team.files, tid, owner, replace=replace)


def drop_lock(team: Team, tid: str) -> None:
    _drop_lock(team.files, tid)


def delete_task(team: Team, tid: str) -> None:
    """Remove a task (and its lock) that one step just wrote: a rollback, never a user's move."""
    files = team.files
    if (st := _store(files)) is not None:
        st.delete(files.name, "tasks", tid)
        return
    for path in (files.task(tid), files.task_lock(tid)):
        try:
            os.unlink(path)
        except OSError:
            pass


def _store(team: TeamFiles) -> Store | None:
    """The project's store when its tasks are not in the files (`omp.store.select`)."""
    if not project_config.store_selected(team.project):
        return None
    from omp.store import select

    return select.current(team.project)


def _take_lock(team: TeamFiles, tid: str, owner: str, *, replace: bool) -> bool:
    """`tasks/<tid>.lock`, the TypeScript tool's record of who holds a task (a store keeps no
    such file). `replace`: a lock found there was left behind (we hold the guard) and goes."""
    if _store(team) is not None:
        return True
    lock = team.task_lock(tid)
    body = jsonl.encode({"owner": owner, "pid": os.getpid(), "claimedAt": clock.iso()})
    # A full disk leaves no empty lock behind: a clean refusal (storage_error).
    if locks.create_exclusive(lock, body):
        return True
    if not replace:
        return False
    fs.check_entry(lock, want_dir=False)
    os.unlink(lock)
    if not locks.create_exclusive(lock, body):
        raise OmpError("claim_race", f"task {tid}: could not take its lock")
    return True


def _drop_lock(team: TeamFiles, tid: str) -> None:
    if _store(team) is not None:
        return
    try:
        os.unlink(team.task_lock(tid))
    except FileNotFoundError:
        pass


def create(team: Team, tid: str, description: str) -> dict[str, Any]:
    team = team.files
    task = {
        "id": check_task_id(tid),
        "description": description,
        "status": "pending",
        "createdAt": clock.iso(),
    }
    with guarded(team):
        _write(team, task)
        history.task(team, None, task)
    return task


def _require(team: TeamFiles, tid: str) -> dict[str, Any]:
    task = read(team, tid)
    if task is None:
        known = [t["id"] for t in list_all(team)]
        raise OmpError(
            "task_not_found",
            f"task {tid} not found; tasks of team {team.name}: {', '.join(known) or 'none'}",
            task_id=tid,
            tasks=known,
        )
    return task


def settle_claims(team: Team) -> None:
    """Wait for every claim in progress to finish (take the guard, let it go): a claim that
    starts after this sees the roster as it is now (`claim` reads it under the guard)."""
    team = team.files
    with guarded(team):
        pass


def _require_member(team: TeamFiles, worker: str) -> None:
    """Under the guard: the worker must still be on the roster. `omp team remove-worker` changes
    the roster first and then settles the worker's tasks after `settle_claims`, so a claim never
    leaves a task in_progress with an owner who is not a member."""
    from omp.record import config as team_config

    cfg = team_config.load(team)
    if worker in cfg.worker_names:
        return
    gone = cfg.raw.get("removedWorkers")
    removed = isinstance(gone, list) and any(
        isinstance(g, dict) and g.get("name") == worker for g in gone
    )
    raise OmpError(
        "worker_removed" if removed else "unknown_worker",
        f"{worker} "
        + ("was removed from" if removed else "is not a worker of")
        + f" team {team.name}; it cannot claim a task",
        team=team.name,
        worker=worker,
    )


def claim(team: Team, tid: str, worker: str) -> tuple[dict[str, Any], str]:
    team = team.files
    check_task_id(tid)
    with guarded(team):
        _require_member(team, worker)
        task = _require(team, tid)
        if task.get("status") != "pending":
            raise OmpError(
                "task_not_pending",
                f"task {tid} is {task.get('status')}"
                + (f" (owner {task['owner']})" if task.get("owner") else "")
                + "; only a pending task can be claimed",
                task_id=tid,
                status=task.get("status"),
            )
        if task.get("backlog") is True and (task.get("blockedBy") or task.get("agent")):
            _backlog_gate(team, task, worker)
        # A lock on a task that is still pending was left by a claimer that died between the
        # lock and the task write (we hold the guard, so nobody is mid-claim now): replaced.
        _take_lock(team, tid, worker, replace=True)
        token = f"{worker}-{int(time.time() * 1000)}-{os.urandom(4).hex()}"
        task.update(status="in_progress", owner=worker, startedAt=clock.iso(), claimToken=token)
        _write(team, task)
        history.task(team, "pending", task)
    return task, token


def _backlog_gate(team: Team, task: dict[str, Any], worker: str) -> None:
    """A backlog task claimed by hand: refused while a task it is blocked by is not done
    (`task_blocked`; `omp.tasks.graph`), or when it is for another agent (`wrong_agent`)."""
    from omp.tasks import graph

    tid = task.get("id")
    waiting = []
    for b in graph.blockers(task):
        bt = read(team, b)
        if bt is None or not graph.is_done(bt):
            waiting.append(f"{b} ({bt.get('status') if bt else 'missing'})")
    if waiting:
        raise OmpError(
            "task_blocked",
            f"task {tid} is blocked by {', '.join(waiting)}: it can start once they are done "
            "(and merged, for a task with a branch of its own); omp then hands it to a free worker",
            task_id=tid,
            blockedBy=graph.blockers(task),
        )
    agent = task.get("agent")
    if isinstance(agent, str) and agent:
        from omp.record import config as team_config

        cfg = team_config.load(team)
        mine = (cfg.worker(worker) or {}).get("agent") or cfg.raw.get("agent")
        if mine != agent:
            raise OmpError(
                "wrong_agent",
                f"task {tid} is for a {agent} worker; {worker} runs {mine or 'another agent'}",
                task_id=tid,
                agent=agent,
            )


def transition(
    team: Team,
    tid: str,
    *,
    worker: str | None,
    from_status: str,
    to_status: str,
    token: str | None,
    result: str | None = None,
    amend: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Move a task as its claimant (or the leader) asks. `amend`, called under the guard once
    every check passed, may change the task before it is written (a completion that must be
    verified first becomes `verifying`) and returns what the history line adds, if anything."""
    team = team.files
    check_task_id(tid)
    check_statuses(from_status, to_status)
    with guarded(team):
        task = _require(team, tid)
        if task.get("status") != from_status:
            raise OmpError(
                "status_mismatch",
                f"task {tid} is {task.get('status')}, not {from_status}",
                task_id=tid,
                status=task.get("status"),
            )
        if from_status == "pending" and to_status == "in_progress":
            raise OmpError(
                "invalid_transition",
                f"task {tid}: start a task with claim-task (it returns the claimToken), "
                "not with transition-task-status",
            )
        if from_status == "verifying":
            raise OmpError(
                "invalid_transition",
                f"task {tid} is being verified: omp moves it on by itself, to completed when the "
                "check passes, or back to in_progress (with mail saying why) when it fails",
                task_id=tid,
                status=from_status,
            )
        check_move(from_status, to_status)
        check_claimant(task, tid, worker, token)
        owner = worker or task.get("owner")
        task["status"] = to_status
        if result is not None:
            task["result"] = result
        extra = amend(task) if amend is not None else None
        final = task["status"]
        outbox = _outbox_path(team, owner) if owner and final in OUTBOX_EVENTS else None
        if final in TERMINAL:
            task["finishedAt"] = clock.iso()
        _write(team, task)
        # under the guard: the log keeps the true order
        history.task(team, from_status, task, extra)
        if final in TERMINAL:
            _drop_lock(team, tid)
    if outbox is not None:
        _post(team, outbox, task)
    return task


def offline_result(worker: str) -> str:
    """How the result of a task the monitor interrupted begins, when `worker` went offline
    holding it (`omp.monitor.sweep`): the one interruption `reclaim` may undo."""
    return f"interrupted: {worker} went offline"


def reclaim(team: Team, tid: str, worker: str) -> dict[str, Any] | None:
    """Give a task the monitor interrupted because `worker` went offline back to that worker,
    still claimed by it with the same claim token (`omp team resume`: its work is where it left
    it). Any other task, or one that moved meanwhile, is left alone: None."""
    team = team.files
    check_task_id(tid)
    with guarded(team):
        task = read(team, tid)
        if (
            task is None
            or task.get("status") != "interrupted"
            or task.get("owner") != worker
            or not task.get("claimToken")
            or not str(task.get("result") or "").startswith(offline_result(worker))
        ):
            return None
        _take_lock(team, tid, worker, replace=True)  # a terminal task holds none: a leftover
        task["status"] = "in_progress"
        for key in ("result", "finishedAt"):
            task.pop(key, None)
        task["resumedAt"] = clock.iso()
        _write(team, task)
        history.task(team, "interrupted", task)
    return task


def omp_move(
    team: Team,
    tid: str,
    *,
    expect: str,
    to: str,
    fields: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    check: Callable[[dict[str, Any]], bool] | None = None,
    extra: dict[str, Any] | None = None,
    amend: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any] | None:
    """A move omp makes on its own (a check's verdict, a merge conflict re-opening a task):
    only while the task is still `expect` and `check(task)` holds, else None and nothing is
    written (it moved meanwhile, or another settler got there first). `fields` are set and
    `drop` removed first. A task going back to `in_progress` keeps its claimant and token, and
    its lock file is made again (the TypeScript tool's record of who holds it); a terminal one
    gets `finishedAt` and loses its lock; a completion is written to the owner's outbox.
    `amend` changes the task last, under the guard (a check started again records its run)."""
    team = team.files
    check_task_id(tid)
    with guarded(team):
        task = read(team, tid)
        if task is None or task.get("status") != expect or (check and not check(task)):
            return None
        owner = task.get("owner") if isinstance(task.get("owner"), str) else None
        outbox = _outbox_path(team, owner) if owner and to in OUTBOX_EVENTS else None
        for key in drop:
            task.pop(key, None)
        task.update(fields or {})
        task["status"] = to
        if amend is not None:
            amend(task)
        if to in TERMINAL:
            task["finishedAt"] = clock.iso()
        elif to == "in_progress":
            task.pop("finishedAt", None)
            if owner:
                _take_lock(team, tid, owner, replace=False)  # False: it is there already
        _write(team, task)
        history.task(team, expect, task, extra)
        if to in TERMINAL:
            _drop_lock(team, tid)
    if outbox is not None:
        _post(team, outbox, task)
    return task


def annotate(team: Team, tid: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    """Add `fields` to a task without moving it (a merge records `mergedAt` and its commit);
    None when there is no such task."""
    team = team.files
    check_task_id(tid)
    with guarded(team):
        task = read(team, tid)
        if task is None:
            return None
        task.update(fields)
        _write(team, task)
    return task


class _StoredLog:
    """A worker's outbox in the store (`outbox/<worker>`), where the files would have a path."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def _post(team: TeamFiles, outbox: str | _StoredLog, task: dict[str, Any]) -> None:
    if isinstance(outbox, _StoredLog):
        st = _store(team)
        assert st is not None
        st.append(team.name, outbox.name, [_outbox_line(task)])
    else:
        jsonl.append(outbox, _outbox_line(task))


def _outbox_path(team: TeamFiles, worker: str) -> str | _StoredLog:
    """The worker's outbox, checked before the task changes: a refused outbox changes nothing."""
    if _store(team) is not None:
        return _StoredLog(f"outbox/{worker}")
    team.ensure_in(team.worker_dir(worker))
    path = team.outbox(worker)
    fs.check_entry(path, want_dir=False)
    return path


def _outbox_line(task: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": OUTBOX_EVENTS[task["status"]],
        "taskId": task["id"],
        "status": task["status"],
        "timestamp": clock.iso(),
    }
    if task.get("result") is not None:
        line["result"] = task["result"]
    return line


def clear_locks(team: Team) -> int:
    """Remove every task lock (shutdown); returns how many."""
    team = team.files
    if _store(team) is not None:
        return 0  # a store keeps no lock files; its guard is a lease that runs out by itself
    n = 0
    if not team.project.check(team.tasks_dir):  # unsafe_path for a symlinked tasks directory
        return 0
    try:
        names = os.listdir(team.tasks_dir)
    except OSError:
        return 0
    for name in names:
        if task_id_of_lock(name) is not None:
            try:
                os.unlink(os.path.join(team.tasks_dir, name))
                n += 1
            except OSError:
                pass
    return n
