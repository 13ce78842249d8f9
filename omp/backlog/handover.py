"""Hand a free worker its next task: claimed for it, its checkout ready, a mail saying everything
the task needs (`omp.mail.bootstrap.task_mail`), a nudge.

Who runs it: the monitor on every scan of a backlog team (`omp.backlog.tick`), the call that
completes or fails a task (for its own worker, only when nothing slow is needed: the next task's
worktree was prepared), `add-worker` (the newcomers join the queue at once) and the leader's
`omp team task add/retry`. All of them go through `omp.tasks.queue.handover`, which claims under
the task guard: however completions race, a task goes to one worker and a worker holds one task.

A claim whose checkout cannot be made is given back to the queue (`queue.release`): the next
scan tries again; a worker never gets mail about a task it cannot work on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omp.backlog import settings
from omp.backlog import worktrees as task_worktrees
from omp.backlog.settings import Backlog
from omp.errors import OmpError
from omp.invocation import team_command
from omp.mail import bootstrap
from omp.record import history
from omp.record.config import TeamConfig
from omp.store.paths import TeamPaths
from omp.tasks import queue

Action = dict[str, Any]
INTENT = "task_handover"


def verify_command(cfg: TeamConfig, task: dict[str, Any]) -> str | None:
    """The check a task's completion runs: its own `verify`, else the team's."""
    own = task.get("verifyCommand")
    if isinstance(own, str) and own.strip():
        return own
    from omp.record.workspace import team_verify

    found = team_verify(cfg.raw)
    return found[0] if found else None


def backlog_words(bl: Backlog | None) -> bootstrap.Backlog:
    if bl is None:
        return bootstrap.Backlog()
    return bootstrap.Backlog(bl.target, "omp" if bl.auto else "the leader")


def prepared(task: dict[str, Any]) -> bool:
    """Its checkout exists already: handing it over costs no `git worktree add`."""
    wt = task_worktrees.of(task)
    return wt is not None and Path(wt.path).is_dir()


def run(
    cfg: TeamConfig,
    *,
    first: str | None = None,
    only: Sequence[str] | None = None,
    cheap: bool = False,
    read: Callable[[TeamPaths], list[dict[str, Any]]] | None = None,
) -> list[Action]:
    """Hand ready tasks to free workers (see the module docstring); the actions taken.
    `cheap`: only what needs no new checkout (the completing call's)."""
    bl = settings.of(cfg)
    with_worktrees = bl is not None and bl.worktrees
    accept = prepared if (cheap and with_worktrees) else None
    if only is None:  # a worker whose pane was seen dead gets nothing (the sweep takes it back)
        from omp.tasks import presence

        only = [w for w in cfg.worker_names if _state(presence.read(cfg.paths, w)) != "offline"]
    picks = queue.handover(cfg.paths, first=first, only=only, accept=accept, read=read)
    out: list[Action] = []
    for worker, task in picks:
        out.append(give(cfg, bl, worker, task))
    return out


def _state(hb: Any) -> str | None:
    return getattr(hb, "state", None)


def give(cfg: TeamConfig, bl: Backlog | None, worker: str, task: dict[str, Any]) -> Action:
    """Finish one hand-over: the checkout, the mail, the nudge, the history line."""
    tid, token = str(task["id"]), str(task["claimToken"])
    record: dict[str, Any] | None = None
    if bl is not None and bl.worktrees:
        try:
            record = task_worktrees.checkout_for(cfg, bl, task)
        except OmpError as exc:
            queue.release(cfg.paths, tid, token, exc.message)
            return {"action": "handover_failed", "team": cfg.name, "taskId": tid,
                    "worker": worker, "error": exc.code, "message": exc.message}  # fmt: skip
    worktree = (str(record["path"]), str(record["branch"])) if record else None
    if worktree is None:
        own = _worker_worktree(cfg, worker)
        worktree = own
    text = bootstrap.task_mail(
        team=cfg.name,
        worker=worker,
        task=task,
        token=token,
        omp=team_command(cfg.raw),
        worktree=worktree,
        verify=verify_command(cfg, task),
        backlog=backlog_words(bl),
    )
    mid = mail(cfg, worker, text, INTENT, tid)
    if mid is None:  # a worker that cannot be told must not hold the task
        why = f"the hand-over mail to {worker} could not be written"
        queue.release(cfg.paths, tid, token, why)
        return {"action": "handover_failed", "team": cfg.name, "taskId": tid, "worker": worker,
                "error": "storage_error", "message": why}  # fmt: skip
    event: dict[str, Any] = {"type": "handover", "taskId": tid, "worker": worker}
    if record:
        event["branch"] = record.get("branch")
    history.record(cfg.paths, event)
    action: Action = {"action": "handed_over", "team": cfg.name, "taskId": tid, "worker": worker}
    if record:
        action["branch"] = record.get("branch")
    action["messageId"] = mid
    return action


def _worker_worktree(cfg: TeamConfig, worker: str) -> tuple[str, str] | None:
    from omp.record.workspace import worktree_of

    wt = worktree_of(cfg.worker(worker))
    return (wt.path, wt.branch) if wt is not None else None


def mail(cfg: TeamConfig, worker: str, body: str, intent: str, tid: str) -> str | None:
    """Mail `worker` from omp (as the leader's automatic mail) and nudge it; the message id."""
    from omp.mail import delivery

    return delivery.auto_mail(cfg, worker, body, {"intent": intent, "backlogTask": tid})


def after_move(cfg: TeamConfig, worker: str | None, status: str) -> list[Action]:
    """What the call that moved a task does next for a backlog team: a failed task with
    retries left goes back to the queue, and the worker, free now, gets its next task if that
    is cheap (`run(cheap=True)`); the monitor does the rest within a scan. Never raises."""
    if status not in ("completed", "failed"):
        return []
    try:
        if status == "failed":
            queue.requeue_failed(cfg.paths)
        return run(cfg, first=worker, only=[worker] if worker else None, cheap=True)
    except Exception:
        return []
