"""A worktree worker hands its work over by committing it in its worktree.

`committed_work` is the check a worktree worker's completion passes first: nothing uncommitted
(modified tracked files, or untracked files git does not ignore), and its branch still checked
out there. It returns what the completed task records of the work: the head commit, the commits
ahead of the worker's base and the files changed. Imported only on the completion path of
`omp team api transition-task-status` (git runs here; the send path never imports it).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.record.workspace import Worktree

MAX_PATHS = 20  # shown in a refusal
MAX_FILES = 200  # recorded in a task


def commit_commands(path: str, subject: str) -> list[str]:
    """The exact lines that commit everything uncommitted in the worktree at `path`."""
    wt = shlex.quote(path)
    return [f"git -C {wt} add -A", f"git -C {wt} commit -m {shlex.quote(subject)}"]


def commit_subject(task: dict[str, Any]) -> str:
    desc = " ".join(str(task.get("description") or "").split())
    text = f"task {task.get('id')}: {desc}" if desc else f"task {task.get('id')}"
    return text if len(text) <= 72 else text[:71] + "…"


def committed_work(
    root: Path,
    worker: str,
    wt: Worktree,
    task: dict[str, Any],
    target: str | None = None,
    *,
    nothing_to_commit: bool = False,
) -> dict[str, Any]:
    """Refuse a completion while the worktree holds uncommitted work (`uncommitted_changes`,
    with up to 20 paths and the commands that commit them), while another branch than the
    worker's is checked out there (`wrong_branch`), or with no commit of the worker's on its
    branch unless `nothing_to_commit` (`nothing_committed`); else what the task records
    (`work`, with `nothingCommitted` when the worker said so)."""
    from omp.workspace import repo, review

    path = Path(wt.path)
    if not path.is_dir():
        raise OmpError(
            "worktree_missing",
            f"{worker}'s worktree {wt.path} is gone; its branch {wt.branch} keeps what was "
            "committed. Ask the leader (send-message to leader) how to go on",
            worker=worker,
            path=wt.path,
            branch=wt.branch,
        )
    found = repo.changes(path)
    if found:
        paths = found.paths
        shown = paths[:MAX_PATHS]
        more = f" and {len(paths) - len(shown)} more" if len(paths) > len(shown) else ""
        cmds = commit_commands(wt.path, commit_subject(task))
        raise OmpError(
            "uncommitted_changes",
            f"{worker}'s worktree {wt.path} has {len(paths)} uncommitted path(s): "
            f"{', '.join(shown)}{more}. Work is handed over by committing it on {wt.branch}; "
            f"commit, then complete the task again:\n  " + "\n  ".join(cmds),
            worker=worker,
            path=wt.path,
            branch=wt.branch,
            files=shown,
            count=len(paths),
            commands=cmds,
        )
    on = repo.current_branch(path)
    if on != wt.branch:
        fix = f"git -C {shlex.quote(wt.path)} switch {shlex.quote(wt.branch)}"
        raise OmpError(
            "wrong_branch",
            f"{worker}'s worktree {wt.path} has {on or 'a detached HEAD'} checked out, not its "
            f"branch {wt.branch}: only {wt.branch} is merged. Put your commits on it "
            f"(`{fix}`, then merge or cherry-pick them), then complete the task again",
            worker=worker,
            branch=wt.branch,
            checkedOut=on,
        )
    top = repo.toplevel(root)
    tip = repo.head(path)
    if tip is None:
        raise OmpError("unknown_revision", f"{wt.branch} has no commit", revision=wt.branch)
    start = review.since(top, wt.base, tip, target)
    ahead = repo.commits(top, start, tip)
    if not ahead and not nothing_to_commit:
        cmds = commit_commands(wt.path, commit_subject(task))
        raise OmpError(
            "nothing_committed",
            f"{worker}'s branch {wt.branch} has no commit of its own: nothing would be handed "
            "over. If the task asks for no change (a review, an answer), complete it with "
            f'"nothing_to_commit": true; else commit your work in {wt.path}, then complete the '
            "task again:\n  " + "\n  ".join(cmds),
            worker=worker,
            branch=wt.branch,
            commands=cmds,
        )
    files = review.files_changed(top, start, tip) if ahead else []
    extra = {"nothingCommitted": True} if not ahead else {}
    return {
        **extra,
        "branch": wt.branch,
        "base": wt.base,
        "since": start,
        "commit": tip,
        "commitsAhead": len(ahead),
        "filesChanged": [f.path for f in files[:MAX_FILES]],
        "filesChangedCount": len(files),
        "stat": review.diffstat(files).line(),
    }


def leader_branch(root: Path) -> str | None:
    """The branch the leader's checkout has (what the worker's work is merged into), or None."""
    from omp.workspace import repo

    try:
        return repo.current_branch(repo.toplevel(root))
    except OmpError:
        return None
