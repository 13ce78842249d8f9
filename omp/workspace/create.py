"""Create a worker's worktree: its branch from a base commit, the leader's uncommitted diff if
asked, files copied and directories linked in. All or nothing: a failure removes what was made.

A new worktree is *provisional* until the caller has recorded it: `git worktree add --lock`
marks it with a lock whose reason names the creating process. `finalize` unlocks it once the
caller's own record (the team's config) is written; if the process dies in between,
`recover_unfinished` (run by the next launch, add-worker or prune) finds the lock of a dead
process and removes the worktree and its branch. Git's own worktree list is the journal: no
file of ours can disagree with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from omp import procs
from omp.errors import OmpError
from omp.store.fs import IGNORE_ALL, write_gitignore
from omp.store.names import team_name, worker_name
from omp.store.paths import StatePaths
from omp.workspace.git import abspath, git, nul_fields
from omp.workspace.repo import (
    HEADS,
    branch_exists,
    changes,
    common_dir,
    resolve,
    toplevel,
    worktrees,
    worktrees_locked,
)

BRANCH_PREFIX = "omp"
OMP_DIR, WORKTREES = ".omp", "worktrees"
PROVISIONING = "omp provisioning"
EXCLUDE_HEADER = "# omp: copied or linked into workers' worktrees (worktree.copy/link)"


def branch_name(team: str, worker: str) -> str:
    """`omp/<team>/<worker>`, refused with `invalid_branch` when git would not take it
    (omp names allow `a..b` or `x.lock`, git refs do not)."""
    name = f"{BRANCH_PREFIX}/{team_name(team)}/{worker_name(worker)}"
    res = git(None, "check-ref-format", "--branch", name, ok=(0, 1, 128))
    if res.rc != 0:
        raise OmpError("invalid_branch", f"{name!r} is not a valid git branch name", branch=name)
    return name


def worktrees_dir(root: Path) -> Path:
    """The alternative place for worktrees, inside the project: `<project>/.omp/worktrees/`
    (deleted with it, on its file system, beside its state), and ignored: `.omp/` holds a
    `.gitignore` of `*`, and so does this directory (for a `.omp/` omp did not create). `git
    status`, ruff and ripgrep honour the `.gitignore`; pytest skips dot-directories by default.
    Tools that do neither still see it: pytest with a project's own `norecursedirs`, vitest and
    jest, which would collect every worker's copy of the tests. Hence the default is
    `outside_worktrees_dir`."""
    return root / OMP_DIR / WORKTREES


def outside_worktrees_dir(root: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where workers' worktrees live by default: outside the project, where no tool run from
    its root can see them, `$XDG_STATE_HOME/omp/worktrees/<project name>-<hash of its path>/`
    (default `~/.local/state`). Not a cache directory: a worktree holds uncommitted work."""
    src = os.environ if env is None else env
    state = src.get("XDG_STATE_HOME") or os.path.join(src.get("HOME") or "~", ".local", "state")
    real = os.path.realpath(root)
    tag = hashlib.sha256(os.fsencode(real)).hexdigest()[:10]
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in os.path.basename(real))
    return Path(os.path.expanduser(state)) / "omp" / WORKTREES / f"{name or 'root'}-{tag}"


def worktree_dir(root: Path, team: str, worker: str, *, under: Path | None = None) -> Path:
    """`<worktrees dir>/<team>/<worker>`: under `outside_worktrees_dir(root)`, or `under`."""
    return (under or outside_worktrees_dir(root)) / team_name(team) / worker_name(worker)


IGNORE_WORKTREES = b"# omp: nothing in here belongs in the repository\n*\n"


def ensure_worktrees_dir(root: Path) -> Path:
    """Create `.omp/worktrees/` through the state tree's own door (which refuses symlinks and
    foreign owners), with a `.gitignore` of `*` in it, and in a `.omp/` made here (the state
    tree gives a `.omp/` it creates one as well; whoever comes first writes it).

    Both are required here (`storage_error` when they cannot be written), unlike the state
    tree's best-effort one: without them every worker's checkout shows in the leader's `git
    status`, and an agent's `git add -A` there would take it in as an embedded repository.
    This runs before each worktree is made in here, so a failure refuses the worktree."""
    where = worktrees_dir(root)
    omp_dir = root / OMP_DIR
    fresh = _made_here(omp_dir)
    StatePaths(root).ensure(where)
    try:
        if fresh:
            write_gitignore(omp_dir, IGNORE_ALL, required=True)
        write_gitignore(where, IGNORE_WORKTREES, required=True)
    except OmpError:
        if fresh:  # refused: what this call made goes with it (each only if still empty)
            for made in (where, omp_dir):
                with contextlib.suppress(OSError):
                    os.rmdir(made)
        raise
    return where


def _made_here(omp_dir: Path) -> bool:
    """Whether `.omp/` is (to be) omp's own for the worktrees: absent, or holding only an empty
    `worktrees/` with no `.gitignore` beside it (what a call refused for a full disk left, if
    its clean-up could not remove it). A `.omp/` of the user's keeps its settings visible."""
    try:
        return os.listdir(omp_dir) == [WORKTREES] and not os.listdir(omp_dir / WORKTREES)
    except FileNotFoundError:
        return not os.path.lexists(omp_dir)  # (a dangling symlink: the state tree refuses it)
    except OSError:
        return False


class Provision(NamedTuple):
    """`[worktree] copy` and `link` of `.omp/config.toml`: paths relative to the project top."""

    copy: tuple[str, ...] = ()
    link: tuple[str, ...] = ()


NOTHING = Provision()


class Worktree(NamedTuple):
    repo: Path  # the leader's checkout (its top)
    path: Path
    branch: str
    base: str  # the commit the branch started from


class Provisioned(NamedTuple):
    copied: list[str]
    linked: list[str]
    missing: list[str]  # listed but absent in the leader's checkout: nothing to copy or link
    present: list[str]  # already in the new checkout (tracked): left as the commit has it
    excluded: list[str]  # added to the repository's `info/exclude` (see `provision`)


class Created(NamedTuple):
    worktree: Worktree
    carried: list[str]  # tracked files whose uncommitted changes were applied
    provisioned: Provisioned


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
    except ValueError:
        return False
    return True


def safe_relpath(rel: str, top: Path) -> str:
    """`rel` normalised, refused with `unsafe_path` when it is absolute, leaves `top`, names
    `.git`, or goes through a symlink out of `top`."""
    norm = os.path.normpath(rel) if rel else ""
    parts = Path(norm).parts
    if not norm or norm == "." or os.path.isabs(norm) or ".." in parts or ".git" in parts:
        raise OmpError(
            "unsafe_path", f"refusing {rel!r}: not a path inside the repository", path=rel
        )
    real_top = top.resolve()
    if not _inside((top / norm).parent.resolve(), real_top):
        raise OmpError("unsafe_path", f"refusing {rel!r}: it leads out of the repository", path=rel)
    return norm


def uncommitted_count(repo: Path) -> tuple[int, int]:
    """(tracked files with uncommitted changes, untracked files) of the leader's checkout: what a
    new worktree will not have (launch says so in one line; `carry_changes` brings the first)."""
    found = changes(repo)
    return len(found.tracked), len(found.untracked)


def carry_changes(leader: Path, worktree: Path) -> list[str]:
    """Apply the leader's uncommitted changes to tracked files (staged or not, against its
    HEAD) to `worktree`; the paths carried. Binary-safe; prefixes given explicitly so a user's
    `diff.noprefix` or textconv cannot change the patch. `carry_failed` when it does not apply
    (the worktree's base is not the leader's HEAD and they differ there)."""
    names = nul_fields(
        git(
            leader, "diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=all", "HEAD"
        ).out
    )
    if not names:
        return []
    patch = git(
        leader,
        "diff",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--ignore-submodules=all",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "HEAD",
    ).out
    try:
        git(worktree, "apply", "--whitespace=nowarn", "-", input=patch)
    except OmpError as exc:
        raise OmpError(
            "carry_failed",
            f"the leader's uncommitted changes do not apply to {worktree}: {exc.message}",
            files=names,
        ) from exc
    return names


def _exclude_pattern(rel: str) -> str:
    escaped = "".join("\\" + c if c in "\\*?[" else c for c in rel)
    if escaped[:1] in ("#", "!"):
        escaped = "\\" + escaped
    return "/" + escaped


def _exclude(worktree: Path, rels: Sequence[str]) -> list[str]:
    """Keep copied and linked paths out of commits: those git would not ignore by itself (a
    symlinked `node_modules` does not match `node_modules/`, which matches directories only)
    go into the repository's `info/exclude`, anchored. That file is shared by every worktree
    and is the repository's own, not the user's `.gitignore`."""
    if not rels:
        return []
    listing = b"".join(os.fsencode(r) + b"\0" for r in rels)
    res = git(worktree, "check-ignore", "-z", "--stdin", input=listing, ok=(0, 1))
    ignored = set(nul_fields(res.out))
    todo = [r for r in rels if r not in ignored]
    if not todo:
        return []
    info = common_dir(worktree) / "info"
    info.mkdir(exist_ok=True)
    exclude = info / "exclude"
    try:
        old = exclude.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        old = ""
    have = set(old.splitlines())
    lines = [_exclude_pattern(r) for r in todo if _exclude_pattern(r) not in have]
    if lines:
        head = [] if EXCLUDE_HEADER in have else [EXCLUDE_HEADER]
        sep = "" if not old or old.endswith("\n") else "\n"
        with open(exclude, "a", encoding="utf-8", errors="surrogateescape") as f:
            f.write(sep + "\n".join([*head, *lines]) + "\n")
    return todo


def provision(leader: Path, worktree: Path, spec: Provision) -> Provisioned:
    """Copy `spec.copy` and symlink `spec.link` from the leader's checkout into `worktree`.

    A link points at the leader's path (absolute), so a `node_modules` or `.venv` is shared, not
    copied. A path absent in the leader is reported, not an error; one the new checkout already
    has (tracked) is left alone. Every path is checked first (`safe_relpath`): nothing is made
    unless all are safe.
    """
    copies = [safe_relpath(r, leader) for r in spec.copy]
    links = [safe_relpath(r, leader) for r in spec.link]
    for rel in [*copies, *links]:
        safe_relpath(rel, worktree)
    copied: list[str] = []
    linked: list[str] = []
    missing: list[str] = []
    present: list[str] = []
    for rel, is_link in [*((c, False) for c in copies), *((lk, True) for lk in links)]:
        src, dst = leader / rel, worktree / rel
        if not os.path.lexists(src):
            missing.append(rel)
            continue
        if os.path.lexists(dst):
            present.append(rel)
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if is_link:
            os.symlink(src, dst)
            linked.append(rel)
        elif src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dst, symlinks=True)
            copied.append(rel)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
            copied.append(rel)
    excluded = _exclude(worktree, [*copied, *linked])
    return Provisioned(copied, linked, missing, present, excluded)


def lock_reason(base: str) -> str:
    """The lock reason of a provisional worktree: this process (pid and start time) and the
    commit it starts from."""
    pid = os.getpid()
    return f"{PROVISIONING} pid={pid} start={procs.start_of(pid) or 0} base={base}"


def _parse_reason(reason: str) -> dict[str, str] | None:
    if not reason.startswith(PROVISIONING + " "):
        return None
    return dict(w.split("=", 1) for w in reason[len(PROVISIONING) + 1 :].split() if "=" in w)


def create_worktree(
    repo: Path,
    path: Path,
    branch: str,
    base: str,
    *,
    carry: bool = False,
    spec: Provision = NOTHING,
) -> Created:
    """Make `branch` at `base` checked out at `path`, provisional (locked) until `finalize`.

    Refused before anything is made: `worktree_exists` (the branch or a non-empty `path`),
    `unknown_revision` (`base`), `unsafe_path` (a copy or link entry). Any failure after
    `git worktree add` removes the worktree and the branch again and re-raises.
    """
    top = toplevel(repo)
    commit = resolve(top, base)
    if commit is None:
        raise OmpError("unknown_revision", f"{base!r} is not a commit in {top}", revision=base)
    for rel in [*spec.copy, *spec.link]:
        safe_relpath(rel, top)
    if branch_exists(top, branch):
        raise OmpError("worktree_exists", f"branch {branch} already exists", branch=branch)
    if os.path.lexists(path) and (not path.is_dir() or path.is_symlink() or any(path.iterdir())):
        raise OmpError("worktree_exists", f"{path} already exists", path=str(path))
    path = path.absolute()
    if _inside(path, worktrees_dir(top)):
        ensure_worktrees_dir(top)
    elif _inside(path, worktrees_dir(repo.absolute())):
        ensure_worktrees_dir(repo.absolute())
    path.parent.mkdir(parents=True, exist_ok=True)
    wt = Worktree(top, path, branch, commit)
    reason = lock_reason(commit)
    added = False
    try:
        # A failing post-checkout hook fails `worktree add` after it made the branch and the
        # worktree: the lock with our reason says they are ours to roll back.
        with worktrees_locked(top):
            git(top, "worktree", "add", "-q", "--lock", "--reason", reason, "-b", branch,
                str(path), commit)  # fmt: skip
        added = True
        carried = carry_changes(top, path) if carry else []
        provisioned = provision(top, path, spec)
    except BaseException:
        if added or _locked_by(top, path, reason):
            rollback(wt)
        raise
    return Created(wt, carried, provisioned)


def _locked_by(top: Path, path: Path, reason: str) -> bool:
    with contextlib.suppress(OmpError):
        return any(
            e.path.resolve() == path.resolve() and e.locked == reason for e in worktrees(top)
        )
    return False


def mark_project(worktree: Path, root: Path) -> None:
    """Write `root` into the worktree's own git directory (`omp.store.paths.PROJECT_MARK`),
    where omp run inside the worktree finds the project it works for. Never in the checkout:
    nothing of it can be committed; git removes it with the worktree."""
    from omp.store.paths import PROJECT_MARK

    gitdir = abspath(worktree, git(worktree, "rev-parse", "--git-dir").text)
    (gitdir / PROJECT_MARK).write_text(str(root) + "\n", encoding="utf-8")


def ensure_project_mark(worktree: Path, root: Path) -> bool:
    """`mark_project` unless the mark already names `root`; True when it wrote. A worktree
    checked out again by hand (`git worktree add -f` after its directory was deleted) has a
    new git directory, without the mark."""
    from omp.store.paths import PROJECT_MARK

    gitdir = abspath(worktree, git(worktree, "rev-parse", "--git-dir").text)
    try:
        if (gitdir / PROJECT_MARK).read_text(encoding="utf-8").strip() == str(root):
            return False
    except (OSError, UnicodeDecodeError):
        pass
    (gitdir / PROJECT_MARK).write_text(str(root) + "\n", encoding="utf-8")
    return True


def finalize(wt: Worktree) -> None:
    """The caller has recorded the worktree: it is a worker's now, no longer provisional."""
    with worktrees_locked(wt.repo):
        git(wt.repo, "worktree", "unlock", str(wt.path))


def rollback(wt: Worktree) -> None:
    """Remove a provisional worktree and its branch (the branch only while it has no commits
    beyond its base: nothing anyone made is deleted; none for a detached scratch worktree,
    `branch` ""). Safe to call twice."""
    with worktrees_locked(wt.repo):
        # unlocked first: `worktree prune` keeps a locked entry whose directory is gone forever
        git(wt.repo, "worktree", "unlock", str(wt.path), ok=(0, 128))
        with contextlib.suppress(OmpError):
            git(wt.repo, "worktree", "remove", "--force", "--force", str(wt.path))
        if os.path.lexists(wt.path) and not (wt.path / ".git").exists():
            # git refused or never got as far as registering it: what is there is ours alone
            shutil.rmtree(wt.path, ignore_errors=True)
        git(wt.repo, "worktree", "prune")
    tip = resolve(wt.repo, HEADS + wt.branch) if wt.branch else None
    if tip is not None and tip == wt.base:
        git(wt.repo, "branch", "-D", "-q", wt.branch, ok=(0, 1))


@contextlib.contextmanager
def provisioned(
    repo: Path,
    path: Path,
    branch: str,
    base: str,
    *,
    carry: bool = False,
    spec: Provision = NOTHING,
) -> Iterator[Created]:
    """`create_worktree`, then the caller's block (record it), then `finalize`; an exception in
    the block rolls the worktree back. A process killed inside the block leaves the lock for
    `recover_unfinished`."""
    created = create_worktree(repo, path, branch, base, carry=carry, spec=spec)
    try:
        yield created
    except BaseException:
        rollback(created.worktree)
        raise
    finalize(created.worktree)


def recover_unfinished(repo: Path) -> list[Worktree]:
    """Roll back every provisional worktree whose creating process is gone (it died between
    creating the worktree and recording it). Those of live processes are left alone."""
    top = toplevel(repo)
    done: list[Worktree] = []
    for entry in worktrees(top):
        fields = _parse_reason(entry.locked or "")
        if fields is None:
            continue
        try:
            pid, start = int(fields.get("pid", "0")), int(fields.get("start", "0"))
        except ValueError:
            continue
        if procs.running(pid, start or None):
            continue
        wt = Worktree(top, entry.path, entry.branch or "", fields.get("base", ""))
        rollback(wt)
        done.append(wt)
    return done
