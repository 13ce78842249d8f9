"""What the monitor does for a backlog team on every scan it runs (`omp.monitor.loop`).

In order, each step cheap when there is nothing to do:

1. failed tasks with `retries` left go back to the queue;
2. a team that merges by itself (`--merge auto`) gets its landable tasks landed, by a
   background lander (`omp.backlog.landing`) unless one is running;
3. free workers whose pane is alive get the next ready task that fits them
   (`omp.backlog.handover`);
4. the worktrees of the next ready tasks are prepared ahead (at most `PREPARE_PER_SCAN` a
   scan: a checkout takes a while, and a scan must stay short), so the next hand-over, even the
   one a completing worker's own call makes, waits on no `git worktree add`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from omp.backlog import handover, landing, settings
from omp.backlog import worktrees as task_worktrees
from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.store.paths import TeamPaths
from omp.tasks import graph as graphs
from omp.tasks import queue, tasks

Action = dict[str, Any]
PREPARE_PER_SCAN = 2


def has_backlog(task_list: list[dict[str, Any]]) -> bool:
    return any(t.get("backlog") is True for t in task_list)


def tick(
    cfg: TeamConfig,
    *,
    live: Sequence[str] | None = None,
    spawn: Callable[[TeamConfig], None] = landing.spawn,
    prepare: int = PREPARE_PER_SCAN,
    read: Callable[[TeamPaths], list[dict[str, Any]]] | None = None,
) -> list[Action]:
    """One scan's work for one team (see the module docstring); the actions taken. `live`: the
    workers whose panes are alive (None: every worker); `read`: how task records are read (the
    monitor's `omp.tasks.queue.Reader` keeps them between scans)."""
    read = read or tasks.list_all
    found = read(cfg.paths)
    if not has_backlog(found):
        return []
    out: list[Action] = []
    bl = settings.of(cfg)
    for t in queue.requeue_failed(cfg.paths):
        out.append({"action": "retried", "team": cfg.name, "taskId": t["id"],
                    "retry": t.get("retried")})  # fmt: skip
    if bl is not None and bl.worktrees and bl.auto:
        todo = landing.landable(cfg, found)
        if todo and not landing.busy(cfg):
            spawn(cfg)
            out.append({"action": "landing", "team": cfg.name,
                        "taskIds": [t["id"] for t in todo]})  # fmt: skip
    out += handover.run(cfg, only=live, read=read)
    if bl is not None and bl.worktrees and prepare > 0:
        out += prepare_next(cfg, bl, prepare, read=read)
    return out


def prepare_next(
    cfg: TeamConfig,
    bl: settings.Backlog,
    most: int,
    *,
    read: Callable[[TeamPaths], list[dict[str, Any]]] | None = None,
) -> list[Action]:
    """Make the worktrees of the first ready tasks that have none, as many as there are workers
    (each may need its next one), at most `most` now."""
    g = graphs.Graph((read or tasks.list_all)(cfg.paths))
    wanted = g.queue()[: max(1, len(cfg.worker_names))]
    out: list[Action] = []
    for t in wanted:
        if len(out) >= most:
            break
        if task_worktrees.of(t) is not None:
            continue
        tid = str(t["id"])
        try:
            record = task_worktrees.prepare(cfg, bl, tid)
        except OmpError as exc:
            out.append({"action": "prepare_failed", "team": cfg.name, "taskId": tid,
                        "error": exc.code, "message": exc.message})  # fmt: skip
            continue
        if record is not None:
            out.append({"action": "prepared", "team": cfg.name, "taskId": tid,
                        "branch": record["branch"]})  # fmt: skip
    return out
