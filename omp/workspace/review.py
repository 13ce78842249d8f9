"""What a worker's branch holds: its commits and files since its base, its diff, its worktree's
uncommitted paths, and whether it is merged. Read-only (`omp team diff`, `status`, `collect`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from omp.workspace.git import git, nul_fields
from omp.workspace.repo import Commit, changes, commits, head, resolve

_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/")


class FileChange(NamedTuple):
    path: str
    added: int | None  # lines; None for a binary file
    deleted: int | None


class DiffStat(NamedTuple):
    files: int
    insertions: int
    deletions: int

    def line(self) -> str:
        """`3 files, +10 -2`: one line for status and collect."""
        noun = "file" if self.files == 1 else "files"
        return f"{self.files} {noun}, +{self.insertions} -{self.deletions}"


def files_changed(repo: str | os.PathLike[str], base: str, tip: str) -> list[FileChange]:
    """Files that differ between `base` and `tip` (`diff --numstat -z`, renames as delete + add)."""
    res = git(repo, "diff", "--numstat", "-z", "--no-renames", *_DIFF, base, tip, "--")
    out: list[FileChange] = []
    for field in nul_fields(res.out):
        added, deleted, path = field.split("\t", 2)
        out.append(
            FileChange(
                path,
                int(added) if added.isdigit() else None,
                int(deleted) if deleted.isdigit() else None,
            )
        )
    return out


def diffstat(changed: list[FileChange]) -> DiffStat:
    return DiffStat(
        len(changed), sum(c.added or 0 for c in changed), sum(c.deleted or 0 for c in changed)
    )


def diff_text(repo: str | os.PathLike[str], base: str, tip: str, *, stat: bool = False) -> str:
    """The diff from `base` to `tip` for a person to read (`--stat` form with `stat`)."""
    args = ["--stat=120"] if stat else ["--binary"]
    res = git(repo, "diff", *args, *_DIFF, base, tip, "--")
    return res.out.decode("utf-8", "replace")


def merged_into(repo: str | os.PathLike[str], branch: str, target: str) -> bool:
    """True when everything `branch` changed is in `target` (`handle.Repo.merged_into`)."""
    from omp.workspace.handle import Repo

    return Repo(repo).merged_into(branch, target)


class BranchReport(NamedTuple):
    """A worker's branch since its base, and its worktree's state."""

    branch: str
    base: str
    head: str | None  # the branch's tip; None when the branch is gone
    commits: list[Commit]  # ahead of base, newest first
    files: list[FileChange]
    stat: DiffStat
    dirty: list[str]  # uncommitted paths in the worktree (tracked changes, then untracked)
    merged: bool | None  # into `target`; None when no target was asked about


def inspect_branch(
    repo: Path,
    branch: str,
    base: str,
    *,
    worktree: Path | None = None,
    target: str | None = None,
) -> BranchReport:
    """Everything `diff`, `status` and `collect` show of one worker, in one call."""
    tip = resolve(repo, branch)
    if tip is None:
        return BranchReport(branch, base, None, [], [], DiffStat(0, 0, 0), [], None)
    ahead = commits(repo, base, tip)
    changed = files_changed(repo, base, tip) if ahead else []
    dirty = changes(worktree).paths if worktree is not None and worktree.is_dir() else []
    merged = merged_into(repo, tip, target) if target is not None else None
    return BranchReport(branch, base, tip, ahead, changed, diffstat(changed), dirty, merged)


def since(repo: str | os.PathLike[str], base: str, tip: str, target: str | None) -> str:
    """Where a worker's own work starts (`handle.Repo.since`)."""
    from omp.workspace.handle import Repo

    return Repo(repo).since(base, tip, target)


def worktree_head(worktree: Path) -> str | None:
    """The commit the worktree's HEAD names (what a completed task records)."""
    return head(worktree)
