"""Merge a worker's branch into a target branch without touching any checkout until it is safe.

The order of events, each step refusing before anything changes:

1. The target must not be held by an operation under way in any worktree of the repository (a
   rebase or bisect of it, a merge, cherry-pick, revert or am stopped where it is checked out):
   else `target_busy`, as git's own commands refuse it (`handle.Repo.in_use`). The checkout
   that has the target branch (the leader's, usually) must have no uncommitted changes to
   tracked files: else `leader_dirty`, naming them. Never a stash, reset or checkout.
2. The merge is computed in the object store alone (`git merge-tree --write-tree`, git >= 2.38):
   a conflict is reported with its files and nothing is touched, so the checkout is byte for
   byte as before. A branch whose changes are all in the target already is `up_to_date`.
3. The new commit: the branch's tip when the target can fast-forward to it, else a merge commit
   (`commit-tree` with both parents), or with `squash` one commit with the caller's message
   and the target as its only parent; signed when the repository's `commit.gpgsign` is on
   (`git commit-tree` alone ignores it), else `signing_failed`.
4. With a verify command, the new commit is checked out in a scratch detached worktree
   (outside the project, provisioned like a worker's), the command runs there, the scratch is
   removed; a failure leaves the target where it was.
5. The target moves only if it is still where step 1 saw it: a checked-out target by
   `git merge --ff-only` in its checkout (which moves branch, index and files together and
   refuses what would overwrite work), any other by `git update-ref NEW OLD` (a
   compare-and-swap). A commit the user made meanwhile is never lost: `target_moved`. Both
   checks of step 1 are made again first (a check can take minutes).
6. What happened is read from the ref, not from git's exit: the target moved when it now names
   the new commit, whatever git said after (a slow `reference-transaction` hook killed at the
   time limit). The user's `post-merge` hook runs after the move, as `git merge` runs it, but
   under a time limit of its own (`HOOK_TIMEOUT`): its failure or time-out is reported as the
   hook's (`hook`), and the merge stands.

Every git call goes through one `handle.Repo` per command, which asks each repeated read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.workspace import verify as verify_mod
from omp.workspace.create import Provision
from omp.workspace.handle import HEADS, HookRun, Repo

DEFAULT_VERIFY_TIMEOUT = 15 * 60.0
# seconds a user's post-merge hook may run after the branch moved (git gives hooks no limit;
# omp's own git calls have one of 60 s, which a dependency install in a hook outlasts)
HOOK_TIMEOUT = 15 * 60.0


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
    hook: HookRun | None = None  # the user's post-merge hook, run after the move
    warning: str | None = None  # what git said after the target had moved

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
        if self.hook is not None:
            out["hook"] = self.hook.to_json()
        if self.warning:
            out["warning"] = self.warning
        return out


MOVED = ("fast_forward", "merged", "squashed")
STATUSES = (*MOVED, "up_to_date", "conflict", "verify_failed", "target_moved", "checkout_refused")


def _target_of(r: Repo, into: str | None) -> str:
    if into is not None:
        return into
    branch = r.current_branch()
    if branch is None:
        raise OmpError(
            "detached_head",
            f"{r.top} has no branch checked out (detached HEAD): name the target branch",
        )
    return branch


def refuse_dirty(r: Repo, checkout: Path) -> None:
    """`leader_dirty` when `checkout` has uncommitted changes to tracked files."""
    dirty = r.changes(checkout, untracked=False).tracked
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        raise OmpError(
            "leader_dirty",
            f"{checkout} has uncommitted changes to tracked files ({shown}): commit or stash "
            "them yourself, then merge again",
            checkout=str(checkout),
            files=dirty[:100],
        )


def _run_check(r: Repo, commit: str, check: Verify) -> verify_mod.Outcome:
    """Check `commit` out in a scratch detached worktree outside the project, run the command
    there, remove the scratch (`omp.workspace.scratch`)."""
    import os
    import tempfile

    from omp.workspace import scratch

    log = check.log
    if log is None:
        fd, name = tempfile.mkstemp(prefix="omp-merge-verify-", suffix=".log")
        os.close(fd)
        log = Path(name)
    with scratch.checkout(r.top, commit, check.provision, timeout=check.timeout) as tree:
        return verify_mod.run(tree, check.command, check.timeout, log)


class _Moved(NamedTuple):
    failure: str | None  # target_moved, checkout_refused; None when the target moved
    checkout: Path | None  # the checkout brought along
    why: str  # the failure's words, or (moved) what git said after the ref moved
    hook: HookRun | None = None


def _move(r: Repo, target: str, old: str, new: str, branch: str, hook_timeout: float) -> _Moved:
    """Move `target` from `old` to `new` (see the module docstring, steps 5 and 6)."""
    reflog = f"omp merge {branch}"
    moved_away = f"{target} moved while merging; nothing changed"
    checkout = r.checkout_of(target, fresh=True)
    r.refuse_in_use(target)  # again: a verify can take minutes, the user may have started one
    if checkout is None:
        ok, said = r.update_ref(target, new, old, reflog)
        if not ok:
            return _Moved("target_moved", None, moved_away)
        r.moved(target, new)
        return _Moved(None, None, said)
    on, at = r.checkout_state(checkout)
    if on != target or at != old:
        return _Moved("target_moved", None, moved_away)
    refuse_dirty(r, checkout)  # again: a verify can take minutes, the user may have edited
    rc, said = r.fast_forward(checkout, new, reflog)
    now = r.resolve(HEADS + target, fresh=True)
    if now != new:
        if now != old:
            return _Moved("target_moved", None, moved_away)
        return _Moved("checkout_refused", None, f"git refused to update {checkout}: {said}")
    r.moved(target, new, checkout)
    hook = None
    if r.hook("post-merge") is not None:
        hook = r.run_hook(checkout, "post-merge", ["0"], hook_timeout)
    return _Moved(None, checkout, said if rc != 0 else "", hook)


def merge_branch(
    repo: Path | Repo,
    branch: str,
    *,
    into: str | None = None,
    squash: bool = False,
    message: str | None = None,
    check: Verify | None = None,
    dry_run: bool = False,
    hook_timeout: float | None = None,
) -> MergeResult:
    """Merge `branch` into `into` (default: the branch checked out in `repo`). See the module
    docstring for the steps. Raises `leader_dirty`, `target_busy`, `detached_head`,
    `unknown_revision`, `git_too_old`, `signing_failed`; every other outcome is a
    `MergeResult` (its `status`)."""
    r = repo if isinstance(repo, Repo) else Repo(repo)
    r.check_version()
    target = _target_of(r, into)
    old = r.resolve(HEADS + target)
    tip = r.resolve(HEADS + branch) or r.resolve(branch)
    for name, sha in ((target, old), (branch, tip)):
        if sha is None:
            raise OmpError("unknown_revision", f"no branch {name!r} in {r.top}", revision=name)
    assert old is not None and tip is not None
    if branch == target:
        raise OmpError("invalid_input", f"cannot merge {branch} into itself")
    r.refuse_in_use(target)
    checkout = r.checkout_of(target)
    if checkout is not None and not r.known_clean(checkout):
        refuse_dirty(r, checkout)

    def result(status: str, commit: str | None, msg: str, **kw: Any) -> MergeResult:
        fields: dict[str, Any] = {"conflicts": [], "verify": None, "checkout": None}
        fields.update(kw)
        return MergeResult(branch, target, status, dry_run, old, commit, message=msg, **fields)

    if r.is_ancestor(tip, old):
        return result("up_to_date", old, f"{branch} is already in {target}")
    ff = r.is_ancestor(old, tip) and not squash
    if ff:
        new, status = tip, "fast_forward"
    else:
        tree, conflicts = r.merge_tree(old, tip)
        if tree is None:
            return result(
                "conflict",
                None,
                f"{branch} conflicts with {target} in {len(conflicts)} file(s); nothing changed",
                conflicts=conflicts,
            )
        if tree == r.tree_of(old):
            return result("up_to_date", old, f"every change of {branch} is in {target} already")
        if dry_run:
            return result(
                "squashed" if squash else "merged", None, f"{branch} would merge into {target}"
            )
        if squash:
            count = len(r.commits(old, tip))
            text = message or f"{branch}: {count} commit(s) squashed"
            new, status = r.commit_tree(tree, [old], text), "squashed"
        else:
            text = message or f"Merge branch '{branch}' into {target}"
            new, status = r.commit_tree(tree, [old, tip], text), "merged"
    if dry_run:
        return result(status, new, f"{target} would fast-forward to {branch}")
    outcome = None
    if check is not None:
        outcome = _run_check(r, new, check)
        if outcome.status != "passed":
            return result(
                "verify_failed",
                None,
                f"`{check.command}` {outcome.status.replace('_', ' ')} on {branch} merged into "
                f"{target}; {target} left where it was",
                verify=outcome,
            )
    limit = HOOK_TIMEOUT if hook_timeout is None else hook_timeout
    done = _move(r, target, old, new, branch, limit)
    if done.failure is not None:
        return result(done.failure, None, done.why, verify=outcome)
    msg = f"{branch} {status.replace('_', ' ')} into {target}"
    if done.hook is not None and done.hook.status != "passed":
        how = "did not finish in time" if done.hook.status == "timed_out" else "failed"
        msg += f"; then its post-merge hook {how} (the merge stands)"
    return result(
        status,
        new,
        msg,
        verify=outcome,
        checkout=done.checkout,
        hook=done.hook,
        warning=done.why or None,
    )


def merge_branches(
    repo: Path | Repo,
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
    r = repo if isinstance(repo, Repo) else Repo(repo)
    out: list[MergeResult] = []
    for branch in branches:
        res = merge_branch(
            r,
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
