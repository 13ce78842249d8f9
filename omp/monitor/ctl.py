"""Starting the project's one monitor, and the owner lock that keeps it one.

`team-monitor/owner.lock` holds `{schemaVersion, token, phase, parentPid, pid?, createdAt,
updatedAt?}`. `ensure_monitor` creates it (phase `pending`, a fresh random token) only if no lock
is there, then spawns a detached `omp team monitor-run --root R --token T`; the child adopts the
lock (pending -> running, with its pid) and refreshes `updatedAt` at least every
`running_stale / 4` seconds. Any number of concurrent starts spawn one child: the creation is
exclusive (a complete file is hard-linked into place, so nobody ever reads a half-written lock).

A lock is stale when it is pending for longer than 15 s (the child never adopted it), running
without a heartbeat for 20 s, or when its pid is gone (or is no longer a monitor holding that
token). A stale lock is removed by compare-and-swap: it is renamed aside, and only if the renamed
file still holds the token judged stale is it dropped; anything else is put back (if the place is
still free). A monitor that finds another token in the lock stops at its next scan, so two
monitors never keep running side by side.

Everything here is fail-open for the callers (`omp team launch`, the loop `start` commands): they
catch every exception. Nothing is created when there is no live team to watch.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.monitor.alive import MAX_RESTARTS, RESTART_WINDOW, judge
from omp.monitor.alive import json_file as alive_json
from omp.monitor.alive import pid_alive as pid_alive  # the one copy, shared with status
from omp.monitor.policy import Intervals
from omp.store import fs, locks, strictjson
from omp.store.names import is_valid_name
from omp.store.paths import StatePaths, TeamPaths

SCHEMA = 1
MAX_EVENTS = 200
WORKER_IDENTITY = frozenset({"OMP_TEAM", "OMP_WORKER", "OMP_TEAM_WORKER", "OMP_LAUNCH_TOKEN"})

Spawn = Callable[[Path, str], int]

# Children this process spawned, kept so they are reaped (no zombies) and never warned about.
_CHILDREN: list[subprocess.Popen[bytes]] = []


# ---- the owner lock -------------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    token: str
    phase: str  # pending | running
    created_at: float
    updated_at: float | None
    pid: int | None
    raw: dict[str, Any]

    @classmethod
    def parse(cls, data: bytes) -> Owner | None:
        try:
            obj = strictjson.loads(data)  # as strictly as every state file
        except ValueError:  # strictjson.Damaged: a damaged lock is no lock's owner
            return None
        if not isinstance(obj, dict) or obj.get("schemaVersion") != SCHEMA:
            return None
        token, phase = obj.get("token"), obj.get("phase")
        created = clock.parse_iso(str(obj.get("createdAt", "")))
        updated = clock.parse_iso(str(obj["updatedAt"])) if obj.get("updatedAt") else None
        pid = obj.get("pid")
        if (
            not isinstance(token, str)
            or not token
            or phase not in ("pending", "running")
            or created is None
            or (pid is not None and (not isinstance(pid, int) or isinstance(pid, bool)))
            or (phase == "running" and (pid is None or updated is None))
        ):
            return None
        return cls(token, phase, created, updated, pid, obj)

    def stale(self, now: float, iv: Intervals) -> bool:
        if self.phase == "pending":
            return now - self.created_at > iv.pending_stale
        assert self.updated_at is not None and self.pid is not None
        return now - self.updated_at > iv.running_stale or not pid_alive(self.pid, self.token)


def owner_path(paths: StatePaths) -> Path:
    return paths.monitor_owner


def read_owner(paths: StatePaths) -> tuple[Owner | None, bytes | None]:
    """(the parsed lock or None, its raw bytes or None when there is no lock). Read-only."""
    data = fs.read_bytes(owner_path(paths))
    return (Owner.parse(data) if data is not None else None), data


def _create_exclusive(path: Path, obj: dict[str, Any]) -> bool:
    """Put a complete file at `path` only if nothing is there. False if something was."""
    return locks.create_exclusive(path, (json.dumps(obj, indent=2) + "\n").encode(), whole=True)


def _remove_if(paths: StatePaths, expect: Callable[[bytes], bool]) -> bool:
    """Compare-and-swap removal of the owner lock: rename aside, verify, drop or put back."""
    lock = owner_path(paths)
    aside = lock.with_name(f".{lock.name}.{secrets.token_hex(6)}.old")
    try:
        os.rename(lock, aside)
    except FileNotFoundError:
        return False
    try:
        data = fs.read_bytes(aside)
        if data is not None and expect(data):
            return True
        # Someone replaced the lock between our read and our rename: put theirs back unless a
        # newer one already took the place (its owner then wins; theirs stops at its next scan).
        with contextlib.suppress(OSError):
            os.link(aside, lock)
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)


def _token_is(token: str) -> Callable[[bytes], bool]:
    def check(data: bytes) -> bool:
        owner = Owner.parse(data)
        return owner is not None and owner.token == token

    return check


def _bytes_are(old: bytes) -> Callable[[bytes], bool]:
    def check(data: bytes) -> bool:
        return data == old

    return check


def adopt(paths: StatePaths, token: str, *, pid: int, now: float) -> bool:
    """The spawned child takes the lock: pending with our token -> running with our pid."""
    owner, _ = read_owner(paths)
    if owner is None or owner.token != token:
        return False
    raw = dict(owner.raw, phase="running", pid=pid, updatedAt=clock.iso(now))
    fs.write_json_atomic(owner_path(paths), raw)
    again, _ = read_owner(paths)  # a reclaimer may have raced the rewrite: the lock decides
    return again is not None and again.token == token


def heartbeat(paths: StatePaths, token: str, *, now: float) -> bool:
    """Refresh `updatedAt` if we still own the lock; False if ownership was lost."""
    owner, _ = read_owner(paths)
    if owner is None or owner.token != token:
        return False
    fs.write_json_atomic(owner_path(paths), dict(owner.raw, updatedAt=clock.iso(now)))
    return True


def is_owner(paths: StatePaths, token: str) -> bool:
    try:
        owner, _ = read_owner(paths)
    except (OSError, OmpError):
        return False
    return owner is not None and owner.token == token


def release(paths: StatePaths, token: str) -> bool:
    """Remove the lock if it is still ours (compare-and-swap)."""
    return _remove_if(paths, _token_is(token))


# ---- events and status ----------------------------------------------------------------------


def log_event(paths: StatePaths, kind: str, /, *, now: float | None = None, **fields: Any) -> None:
    """Append one line to `events.jsonl`, keeping the newest `MAX_EVENTS` (atomic rewrite)."""
    rec: dict[str, Any] = {"schemaVersion": SCHEMA, "type": kind, "timestamp": clock.iso(now)}
    rec.update({k: v for k, v in fields.items() if v is not None})
    line = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    path = paths.monitor_events
    with locks.flocked(paths.monitor_events_lock):
        old = fs.read_bytes(path) or b""
        lines = [ln + b"\n" for ln in old.split(b"\n") if ln.strip()]
        lines.append(line)
        fs.write_atomic(path, b"".join(lines[-MAX_EVENTS:]))


def write_status(paths: StatePaths, status: dict[str, Any]) -> None:
    fs.write_json_atomic(paths.monitor_status, {"schemaVersion": SCHEMA, **status})


# ---- what there is to watch (files only; no tmux) -------------------------------------------


def _read_config(team: TeamPaths) -> Any:
    return fs.read_json(team.config)


def watched_teams(
    paths: StatePaths,
    *,
    read: Callable[[TeamPaths], Any] = _read_config,
    problems: list[str] | None = None,
) -> Iterator[tuple[TeamPaths, dict[str, Any]]]:
    """(team, parsed config) of each team a monitor could watch: not shut down, with a tmux
    identity and a worker pane id, or a worker on another host (`has_targets`). The one
    discovery, for starting a monitor and for its scans.

    Files only, read-only, never raises for a team or the listing: what could not be read is
    skipped, and said in `problems` if given. `read` reads a config (the monitor's is cached).
    """
    try:
        if not paths.check(paths.teams):
            return
        names = sorted(os.listdir(paths.teams))
    except (OSError, OmpError) as exc:
        if problems is not None:
            problems.append(f"cannot list teams: {exc}")
        return
    for name in names:
        if not is_valid_name(name):
            continue
        team = paths.team(name)
        try:
            if os.path.lexists(team.shutdown) or not fs.check_entry(team.dir, want_dir=True):
                continue
            raw = read(team)
        except (OSError, OmpError) as exc:
            if problems is not None:
                problems.append(f"team {name}: {exc}")
            continue
        if has_targets(raw):
            yield team, raw


def watchable_teams(paths: StatePaths) -> list[str]:
    """The names of the teams a monitor could watch (`watched_teams`). Never raises: cheap
    enough for every launch and loop start."""
    return [team.name for team, _ in watched_teams(paths)]


def has_ident(raw: Any) -> bool:
    """Does the config name the team's tmux server here (`tmuxIdentity`)?"""
    ident = raw.get("tmuxIdentity") if isinstance(raw, dict) else None
    return (
        isinstance(ident, dict) and bool(ident.get("socketPath")) and bool(ident.get("serverPid"))
    )


def has_targets(raw: Any) -> bool:
    """A pane to watch: a worker's pane on the team's tmux server here, or a worker on another
    host (`omp.record.placement`: its pane is watched over ssh, whatever the leader's is)."""
    if not isinstance(raw, dict):
        return False
    workers = raw.get("workers")
    if not isinstance(workers, list):
        return False
    if any(isinstance(w, dict) and isinstance(w.get("remote"), dict) for w in workers):
        return True
    return has_ident(raw) and any(
        isinstance(w, dict) and isinstance(w.get("paneId"), str) and w["paneId"].startswith("%")
        for w in workers
    )


# ---- starting -------------------------------------------------------------------------------


def monitor_argv(root: Path, token: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "omp",
        "team",
        "monitor-run",
        "--root",
        str(root),
        "--token",
        token,
    ]


def spawn_detached(root: Path, token: str) -> int:
    """Start the monitor in its own session, stdio on /dev/null, not waited for. Its pid."""
    _reap()
    # A worker's API call may start the monitor: it must not carry that worker's identity, or
    # ending the worker's processes (`omp.procs`, by environment) would end the project's monitor.
    env = {k: v for k, v in os.environ.items() if k not in WORKER_IDENTITY}
    proc = subprocess.Popen(
        monitor_argv(root, token),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal: the shell's hangup does not reach it
        close_fds=True,
        cwd="/",  # never sys.path[0] = a project directory that may hold an `omp/` of its own
    )
    _CHILDREN.append(proc)
    return proc.pid


def _reap() -> None:
    for proc in list(_CHILDREN):
        if proc.poll() is not None:
            _CHILDREN.remove(proc)


def _as_root(root: Path | StatePaths | str) -> StatePaths:
    if isinstance(root, StatePaths):
        return root
    return StatePaths(Path(root).absolute())


def ensure_monitor(
    root: Path | StatePaths | str,
    *,
    now: Callable[[], float] = clock.now,
    intervals: Intervals | None = None,
    spawn: Spawn = spawn_detached,
) -> dict[str, Any]:
    """Make sure the project's monitor runs (or is starting); start it if there is work.

    Returns `{"started": bool, "reason": ..., "token"?, "pid"?}` with reason one of `started`,
    `no-live-teams` (nothing was created), `already-pending`, `already-running`,
    `spawn-failed`, `contended`, `disabled` (`OMP_NO_MONITOR=1`: nothing is looked at).
    Raises only for an unsafe state tree or a bad `OMP_MONITOR_*` value (callers fail open).
    """
    paths = _as_root(root)
    _reap()
    if os.environ.get("OMP_NO_MONITOR", "") not in ("", "0"):
        return {"started": False, "reason": "disabled"}
    if not watchable_teams(paths):
        return {"started": False, "reason": "no-live-teams"}
    iv = intervals or Intervals.from_env()
    paths.ensure(paths.monitor)
    for _ in range(5):
        owner, data = read_owner(paths)
        if data is not None:
            if owner is not None and not owner.stale(now(), iv):
                return {
                    "started": False,
                    "reason": f"already-{owner.phase}",
                    "token": owner.token,
                    "pid": owner.pid,
                }
            expect = _token_is(owner.token) if owner is not None else _bytes_are(data)
            if _remove_if(paths, expect):
                log_event(
                    paths,
                    "owner-reclaimed",
                    now=now(),
                    token=owner.token if owner else None,
                    message=(
                        f"stale {owner.phase} owner (pid {owner.pid})" if owner else "invalid owner"
                    ),
                )
            continue
        token = secrets.token_hex(16)
        t = now()
        lock = {
            "schemaVersion": SCHEMA,
            "token": token,
            "phase": "pending",
            "parentPid": os.getpid(),
            "createdAt": clock.iso(t),
        }
        if not _create_exclusive(owner_path(paths), lock):
            continue  # another start won the race; look again
        try:
            pid = spawn(paths.root, token)
        except Exception as exc:
            release(paths, token)
            log_event(paths, "spawn-failed", now=now(), token=token, message=str(exc))
            return {"started": False, "reason": "spawn-failed", "message": str(exc)}
        return {"started": True, "reason": "started", "token": token, "pid": pid}
    return {"started": False, "reason": "contended"}


def revive(paths: StatePaths, now: float | None = None) -> dict[str, Any] | None:
    """Restart a dead monitor (a writing API call's epilogue). Fail-open, never raises.

    Bounded: at most `MAX_RESTARTS` restarts per `RESTART_WINDOW` seconds per project (recorded
    in `team-monitor/restarts.json`), and `ensure_monitor`'s exclusive lock keeps it
    one monitor per project however many calls race. Returns what `ensure_monitor` said, or None
    when nothing was tried.
    """
    try:
        if os.environ.get("OMP_NO_MONITOR", "") not in ("", "0"):
            return None
        t = clock.now() if now is None else now
        if judge(paths, t)["state"] != "dead":
            return None  # running or starting; or stopped on its own, or never started here
        record = alive_json(paths.monitor_restarts) or {}
        at = record.get("at")
        recent = [
            x for x in (at if isinstance(at, list) else []) if isinstance(x, (int, float))
            and t - x < RESTART_WINDOW
        ]  # fmt: skip
        if len(recent) >= MAX_RESTARTS:
            return None
        result = ensure_monitor(paths)
        if result.get("started"):
            fs.write_json_atomic(paths.monitor_restarts, {"at": [*recent, t]})
        return result
    except Exception:
        return None  # the call already succeeded; a monitor is best effort
