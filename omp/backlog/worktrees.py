"""A worktree and branch per task: `omp/<team>/task-<id>` checked out at `<dir>/task-<id>`, from
the team's target branch as it is when the task starts.

A checkout of a real repository takes a while (`git worktree add` of 2,000 files: 0.25-0.6 s),
so it is kept off the hand-over: the monitor prepares the worktrees of the next ready tasks
ahead (`prepare`), and a hand-over only brings a prepared one up to the target's tip if the
target moved since (`refresh`: a fast-forward of a branch with no commits of its own, which
touches only the files that changed). The task records its worktree (`workspace`, the shape a
worker entry's has: kind, path, branch, base; plus `target`), so its work, its check
(`omp.monitor.verifying`), its review (`omp team diff --task`) and its merge follow the task,
whoever works on it; a task handed out again (a retry, a conflict) keeps its worktree.

Worktrees are made provisional (`omp.workspace.create.provisioned`) until the task records
them: a crash in between leaves a lock the next `recover_unfinished` rolls back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omp import clock
from omp.backlog.settings import Backlog
from omp.errors import OmpError
from omp.record import workspace as ws
from omp.record.config import TeamConfig
from omp.record.workspace import Worktree
from omp.store.names import team_name
from omp.tasks import tasks

BRANCH_PREFIX = "omp"


def branch_name(team: str, tid: str) -> str:
    """`omp/<team>/task-<id>`, refused with `invalid_branch` when git would not take it."""
    from omp.workspace.git import git

    name = f"{BRANCH_PREFIX}/{team_name(team)}/task-{tid}"
    res = git(None, "check-ref-format", "--branch", name, ok=(0, 1, 128))
    if res.rc != 0:
        raise OmpError("invalid_branch", f"{name!r} is not a valid git branch name", branch=name)
    return name


def path_for(bl: Backlog, tid: str) -> Path:
    assert bl.dir is not None
    return Path(bl.dir) / f"task-{tid}"


def of(task: dict[str, Any]) -> Worktree | None:
    """The worktree a task records, or None."""
    return ws.worktree_of(task)


def target_tip(top: Path, bl: Backlog) -> str:
    from omp.workspace import repo

    assert bl.target is not None
    tip = repo.resolve(top, repo.HEADS + bl.target)
    if tip is None:
        raise OmpError(
            "unknown_revision",
            f"the team's target branch {bl.target} is gone from {top}",
            revision=bl.target,
        )
    return tip


def _spec(cfg: TeamConfig) -> Any:
    return spec_of(cfg.paths.project.root)


def record_json(wt: Worktree, bl: Backlog) -> dict[str, Any]:
    return {**wt.to_json(), "target": bl.target, "preparedAt": clock.iso()}


def provisional(
    cfg: TeamConfig, bl: Backlog, tid: str, base: str | None = None
) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """Make task `tid`'s worktree from `base` (default: the target's tip now), provisional
    until the block ends without an exception (the caller records it); yields its record."""
    return provisional_at(cfg.paths.project.root, cfg.name, bl, tid, _spec(cfg), base)


@contextlib.contextmanager
def provisional_at(
    root: Path, team: str, bl: Backlog, tid: str, spec: Any, base: str | None = None
) -> Iterator[dict[str, Any]]:
    """`provisional` for a team whose config is not written yet (a launch)."""
    from omp.workspace import create, repo

    top = repo.toplevel(root)
    start = base or target_tip(top, bl)
    path = path_for(bl, tid)
    with create.provisioned(top, path, branch_name(team, tid), start, spec=spec) as made:
        w = made.worktree
        create.mark_project(w.path, root)  # omp run inside it finds the project
        yield record_json(Worktree(str(w.path), w.branch, w.base), bl)


def spec_of(root: Path) -> Any:
    """`[worktree] copy` and `link` of the project (`omp.workspace.create.Provision`)."""
    from omp.store.paths import StatePaths
    from omp.workspace import create

    settings = ws.load_settings(StatePaths(root))
    return create.Provision(settings.copy, settings.link)


def prepare(cfg: TeamConfig, bl: Backlog, tid: str) -> dict[str, Any] | None:
    """Make a pending task's worktree ahead of its hand-over (the monitor's); its record, or None
    when the task has one already or is no longer pending."""
    task = tasks.read(cfg.paths, tid)
    if task is None or of(task) is not None or task.get("status") not in ("pending", "in_progress"):
        return None
    with provisional(cfg, bl, tid) as record:
        done = tasks.annotate(cfg.paths, tid, {"workspace": record})
        if done is None or (of(done) or Worktree("", "", "")).path != record["path"]:
            raise OmpError("task_not_found", f"task {tid} is gone; its worktree is not kept")
    return record


def refresh(cfg: TeamConfig, bl: Backlog, task: dict[str, Any]) -> dict[str, Any] | None:
    """Bring a prepared worktree of a task nobody worked on yet up to the target's tip, when the
    target moved since it was made (a fast-forward: only the changed files are touched). The
    new record, or None when nothing was to be done (or could be: it keeps its base)."""
    from omp.workspace import repo
    from omp.workspace.git import git

    wt = of(task)
    if wt is None or not Path(wt.path).is_dir():
        return None
    top = repo.toplevel(cfg.paths.project.root)
    tip = target_tip(top, bl)
    head = repo.head(Path(wt.path))
    if head is None or head == tip or head != wt.base:
        return None  # up to date, or commits of its own (a retry): never rewritten
    if repo.changes(Path(wt.path)):
        return None
    res = git(Path(wt.path), "merge", "--ff-only", "-q", tip, ok=(0, 1, 128))
    if res.rc != 0:
        return None
    record = {**(task.get("workspace") or {}), "base": tip, "refreshedAt": clock.iso()}
    tasks.annotate(cfg.paths, str(task["id"]), {"workspace": record})
    return record


def checkout_for(cfg: TeamConfig, bl: Backlog, task: dict[str, Any]) -> dict[str, Any]:
    """The worktree a task handed over now works in: its own if it has one (refreshed when
    nothing was done in it yet), else made now."""
    wt = of(task)
    if wt is not None and Path(wt.path).is_dir():
        fresh = refresh(cfg, bl, task)
        return fresh or dict(task["workspace"])
    if wt is not None:
        raise OmpError(
            "worktree_missing",
            f"task {task['id']}'s worktree {wt.path} is gone; its branch {wt.branch} keeps what "
            "was committed",
            path=wt.path,
            branch=wt.branch,
        )
    with provisional(cfg, bl, str(task["id"])) as record:
        done = tasks.annotate(cfg.paths, str(task["id"]), {"workspace": record})
        if done is None:
            raise OmpError("task_not_found", f"task {task['id']} is gone")
    return record


def remove(cfg: TeamConfig, task: dict[str, Any], *, force: bool = False) -> bool:
    """Remove a landed (or cancelled) task's worktree, keeping its branch; only when nothing in
    it would be lost (`force`: anyway). True when it went."""
    from omp.workspace import remove as rm
    from omp.workspace import repo

    wt = of(task)
    if wt is None or not os.path.lexists(wt.path):
        return False
    try:
        top = repo.toplevel(cfg.paths.project.root)
        if not force and repo.changes(Path(wt.path)):
            return False
        rm.remove_worktree(top, Path(wt.path), wt.branch, force=force, keep_branch=True)
    except OmpError:
        return False
    return True


def task_items(cfg: TeamConfig) -> list[tuple[str, Worktree]]:
    """(`task <id>`, its worktree) of every task whose worktree is still on disk: what deleting
    the team removes with the workers' (`omp.team.removal`), only where nothing is lost."""
    out = []
    for t in tasks.list_all(cfg.paths):
        wt = of(t)
        if wt is not None and os.path.lexists(wt.path):
            out.append((f"task {t['id']}", wt))
    return out


def pane_home(bl: Backlog) -> Path:
    """Where a backlog worker's pane starts: the directory of the tasks' worktrees (each task's
    checkout is below it: an agent confined to its directory may use every one)."""
    assert bl.dir is not None
    home = Path(bl.dir)
    home.mkdir(parents=True, exist_ok=True)
    return home
