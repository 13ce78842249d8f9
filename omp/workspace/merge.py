"""Merge a worker's branch into a target branch without touching any checkout until it is safe.

The order of events, each step refusing before anything changes:

1. The checkout that has the target branch (the leader's, usually) must have no uncommitted
   changes to tracked files: else `leader_dirty`, naming them. Never a stash, reset or checkout.
2. The merge is computed in the object store alone (`git merge-tree --write-tree`, git >= 2.38):
   a conflict is reported with its files and nothing is touched, so the checkout is byte for
   byte as before. A branch whose changes are all in the target already is `up_to_date`.
3. The new commit: the branch's tip when the target can fast-forward to it, else a merge commit
   (`commit-tree` with both parents), or with `squash` one commit with the caller's message
   and the target as its only parent.
4. With a verify command, the new commit is checked out in a scratch detached worktree
   (outside the project, provisioned like a worker's), the command runs there, the scratch is
   removed; a failure leaves the target where it was.
5. The target moves only if it is still where step 1 saw it: a checked-out target by
   `git merge --ff-only` in its checkout (which moves branch, index and files together and
   refuses what would overwrite work), any other by `git update-ref NEW OLD` (a
   compare-and-swap). A commit the user made meanwhile is never lost: `target_moved`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.workspace import verify as verify_mod
from omp.workspace.create import (
    Provision,
    Worktree,
    lock_reason,
    provision,
    rollback,
)
from omp.workspace.git import check_version, git, nul_fields
from omp.workspace.repo import (
    HEADS,
    changes,
    checkout_of,
    commits,
    current_branch,
    head,
    is_ancestor,
    resolve,
    toplevel,
)

DEFAULT_VERIFY_TIMEOUT = 15 * 60.0


class Verify(NamedTuple):
    """A check the merged commit must pass before the target moves."""

    command: str
    timeout: float = DEFAULT_VERIFY_TIMEOUT
    log: Path | None = None  # where its output goes (default: a kept temporary file)
    provision: Provision = Provision()  # what the scratch checkout gets copied or linked in


class MergeResult(NamedTuple):
    branch: str
    target: str
    status: str  # see STATUSES
    dry_run: bool
    previous: str  # the target's commit before
    commit: str | None  # the target's commit after (for a dry run: the fast-forward's, or None)
    conflicts: list[str]  # files in conflict
    verify: verify_mod.Outcome | None
    checkout: Path | None  # the checkout brought to the new commit (the target's)
    message: str  # one line for a person

    @property
    def moved(self) -> bool:
        return self.status in MOVED and not self.dry_run

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "branch": self.branch,
            "target": self.target,
            "status": self.status,
            "dryRun": self.dry_run,
            "previous": self.previous,
            "commit": self.commit,
            "conflicts": self.conflicts,
            "checkout": str(self.checkout) if self.checkout else None,
            "message": self.message,
        }
        if self.verify is not None:
            v = self.verify
            out["verify"] = {"status": v.status, "exit": v.exit, "log": str(v.log)}
        return out


MOVED = ("fast_forward", "merged", "squashed")
STATUSES = (*MOVED, "up_to_date", "conflict", "verify_failed", "target_moved", "checkout_refused")


def _target_of(top: Path, into: str | None) -> str:
    if into is not None:
        return into
    branch = current_branch(top)
    if branch is None:
        raise OmpError(
            "detached_head",
            f"{top} has no branch checked out (detached HEAD): name the target branch",
        )
    return branch


def refuse_dirty(checkout: Path) -> None:
    """`leader_dirty` when `checkout` has uncommitted changes to tracked files."""
    dirty = changes(checkout, untracked=False).tracked
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        raise OmpError(
            "leader_dirty",
            f"{checkout} has uncommitted changes to tracked files ({shown}): commit or stash "
            "them yourself, then merge again",
            checkout=str(checkout),
            files=dirty[:100],
        )


def merge_tree(repo: Path, target: str, tip: str) -> tuple[str | None, list[str]]:
    """(tree of the merge, []) or (None, conflicting files). Touches no checkout or index."""
    res = git(
        repo,
        "merge-tree",
        "--write-tree",
        "-z",
        "--name-only",
        "--no-messages",
        target,
        tip,
        ok=(0, 1),
    )
    fields = nul_fields(res.out)
    if res.rc == 0:
        return fields[0], []
    seen: dict[str, None] = {}
    for name in fields[1:]:
        if name:
            seen.setdefault(name, None)
    return None, list(seen)


def _commit_tree(repo: Path, tree: str, parents: Sequence[str], message: str) -> str:
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    return git(repo, *args, "-F", "-", input=message.encode()).text


def _run_check(top: Path, commit: str, check: Verify) -> verify_mod.Outcome:
    """Check `commit` out in a scratch detached worktree outside the project, run the command
    there, remove the scratch. The lock on it lets `recover_unfinished` clean up after a crash."""
    scratch = Path(tempfile.mkdtemp(prefix="omp-merge-verify-")) / "tree"
    log = check.log
    if log is None:
        fd, name = tempfile.mkstemp(prefix="omp-merge-verify-", suffix=".log")
        os.close(fd)
        log = Path(name)
    wt = Worktree(top, scratch, "", commit)
    git(
        top,
        "worktree",
        "add",
        "-q",
        "--detach",
        "--lock",
        "--reason",
        lock_reason(commit),
        str(scratch),
        commit,
    )
    try:
        provision(top, scratch, check.provision)
        return verify_mod.run(scratch, check.command, check.timeout, log)
    finally:
        rollback(wt)
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch.parent)


def _move(
    top: Path, target: str, old: str, new: str, branch: str
) -> tuple[str | None, Path | None, str]:
    """Move `target` from `old` to `new`; (failure status or None, checkout moved, why)."""
    reflog = f"omp merge {branch}"
    checkout = checkout_of(top, target)
    if checkout is None:
        res = git(top, "update-ref", "-m", reflog, HEADS + target, new, old, ok=(0, 1, 128))
        if res.rc != 0:
            return "target_moved", None, f"{target} moved while merging; nothing changed"
        return None, None, ""
    if head(checkout) != old:
        return "target_moved", None, f"{target} moved while merging; nothing changed"
    refuse_dirty(checkout)  # again: a verify can take minutes, the user may have edited
    res = git(
        checkout,
        "merge",
        "--ff-only",
        "--no-stat",
        new,
        ok=(0, 1, 128),
        env={"GIT_REFLOG_ACTION": reflog},
    )
    if res.rc != 0:
        if head(checkout) != old:
            return "target_moved", None, f"{target} moved while merging; nothing changed"
        why = res.err.decode("utf-8", "replace").strip().splitlines()
        return "checkout_refused", None, f"git refused to update {checkout}: " + " ".join(why[:3])
    return None, checkout, ""


def merge_branch(
    repo: Path,
    branch: str,
    *,
    into: str | None = None,
    squash: bool = False,
    message: str | None = None,
    check: Verify | None = None,
    dry_run: bool = False,
) -> MergeResult:
    """Merge `branch` into `into` (default: the branch checked out in `repo`). See the module
    docstring for the steps. Raises `leader_dirty`, `detached_head`, `unknown_revision`,
    `git_too_old`; every other outcome is a `MergeResult` (its `status`)."""
    top = toplevel(repo)
    check_version(top)
    target = _target_of(top, into)
    old = resolve(top, HEADS + target)
    tip = resolve(top, HEADS + branch) or resolve(top, branch)
    for name, sha in ((target, old), (branch, tip)):
        if sha is None:
            raise OmpError("unknown_revision", f"no branch {name!r} in {top}", revision=name)
    assert old is not None and tip is not None
    if branch == target:
        raise OmpError("invalid_input", f"cannot merge {branch} into itself")
    checkout = checkout_of(top, target)
    if checkout is not None:
        refuse_dirty(checkout)

    def result(status: str, commit: str | None, msg: str, **kw: Any) -> MergeResult:
        fields: dict[str, Any] = {"conflicts": [], "verify": None, "checkout": None}
        fields.update(kw)
        return MergeResult(branch, target, status, dry_run, old, commit, message=msg, **fields)

    if is_ancestor(top, tip, old):
        return result("up_to_date", old, f"{branch} is already in {target}")
    ff = is_ancestor(top, old, tip) and not squash
    if ff:
        new, status = tip, "fast_forward"
    else:
        tree, conflicts = merge_tree(top, old, tip)
        if tree is None:
            return result(
                "conflict",
                None,
                f"{branch} conflicts with {target} in {len(conflicts)} file(s); nothing changed",
                conflicts=conflicts,
            )
        if tree == git(top, "rev-parse", f"{old}^{{tree}}").text:
            return result("up_to_date", old, f"every change of {branch} is in {target} already")
        if dry_run:
            return result(
                "squashed" if squash else "merged", None, f"{branch} would merge into {target}"
            )
        if squash:
            count = len(commits(top, old, tip))
            text = message or f"{branch}: {count} commit(s) squashed"
            new, status = _commit_tree(top, tree, [old], text), "squashed"
        else:
            text = message or f"Merge branch '{branch}' into {target}"
            new, status = _commit_tree(top, tree, [old, tip], text), "merged"
    if dry_run:
        return result(status, new, f"{target} would fast-forward to {branch}")
    outcome = None
    if check is not None:
        outcome = _run_check(top, new, check)
        if outcome.status != "passed":
            return result(
                "verify_failed",
                None,
                f"`{check.command}` {outcome.status.replace('_', ' ')} on {branch} merged into "
                f"{target}; {target} left where it was",
                verify=outcome,
            )
    failure, moved_checkout, why = _move(top, target, old, new, branch)
    if failure is not None:
        return result(failure, None, why, verify=outcome)
    return result(
        status,
        new,
        f"{branch} {status.replace('_', ' ')} into {target}",
        verify=outcome,
        checkout=moved_checkout,
    )


def merge_branches(
    repo: Path,
    branches: Sequence[str],
    *,
    into: str | None = None,
    squash: bool = False,
    messages: dict[str, str] | None = None,
    check: Verify | None = None,
    dry_run: bool = False,
    stop_on_conflict: bool = False,
) -> list[MergeResult]:
    """Merge each of `branches` in turn (each onto what the previous made). A conflict, a
    failed check or a moved target does not stop the others unless `stop_on_conflict`."""
    out: list[MergeResult] = []
    for branch in branches:
        res = merge_branch(
            repo,
            branch,
            into=into,
            squash=squash,
            message=(messages or {}).get(branch),
            check=check,
            dry_run=dry_run,
        )
        out.append(res)
        if stop_on_conflict and res.status in (
            "conflict",
            "verify_failed",
            "target_moved",
            "checkout_refused",
        ):
            break
    return out
