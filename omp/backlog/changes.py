"""Work added or taken off while the team runs: `omp team task add|cancel|retry` (the leader) and
the `create-task` API operation (an agent splitting its own task).

Every change is checked whole before anything is written (`omp.tasks.queue`); then the free
workers are handed what became ready (`omp.backlog.handover`). A task an agent makes records who
made it (`createdBy`); one worker may make at most `[backlog] max_tasks_per_worker` (default 20)
tasks, so a runaway agent is refused (`task_limit`) before it floods the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omp.backlog import files, handover, settings
from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.store.names import LEADER
from omp.tasks import graph as graphs
from omp.tasks import queue, tasks

Result = dict[str, Any]


def next_id(existing: Sequence[dict[str, Any]]) -> str:
    top = max((int(i) for t in existing if (i := str(t.get("id"))).isdigit()), default=0)
    return str(top + 1)


def add(
    cfg: TeamConfig,
    title: str,
    *,
    description: str = "",
    blocked_by: Sequence[str] = (),
    agent: str | None = None,
    model: str | None = None,
    verify: str | None = None,
    priority: int = 0,
    retries: int = 0,
    tid: str | None = None,
    created_by: str = LEADER,
    hand_over: bool = True,
    cheap: bool = False,
) -> Result:
    """Add one backlog task (see the module docstring): `{ok, task, handedOver}`."""
    where = "the new task"
    clean_title = files.title(title, where, "task add")
    desc = files.text_field(description, "description", files.MAX_DESCRIPTION, where, "task add")
    blockers = tuple(files.task_id(b, where, "task add") for b in dict.fromkeys(blocked_by))
    agent = files.agent_name(agent, where, "task add")
    priority = files.int_field(priority, "priority", -files.MAX_PRIORITY, files.MAX_PRIORITY, where,
                          "task add")  # fmt: skip
    retries = files.int_field(retries, "retries", 0, files.MAX_RETRIES, where, "task add")
    found = tasks.list_all(cfg.paths)
    if created_by != LEADER:
        made = sum(1 for t in found if t.get("createdBy") == created_by)
        most = settings.limits(cfg.paths.project).max_tasks_per_worker
        if made >= most:
            raise OmpError(
                "task_limit",
                f"{created_by} made {made} task(s) already, as many as a worker may "
                f"([backlog] max_tasks_per_worker = {most}); ask the leader (send-message to "
                "leader) to add more",
                worker=created_by,
                limit=most,
            )
    new_id = files.task_id(tid, where, "task add") if tid is not None else next_id(found)
    record = queue.new_task(
        new_id, clean_title, desc or "", blocked_by=blockers, agent=agent, model=model,
        verify=verify, priority=priority, retries=retries, created_by=created_by,
        source="create-task" if created_by != LEADER else "task add",
    )  # fmt: skip
    queue.add(cfg.paths, [record], source="task add" if created_by == LEADER else "create-task")
    given = handover.run(cfg, cheap=cheap) if hand_over else []
    return {"ok": True, "team": cfg.name, "task": _shown(record), "handedOver": given}


def _shown(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k not in tasks.TOKEN_FIELDS}


def cancel(cfg: TeamConfig, tid: str, reason: str = "") -> Result:
    """Take a task off; a worker that held it is told to stop, and is free for the next one."""
    task, before = queue.cancel(cfg.paths, tid, reason)
    told = None
    owner = task.get("owner")
    if before in graphs.HELD and isinstance(owner, str) and owner in cfg.worker_names:
        text = (
            f"Task {tid} was cancelled by the leader"
            + (f" ({reason})" if reason else "")
            + ": stop working on it and do not complete it. omp mails you your next task."
        )
        if handover.mail(cfg, owner, text, "task_cancelled", tid):
            told = owner
    given = handover.run(cfg)
    return {"ok": True, "team": cfg.name, "task": _shown(task), "was": before, "told": told,
            "handedOver": given}  # fmt: skip


def retry(cfg: TeamConfig, tid: str) -> Result:
    """Queue a failed, interrupted or cancelled task again, and hand it out if a worker is free."""
    task = queue.retry(cfg.paths, tid)
    given = handover.run(cfg)
    return {"ok": True, "team": cfg.name, "task": _shown(task), "handedOver": given}
