"""Facts about a repository and its checkouts: is it one, its top, HEAD, branch, worktrees, and
which files have changes. Read-only: nothing here writes to the repository or its index."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.workspace.git import abspath, git, nul_fields

TYPE_CHECKING = False  # true for mypy: the lock's module loads only when a worktree changes
if TYPE_CHECKING:
    from omp.store.locks import flocked

HEADS = "refs/heads/"


def has_commit(path: str | os.PathLike[str]) -> bool:
    """True when `path` is inside a git work tree whose HEAD is a commit: the test for a team's
    default workspace (`worktree`, else `shared`). No git, no repository, an unborn branch or a
    bare repository all give False; nothing is raised."""
    try:
        res = git(
            path,
            "rev-parse",
            "--is-inside-work-tree",
            "--verify",
            "-q",
            "HEAD^{commit}",
            ok=(0, 1, 128),
        )
    except OmpError:
        return False
    lines = res.text.splitlines()
    return res.rc == 0 and len(lines) == 2 and lines[0] == "true"


def toplevel(path: str | os.PathLike[str]) -> Path:
    """The top of the work tree holding `path`; `not_a_git_repo` when there is none."""
    res = git(path, "rev-parse", "--show-toplevel", ok=(0, 128))
    if res.rc != 0 or not res.text:
        raise OmpError("not_a_git_repo", f"{path} is not inside a git work tree", path=str(path))
    return Path(res.text)


def common_dir(path: str | os.PathLike[str]) -> Path:
    """The repository's shared git directory (`.git` of the main checkout): refs, objects,
    `info/exclude` and `worktrees/` live there for every worktree."""
    res = git(path, "rev-parse", "--git-common-dir")
    return abspath(Path(path), res.text).resolve()


WORKTREES_LOCK = "omp-worktrees.lock"  # in the common git dir, beside git's `worktrees/`


class worktrees_locked:
    """`git worktree add|remove|prune|unlock` of one repository, one process at a time. git
    does not lock its list of worktrees (`.git/worktrees/`): parallel checks, each adding and
    removing a scratch checkout, see or prune one another's half-made entries ("could not open
    .git/worktrees/tree/gitdir"). Not reentrant: never nest it (a flock per open file)."""

    __slots__ = ("_lock", "_path", "_timeout")

    def __init__(self, path: str | os.PathLike[str], timeout: float = 120.0) -> None:
        self._path, self._timeout = path, timeout
        self._lock: flocked | None = None

    def __enter__(self) -> None:
        from omp.store.locks import flocked

        where = common_dir(self._path) / WORKTREES_LOCK
        lock = flocked(where, self._timeout, poll=0.02)
        if not lock.__enter__():
            lock.__exit__(None, None, None)
            raise OmpError(
                "git_failed",
                f"another omp process changed the worktrees of {self._path} for more than "
                f"{self._timeout:g} s ({where})",
            )
        self._lock = lock

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.__exit__(*exc)
        self._lock = None


def head(path: str | os.PathLike[str]) -> str | None:
    """The commit HEAD of the checkout at `path` names, or None on an unborn branch."""
    return resolve(path, "HEAD")


def resolve(path: str | os.PathLike[str], rev: str) -> str | None:
    """The full commit id `rev` names in the repository at `path`, or None."""
    if rev.startswith("-"):
        return None  # never let a name become an option
    res = git(
        path, "rev-parse", "--verify", "-q", "--end-of-options", f"{rev}^{{commit}}", ok=(0, 1, 128)
    )
    return res.text if res.rc == 0 and res.text else None


def current_branch(path: str | os.PathLike[str]) -> str | None:
    """The short name of the branch checked out at `path`, or None when HEAD is detached."""
    res = git(path, "symbolic-ref", "-q", "HEAD", ok=(0, 1))
    ref = res.text
    return ref[len(HEADS) :] if res.rc == 0 and ref.startswith(HEADS) else None


def branch_exists(path: str | os.PathLike[str], branch: str) -> bool:
    res = git(path, "show-ref", "--verify", "-q", HEADS + branch, ok=(0, 1))
    return res.rc == 0


def is_ancestor(path: str | os.PathLike[str], older: str, newer: str) -> bool:
    res = git(path, "merge-base", "--is-ancestor", older, newer, ok=(0, 1))
    return res.rc == 0


def merge_base(path: str | os.PathLike[str], a: str, b: str) -> str | None:
    """The best common ancestor of `a` and `b`, or None when they share no history."""
    res = git(path, "merge-base", "--end-of-options", a, b, ok=(0, 1))
    return res.text if res.rc == 0 and res.text else None


class WorktreeEntry(NamedTuple):
    """One block of `git worktree list --porcelain -z`."""

    path: Path
    head: str | None
    branch: str | None  # short name; None when detached or bare
    locked: str | None  # the lock reason ("" for a lock without one); None when not locked
    prunable: bool  # its directory is gone: `git worktree prune` would forget it
    bare: bool


def worktrees(path: str | os.PathLike[str]) -> list[WorktreeEntry]:
    """Every worktree of the repository at `path`, the main checkout first."""
    fields = nul_fields(git(path, "worktree", "list", "--porcelain", "-z").out)
    out: list[WorktreeEntry] = []
    cur: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in cur:
            ref = cur.get("branch")
            out.append(
                WorktreeEntry(
                    path=Path(cur["worktree"]),
                    head=cur.get("HEAD"),
                    branch=ref[len(HEADS) :] if ref and ref.startswith(HEADS) else None,
                    locked=cur.get("locked"),
                    prunable="prunable" in cur,
                    bare="bare" in cur,
                )
            )
        cur.clear()

    for field in [*fields, ""]:
        if not field:
            flush()
            continue
        key, _, value = field.partition(" ")
        cur[key] = value
    return out


def checkout_of(path: str | os.PathLike[str], branch: str) -> Path | None:
    """The worktree that has `branch` checked out, or None."""
    for entry in worktrees(path):
        if entry.branch == branch and not entry.prunable:
            return entry.path
    return None


class Changes(NamedTuple):
    """Uncommitted changes of a checkout, paths relative to its top (`status --porcelain=v1`)."""

    tracked: list[str]  # modified, added, deleted, conflicted: what a commit would carry
    untracked: list[str]  # untracked and not ignored (a whole new directory shows as `dir/`)

    @property
    def paths(self) -> list[str]:
        return [*self.tracked, *self.untracked]

    def __bool__(self) -> bool:
        return bool(self.tracked or self.untracked)


def changes(path: str | os.PathLike[str], *, untracked: bool = True) -> Changes:
    """What is uncommitted in the checkout at `path`.

    `--untracked-files=normal` overrides a `status.showUntrackedFiles=no` setting that would
    hide new files (work an agent made and never added); `--no-renames` makes every entry one
    path; `GIT_OPTIONAL_LOCKS=0` (in `git_env`) keeps the index as it is.
    """
    mode = "--untracked-files=normal" if untracked else "--untracked-files=no"
    res = git(
        path, "status", "--porcelain=v1", "-z", "--no-renames", mode, "--ignore-submodules=none"
    )
    tracked: list[str] = []
    new: list[str] = []
    for entry in nul_fields(res.out):
        code, name = entry[:2], entry[3:]
        (new if code == "??" else tracked).append(name)
    return Changes(tracked, new)


class Commit(NamedTuple):
    sha: str
    subject: str


def commits(path: str | os.PathLike[str], since: str, until: str) -> list[Commit]:
    """Commits reachable from `until` and not from `since`, newest first."""
    res = git(
        path,
        "log",
        "--no-show-signature",
        "--no-decorate",
        "--format=%H%x00%s%x00",
        f"{since}..{until}",
        "--",
    )
    parts = res.out.split(b"\0")
    out: list[Commit] = []
    for i in range(0, len(parts) - 1, 2):
        sha = parts[i].strip().decode("ascii", "replace")
        if sha:
            out.append(Commit(sha, parts[i + 1].decode("utf-8", "replace")))
    return out
