"""`omp team delete` and `omp team prune`: state that goes away, never unread mail by surprise.

Removal is two steps. First the directory is renamed to a hidden tombstone beside the teams
(`team/.tomb-<name>-<random>`), one atomic rename: a reader sees the whole team or no team, never
half of one, and a name that starts with a dot is never a team name. Then the tombstone is removed.
A process killed between the two leaves only a tombstone, which the next `delete` or `prune`
finishes first thing. An archived run (`runs/<label>/`) goes the same way.

Mail outranks tidiness (pi peers learned it by deleting a queued letter): a team whose mailboxes
hold unread mail is refused, by `delete` and skipped by `prune`, unless `--force`, and then what is
lost is listed. A mailbox omp refuses to read is "cannot tell", which counts as unread. What is
lost is counted after the rename and after every mailbox's lock was taken once (`_take_away`): a
sender that got in before the rename has finished and is counted, one after it finds the team
gone (`omp.mail.mailbox.Mailbox._writing`). A team with a live pane is refused even with
`--force`: shut it down first. Whatever process of the team outlived its panes (an agent that
`setsid`'d) is ended before its state goes (`omp.procs`), so it sends nothing more.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock, procs
from omp.errors import OmpError
from omp.invocation import team_command
from omp.mail.mailbox import Mailbox
from omp.record import config as team_config
from omp.store import fs, locks
from omp.store.names import is_valid_name
from omp.store.paths import TOMB_PREFIX, StatePaths, TeamPaths, recipient_of_mailbox

DEFAULT_OLDER_THAN = "7d"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")
Remover = Callable[[Path], None]

if TYPE_CHECKING:
    from omp.store.backend import Store


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `12h`, `7d`, `2w`, or bare seconds; `invalid_input` otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if m is None:
        raise OmpError(
            "invalid_input",
            f"--older-than takes a duration like 30m, 12h, 7d or 2w (or 0 for all), got {text!r}",
        )
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


# ---- measuring and removing -----------------------------------------------------------------


def tree_bytes(path: Path) -> int:
    """Bytes of the files under `path` (a symlink counts as itself, never followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(path, followlinks=False):
        for n in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                continue
    return total


# How long a removal keeps at a tombstone that changes under it (see `_rmtree`).
SETTLE_SECONDS = 5.0


def _rmtree(path: Path) -> None:
    """`shutil.rmtree`, again while the tree changes under it.

    A writer whose path lookup passed the team's name just before the rename may still create
    (or rename) one entry inside the tombstone a moment later: a worker's heartbeat, written
    beside itself and renamed into place (seen under load: `Directory not empty`, or an entry
    gone between the listing and its unlink). No one finds a tombstone by name, so such
    stragglers are few and finish at once; the removal goes on until they have.
    """
    import errno
    import time

    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            if not os.path.lexists(path):
                raise  # the tombstone itself is gone: `_remove` says a concurrent removal did it
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
        if time.monotonic() >= deadline:
            shutil.rmtree(path)  # the last try: its error is the answer
            return
        time.sleep(0.01)


def tombstone(project: StatePaths, src: Path, kind: str, team: str) -> Path:
    """Rename `src` to a fresh hidden tombstone in the teams directory (atomic, same fs).

    `.tomb-<kind>~<team>~<random>`: `~` is in no team name, so the team is recoverable from it.
    """
    project.ensure(project.teams)
    for _ in range(8):
        dest = project.tombstone(kind, team, os.urandom(4).hex())
        if os.path.lexists(dest):
            continue
        try:
            os.rename(src, dest)
        except OSError as exc:
            raise fs.storage_error(src, exc) from exc
        return dest
    raise OmpError("storage_error", f"no free tombstone name for {src}")  # pragma: no cover


def tombstones(project: StatePaths, team: str | None = None) -> list[Path]:
    """Tombstones left by interrupted removals (of one team's directory, if `team`)."""
    names = team_config.team_dir_entries(project)
    want = f"{TOMB_PREFIX}team~{team}~" if team is not None else TOMB_PREFIX
    return [project.teams / n for n in names if n.startswith(want)]


def finish_tombstones(
    project: StatePaths,
    *,
    team: str | None = None,
    remove: Remover = _rmtree,
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """Remove what an interrupted delete or prune left; returns what was (or would be) removed."""
    done: list[dict[str, Any]] = []
    for tomb in tombstones(project, team):
        kind, _, rest = tomb.name[len(TOMB_PREFIX) :].partition("~")
        entry = {
            "kind": "tombstone",
            "of": kind,
            "team": rest.rpartition("~")[0],
            "path": str(tomb),
            "bytes": tree_bytes(tomb),
        }
        if not dry_run:
            _remove(tomb, remove)
        done.append(entry)
    return done


def _remove(path: Path, remove: Remover) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            remove(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass  # a concurrent delete or prune finished it
    except OSError as exc:
        raise OmpError(
            "storage_error",
            f"could not remove {path}: {exc.strerror}; it is hidden from every reader, and the "
            "next `omp team delete` or `omp team prune` finishes it",
            path=str(path),
        ) from exc


# ---- what a removal would lose ----------------------------------------------------------------

# How long a removal waits for a sender that holds a mailbox's lock to finish its append.
DRAIN_SECONDS = 10.0


def _cannot_tell(recipient: str | None, err: Exception, run: str | None) -> dict[str, Any]:
    """A mailbox (or a directory of them) omp will not read: it may hold unread mail, so it counts
    as unread (`unread` None: how much is unknown)."""
    why = f"{err.code}: {err.message}" if isinstance(err, OmpError) else f"{err}"
    entry: dict[str, Any] = {
        "recipient": recipient or "*",
        "unread": None,
        "from": [],
        "messageIds": [],
        "cannotTell": why,
    }
    if run is not None:
        entry["run"] = run
    return entry


def _unread_in(box_owner: TeamPaths, run: str | None) -> list[dict[str, Any]]:
    """Unread mail per mailbox; a mailbox omp refuses to read (unsafe, unreadable) is "cannot
    tell", never "none": a removal treats it as unread."""
    out: list[dict[str, Any]] = []
    try:
        if not box_owner.project.check(box_owner.mailbox_dir):
            return []
        files = sorted(os.listdir(box_owner.mailbox_dir))
    except (OSError, OmpError) as exc:
        return [_cannot_tell(None, exc, run)]
    for f in files:
        name = recipient_of_mailbox(f)
        if name is None or not is_valid_name(name):
            continue  # no member's mail: omp never writes such a name
        try:
            msgs, _ = Mailbox(box_owner, name).undelivered()
        except (OSError, OmpError) as exc:
            out.append(_cannot_tell(name, exc, run))
            continue
        if msgs:
            entry: dict[str, Any] = {
                "recipient": name,
                "unread": len(msgs),
                "from": sorted({str(m.get("from")) for m in msgs}),
                "messageIds": [m["id"] for m in msgs],
            }
            if run is not None:
                entry["run"] = run
            out.append(entry)
    return out


def _stored_unread(store: Store, team: str, recipients: list[str]) -> list[dict[str, Any]]:
    """`_unread_in` for a team whose mail is in the store (`omp.mail.stored`)."""
    out: list[dict[str, Any]] = []
    for name in recipients:
        msgs = store.undelivered(team, name)
        if msgs:
            out.append(
                {
                    "recipient": name,
                    "unread": len(msgs),
                    "from": sorted({str(m.get("from")) for m in msgs}),
                    "messageIds": [m["id"] for m in msgs],
                }
            )
    return out


def run_mail(team: TeamPaths, run: Path) -> list[dict[str, Any]]:
    """Unread mail an archived run holds (a relaunch moves the leader's mail of the last run
    into `runs/<time>/mailbox/`). Read-only."""
    return _unread_in(TeamPaths(team.project, run), run.name)


def unread_mail(team: TeamPaths) -> list[dict[str, Any]]:
    """Per mailbox with undelivered messages, the team's own and its archived runs': recipient,
    count, ids and senders (and `run` for a run's); a mailbox, or a directory of them, that omp
    cannot read is listed with `cannotTell` (why) and `unread` None. Read-only."""
    out = _unread_in(team, None)
    try:
        runs = _run_dirs(team)
    except (OSError, OmpError) as exc:
        return [*out, _cannot_tell(None, exc, "*")]
    for run in runs:
        out += run_mail(team, run)
    return out


def _drain(team: TeamPaths, wait: float) -> list[dict[str, Any]]:
    """Wait until no sender holds the lock of any of the team's mailboxes: one that checked the
    team before it was renamed away finishes its append, and is counted. A lock still held after
    `wait` seconds makes that mailbox "cannot tell"."""
    try:
        if not team.project.check(team.mailbox_dir):
            return []
        files = sorted(os.listdir(team.mailbox_dir))
    except (OSError, OmpError):
        return []  # unread_mail reports it
    busy: list[dict[str, Any]] = []
    for f in files:
        name = recipient_of_mailbox(f)
        if name is None or not is_valid_name(name):
            continue
        try:
            fd = fs.open_file(team.mailbox(name), os.O_RDONLY)
        except (OSError, OmpError):
            continue  # unread_mail reports it
        try:
            if not locks.acquire(fd, wait):
                busy.append(
                    _cannot_tell(name, OSError(f"a writer held its lock for {wait:g} s"), None)
                )
        finally:
            os.close(fd)  # releases the flock
    return busy


def _take_away(
    project: StatePaths, team: TeamPaths, *, force: bool, remove: Remover
) -> list[dict[str, Any]]:
    """Remove a team's directory and return the unread mail that went with it.

    Rename it to a tombstone (no reader, no writer finds it any more), wait for every sender that
    got in before (`_drain`), then count what it holds: that count is exact, because a sender
    checks under its mailbox's lock that the team is still there. Without `force`, a team that
    got mail in the meantime is put back and refused (`unread_mail`): never lost silently."""
    tomb = tombstone(project, team.dir, "team", team.name)
    gone = TeamPaths(project, tomb)
    lost = _drain(gone, DRAIN_SECONDS) + unread_mail(gone)
    for e in lost:
        if "cannotTell" in e:
            e["cannotTell"] = e["cannotTell"].replace(str(tomb), str(team.dir))
    if lost and not force:
        try:
            os.rename(tomb, team.dir)
        except OSError as exc:
            raise OmpError(
                "storage_error",
                f"team {team.name} got mail while it was being deleted, and could not be put "
                f"back ({exc.strerror}); it is at {tomb}: move it back by hand before the next "
                "`omp team delete` or `omp team prune`",
                team=team.name,
                path=str(tomb),
            ) from exc
        raise _unread_error(team.name, lost)
    _remove(tomb, remove)
    return lost


def _unread_error(name: str, lost: list[dict[str, Any]]) -> OmpError:
    return OmpError(
        "unread_mail",
        f"team {name} has unread mail ({_lost_text(lost)}); read it first, or delete with "
        "--force to lose it",
        team=name,
        unread=lost,
    )


def live_panes(cfg: team_config.TeamConfig) -> list[dict[str, str]]:
    """Workers whose pane is alive (or cannot be proven otherwise) right now."""
    from omp.mail.panes import pane_views

    views = pane_views(cfg)
    return [
        {"worker": w, "pane": str(cfg.pane_of(w)), "state": v.state}
        for w, v in views.items()
        if v.state in ("alive", "unknown")
    ]


def _lost_text(lost: list[dict[str, Any]]) -> str:
    return ", ".join(
        f"{e['recipient']}{' (run ' + e['run'] + ')' if e.get('run') else ''} "
        + (f"{e['unread']}" if e.get("unread") is not None else f"cannot tell: {e['cannotTell']}")
        for e in lost
    )


# ---- delete -----------------------------------------------------------------------------------


def delete(
    project: StatePaths, name: str, *, force: bool = False, remove: Remover = _rmtree
) -> dict[str, Any]:
    """Delete one team: checks, tombstone, removal. See the module docstring."""
    team = project.team(name)
    if not os.path.lexists(team.dir) and tombstones(project, name):
        # The last delete of this team was interrupted after its rename: finish it.
        finished = finish_tombstones(project, team=name, remove=remove)
        size = sum(int(e["bytes"]) for e in finished)
        return {"ok": True, "team": name, "bytes": size, "lost": [], "finished": finished}
    cfg = team_config.load(team)  # unknown_team / invalid_config before anything moves
    alive = live_panes(cfg)
    if alive:
        panes = ", ".join(f"{a['worker']} ({a['pane']}, {a['state']})" for a in alive)
        raise OmpError(
            "team_alive",
            f"team {name} still has live panes: {panes}; shut it down first: "
            f"{team_command(cfg.raw)} team shutdown {name}",
            team=name,
            panes=alive,
        )
    from omp.team.setup import selected_store

    store = selected_store(project)
    lost = unread_mail(team) + (_stored_unread(store, name, cfg.recipients) if store else [])
    if lost and not force:
        raise _unread_error(name, lost)
    gone = _worktrees_first(cfg, force=force)
    ended = _end_leftovers(team)
    finished = finish_tombstones(project, remove=remove)
    size = tree_bytes(team.dir)
    lost = _take_away(project, team, force=force, remove=remove)
    if store is not None:
        # the team's mail and tasks in the store go with it (a writer is refused from the
        # moment the store forgets the team, before its keys go)
        lost += _stored_unread(store, name, cfg.recipients)
        store.drop_team(name)
    return {
        "ok": True,
        "team": name,
        "bytes": size,
        "lost": lost,
        "finished": finished,
        "endedProcesses": ended.found,
        **({"processesLeft": ended.left} if ended.left else {}),
        "worktrees": gone,
    }


def _end_leftovers(team: TeamPaths) -> procs.Ended:
    """End the team's processes that outlived its panes: nothing of it keeps running."""
    from omp.team.shutdown import team_match

    return procs.terminate(procs.collect([], team_match(team)))


def _worktrees_first(
    cfg: team_config.TeamConfig, *, force: bool, dry_run: bool = False
) -> list[dict[str, Any]]:
    """Remove the team's worktrees and branches before its directory (which records them):
    only when each is merged (or has no commits) and clean; else `unmerged_work`, naming what
    would be lost, unless `force`, which removes them and lists what was thrown away."""
    from omp.record.workspace import worktrees as recorded
    from omp.team import worktrees

    items = [(w, wt) for w, wt, _gone in recorded(cfg.raw)]
    from omp.backlog.worktrees import task_items

    items += task_items(cfg)  # a backlog's task worktrees not merged (and removed) yet
    if not items:
        return []
    root = cfg.paths.project.root
    if not force:
        kept = [r for r in worktrees.remove_safely(root, items, dry_run=True) if r.why]
        if kept:
            raise worktrees.at_risk_error(cfg.name, kept, "deleting")
    if dry_run:
        return [r._asdict() for r in worktrees.remove_safely(root, items, dry_run=True)]
    done = worktrees.remove_safely(root, items, force=force)
    kept = [r for r in done if not r.removed]
    if kept:
        raise worktrees.at_risk_error(cfg.name, kept, "deleting")
    return [r._asdict() for r in done]


# ---- prune ------------------------------------------------------------------------------------


def _age(record: Path, fallback: Path, now: float) -> float:
    try:
        obj = fs.read_json(record) if os.path.lexists(record) else None
    except OmpError as exc:  # damaged: its age is the directory's, as for a team without one
        if exc.code != "corrupt_state":
            raise
        obj = None
    at = clock.parse_iso(str(obj.get("shutdownAt"))) if isinstance(obj, dict) else None
    if at is None:
        try:
            at = os.lstat(fallback).st_mtime
        except OSError:
            at = now
    return max(0.0, now - at)


def _run_dirs(team: TeamPaths) -> list[Path]:
    """The team's archived runs; `unsafe_path` or OSError when `runs/` cannot be read."""
    runs = team.runs_dir
    if not team.project.check(runs):
        return []
    return [team.run(n).dir for n in sorted(os.listdir(runs)) if not n.startswith(".")]


def _runs(team: TeamPaths) -> list[Path]:
    try:
        return _run_dirs(team)
    except (OSError, OmpError):
        return []  # nothing of them is pruned: nothing is lost


def prune(
    project: StatePaths,
    *,
    older_than: float,
    dry_run: bool = False,
    force: bool = False,
    now: float | None = None,
    remove: Remover = _rmtree,
) -> dict[str, Any]:
    """Archived runs and shut-down teams older than `older_than` seconds; never unread mail
    unless `force`. Returns what was removed (or would be, with `dry_run`) and what was kept."""
    t = clock.now() if now is None else now
    removed = finish_tombstones(project, remove=remove, dry_run=dry_run)
    forgotten = [] if dry_run else _forget_vanished(project)
    kept: list[dict[str, Any]] = []
    for name in team_config.list_teams(project):
        team = project.team(name)
        if os.path.lexists(team.shutdown):
            age = _age(team.shutdown, team.shutdown, t)
            if age >= older_than:
                whole, why = _prune_team(
                    project, team, age, force=force, dry_run=dry_run, rm=remove
                )
                (removed if why is None else kept).append(whole)
                if why is None:
                    continue  # its runs went with it
        for run in _runs(team):
            age = _age(TeamPaths(project, run).shutdown, run, t)
            if age < older_than:
                continue
            entry: dict[str, Any] = {
                "kind": "run",
                "team": name,
                "path": str(run),
                "ageSeconds": round(age),
                "bytes": tree_bytes(run),
            }
            lost = run_mail(team, run)
            if lost:
                entry["unread"] = lost
                if not force:
                    entry["why"] = f"unread mail ({_lost_text(lost)}); --force loses it"
                    kept.append(entry)
                    continue
                entry["lost"] = lost
            if not dry_run:
                _remove(tombstone(project, run, "run", name), remove)
            removed.append(entry)
    return {
        "ok": True,
        "dryRun": dry_run,
        "olderThanSeconds": older_than,
        "removed": removed,
        "kept": kept,
        "bytes": sum(int(e["bytes"]) for e in removed),
        "worktreesForgotten": forgotten,
    }


def _forget_vanished(project: StatePaths) -> list[str]:
    """Worktrees whose directory vanished are dropped from git's list (their branches stay: a
    branch is work), and provisional ones a crashed launch left are rolled back."""
    from omp.workspace import create, remove, repo

    if not repo.has_commit(project.root):
        return []
    try:
        rolled = [str(w.path) for w in create.recover_unfinished(project.root)]
        return rolled + [str(p) for p in remove.prune(project.root)]
    except OmpError:
        return []


def _prune_team(
    project: StatePaths,
    team: TeamPaths,
    age: float,
    *,
    force: bool,
    dry_run: bool,
    rm: Remover,
) -> tuple[dict[str, Any], str | None]:
    entry: dict[str, Any] = {
        "kind": "team",
        "team": team.name,
        "path": str(team.dir),
        "ageSeconds": round(age),
        "bytes": tree_bytes(team.dir),
    }
    try:
        cfg = team_config.load(team)
    except OmpError as err:
        entry["why"] = f"{err.code}: {err.message}"
        return entry, entry["why"]
    alive = live_panes(cfg)
    if alive:
        entry["why"] = "live panes: " + ", ".join(a["worker"] for a in alive)
        return entry, entry["why"]
    lost = unread_mail(team)
    if lost and not force:
        entry["unread"] = lost
        entry["why"] = f"unread mail ({_lost_text(lost)}); --force loses it"
        return entry, entry["why"]
    try:
        trees = _worktrees_first(cfg, force=force, dry_run=dry_run)
    except OmpError as err:
        entry["why"] = f"{err.message}"
        if err.detail.get("worktrees"):
            entry["worktrees"] = err.detail["worktrees"]
        return entry, entry["why"]
    if trees:
        entry["worktrees"] = trees
    if not dry_run:
        _end_leftovers(team)
        try:
            lost = _take_away(project, team, force=force, remove=rm)
        except OmpError as err:
            if err.code != "unread_mail":
                raise
            entry["unread"] = err.detail["unread"]
            entry["why"] = f"unread mail ({_lost_text(entry['unread'])}); --force loses it"
            return entry, entry["why"]
    if lost:
        entry["unread"] = entry["lost"] = lost
    return entry, None
