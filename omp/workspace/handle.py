"""One command's door to a repository: the git calls of a merge, the reads it repeats made once.

`omp team merge` asks git the same things many times over: the top of the checkout, git's
version, the worktree list, a branch's commit, whether one commit is an ancestor of another, the
merge of two commits. A `Repo` asks each once per command:

- facts about commits (an id always names the same commit): ancestry, `merge-tree`, a commit's
  tree and the commits between two; and facts of the command's run: git's version, the top,
  the common git directory, a config value, where hooks live. Kept for the handle's life;
- facts about refs and checkouts (a branch's commit, the worktree list, the branch checked out
  at the top): kept until this handle writes, then forgotten (a ref it moved itself is
  remembered at its new place). The checks right before a branch moves read afresh
  (`fresh=True`, `checkout_state`): a commit the user made meanwhile is never missed;
- uncommitted changes are never kept.

Every git process goes through `git.git()` (through `repo`'s functions for the reads); the merge
(`omp.workspace.merge`) and the team's merge (`omp.team.merging`) use this class and nothing
else of git. `review.merged_into` and `review.since` are written once, here.

It also reads what git keeps of an operation under way in each worktree (`in_use`): a branch
being rebased or bisected anywhere, or checked out where a merge, cherry-pick, revert, am or
rebase has stopped, is one git's own commands refuse to move.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.workspace import repo as facts
from omp.workspace.git import GIT_TIMEOUT, GitResult, abspath, check_version, git, nul_fields

HEADS = facts.HEADS
WRITE_TIMEOUT = GIT_TIMEOUT  # seconds a ref update or a checkout's fast-forward may take
_HEX = frozenset("0123456789abcdef")


def _is_id(rev: str) -> bool:
    """A full commit id (SHA-1 or SHA-256): what it names never changes."""
    return len(rev) in (40, 64) and set(rev) <= _HEX


class Busy(NamedTuple):
    """A branch an operation under way holds: which one, in which worktree."""

    branch: str
    operation: str  # rebase, bisect, merge, cherry-pick, revert, am
    worktree: Path
    detail: str  # for a person: "is being rebased", "has a merge stopped on it"


class HookRun(NamedTuple):
    """A user's hook omp ran after moving a branch (git runs it there; omp runs it itself)."""

    name: str
    status: str  # passed, failed, timed_out
    exit: int | None
    seconds: float
    output: str  # the end of what it printed

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "exit": self.exit,
                "seconds": round(self.seconds, 3), "output": self.output}  # fmt: skip


class Repo:
    """A repository as one command sees it (see the module docstring). `path` is any directory
    of its work tree; git runs there (`top` is asked when first needed)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float | None = None) -> None:
        self.path = Path(path)
        self.timeout = WRITE_TIMEOUT if timeout is None else timeout  # the writes' time limit
        self._top: Path | None = None
        self._kept: dict[tuple[str, ...], object] = {}  # facts of commits and of the run
        self._refs: dict[tuple[str, ...], object] = {}  # facts of refs: gone on a write

    # ---- kept for the handle's life ---------------------------------------------------------

    def _once(self, key: tuple[str, ...], make: object, *, refs: bool = False) -> object:
        store = self._refs if refs else self._kept
        if key not in store:
            assert callable(make)
            store[key] = make()
        return store[key]

    @property
    def top(self) -> Path:
        if self._top is None:
            self._top = facts.toplevel(self.path)
        return self._top

    def check_version(self) -> tuple[int, ...]:
        found = self._once(("version",), lambda: check_version(self.path))
        assert isinstance(found, tuple)
        return found

    def common_dir(self) -> Path:
        found = self._once(("common",), lambda: facts.common_dir(self.path))
        assert isinstance(found, Path)
        return found

    def config_bool(self, key: str) -> bool | None:
        """A boolean setting as git reads it (every config file in force), or None if unset."""

        def read() -> bool | None:
            res = git(self.path, "config", "--type=bool", "--get", key, ok=(0, 1))
            return None if res.rc == 1 else res.text == "true"

        found = self._once(("config", key), read)
        return found if isinstance(found, bool) else None

    def hook(self, name: str) -> Path | None:
        """The hook `name` git would run here (`core.hooksPath` honoured), if it is there and
        executable; None otherwise (git then runs nothing)."""

        def where() -> Path:
            return abspath(self.path, git(self.path, "rev-parse", "--git-path", "hooks").text)

        hooks = self._once(("hooks",), where)
        assert isinstance(hooks, Path)
        path = hooks / name
        try:
            st = os.stat(path)
        except OSError:
            return None
        return path if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK) else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        def ask() -> bool:
            return facts.is_ancestor(self.path, older, newer)

        if not (_is_id(older) and _is_id(newer)):
            return ask()
        return bool(self._once(("ancestor", older, newer), ask))

    def merge_tree(self, target: str, tip: str) -> tuple[str | None, list[str]]:
        """(tree of the merge, []) or (None, conflicting files). Touches no checkout or index."""

        def ask() -> tuple[str | None, list[str]]:
            res = git(self.path, "merge-tree", "--write-tree", "-z", "--name-only",
                      "--no-messages", target, tip, ok=(0, 1))  # fmt: skip
            fields = nul_fields(res.out)
            if res.rc == 0:
                return fields[0], []
            return None, list(dict.fromkeys(n for n in fields[1:] if n))

        if not (_is_id(target) and _is_id(tip)):
            return ask()
        found = self._once(("merge-tree", target, tip), ask)
        assert isinstance(found, tuple)
        return found

    def tree_of(self, commit: str) -> str:
        def ask() -> str:
            return git(
                self.path, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}"
            ).text

        return str(self._once(("tree", commit), ask)) if _is_id(commit) else ask()

    def merge_base(self, a: str, b: str) -> str | None:
        def ask() -> str | None:
            return facts.merge_base(self.path, a, b)

        if not (_is_id(a) and _is_id(b)):
            return ask()
        found = self._once(("base", a, b), ask)
        return found if isinstance(found, str) else None

    def commits(self, since: str, until: str) -> list[facts.Commit]:
        def ask() -> list[facts.Commit]:
            return facts.commits(self.path, since, until)

        if not (_is_id(since) and _is_id(until)):
            return ask()
        found = self._once(("commits", since, until), ask)
        assert isinstance(found, list)
        return found

    # ---- kept until this handle writes --------------------------------------------------------

    def resolve(self, rev: str, *, fresh: bool = False) -> str | None:
        """The commit `rev` names (None: none); a branch's place is asked once until a write."""
        if fresh:
            self._refs.pop(("resolve", rev), None)
        found = self._once(("resolve", rev), lambda: facts.resolve(self.path, rev), refs=True)
        return found if isinstance(found, str) else None

    def worktrees(self, *, fresh: bool = False) -> list[facts.WorktreeEntry]:
        if fresh:
            self._refs.pop(("worktrees",), None)
        found = self._once(("worktrees",), lambda: facts.worktrees(self.path), refs=True)
        assert isinstance(found, list)
        return found

    def checkout_of(self, branch: str, *, fresh: bool = False) -> Path | None:
        """The worktree that has `branch` checked out, or None."""
        for entry in self.worktrees(fresh=fresh):
            if entry.branch == branch and not entry.prunable:
                return entry.path
        return None

    def current_branch(self) -> str | None:
        """The branch checked out at the top (None: detached HEAD)."""
        found = self._once(("branch",), lambda: facts.current_branch(self.path), refs=True)
        return found if isinstance(found, str) else None

    # ---- never kept ---------------------------------------------------------------------------

    def changes(self, checkout: Path, *, untracked: bool = True) -> facts.Changes:
        """What is uncommitted in `checkout`, asked now (never kept)."""
        return facts.changes(checkout, untracked=untracked)

    def known_clean(self, checkout: Path) -> bool:
        """True when this handle left `checkout` clean itself, nothing written since (`moved`):
        the check before the next branch's merge needs no second `git status`. The check right
        before a move never relies on it."""
        return self._refs.get(("clean", str(checkout))) is True

    def checkout_state(self, checkout: Path) -> tuple[str | None, str | None]:
        """(the branch checked out at `checkout`, its commit), read now, in one git call; the
        branch is None when HEAD is detached, the commit None on an unborn branch."""
        res = git(checkout, "rev-parse", "HEAD", "--symbolic-full-name", "HEAD", ok=(0, 128))
        lines = res.text.splitlines()
        if res.rc == 0 and len(lines) == 2:
            sha, ref = lines
        else:  # an unborn branch: no commit to name
            sha, ref = None, ""
        branch = ref[len(HEADS) :] if ref.startswith(HEADS) else None
        return branch, sha

    def merged_into(self, branch: str, target: str) -> bool:
        """True when everything `branch` changed is in `target`: it is an ancestor (a merge or
        a fast-forward), or merging it would change nothing (squashed or cherry-picked in)."""
        tip = branch if _is_id(branch) else self.resolve(branch)  # an id a caller read
        onto = self.resolve(target)
        if tip is None or onto is None:
            return False
        if self.is_ancestor(tip, onto):
            return True
        tree, _conflicts = self.merge_tree(onto, tip)
        return tree is not None and tree == self.tree_of(onto)

    def since(self, base: str, tip: str, target: str | None) -> str:
        """Where a worker's own work starts: its recorded `base`, or, once it rebased onto
        `target` (after a merge conflict, say), the point where it left `target`, so the work
        of others merged in meanwhile is not counted as its own. A branch already in `target`
        keeps `base`."""
        onto = self.resolve(target) if target is not None else None
        if onto is None:
            return base
        mb = self.merge_base(tip, onto)
        if mb is None or mb in (base, tip) or not self.is_ancestor(base, mb):
            return base
        return mb

    def in_use(self, branch: str) -> Busy | None:
        """The operation under way that holds `branch`, in any worktree of the repository, or
        None. Read from git's own files in each worktree's git directory (the main one is the
        common directory, the others `worktrees/<id>/` in it, as git lists them): a rebase of
        it (`rebase-merge/` or `rebase-apply/` naming it in `head-name`: HEAD is detached
        meanwhile) or a bisect started on it (`BISECT_START`), anywhere; and where it is
        checked out, a merge (`MERGE_HEAD`), cherry-pick or revert (`CHERRY_PICK_HEAD`,
        `REVERT_HEAD`, `sequencer/`) or am (`rebase-apply/applying`) stopped on it. Where it
        is checked out is git's word (`worktree list`, as kept by this handle: HEAD itself may
        live in a ref store that is no file); the rest are files in every ref store."""
        common = self.common_dir()
        dirs = [common]
        try:
            dirs += sorted(p for p in (common / "worktrees").iterdir() if p.is_dir())
        except OSError:
            pass
        holder = self.checkout_of(branch)
        held_at = os.path.realpath(holder) if holder is not None else None
        ref = HEADS + branch
        for gitdir in dirs:
            where = _worktree_of(gitdir, common)
            found = _busy_in(gitdir, ref, branch, os.path.realpath(where) == held_at)
            if found is not None:
                operation, detail = found
                return Busy(branch, operation, where, detail)
        return None

    def refuse_in_use(self, branch: str) -> None:
        """`target_busy` when an operation under way holds `branch` (see `in_use`)."""
        busy = self.in_use(branch)
        if busy is not None:
            raise OmpError(
                "target_busy",
                f"{branch} {busy.detail} in {busy.worktree}: git itself would not move it now. "
                f"Nothing was merged. Finish or abort the {busy.operation} there "
                f"(git {busy.operation} --continue or --abort), then merge again",
                branch=branch,
                operation=busy.operation,
                worktree=str(busy.worktree),
            )

    # ---- writes -------------------------------------------------------------------------------

    def _wrote(self) -> None:
        """Forget the facts of refs after a write, but which branch is checked out where (and
        at the top): no write of this handle changes that (the check before a move asks it
        afresh anyway)."""
        keys: tuple[tuple[str, ...], ...] = (("worktrees",), ("branch",))
        kept = {k: self._refs[k] for k in keys if k in self._refs}
        self._refs.clear()
        self._refs.update(kept)

    def commit_tree(self, tree: str, parents: Sequence[str], message: str) -> str:
        """A commit of `tree` with `parents`, signed (`-S`) when `commit.gpgsign` is on, as `git
        commit` would sign it (`git commit-tree` alone ignores the setting)."""
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        sign = self.config_bool("commit.gpgsign") is True
        if sign:
            args.append("-S")
        try:
            return git(self.path, *args, "-F", "-", input=message.encode()).text
        except OmpError as exc:
            if not sign:
                raise
            raise OmpError(
                "signing_failed",
                f"commit.gpgsign is on in this repository, and git could not sign the merge "
                f"commit: {exc.message}. Make signing work (gpg or ssh key, user.signingkey), "
                "or turn commit.gpgsign off for this repository; nothing was merged",
                setting="commit.gpgsign",
            ) from exc

    def update_ref(self, branch: str, new: str, old: str, reflog: str) -> tuple[bool, str]:
        """Move `branch` from `old` to `new` only if it is still at `old` (compare-and-swap);
        (whether it is at `new` now, what git said). A git killed after the ref moved (a slow
        `reference-transaction` hook) still counts: the ref is read again."""
        why = ""
        try:
            res = git(self.path, "update-ref", "-m", reflog, HEADS + branch, new, old,
                      ok=(0, 1, 128), timeout=self.timeout)  # fmt: skip
            why = _first_lines(res)
        except OmpError as exc:
            why = exc.message
        self._wrote()
        return self.resolve(HEADS + branch) == new, why

    def fast_forward(self, checkout: Path, new: str, reflog: str) -> tuple[int, str]:
        """`git merge --ff-only NEW` in `checkout` (branch, index and files together, refusing
        what would overwrite work), with hooks off: the user's `post-merge` is run after it by
        `run_hook`, under a time limit of its own. (exit code, what git said); -1 when git did
        not finish in time."""
        try:
            res = git(checkout, "-c", "core.hooksPath=/dev/null", "merge", "--ff-only",
                      "--no-stat", new, ok=range(256), timeout=self.timeout,
                      env={"GIT_REFLOG_ACTION": reflog})  # fmt: skip
            rc, why = res.rc, _first_lines(res)
        except OmpError as exc:
            rc, why = -1, exc.message
        self._wrote()
        return rc, why

    def run_hook(self, checkout: Path, name: str, args: Sequence[str], timeout: float) -> HookRun:
        """Run the user's hook `name` in `checkout` as git would (`git hook run`), for at most
        `timeout` seconds; what it did. Never raises for the hook's own failure."""
        import time

        t0 = time.monotonic()
        try:
            res = git(checkout, "hook", "run", "--ignore-missing", name, "--", *args,
                      ok=range(256), timeout=timeout)  # fmt: skip
        except OmpError as exc:
            status = "timed_out" if exc.detail.get("timedOut") else "failed"
            return HookRun(name, status, None, time.monotonic() - t0, exc.message[-400:])
        said = (res.err + res.out).decode("utf-8", "replace").strip()[-400:]
        status = "passed" if res.rc == 0 else "failed"
        return HookRun(name, status, res.rc, time.monotonic() - t0, said)

    def moved(self, branch: str, new: str, checkout: Path | None = None) -> None:
        """This handle moved `branch` to `new`: remember it there, and, when it fast-forwarded
        a `checkout` found clean just before, that the checkout is clean (a fast-forward of a
        clean checkout leaves it clean). Which branch is checked out where did not change;
        every other fact of refs is asked again."""
        self._wrote()
        self._refs[("resolve", HEADS + branch)] = new
        if checkout is not None:
            self._refs[("clean", str(checkout))] = True


def _first_lines(res: GitResult) -> str:
    return " ".join(res.err.decode("utf-8", "replace").strip().splitlines()[:3])


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None


def _busy_in(gitdir: Path, ref: str, branch: str, checked_out: bool) -> tuple[str, str] | None:
    """(operation, detail) holding `ref` in the worktree whose git directory is `gitdir`
    (`checked_out`: that worktree has the branch checked out)."""
    for sub in ("rebase-merge", "rebase-apply"):
        if sub == "rebase-apply" and (gitdir / sub / "applying").exists():
            continue  # an am, not a rebase: HEAD stays on its branch (below)
        if _read(gitdir / sub / "head-name") == ref:
            return "rebase", "is being rebased"
    start = _read(gitdir / "BISECT_START")
    if start is not None and start in (branch, ref):
        return "bisect", "is being bisected (git bisect reset returns to it)"
    if not checked_out:
        return None
    am = (gitdir / "rebase-apply" / "applying").exists()
    stopped = (
        ("MERGE_HEAD", "merge", "has a merge stopped on it"),
        ("CHERRY_PICK_HEAD", "cherry-pick", "has a cherry-pick stopped on it"),
        ("REVERT_HEAD", "revert", "has a revert stopped on it"),
        ("sequencer", "cherry-pick", "has a cherry-pick or revert sequence under way"),
        (
            "rebase-apply",
            "am" if am else "rebase",
            f"has {'git am' if am else 'a rebase'} under way",
        ),
        ("rebase-merge", "rebase", "has a rebase under way"),
    )
    for name, operation, detail in stopped:
        if os.path.lexists(gitdir / name):
            return operation, detail
    return None


def _worktree_of(gitdir: Path, common: Path) -> Path:
    """The checkout a worktree's git directory serves: the main one's is its parent; a linked
    one's `gitdir` file names the checkout's `.git` file."""
    if gitdir == common:
        return common.parent
    named = _read(gitdir / "gitdir")
    return Path(named).parent if named else gitdir
