"""`omp team merge TEAM [WORKER...]`: workers' branches onto the leader's branch, in the order
their tasks completed, each step true to what happened.

Which branches: the named workers', else every worker whose task is completed (and verified,
when the team verifies). Branches already merged are skipped (`mergedAt` is recorded on the task
the first time; a branch merged by hand is recognised too). Each goes through
`omp.workspace.merge.merge_branch`: nothing happens while the target checkout has uncommitted
changes to tracked files (`leader_dirty`); the merge is computed in git's object store; a
fast-forward where possible, else a merge commit (or, with `--squash`, one commit whose message
is the task's subject and result); the team's check (`--verify`) runs on the merged result in a
scratch worktree before the target moves; the target moves only if nobody moved it meanwhile.

On a conflict nothing changes (the checkout is byte for byte as before); the worker is mailed the
exact commands to rebase onto the target, and its task is in_progress again so it can complete
once more; the report names the files and the two ways on, and a `merge_conflict` notification
goes out. The other branches are still tried unless `stop_on_conflict`. A merged task records
`mergedAt`, `mergedCommit`, `mergedInto`, whenever the target moved, whatever failed after.

A target held by an operation under way in any worktree (a rebase, a bisect, a stopped merge,
cherry-pick, revert or am) is refused first (`target_busy`), as git's own commands refuse it.
The whole command goes through one `omp.workspace.handle.Repo`: what it asks git again and again
is asked once.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from pathlib import Path
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint, team_command
from omp.mail import bootstrap
from omp.record import history
from omp.record import workspace as ws
from omp.record.config import TeamConfig
from omp.record.workspace import Worktree
from omp.store.names import worker_name
from omp.tasks import tasks

STOPPING = ("conflict", "verify_failed", "target_moved", "checkout_refused")


def _task_of(
    cfg: TeamConfig, worker: str, task_list: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The worker's task: the latest it completed, else the latest it holds, else its entry's."""
    mine = [t for t in task_list if t.get("owner") == worker]
    done = [t for t in mine if t.get("status") == "completed"]
    if done:
        return max(done, key=lambda t: str(t.get("finishedAt") or ""))
    if mine:
        return max(mine, key=lambda t: str(t.get("startedAt") or ""))
    entry = cfg.worker(worker) or {}
    tid = entry.get("taskId")
    return next((t for t in task_list if t.get("id") == tid), None)


def _eligible(task: dict[str, Any] | None, verifies: bool) -> str | None:
    """Why a worker's branch is not taken by a merge without names, or None."""
    if task is None:
        return "no task"
    if task.get("status") != "completed":
        return f"task {task.get('id')} is {task.get('status')}"
    v = task.get("verify")
    if verifies and not (isinstance(v, dict) and v.get("status") == "passed"):
        return f"task {task.get('id')} is not verified"
    return None


SUBJECT_MAX = 72  # characters of a commit subject (what `git log --oneline` shows whole)


def message_for(
    cfg: TeamConfig, worker: str, wt: Worktree, task: dict[str, Any] | None, *, squash: bool
) -> str:
    """The commit message of a squash (`task <id>: <title>`) or of a merge commit (`Merge task
    <id> (<worker>): <title>`), then the result. The task's id and the worker come first and
    are never cut, so the parts of one task (same title, another id or worker) read apart
    even when the title is cut to fit `SUBJECT_MAX`."""
    if task is None:
        return f"Merge {wt.branch} (omp team {cfg.name}, {worker})\n"
    tid = task.get("id")
    title = " ".join(str(task.get("description") or "").split())
    head = f"task {tid}" if squash else f"Merge task {tid} ({worker})"
    room = SUBJECT_MAX - len(head) - 2
    if title and room < len(title):
        title = title[: max(room - 1, 0)] + "…"
    subject = f"{head}: {title}" if title else head
    body = str(task.get("result") or "").strip()
    trailer = f"omp team {cfg.name}, {worker}, task {tid} ({wt.branch})"
    return subject + (f"\n\n{body}" if body else "") + f"\n\n{trailer}\n"


def conflict_mail(
    cfg: TeamConfig, worker: str, wt: Worktree, target: str, files: list[str], tid: str | None
) -> str:
    """The exact way for the worker to put its branch on top of the target again."""
    p, t = shlex.quote(wt.path), shlex.quote(target)
    lines = [
        f"Your branch {wt.branch} conflicts with {target} in: {', '.join(files[:20])}"
        + (f" and {len(files) - 20} more" if len(files) > 20 else "")
        + f". Nothing was merged. Rebase it onto {target} and resolve the conflicts:",
        f"   git -C {p} rebase {t}",
        # `rebase --continue` opens an editor for the commit message, which an agent's shell
        # (no terminal) cannot run: git fails ("problem with the editor") or waits for good.
        f"   (fix each file, then) git -C {p} add <file> && "
        f"GIT_EDITOR=true git -C {p} rebase --continue",
    ]
    if tid is not None:
        done = bootstrap.complete_command(team_command(cfg.raw), cfg.name, tid, worker)
        lines += [
            f"Task {tid} is in_progress again, still yours (same claimToken). Then complete it:",
            f"   {done}",
        ]
    return "\n".join(lines)


def _pick(
    cfg: TeamConfig, names: list[str], task_list: list[dict[str, Any]]
) -> tuple[list[tuple[str, Worktree, dict[str, Any] | None]], list[dict[str, Any]]]:
    """(what to merge, in completion order; what was left out and why)."""
    have = {w: wt for w, wt, _gone in ws.worktrees(cfg.raw)}
    verifies = ws.team_verify(cfg.raw) is not None
    chosen: list[tuple[str, Worktree, dict[str, Any] | None]] = []
    left: list[dict[str, Any]] = []
    if names:
        for n in dict.fromkeys(names):
            worker_name(n)
            if n not in have:
                known = n in cfg.worker_names
                raise OmpError(
                    "invalid_input" if known else "unknown_worker",
                    f"{n} works in the shared checkout: it has no branch to merge"
                    if known
                    else f"{n!r} is not a worker of team {cfg.name} with a worktree; "
                    f"workers with one: {', '.join(have) or 'none'}",
                    worker=n,
                    candidates=list(have),
                )
            chosen.append((n, have[n], _task_of(cfg, n, task_list)))
    else:
        for n, wt in have.items():
            task = _task_of(cfg, n, task_list)
            why = _eligible(task, verifies)
            if why is None:
                chosen.append((n, wt, task))
            else:
                left.append({"worker": n, "branch": wt.branch, "why": why})

    def order(item: tuple[str, Worktree, dict[str, Any] | None]) -> tuple[int, str]:
        t = item[2]
        done = t is not None and t.get("status") == "completed"
        return (0 if done else 1, str(t.get("finishedAt") or "") if done and t else "")

    chosen.sort(key=order)
    return chosen, left


def merge_team(
    cfg: TeamConfig,
    workers: list[str] | None = None,
    *,
    into: str | None = None,
    squash: bool = False,
    dry_run: bool = False,
    stop_on_conflict: bool = False,
) -> dict[str, Any]:
    """Merge as the module docstring says; the report. Raises `merge_conflict`,
    `verify_failed` or `target_moved` (with the whole report as its detail) when a branch could
    not be merged; `leader_dirty` or `target_busy` before anything happens."""
    from omp.workspace import merge
    from omp.workspace.handle import HEADS, Repo

    team = cfg.paths
    root = team.project.root
    if not workers and not ws.worktrees(cfg.raw):
        # Every worker in the shared checkout: nothing to merge, whatever git says of the
        # project (no commit yet, no repository at all: shared is the default there).
        return _nothing_to_merge(cfg, root, into, dry_run=dry_run, squash=squash)
    r = Repo(root)  # one door for the whole command: its repeated reads are made once
    top = r.top
    target = into or r.current_branch()
    if target is None:
        raise OmpError(
            "detached_head",
            f"{top} has no branch checked out (detached HEAD): name the target with --into",
        )
    if r.resolve(HEADS + target) is None:
        raise OmpError("unknown_revision", f"no branch {target!r} in {top}", revision=target)
    r.refuse_in_use(target)
    task_list = tasks.list_all(team)
    chosen, left = _pick(cfg, list(workers or []), task_list)
    check = _check(cfg, dry_run)
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = list(left)
    shut = team.shutdown.exists()
    far = _fetch_remote(cfg, [w for w, _wt, _t in chosen], top)
    for w, wt, task in chosen:
        tid = str(task["id"]) if task else None
        row: dict[str, Any] = {"worker": w, "branch": wt.branch, "taskId": tid}
        got = far.get(w)
        if got is not None:
            row["host"] = got["host"]
            if got.get("error"):
                # its host did not answer, or the fetch was refused: the leader's copy may be
                # behind the worker's work, so it is not merged (never a stale half)
                results.append({**row, "status": "not_fetched", **_fetch_error(got)})
                continue
        # a fetched branch moved since the door opened: its place is read afresh
        tip = r.resolve(HEADS + wt.branch, fresh=got is not None)
        if tip is None:
            skipped.append({**row, "why": "its branch is gone"})
            continue
        if r.merged_into(tip, HEADS + target):
            mine = r.since(wt.base, tip, HEADS + target)
            why = "nothing committed" if tip == mine else f"already merged into {target}"
            if task and not task.get("mergedAt") and tip != mine and not dry_run:
                _record(cfg, tid, target, r.resolve(HEADS + target), "up_to_date")
            skipped.append({**row, "why": why})
            continue
        dirty: list[str] = []
        if got is not None:  # its checkout is on its host: asked there, never opened here
            dirty = _remote_dirty(cfg, w)
        elif Path(wt.path).is_dir():
            try:
                dirty = r.changes(Path(wt.path)).paths
            except OmpError:
                dirty = []
        verify = check(w) if check is not None else None
        before = r.resolve(HEADS + target)
        try:
            res = merge.merge_branch(
                r,
                wt.branch,
                into=target,
                squash=squash,
                message=message_for(cfg, w, wt, task, squash=squash),
                check=verify,
                dry_run=dry_run,
            )
        except OmpError as exc:
            if not results and not skipped and exc.code in FIRST_REFUSALS:
                raise  # before anything happened: the plain refusal
            error = {**row, "status": "error", "error": exc.code, "message": _why(exc)}
            landed = None if dry_run else _landed(r, target, before, tip)
            if landed is not None:  # git failed after the target had moved: it did move
                _record(cfg, tid, target, landed, "merged")
                error.update(status="merged", commit=landed, warning=_why(exc))
            results.append(error)
            if exc.code in ("leader_dirty", "target_busy") or stop_on_conflict:
                break  # the user is at work in the checkout: stop, say what was done
            continue
        row.update(res.to_json())
        row["uncommittedInWorktree"] = dirty[:20]
        if res.moved:
            _record(cfg, tid, target, res.commit, res.status)
        elif res.status == "conflict" and not dry_run:
            row["mailed"] = _on_conflict(cfg, w, wt, target, res.conflicts, task, shut)
            _notify_conflict(cfg, w, tid, target, res.conflicts, tip)
        _history(cfg, w, tid, res.to_json())
        results.append(row)
        if stop_on_conflict and res.status in STOPPING:
            break
    report = {
        "ok": True,
        "team": cfg.name,
        "target": target,
        "checkout": str(r.checkout_of(target) or ""),
        "dryRun": dry_run,
        "squash": squash,
        "results": results,
        "skipped": skipped,
        "merged": [x["worker"] for x in results if x["status"] in merge.MOVED],
    }
    _raise_for(cfg, report, top)
    return report


def _fetch_remote(cfg: TeamConfig, workers: list[str], top: Path) -> dict[str, dict[str, Any]]:
    """The branches of the workers on other hosts brought back first (fast-forward only:
    `omp.team.remote_life.fetch`); nothing of ssh is loaded for a team without them."""
    from omp.mail.panes import has_remote

    gone = cfg.raw.get("removedWorkers")
    if not has_remote(cfg) and not any(
        isinstance(g, dict) and isinstance(g.get("remote"), dict)
        for g in (gone if isinstance(gone, list) else [])
    ):
        return {}
    from omp.team import remote_life

    far = remote_life.placements(cfg)
    return {w: remote_life.fetch(cfg, w, top) for w in workers if w in far}


def _fetch_error(got: dict[str, Any]) -> dict[str, Any]:
    code = str(got.get("error"))
    why = (
        f"its branch was not fetched from {got['host']}: {got.get('message')}"
        if code == "host_unreachable"
        else f"its branch was not fetched from {got['host']} (refused, nothing overwritten): "
        f"{got.get('message')}"
    )
    return {"error": code, "message": why}


def _target_to_host(cfg: TeamConfig, worker: str, target: str) -> None:
    """A worker on another host rebases there: the target goes there first (best effort: the
    mail still goes, and says the same commands, if its host does not answer now)."""
    remote = (cfg.worker(worker) or {}).get("remote")
    if not isinstance(remote, dict):
        return
    from omp.team import remote_life

    remote_life.push_target(cfg, worker, target)


def _remote_dirty(cfg: TeamConfig, worker: str) -> list[str]:
    from omp.team import remote_life

    return remote_life.uncommitted(cfg, worker) or []


# refusals that leave everything as it was: raised as they are when nothing happened yet
FIRST_REFUSALS = ("leader_dirty", "git_too_old", "target_busy", "signing_failed")


def _landed(r: Any, target: str, before: str | None, tip: str) -> str | None:
    """The target's commit when it moved from `before` to one holding `tip` (the merge took
    place, whatever failed after it), else None."""
    from omp.workspace.handle import HEADS

    try:
        now = r.resolve(HEADS + target, fresh=True)
        if now is not None and now != before and r.is_ancestor(tip, now):
            return str(now)
    except OmpError:
        pass
    return None


def _nothing_to_merge(
    cfg: TeamConfig, root: Path, into: str | None, *, dry_run: bool, squash: bool
) -> dict[str, Any]:
    """The report of a team without a worktree: its target as far as git can tell."""
    from omp.workspace import repo

    target, checkout = into or "", ""
    with contextlib.suppress(OmpError):
        top = repo.toplevel(root)
        target = target or repo.current_branch(top) or ""
        checkout = str(repo.checkout_of(top, target) or "") if target else ""
    return {
        "ok": True,
        "team": cfg.name,
        "target": target,
        "checkout": checkout,
        "dryRun": dry_run,
        "squash": squash,
        "results": [],
        "skipped": [],
        "merged": [],
    }


def _check(cfg: TeamConfig, dry_run: bool) -> Any:
    """A function giving each worker's `merge.Verify`, or None when the team does not verify."""
    found = ws.team_verify(cfg.raw)
    if found is None or dry_run:
        return None
    from omp.workspace import create, merge

    command, timeout = found
    settings = ws.load_settings(cfg.paths.project)
    spec = create.Provision(settings.copy, settings.link)
    team = cfg.paths
    logs = team.ensure_in(team.merges_dir)
    stamp = time.strftime("%Y%m%dT%H%M%S")

    def make(worker: str) -> merge.Verify:
        return merge.Verify(command, timeout, logs / f"{stamp}-{worker}.log", spec)

    return make


def _record(cfg: TeamConfig, tid: str | None, target: str, commit: str | None, how: str) -> None:
    if tid is None:
        return
    tasks.annotate(
        cfg.paths,
        tid,
        {"mergedAt": clock.iso(), "mergedCommit": commit, "mergedInto": target, "mergedHow": how},
    )


def _history(cfg: TeamConfig, worker: str, tid: str | None, res: dict[str, Any]) -> None:
    if res.get("dryRun"):
        return
    ev: dict[str, Any] = {
        "type": "merge",
        "worker": worker,
        "branch": res.get("branch"),
        "target": res.get("target"),
        "status": res.get("status"),
    }
    if tid is not None:
        ev["taskId"] = tid
    if res.get("commit") and res.get("status") not in STOPPING:
        ev["commit"] = res["commit"]
    if res.get("conflicts"):
        ev["conflicts"] = res["conflicts"][:20]
    if res.get("verify"):
        ev["verify"] = res["verify"]
    history.record(cfg.paths, ev)


def _on_conflict(
    cfg: TeamConfig,
    worker: str,
    wt: Worktree,
    target: str,
    files: list[str],
    task: dict[str, Any] | None,
    shut: bool,
) -> bool:
    """Mail the worker how to rebase, and give its task back to it (not for a team that was
    shut down, nor a worker taken off it: the leader resolves those by hand)."""
    if shut or worker not in cfg.worker_names:
        return False
    tid = str(task["id"]) if task and task.get("status") == "completed" else None
    _target_to_host(cfg, worker, target)
    if tid is not None:
        tasks.omp_move(
            cfg.paths,
            tid,
            expect="completed",
            to="in_progress",
            fields={"mergeConflict": {"target": target, "files": files[:50], "at": clock.iso()}},
            drop=("result",),  # the completed attempt's one-line result is not the task's now
            check=lambda t: t.get("owner") == worker,
            extra={"merge": "conflict", "conflicts": files[:20]},
        )
    from omp.mail import delivery

    body = conflict_mail(cfg, worker, wt, target, files, tid)
    return delivery.auto_mail(cfg, worker, body, {"intent": "merge_conflict"}) is not None


def _notify_conflict(
    cfg: TeamConfig, worker: str, tid: str | None, target: str, files: list[str], tip: str
) -> None:
    """Queue a `merge_conflict` notification (`omp.monitor.notices`), once per branch tip and
    target."""
    from omp.monitor import notices

    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    event = {
        "kind": "merge_conflict",
        "team": cfg.name,
        "worker": worker,
        "text": f"{cfg.name}/{worker}: its branch conflicts with {target} in {shown}",
        "target": target,
        "files": files[:20],
        "taskId": tid,
    }
    key = f"merge_conflict:{cfg.name}:{worker}:{tip}:{target}"
    notices.queue(cfg.paths.project, event, key)


def _why(exc: OmpError) -> str:
    if "Author identity unknown" in exc.message or "Please tell me who you are" in exc.message:
        return (
            "git has no identity to write the merge commit with: set one (git config user.name "
            "and user.email, or GIT_AUTHOR_NAME/GIT_AUTHOR_EMAIL/GIT_COMMITTER_NAME/"
            "GIT_COMMITTER_EMAIL), then merge again"
        )
    return exc.message


def _raise_for(cfg: TeamConfig, report: dict[str, Any], top: Path) -> None:
    """A report with a branch that could not be merged is an error (exit 1) carrying it."""
    results = report["results"]
    target = report["target"]
    conflicts = [r for r in results if r["status"] == "conflict"]
    failed = [r for r in results if r["status"] == "verify_failed"]
    moved = [r for r in results if r["status"] == "target_moved"]
    refused = [r for r in results if r["status"] == "checkout_refused"]
    done = ", ".join(report["merged"]) or "nothing"
    detail = {k: v for k, v in report.items() if k != "ok"}
    if conflicts:
        parts = [f"{r['worker']} ({', '.join(r['conflicts'][:10])})" for r in conflicts]
        first = conflicts[0]
        ways = [
            f"the worker rebases: {'omp mailed it' if first.get('mailed') else 'tell it'} the "
            f"commands; once it completes again, run {hint(f'team merge {cfg.name}')}",
            f"or resolve by hand in {report['checkout'] or top}: git merge {first['branch']}, "
            f"fix, commit; the next merge sees it merged",
        ]
        raise OmpError(
            "merge_conflict",
            f"{'; '.join(parts)} conflict(s) with {target}: nothing of those changed, the "
            f"checkout is as it was. Merged: {done}. Two ways on: " + "; ".join(ways),
            ways=ways,
            **detail,
        )
    if failed:
        r = failed[0]
        log = (r.get("verify") or {}).get("log")
        raise OmpError(
            "verify_failed",
            f"the team's check failed on {r['branch']} merged into {target} (log: {log}); "
            f"{target} was left where it was. Merged before it: {done}",
            **detail,
        )
    unfetched = [r for r in results if r["status"] == "not_fetched"]
    errors = [r for r in results if r["status"] == "error"]
    if errors:
        r = errors[0]
        raise OmpError(
            str(r["error"]) if r["error"] in ("leader_dirty", "git_failed") else "git_failed",
            f"{r['worker']} ({r['branch']}): {r['message']}; merged before it: {done}",
            **detail,
        )
    if refused:
        # git would not write over files of the user's in the checkout (an untracked file the
        # branch adds): the checkout holds work in the way, as for `leader_dirty` before the
        # merge. Running it again would be refused again: nothing moved, the user decides.
        r = refused[0]
        raise OmpError(
            "leader_dirty",
            f"{r['message']}; {target} did not move and your files are as they were: move them "
            f"out of the way (or commit them), then merge again. Merged before: {done}",
            **detail,
        )
    if moved:
        r = moved[0]
        raise OmpError(
            "target_moved",
            f"{r['message']}; merged before: {done}. Run the merge again",
            **detail,
        )
    if unfetched:
        r = unfetched[0]
        raise OmpError(
            str(r["error"]) if r["error"] in ("host_unreachable", "git_failed") else "git_failed",
            f"{r['worker']} ({r['branch']}): {r['message']}; {target} did not take it. "
            f"Merged: {done}. Merge it again once its host answers",
            **detail,
        )
