"""Workers' worktrees in a team's life: which workspace a launch or add-worker gives, making the
worktrees around the config write, and removing them only when nothing would be lost.

`plan` decides, touching nothing: `--workspace`, else (add-worker) the team's, else `[team]
workspace` of `.omp/config.toml`, else `worktree` in a git repository with a commit and `shared`
elsewhere. A worktree worker gets `omp/<team>/<worker>` from the leader's HEAD (the base,
recorded per worker and for the team), checked out under `omp.workspace.create.worktree_dir`
(outside the project: see docs/worktrees.md), its pane started in the same subdirectory the
leader launched from.

`provision` makes each worktree provisional (`omp.workspace.create.provisioned`) inside the
caller's `ExitStack`, which spans the panes and the config write: a failure unwinds it (the
worktrees and branches go), a crash leaves locks that `omp.workspace.create.recover_unfinished`
rolls back at the next launch, add-worker or prune.

`remove_safely` is what delete, prune and a failed launch use: a worktree and its branch go only
when the branch is merged (or has no commits) and the worktree is clean; `force` removes them
anyway and says what was thrown away.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.invocation import hint
from omp.record import workspace as ws
from omp.record.workspace import SHARED, WORKTREE, Worktree
from omp.store.paths import StatePaths


class Plan(NamedTuple):
    kind: str  # worktree | shared
    top: Path | None  # the git work tree of the leader's checkout (worktree only)
    base: str | None  # the leader's HEAD: every new branch starts here
    subdir: str  # the launch directory relative to `top` ("" for its top)
    carry: bool
    copy: tuple[str, ...]
    link: tuple[str, ...]
    under: Path | None  # where worktrees go (None: the default place)
    uncommitted: tuple[int, int]  # (tracked files, untracked files) the worktrees will lack
    verify: tuple[str, float] | None  # the team's check of completions

    @property
    def worktree(self) -> bool:
        return self.kind == WORKTREE

    def verify_json(self) -> dict[str, Any] | None:
        if self.verify is None:
            return None
        return {"command": self.verify[0], "timeout": self.verify[1]}

    def team_json(self) -> dict[str, Any]:
        """The team's record: its kind and, for worktrees, the base and the repository."""
        if not self.worktree:
            return {"kind": SHARED}
        return {"kind": WORKTREE, "base": self.base, "repo": str(self.top)}


def plan(
    project: StatePaths,
    cwd: Path,
    *,
    requested: str | None,
    team_default: str | None = None,
    carry: bool = False,
    verify: str | None = None,
    verify_timeout: float | None = None,
    under: Path | None = None,
) -> Plan:
    """Decide the workspace of new workers (see the module docstring). Reads only."""
    settings = ws.load_settings(project)
    kind = requested or team_default or settings.workspace
    from omp.workspace import repo

    if kind is None:
        kind = WORKTREE if repo.has_commit(cwd) else SHARED
    ws.kind(kind)
    cmd = settings.verify if verify is None else (verify.strip() or None)
    timeout = verify_timeout if verify_timeout is not None else settings.verify_timeout
    check = (cmd, ws.verify_timeout(timeout)) if cmd else None
    if kind == SHARED:
        if carry:
            raise OmpError(
                "invalid_input",
                "--carry-changes needs --workspace worktree (shared workers "
                "already see the leader's files)",
            )
        return Plan(SHARED, None, None, "", False, (), (), None, (0, 0), check)
    if not repo.has_commit(cwd):
        raise OmpError(
            "not_a_git_repo",
            f"--workspace worktree needs a git repository with at least one commit; {cwd} is "
            "not in one (or its branch has no commit yet). Commit once, or use --workspace "
            "shared",
            path=str(cwd),
        )
    top = repo.toplevel(cwd)
    base = repo.head(top)
    assert base is not None
    from omp.workspace import create

    for rel in (*settings.copy, *settings.link):
        create.safe_relpath(rel, top)  # unsafe_path before anything is made
    try:
        subdir = os.path.relpath(cwd.resolve(), top.resolve())
    except ValueError:
        subdir = ""
    subdir = "" if subdir == "." or subdir.startswith("..") else subdir
    counts = create.uncommitted_count(top)
    return Plan(
        WORKTREE, top, base, subdir, carry, settings.copy, settings.link, under, counts, check
    )


def path_for(p: Plan, team: str, worker: str) -> Path:
    from omp.workspace import create

    assert p.top is not None
    return create.worktree_dir(p.top, team, worker, under=p.under)


def pane_cwd(p: Plan, wt: Worktree) -> Path:
    """Where the worker's pane starts: the launch directory's place in its worktree."""
    where = Path(wt.path) / p.subdir if p.subdir else Path(wt.path)
    return where if where.is_dir() else Path(wt.path)


def _leftover(p: Plan, team: str, worker: str) -> tuple[Path, str] | None:
    from omp.workspace import create, repo

    assert p.top is not None
    path, branch = path_for(p, team, worker), create.branch_name(team, worker)
    if repo.branch_exists(p.top, branch) or os.path.lexists(path):
        return path, branch
    return None


def check_leftovers(p: Plan, team: str, workers: list[str]) -> list[tuple[Path, str]]:
    """Worktrees and branches an earlier run of this team left under the names these workers
    get. Nothing of them at risk: returned, for `clear_leftovers`. Work at risk: refused
    (`worktree_exists`), naming it and the ways on. Reads only."""
    if not p.worktree:
        return []
    from omp.workspace import remove

    assert p.top is not None
    clear: list[tuple[Path, str]] = []
    risky: list[str] = []
    for w in workers:
        found = _leftover(p, team, w)
        if found is None:
            continue
        path, branch = found
        try:
            risk = remove.at_risk(p.top, path, branch)
        except OmpError:
            risk = None
        if risk is None or risk:
            what = (
                f"{len(risk.commits)} unmerged commit(s), {len(risk.files)} uncommitted file(s)"
                if risk is not None
                else "its state cannot be read"
            )
            risky.append(f"{branch} at {path} ({what})")
        else:
            clear.append((path, branch))
    if risky:
        raise OmpError(
            "worktree_exists",
            f"an earlier run of team {team} left work in its worktrees: {'; '.join(risky)}. "
            f"Merge it ({hint(f'team merge {team}')}), or throw it away "
            f"({hint(f'team delete {team} --force')}), then launch again",
            team=team,
            worktrees=risky,
        )
    return clear


def clear_leftovers(p: Plan, leftovers: list[tuple[Path, str]]) -> None:
    """Remove what `check_leftovers` found safe to remove (merged, or without commits, and
    clean)."""
    from omp.workspace import remove

    assert p.top is not None
    for path, branch in leftovers:
        remove.remove_worktree(p.top, path, branch)


def provision(
    stack: contextlib.ExitStack[Any],
    p: Plan,
    team: str,
    workers: list[str],
    root: Path | None = None,
) -> dict[str, Worktree]:
    """Make each worker's worktree, provisional until `stack` closes without an exception
    (the caller writes the config inside it); rolled back when it closes with one."""
    if not p.worktree:
        return {}
    from omp.workspace import create

    assert p.top is not None and p.base is not None
    create.recover_unfinished(p.top)
    spec = create.Provision(p.copy, p.link)
    made: dict[str, Worktree] = {}
    for w in workers:
        created = stack.enter_context(
            create.provisioned(
                p.top,
                path_for(p, team, w),
                create.branch_name(team, w),
                p.base,
                carry=p.carry,
                spec=spec,
            )
        )
        wt = created.worktree
        create.mark_project(wt.path, root or p.top)  # omp run inside it finds the project
        made[w] = Worktree(str(wt.path), wt.branch, wt.base)
    return made


def entry_json(made: dict[str, Worktree], worker: str) -> dict[str, Any]:
    """A worker entry's `workspace`."""
    wt = made.get(worker)
    return wt.to_json() if wt is not None else {"kind": SHARED}


class Removal(NamedTuple):
    worker: str
    path: str
    branch: str
    removed: bool
    lost: dict[str, Any]  # {"commits": [...], "files": [...]} thrown away (force), or at risk
    why: str | None  # why it was kept
    host: str = ""  # its checkout is on that host: only the branch here was weighed and removed


def remove_safely(
    root: Path,
    items: list[tuple[str, Worktree]],
    *,
    force: bool = False,
    dry_run: bool = False,
    keep_branch: bool = False,
) -> list[Removal]:
    """Remove each worker's worktree (and branch, unless `keep_branch`) when nothing is at risk,
    or anyway with `force`; never raises for one worker (its row says why it stayed). The
    target a branch must be merged into is the leader's current branch."""
    from omp.workspace import remove, repo

    out: list[Removal] = []
    if not items:
        return out
    try:
        top = repo.toplevel(root)
    except OmpError as exc:
        return [Removal(w, wt.path, wt.branch, False, {}, exc.message) for w, wt in items]
    with contextlib.suppress(OmpError):
        remove.prune(top)  # worktrees whose directory vanished
    for w, wt in items:
        # a checkout on another host is never looked for here (its path may name anything
        # here): its branch is what this repository holds of it
        path = Path(wt.path) if not wt.host else None
        try:
            risk = remove.at_risk(top, path, wt.branch, keep_branch=keep_branch)
        except OmpError as exc:
            out.append(Removal(w, wt.shown, wt.branch, False, {}, exc.message, wt.host))
            continue
        if risk and not force:
            out.append(
                Removal(w, wt.shown, wt.branch, False, risk.to_json(), "unmerged work", wt.host)
            )
            continue
        if dry_run:
            out.append(Removal(w, wt.shown, wt.branch, False, risk.to_json(), None, wt.host))
            continue
        try:
            done = remove.remove_worktree(
                top, path, wt.branch, force=force, keep_branch=keep_branch
            )
        except OmpError as exc:
            out.append(Removal(w, wt.shown, wt.branch, False, risk.to_json(), exc.message, wt.host))
            continue
        out.append(Removal(w, wt.shown, wt.branch, True, done.lost.to_json(), None, wt.host))
    return out


def at_risk_error(team: str, kept: list[Removal], action: str) -> OmpError:
    """`unmerged_work` for a team whose worktrees hold work a removal would lose."""
    parts = []
    for r in kept:
        commits = len(r.lost.get("commits") or [])
        files = len(r.lost.get("files") or [])
        what = r.why if not (commits or files) else f"{commits} commit(s), {files} file(s)"
        parts.append(f"{r.worker} ({r.branch}: {what})")
    return OmpError(
        "unmerged_work",
        f"{action} team {team} would lose work in its worktrees: {'; '.join(parts)}. Merge it "
        f"({hint(f'team merge {team}')}), or add --force to throw it away",
        team=team,
        worktrees=[r._asdict() for r in kept],
    )
