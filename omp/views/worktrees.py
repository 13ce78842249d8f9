"""What each worker's branch holds, for `omp team diff`, `status` and `collect`. Read-only.

Every git call reads (`GIT_OPTIONAL_LOCKS=0`: not even the index of a worktree is refreshed);
nothing of omp's is written. A worker's own work starts at its recorded base, or where it left
the leader's branch once it rebased onto it (`omp.workspace.review.since`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.record import workspace as ws
from omp.record.config import TeamConfig
from omp.store.names import worker_name

MAX_DIFF = 2 * 1024 * 1024  # characters of one worker's diff shown


def target_of(cfg: TeamConfig) -> tuple[Path | None, str | None]:
    """(the leader's checkout, its branch): what merged means. (None, None) outside git."""
    from omp.workspace import repo

    try:
        top = repo.toplevel(cfg.paths.project.root)
    except OmpError:
        return None, None
    try:
        return top, repo.current_branch(top)
    except OmpError:
        return top, None


def branch_row(
    top: Path,
    worker: str,
    wt: ws.Worktree,
    target: str | None,
    *,
    removed: bool = False,
) -> dict[str, Any]:
    """One worker's branch: head, commits ahead, files, diffstat, uncommitted paths, merged.
    A worker on another host (`wt.host`): its branch as last brought back to the leader's
    repository, its worktree (on that host) neither looked at nor called missing."""
    from omp.workspace import repo, review

    host = wt.host or None
    row: dict[str, Any] = {
        "worker": worker,
        "branch": wt.branch,
        "path": wt.path,
        "base": wt.base,
        "removed": removed,
    }
    if host is None:
        row["worktreeExists"] = Path(wt.path).is_dir()
    else:
        row["host"] = host
    try:
        tip = repo.resolve(top, repo.HEADS + wt.branch)
        if tip is None and host is not None:
            return {
                **row,
                "head": None,
                "error": f"branch {wt.branch} has not come back from {host} yet (`team diff` "
                "and `team merge` fetch it)",
            }
        if tip is None:
            return {**row, "head": None, "error": f"branch {wt.branch} is gone"}
        onto = repo.HEADS + target if target else None
        start = review.since(top, wt.base, tip, onto)
        rep = review.inspect_branch(
            top,
            tip,
            start,
            worktree=Path(wt.path) if row.get("worktreeExists") else None,
            target=onto,
        )
    except OmpError as exc:
        return {**row, "head": None, "error": exc.message}
    return {
        **row,
        "head": rep.head,
        "since": start,
        "commitsAhead": len(rep.commits),
        "commits": [{"sha": c.sha, "subject": c.subject} for c in rep.commits[:50]],
        "files": [f.path for f in rep.files[:200]],
        "filesCount": len(rep.files),
        "stat": rep.stat.line(),
        "uncommitted": rep.dirty[:50],
        "uncommittedCount": len(rep.dirty),
        "merged": rep.merged,
        "target": target,
    }


def rows(cfg: TeamConfig, *, removed: bool = True) -> dict[str, dict[str, Any]]:
    """Every worktree worker's row (workers taken off the team too, with `removed`)."""
    items = ws.worktrees(cfg.raw, removed=removed)
    if not items:
        return {}
    top, target = target_of(cfg)
    if top is None:
        return {
            w: {"worker": w, "branch": wt.branch, "path": wt.path, "error": "not a git repository"}
            for w, wt, _gone in items
        }
    return {w: branch_row(top, w, wt, target, removed=gone) for w, wt, gone in items}


def diff(cfg: TeamConfig, worker: str | None = None, *, stat: bool = False) -> dict[str, Any]:
    """`omp team diff`: each worker's (or one worker's) commits and diff since its base."""

    items = ws.worktrees(cfg.raw)
    if worker is not None:
        worker_name(worker)
        items = [i for i in items if i[0] == worker]
        if not items:
            shared = worker in cfg.worker_names
            raise OmpError(
                "invalid_input" if shared else "unknown_worker",
                f"{worker} works in the shared checkout: it has no branch of its own"
                if shared
                else f"{worker!r} is not a worker of team {cfg.name} with a worktree",
                worker=worker,
            )
    top, target = target_of(cfg)
    if items and top is None:
        raise OmpError("not_a_git_repo", f"{cfg.paths.project.root} is not in a git work tree")
    out: list[dict[str, Any]] = []
    far = [w for w, wt, _g in items if wt.host]
    fetched = _fetch(cfg, far, top) if far else {}
    for w, wt, gone in items:
        assert top is not None
        row = branch_row(top, w, wt, target, removed=gone)
        if fetched.get(w, {}).get("error"):
            got = fetched[w]
            row["fetchError"] = {"error": got["error"], "message": got.get("message")}
        out.append(with_diff(top, row, stat=stat))
    return {"ok": True, "team": cfg.name, "target": target, "stat": stat, "workers": out}


def with_diff(top: Path, row: dict[str, Any], *, stat: bool) -> dict[str, Any]:
    """A branch row with its diff since its start (cut at `MAX_DIFF` characters), if it has a
    head."""
    from omp.workspace import review

    if row.get("head"):
        text = review.diff_text(top, row["since"], row["head"], stat=stat)
        if len(text) > MAX_DIFF:
            text = text[:MAX_DIFF] + f"\n… (cut at {MAX_DIFF} characters)\n"
        row["diff"] = text
    return row


def _fetch(cfg: TeamConfig, workers: list[str], top: Path | None) -> dict[str, dict[str, Any]]:
    """The branches of workers on other hosts brought back first (fast-forward only): a diff
    shows their work as it is there now; a host that does not answer, or a refused fetch, is
    said on its row (`fetchError`), the copy here shown as it was."""
    if top is None or not workers:
        return {}
    from omp.team import remote_life

    return {w: remote_life.fetch(cfg, w, top) for w in workers}
