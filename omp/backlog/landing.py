"""A task lands: its branch merged onto the team's target, its dependents ready, the workers whose
base moved told so.

`land(cfg, tid)` merges one completed task's branch with `omp.workspace.merge.merge_branch`
(nothing moves while the target's checkout has uncommitted changes; a conflict changes
nothing). A fast-forward lands exactly the commit its check passed on; otherwise, in a team
that verifies, the merged result is checked in a scratch checkout before the target moves.
Landings of one team are one at a time (a flock on `tasks/.land`).

- merged (or already in the target): the task records `mergedAt`, `mergedCommit`,
  `mergedInto`; its worktree goes (its branch stays); every worker with a task in progress is
  mailed that its base moved, with the command that rebases; the tasks that waited for this
  one are handed out (`omp.backlog.handover`);
- a conflict, or the merged result failing the check: the task goes back to its worker, told
  how to rebase, when that worker is free; else to the queue, for the next free worker (the
  worktree and its commits stay with the task);
- anything else (the leader's checkout has uncommitted changes, the target moved meanwhile):
  recorded on the task (`landError`), tried again later.

`--merge auto` teams land each task as soon as it is done: the monitor starts
`python -m omp.backlog.landing ROOT TEAM` in the background (a check of a merged result can
take minutes, which a scan must not wait for). `omp team merge TEAM --task ID` lands by hand.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from omp import clock
from omp.backlog import handover, settings
from omp.backlog import worktrees as task_worktrees
from omp.backlog.settings import Backlog
from omp.errors import OmpError
from omp.invocation import hint, team_command
from omp.mail import bootstrap
from omp.record import history
from omp.record.config import TeamConfig
from omp.record.workspace import team_verify
from omp.store import fs, locks
from omp.tasks import graph as graphs
from omp.tasks import tasks

Row = dict[str, Any]
RETRY_AFTER = 30.0  # seconds before a landing that failed for a passing reason is tried again


def _lock_path(cfg: TeamConfig) -> Path:
    return cfg.paths.tasks_dir / ".land"


class _Held:
    """The team's landing flock (`wait`: block for it, else give up at once)."""

    def __init__(self, cfg: TeamConfig, wait: bool) -> None:
        self.cfg, self.wait, self.fd = cfg, wait, -1

    def __enter__(self) -> bool:
        team = self.cfg.paths
        team.ensure_in(team.tasks_dir)
        self.fd = fs.open_file(_lock_path(self.cfg), os.O_RDWR, create=True)
        if locks.acquire(self.fd, self.wait):
            return True
        os.close(self.fd)
        self.fd = -1
        return False

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def landable(
    cfg: TeamConfig, task_list: list[dict[str, Any]], *, now: float | None = None
) -> list[dict[str, Any]]:
    """Completed tasks with a branch of their own not merged yet, verified when the team (or
    the task) verifies, in the order they completed; a recent passing failure waits."""
    verifies = team_verify(cfg.raw) is not None
    wall = time.time() if now is None else now
    out = []
    for t in task_list:
        if t.get("status") != "completed" or t.get("mergedAt") or task_worktrees.of(t) is None:
            continue
        v = t.get("verify")
        if (verifies or t.get("verifyCommand")) and not (
            isinstance(v, dict) and v.get("status") == "passed"
        ):
            continue
        err = t.get("landError")
        if isinstance(err, dict):
            at = clock.parse_iso(str(err.get("at"))) or 0.0
            if wall - at < RETRY_AFTER:
                continue
        out.append(t)
    out.sort(key=lambda t: str(t.get("finishedAt") or ""))
    return out


def message_for(cfg: TeamConfig, task: dict[str, Any], branch: str) -> str:
    title = " ".join(str(task.get("title") or task.get("description") or "").split())
    subject = f"Merge {branch}: {title or 'task ' + str(task.get('id'))}"
    if len(subject) > 72:
        subject = subject[:71] + "…"
    body = str(task.get("result") or "").strip()
    owner = task.get("owner") or "?"
    trailer = f"omp team {cfg.name}, task {task.get('id')}, {owner} ({branch})"
    return subject + (f"\n\n{body}" if body else "") + f"\n\n{trailer}\n"


def land(cfg: TeamConfig, tid: str, *, wait: bool = True) -> Row:
    """Land task `tid` (see the module docstring); the row saying what happened. Raises
    `task_not_found`, `invalid_input` (not completed, no branch), `leader_dirty` when nothing
    could be tried at all."""
    with _Held(cfg, wait) as held:
        if not held:
            return {"taskId": tid, "status": "busy", "message": "another landing is running"}
        return _land(cfg, tid)


def _land(cfg: TeamConfig, tid: str) -> Row:
    from omp.workspace import merge, repo

    task = tasks.read(cfg.paths, tid)
    if task is None:
        raise OmpError("task_not_found", f"task {tid} not found in team {cfg.name}", task_id=tid)
    wt = task_worktrees.of(task)
    if wt is None:
        raise OmpError("invalid_input", f"task {tid} has no branch of its own to merge")
    row: Row = {"taskId": tid, "branch": wt.branch, "worker": task.get("owner")}
    if task.get("mergedAt"):
        return {**row, "status": "up_to_date", "message": f"task {tid} was merged already"}
    if task.get("status") != "completed":
        raise OmpError(
            "invalid_input",
            f"task {tid} is {task.get('status')}: only a completed task is merged",
            task_id=tid,
        )
    bl = settings.of(cfg) or Backlog()
    top = repo.toplevel(cfg.paths.project.root)
    target = bl.target or repo.current_branch(top)
    if target is None:
        raise OmpError("detached_head", f"{top} has no branch checked out: no target to merge into")
    old = repo.resolve(top, repo.HEADS + target)
    tip = repo.resolve(top, repo.HEADS + wt.branch)
    if old is None or tip is None:
        missing = target if old is None else wt.branch
        raise OmpError("unknown_revision", f"no branch {missing!r} in {top}", revision=missing)
    check = None
    command = handover.verify_command(cfg, task)
    if command and not repo.is_ancestor(top, old, tip):
        # not a fast-forward: what lands is not what was checked; check the merged result
        found = team_verify(cfg.raw)
        timeout = found[1] if found else 900.0
        logs = cfg.paths.ensure_in(cfg.paths.merges_dir)
        log = logs / f"{time.strftime('%Y%m%dT%H%M%S')}-task-{tid}.log"
        check = merge.Verify(command, timeout, log, task_worktrees._spec(cfg))
    try:
        res = merge.merge_branch(
            top, wt.branch, into=target, message=message_for(cfg, task, wt.branch), check=check
        )
    except OmpError as exc:
        _note_error(cfg, tid, exc.code, exc.message)
        raise
    row.update(res.to_json())
    history.record(
        cfg.paths,
        {"type": "merge", "taskId": tid, "branch": wt.branch, "target": target,
         "status": res.status} | ({"commit": res.commit} if res.moved else {}),
    )  # fmt: skip
    if res.moved or res.status == "up_to_date":
        landed = tasks.annotate(
            cfg.paths,
            tid,
            {"mergedAt": clock.iso(), "mergedCommit": res.commit, "mergedInto": target,
             "mergedHow": res.status, "landError": None},
        )  # fmt: skip
        task_worktrees.remove(cfg, landed or task)
        if res.moved:
            row["told"] = base_moved(cfg, tid, target, str(res.commit))
        row["handedOver"] = [a for a in handover.run(cfg) if a.get("action") == "handed_over"]
        return row
    if res.status in ("conflict", "verify_failed"):
        row["back"] = _send_back(cfg, task, target, res.status, res.conflicts, row)
        return row
    _note_error(cfg, tid, res.status, res.message)
    return row


def _note_error(cfg: TeamConfig, tid: str, code: str, message: str) -> None:
    try:
        tasks.annotate(
            cfg.paths, tid, {"landError": {"error": code, "message": message, "at": clock.iso()}}
        )
    except OmpError:
        pass


def rebase_lines(path: str, target: str) -> list[str]:
    p, t = shlex.quote(path), shlex.quote(target)
    return [
        f"   cd {p} && git rebase {t}",
        # `rebase --continue` opens an editor, which an agent's shell cannot run
        "   (on a conflict: fix each file, git add it, then GIT_EDITOR=true git rebase --continue)",
    ]


def _send_back(
    cfg: TeamConfig,
    task: dict[str, Any],
    target: str,
    why: str,
    files: list[str],
    row: Row,
) -> str:
    """A task that could not land goes back: to its worker when that worker holds nothing else
    (`in_progress` again, same claim), else to the queue (`pending`, its worktree kept)."""
    tid = str(task["id"])
    wt = task_worktrees.of(task)
    assert wt is not None
    owner = task.get("owner") if isinstance(task.get("owner"), str) else None
    held = graphs.Graph(tasks.list_all(cfg.paths)).held()
    note = {"target": target, "why": why, "files": files[:50], "at": clock.iso()}
    what = (
        f"conflicts with {target} in {', '.join(files[:10])}"
        if why == "conflict"
        else f"merged onto {target} fails the check (log: {(row.get('verify') or {}).get('log')})"
    )
    fix = [
        f"Task {tid} ({wt.branch}) {what}: nothing was merged. Rebase it onto {target} and fix it:",
        *rebase_lines(wt.path, target),
    ]
    if owner and owner in cfg.worker_names and owner not in held:
        back = tasks.omp_move(
            cfg.paths,
            tid,
            expect="completed",
            to="in_progress",
            fields={"mergeConflict": note},
            drop=("mergedAt",),
            check=lambda t: t.get("owner") == owner,
            extra={"merge": why, "conflicts": files[:20]},
        )
        if back is not None:
            token = str(back.get("claimToken") or "<claimToken>")
            done = bootstrap.api_command(
                team_command(cfg.raw), "transition-task-status", team_name=cfg.name,
                task_id=tid, worker=owner, **{"from": "in_progress", "to": "completed"},
                claim_token=token, result="<one-line summary>",
            )  # fmt: skip
            fix += [f"Task {tid} is yours again (same claimToken). Then complete it:", f"   {done}"]
            handover.mail(cfg, owner, "\n".join(fix), "merge_conflict", tid)
            return f"to {owner}"
    from omp.tasks import queue

    with tasks.guarded(cfg.paths):
        fresh = tasks.read(cfg.paths, tid)
        if fresh is None or fresh.get("status") != "completed" or fresh.get("mergedAt"):
            return "moved meanwhile"
        queue.again(fresh, by_hand=True)
        fresh["mergeConflict"] = note
        tasks.write_task(cfg.paths, fresh)
        history.task(cfg.paths, "completed", fresh, {"merge": why})
    return "to the queue"


def base_moved(cfg: TeamConfig, tid: str, target: str, commit: str) -> list[str]:
    """Mail every worker with a task in progress on a branch of its own: its base moved."""
    told: list[str] = []
    for t in tasks.list_all(cfg.paths):
        owner = t.get("owner")
        wt = task_worktrees.of(t)
        if t.get("status") not in graphs.HELD or wt is None or not isinstance(owner, str):
            continue
        if owner not in cfg.worker_names:
            continue
        lines = [
            f"Task {tid} landed on {target} ({commit[:10]}): the base of your task {t['id']} "
            f"({wt.branch}) moved. Rebase onto it now, while conflicts are small (commit your "
            "work first):",
            *rebase_lines(wt.path, target),
        ]
        if handover.mail(cfg, owner, "\n".join(lines), "base_moved", str(t["id"])):
            told.append(owner)
    return told


def land_all(cfg: TeamConfig, *, wait: bool = False) -> list[Row]:
    """Land every landable task, one after another (the background lander's loop)."""
    out: list[Row] = []
    with _Held(cfg, wait) as held:
        if not held:
            return out
        done: set[str] = set()
        while True:
            todo = [t for t in landable(cfg, tasks.list_all(cfg.paths)) if t["id"] not in done]
            if not todo:
                return out
            tid = str(todo[0]["id"])
            done.add(tid)
            try:
                out.append(_land(cfg, tid))
            except OmpError as exc:
                out.append({"taskId": tid, "status": "error", "error": exc.code,
                            "message": exc.message})  # fmt: skip


def busy(cfg: TeamConfig) -> bool:
    """A landing is running now (its flock is held)."""
    try:
        fd = fs.open_file(_lock_path(cfg), os.O_RDWR)
    except (OSError, OmpError):
        return False
    try:
        return not locks.acquire(fd, False)
    finally:
        os.close(fd)


def spawn(cfg: TeamConfig) -> None:
    """Start the background lander for this team (`python -m omp.backlog.landing`)."""
    root = str(cfg.paths.project.root)
    subprocess.Popen(
        [sys.executable, "-m", "omp.backlog.landing", root, cfg.name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "OMP_ROOT": root},
        close_fds=True,
    )


def how_to_merge(cfg: TeamConfig, tid: str) -> str:
    return hint(f"team merge {cfg.name} --task {tid}")


def main(argv: list[str]) -> int:
    """`python -m omp.backlog.landing ROOT TEAM`: land what is landable. Prints nothing."""
    if len(argv) != 2:
        return 2
    from omp.record import config as team_config
    from omp.store.paths import StatePaths

    root, team = argv
    try:
        cfg = team_config.load(StatePaths(Path(root)).team(team))
        land_all(cfg)
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def land_report(cfg: TeamConfig, tid: str | None, *, dry_run: bool = False) -> dict[str, Any]:
    """`omp team merge TEAM --task ID` (or every landable task): the merge report `omp team
    merge` prints. `merge_conflict` / `verify_failed` (exit 1) when a task could not land; it
    went back to its worker (or the queue) with the way to rebase."""
    from omp.workspace import repo

    bl = settings.of(cfg) or Backlog()
    top = repo.toplevel(cfg.paths.project.root)
    target = bl.target or repo.current_branch(top) or ""
    if tid is not None:
        chosen = [tid]
    else:
        chosen = [str(t["id"]) for t in landable(cfg, tasks.list_all(cfg.paths), now=float("inf"))]
    results: list[Row] = []
    skipped: list[Row] = []
    for one in chosen:
        task = tasks.read(cfg.paths, one)
        label = str((task or {}).get("owner") or f"task {one}")
        wt = task_worktrees.of(task) if task else None
        if dry_run:
            why = _dry(task, one)
            row = {"worker": label, "branch": wt.branch if wt else None, "taskId": one}
            (skipped if why else results).append(
                {**row, "why": why} if why else {**row, "status": "would_merge"}
            )
            continue
        res = land(cfg, one)
        results.append({"worker": label, **res, "taskId": one})
    report: dict[str, Any] = {
        "ok": True,
        "team": cfg.name,
        "target": target,
        "checkout": str(repo.checkout_of(top, target) or "") if target else "",
        "dryRun": dry_run,
        "squash": False,
        "results": results,
        "skipped": skipped,
        "merged": [r["worker"] for r in results if r.get("status") in ("fast_forward", "merged")],
    }
    bad = [r for r in results if r.get("status") in ("conflict", "verify_failed", "error")]
    if bad:
        r = bad[0]
        code = "verify_failed" if r["status"] == "verify_failed" else "merge_conflict"
        if r["status"] == "error":
            code = str(r.get("error") or "git_failed")
        raise OmpError(
            code if code in ("merge_conflict", "verify_failed", "leader_dirty") else "git_failed",
            f"task {r['taskId']} ({r.get('branch')}) did not merge into {target}: "
            f"{r.get('message')}; it went back {r.get('back') or 'to its worker'} with the way to "
            f"rebase. Merged: {', '.join(report['merged']) or 'nothing'}",
            **{k: v for k, v in report.items() if k != "ok"},
        )
    return report


def _dry(task: dict[str, Any] | None, tid: str) -> str | None:
    if task is None:
        return "no such task"
    if task_worktrees.of(task) is None:
        return "no branch of its own"
    if task.get("mergedAt"):
        return "merged already"
    if task.get("status") != "completed":
        return f"task {tid} is {task.get('status')}"
    return None
