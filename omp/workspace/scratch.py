"""A scratch checkout of one commit, where a check runs without touching anyone's worktree.

A check (`--verify`) leaves things behind: `__pycache__/`, `.pytest_cache/`, build output, a
coverage file. Run in a worker's own worktree, whatever the project's `.gitignore` does not
cover shows as the worker's uncommitted work: `status` and `diff` count it, the next completion
is refused (`uncommitted_changes`) for paths the worker never made, and `git add -A` carries
them onto the leader's branch. So every check runs here instead: a detached worktree of the
commit, outside the project (a temporary directory), provisioned like a worker's (`[worktree]
copy` and `link`), removed when the check ends. Both the merge's check of a merged result
(`omp.workspace.merge`) and the check of a completion (`omp.workspace.verify`, in the
background) use it.

The worktree is added locked, its lock naming the process that made it and the commit
(`create.lock_reason`): if that process dies before removing it, the next
`create.recover_unfinished` (launch, add-worker, prune) removes it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from omp.workspace.create import NOTHING, Provision, Worktree, lock_reason, provision, rollback
from omp.workspace.git import GIT_TIMEOUT, git
from omp.workspace.repo import worktrees_locked

PREFIX = "omp-check-"


def make(
    top: Path, commit: str, spec: Provision = NOTHING, *, timeout: float = GIT_TIMEOUT
) -> Worktree:
    """A detached, locked worktree of `commit` in a new temporary directory, provisioned.
    `timeout`: what the checkout may take, the user's `post-checkout` hook included (git runs
    it; the check's own time limit, so a slow hook is the check's time, not a failure)."""
    scratch = Path(tempfile.mkdtemp(prefix=PREFIX)) / "tree"
    wt = Worktree(top, scratch, "", commit)
    try:
        with worktrees_locked(top, timeout):
            git(top, "worktree", "add", "-q", "--detach", "--lock", "--reason",
                lock_reason(commit), str(scratch), commit, timeout=timeout)  # fmt: skip
        provision(top, scratch, spec)
    except BaseException:
        remove(wt)
        raise
    return wt


def remove(wt: Worktree) -> None:
    """Remove the scratch worktree and its temporary directory. Safe to call twice."""
    with contextlib.suppress(Exception):
        rollback(wt)
    with contextlib.suppress(OSError):
        shutil.rmtree(wt.path.parent)


@contextlib.contextmanager
def checkout(
    top: Path, commit: str, spec: Provision = NOTHING, *, timeout: float = GIT_TIMEOUT
) -> Iterator[Path]:
    """`make`, the caller's block run with the scratch's path, `remove`."""
    wt = make(top, commit, spec, timeout=timeout)
    try:
        yield wt.path
    finally:
        remove(wt)
