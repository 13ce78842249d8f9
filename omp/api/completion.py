"""What a completion does beyond moving the task, for a team with worktrees or a verify command.

Imported by `transition-task-status` only when a task is being completed in such a team: git
and the check's machinery stay out of every other call.

- A worker with a worktree hands its work over by committing it: while the worktree holds
  uncommitted work the completion is refused (`uncommitted_changes`, with the paths and the
  commands that commit them), and a completed task records the head commit, the commits ahead
  of the worker's base and the files changed (`work`). A completion with no commit of the
  worker's is refused (`nothing_committed`) unless the worker says there is nothing to commit
  (`nothing_to_commit`: a review, an answer): then `work.nothingCommitted` says so, and no
  check runs (it would check the base, not the worker's work).
- A team that verifies (`--verify`) makes the completion `verifying` and starts its check in the
  background (`omp.monitor.verifying`); omp moves the task on once the check has a verdict. On
  another host (the mirrored config says `verifyAt: leader`) the check is only queued: the
  leader's monitor brings the worker's branch back and runs it there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omp import clock
from omp.record.config import TeamConfig
from omp.record.workspace import WORKTREE, team_verify, worktree_of
from omp.tasks import tasks

QUEUED = "queued"  # a check to be run by the leader's monitor (a worker on another host)
Amend = Callable[[dict[str, Any]], dict[str, Any] | None]


def involved(cfg: TeamConfig) -> bool:
    """True when a completion in this team needs more than the task's move (cheap: no I/O)."""
    if isinstance(cfg.raw.get("verify"), dict) or isinstance(cfg.raw.get("backlog"), dict):
        return True  # (a backlog task may have a worktree or a check of its own)
    return any(
        isinstance(w.get("workspace"), dict) and w["workspace"].get("kind") == WORKTREE
        for w in cfg.workers
    )


def prepare(
    cfg: TeamConfig, tid: str, who: str | None, nothing_to_commit: bool = False
) -> Amend | None:
    """Check the owner's worktree now (refusing uncommitted work) and return what the task's
    move must add under its guard; None when nothing."""
    owner = who
    current = tasks.read(cfg.paths, tid)
    if owner is None:
        found = current.get("owner") if current else None
        owner = found if isinstance(found, str) else None
    # a backlog task's own worktree (`omp.backlog.worktrees`), else the worker's
    wt = worktree_of(current) or (worktree_of(cfg.worker(owner)) if owner else None)
    work: dict[str, Any] | None = None
    if wt is not None and owner is not None:
        from omp.tasks import handover

        root = cfg.paths.project.root
        task = current or {"id": tid}
        own = current.get("workspace") if current else None
        target = str(own.get("target") or "") if isinstance(own, dict) else ""
        work = handover.committed_work(
            root,
            owner,
            wt,
            task,
            target or handover.leader_branch(root),
            nothing_to_commit=nothing_to_commit,
        )
    own_check = current.get("verifyCommand") if current else None
    verifies = (team_verify(cfg.raw) is not None or bool(own_check)) and not (
        work and work.get("nothingCommitted")
    )
    if work is None and not verifies:
        return None

    def amend(task: dict[str, Any]) -> dict[str, Any] | None:
        extra: dict[str, Any] = {}
        if work is not None:
            task["work"] = work
            extra.update(commit=work["commit"], commitsAhead=work["commitsAhead"])
        if verifies and task.get("status") == "completed" and cfg.raw.get("verifyAt") == "leader":
            # a worker on another host: the leader's monitor brings its branch back and checks
            # it there (`omp.monitor.verifying.settle_task`)
            task["status"] = "verifying"
            task["verify"] = {"status": QUEUED, "run": "", "attempt": 0, "startedAt": clock.iso()}
            extra["verify"] = {"status": QUEUED}
        elif verifies and task.get("status") == "completed":
            from omp.monitor import verifying

            task["status"] = "verifying"
            task["verify"] = verifying.start(cfg, task, restart=True)
            extra["verify"] = {"status": "running", "log": task["verify"]["log"]}
        return extra or None

    return amend
