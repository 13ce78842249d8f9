"""Remove a worker's worktree and branch, only when nothing would be lost (or when forced, saying
what was thrown away); forget worktrees whose directory vanished."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.workspace.git import git
from omp.workspace.repo import (
    HEADS,
    Commit,
    changes,
    checkout_of,
    commits,
    current_branch,
    resolve,
    toplevel,
    worktrees,
    worktrees_locked,
)
from omp.workspace.review import merged_into


class AtRisk(NamedTuple):
    """What removing a worktree and its branch would throw away."""

    commits: list[Commit]  # on the branch and not in the target (newest first)
    files: list[str]  # uncommitted in the worktree (tracked changes, then untracked)

    def __bool__(self) -> bool:
        return bool(self.commits or self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "commits": [{"sha": c.sha, "subject": c.subject} for c in self.commits],
            "files": self.files,
        }


class Removed(NamedTuple):
    path: Path | None
    branch: str
    worktree_removed: bool
    branch_removed: bool
    lost: AtRisk  # empty unless forced


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def at_risk(
    repo: Path,
    path: Path | None,
    branch: str,
    *,
    target: str | None = None,
    keep_branch: bool = False,
) -> AtRisk:
    """The commits of `branch` not in `target` (default: the branch checked out in `repo`;
    none counted with `keep_branch`) and the uncommitted files of the worktree at `path` (None:
    the branch alone; its checkout is on another host)."""
    top = toplevel(repo)
    lost: list[Commit] = []
    tip = resolve(top, HEADS + branch)
    if tip is not None and not keep_branch:
        onto = target if target is not None else current_branch(top)
        if onto is None or resolve(top, HEADS + onto) is None:
            raise OmpError(
                "detached_head",
                f"{top} has no branch checked out: name the branch {branch} should be merged into",
            )
        if not merged_into(top, tip, HEADS + onto):
            lost = commits(top, HEADS + onto, tip)
    files = changes(path).paths if path is not None and (path / ".git").exists() else []
    return AtRisk(lost, files)


def remove_worktree(
    repo: Path,
    path: Path | None,
    branch: str,
    *,
    target: str | None = None,
    force: bool = False,
    keep_branch: bool = False,
) -> Removed:
    """Remove the worktree at `path` and (unless `keep_branch`) `branch`; `path` None: the
    branch alone (a checkout on another host is that host's: `omp.team.remote_life`).

    Refused with `unmerged_work` (listing `commits` and `files`) when the branch has commits
    not in `target` or the worktree has uncommitted changes; `force` removes anyway and returns
    what was lost. Refused with `branch_checked_out` when the branch is checked out in another
    worktree (a person's). A worktree whose directory is gone is pruned from git's list.
    """
    top = toplevel(repo)
    elsewhere = checkout_of(top, branch) if not keep_branch else None
    if elsewhere is not None and (path is None or not _same(elsewhere, path)):
        raise OmpError(
            "branch_checked_out",
            f"{branch} is checked out in {elsewhere}: not deleting it",
            branch=branch,
            checkout=str(elsewhere),
        )
    risk = at_risk(top, path, branch, target=target, keep_branch=keep_branch)
    if risk and not force:
        parts = []
        if risk.commits:
            parts.append(f"{len(risk.commits)} unmerged commit(s) on {branch}")
        if risk.files:
            parts.append(f"{len(risk.files)} uncommitted file(s) in {path}")
        raise OmpError(
            "unmerged_work",
            f"removing {path} would lose {' and '.join(parts)}; merge or commit them, or force",
            branch=branch,
            path=str(path),
            **risk.to_json(),
        )
    registered = path is not None and any(_same(e.path, path) for e in worktrees(top))
    removed_tree = False
    with worktrees_locked(top):
        if registered and path is not None and path.exists():
            # a double --force also removes a locked worktree: the loss was weighed above
            git(top, "worktree", "remove", "--force", "--force", str(path))
            removed_tree = True
        git(top, "worktree", "prune")
    removed_branch = False
    if not keep_branch and resolve(top, HEADS + branch) is not None:
        git(top, "branch", "-D", "-q", branch)
        removed_branch = True
    return Removed(path, branch, removed_tree, removed_branch, risk if force else AtRisk([], []))


def prune(repo: Path) -> list[Path]:
    """Forget worktrees whose directory vanished (`git worktree prune`); their paths. Their
    branches are kept: a branch is work."""
    top = toplevel(repo)
    gone = [e.path for e in worktrees(top) if e.prunable and not e.locked]
    if gone:
        with worktrees_locked(top):
            git(top, "worktree", "prune")
    return gone
