"""Presence and status: who is there, and who is free.

Presence comes from `workers/<w>/heartbeat.json` (`pid`, `pane_id`, `state`, `updated_at`), which
only two writers touch: a worker's own writing API calls (`touch`) and the monitor's look at its
pane (`observe_pane`). A heartbeat is its own small file, replaced atomically and never fsynced:
writing it never touches a mailbox or the config, and it never creates a missing directory, so a
late write cannot resurrect a removed team. A lost write only makes a worker look stale sooner.

Presence is classified when read, never by a write:

- `offline`: the pane is dead or gone, the recorded process has exited, or the last look saw that;
- `live`: otherwise, with activity within `LIVE_SECONDS`;
- `stalled`: alive as far as anyone knows, but nothing for longer (mail waits; it does not bounce);
- `unknown`: never seen (no heartbeat yet, or the leader, whose presence is not tracked).

Status (`available`, `busy`, `inactive`: whether a member may take a request) is the task
conversations' question and lives with them (`omp.conversations.availability`); it reads presence
from here. A worker marked inactive by the sweep (no `task_cancel_ack` in time) stays so until
its next own API call (`touch`).
"""

from __future__ import annotations

import os

from omp import clock
from omp.errors import OmpError
from omp.store import fs, project_config
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.record.config import TeamConfig
    from omp.store.backend import Store
    from omp.store.layout import TeamFiles
    from omp.store.paths import TeamPaths

    Team = TeamPaths | TeamFiles

LIVE_SECONDS = 45.0
# The monitor's look rewrites a live heartbeat at most this often: every scan would be churn.
OBSERVE_REFRESH_SECONDS = 10.0
DEAD_PANES = frozenset({"dead", "gone"})
OMP_SOURCES = frozenset({"api", "pane", "sweep"})  # the writers of a heartbeat omp trusts


class Heartbeat:
    # A plain class: this module is on the `omp team api` path, where `dataclasses` (it imports
    # `inspect`) would cost ~10 ms a call.
    __slots__ = ("inactive", "pane_id", "pid", "source", "state", "updated_at")

    def __init__(
        self,
        pid: int | None = None,
        pane_id: str | None = None,
        state: str = "live",  # what the last writer saw: "live" (activity) or "offline"
        updated_at: float | None = None,  # the last activity, POSIX seconds
        inactive: dict[str, Any] | None = None,  # {"reason", "at"}: set by the sweep
        source: str = "api",
    ) -> None:
        self.pid = pid
        self.pane_id = pane_id
        self.state = state
        self.updated_at = updated_at
        self.inactive = inactive
        self.source = source

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pid": self.pid,
            "pane_id": self.pane_id,
            "state": self.state,
            "updated_at": clock.iso(self.updated_at) if self.updated_at is not None else None,
            "source": self.source,
        }
        if self.inactive:
            out["inactive"] = self.inactive
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Heartbeat | None:
        if not isinstance(obj, dict):
            return None
        # Only a heartbeat omp wrote is evidence of death: the TypeScript tool's task calls write
        # the pid of their own short-lived CLI process, which has exited by the time anyone reads
        # it. A foreign heartbeat still says when someone was active, never that a worker is gone.
        ours = _ours(obj)
        state = obj.get("state") if ours else "live"
        inactive = obj.get("inactive") if ours else None
        # a heartbeat in a store (`omp.store.select`) names its host: another host's pid says
        # nothing here
        here = "host" not in obj or obj["host"] == _hostname()
        return cls(
            pid=_pid(obj) if here else None,
            pane_id=_pane(obj),
            state=state if state in ("live", "offline") else "live",
            updated_at=clock.parse_iso(str(obj.get("updated_at", ""))),
            inactive=inactive if isinstance(inactive, dict) else None,
            source=str(obj.get("source", "")),
        )


def _ours(obj: dict[str, Any]) -> bool:
    source = obj.get("source")
    return isinstance(source, str) and source in OMP_SOURCES


def _pid(obj: dict[str, Any]) -> int | None:
    pid = obj.get("pid") if _ours(obj) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None


def _pane(obj: dict[str, Any]) -> str | None:
    pane = obj.get("pane_id")
    return pane if isinstance(pane, str) else None


def heartbeat_path(team: Team, worker: str) -> str:
    return team.files.heartbeat(worker)


def _hostname() -> str:
    # a worker on another host is started with the name the team knows that host by
    # (`omp.team.remote`): two hosts that share a hostname, or a container's, stay apart
    named = os.environ.get("OMP_HOST")
    if named:
        return f"omp-host:{named}"
    import socket  # only for heartbeats kept in a store

    return socket.gethostname()


def _store(team: Team) -> Store | None:
    """The project's store when its heartbeats are not files (`omp.store.select`)."""
    files = team.files
    if not project_config.store_selected(files.project):
        return None
    from omp.store import select

    return select.current(files.project)


def _read_json(team: Team, worker: str) -> Any:
    """The worker's heartbeat file as JSON, or None (missing, unparsable or unsafe)."""
    files = team.files
    if (store := _store(files)) is not None:
        try:
            return store.heartbeats(files.name).get(worker)
        except OmpError:
            return None
    try:
        if not files.project.check(files.worker_dir(worker)):
            return None
        return fs.read_json(heartbeat_path(files, worker))
    except (OmpError, OSError):
        return None


def read(team: Team, worker: str) -> Heartbeat | None:
    """The worker's heartbeat, or None (missing, unparsable or unsafe: never seen). Read-only."""
    return Heartbeat.from_json(_read_json(team, worker))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process holds that pid: it exists
    except OSError:
        return True
    return True


def classify(hb: Heartbeat | None, now: float, pane: str | None = None) -> str:
    """live, stalled, offline or unknown, from a heartbeat and (if known) the pane's state.

    `pane` is a `panes.PaneView.state`: alive, dead, gone or unknown (None: not looked at).
    """
    if pane in DEAD_PANES:
        return "offline"
    if hb is None:
        return "unknown"
    if hb.state == "offline" and pane != "alive":
        return "offline"
    if pane != "alive" and hb.pid is not None and not pid_alive(hb.pid):
        return "offline"  # the pane, when it was looked at, is the better witness
    if hb.updated_at is not None and now - hb.updated_at <= LIVE_SECONDS:
        return "live"
    return "stalled"


def _worker_dir_ok(team: Team, worker: str) -> bool:
    files = team.files
    try:
        files.verify()  # not a team deleted (or made again) since the call loaded it
        return files.project.check(files.worker_dir(worker))
    except OmpError:
        return False


def _write(team: Team, worker: str, hb: Heartbeat) -> bool:
    # Never creates the directory: a heartbeat in flight must not resurrect a removed team.
    if not _worker_dir_ok(team, worker):
        return False
    try:
        if (store := _store(team)) is not None:
            store.beat(team.files.name, worker, {**hb.to_json(), "host": _hostname()})
        else:
            fs.write_json_atomic(heartbeat_path(team, worker), hb.to_json(), pretty=False)
    except (OmpError, OSError):
        return False  # presence is best-effort: the call it rides on has already succeeded
    return True


def touch(cfg: TeamConfig, worker: str, now: float | None = None) -> bool:
    """A worker's own writing API call: it is live now; a sweep's inactive mark is lifted. On
    the per-call layer: of the old heartbeat only its pid and pane are kept (no time parsed)."""
    if worker == LEADER or worker not in cfg.worker_names:
        return False
    team = cfg.files
    t = clock.now() if now is None else now
    old = _read_json(team, worker)
    old = old if isinstance(old, dict) else {}
    hb = Heartbeat(
        pid=_pid(old),
        pane_id=_pane(old) or cfg.pane_of(worker),
        state="live",
        updated_at=t,
        source="api",
    )
    return _write(team, worker, hb)


def observe_pane(
    cfg: TeamConfig,
    worker: str,
    *,
    now: float,
    alive: bool,
    activity_at: float | None = None,
    pane_id: str | None = None,
    pid: int | None = None,
) -> bool:
    """The monitor's look at a worker's pane; writes only when something changed. True if written.

    `alive`: the pane exists and its process runs (False for a dead or gone pane, or an exited
    process). `activity_at`: the latest time the look has evidence the agent is working or
    responsive (pass `now` when the screen changed since the last look or shows the agent's ready
    prompt, or tmux's activity time); None when it saw none. `pid` is the pane's process.
    The sweep's inactive mark is kept: only the worker's own API call lifts it.
    """
    if worker == LEADER or worker not in cfg.worker_names:
        return False
    team = cfg.paths
    old = read(team, worker)
    hb = Heartbeat(
        pid=pid if pid is not None else (old.pid if old else None),
        pane_id=pane_id or (old.pane_id if old else None) or cfg.pane_of(worker),
        state=old.state if old else "live",
        updated_at=old.updated_at if old else None,
        inactive=old.inactive if old else None,
        source="pane",
    )
    if not alive:
        hb.state = "offline"
    else:
        if hb.state == "offline":
            hb.state = "live"
        if activity_at is not None:
            seen = min(activity_at, now)
            stale = hb.updated_at is None or seen - hb.updated_at >= OBSERVE_REFRESH_SECONDS
            if stale or (old is not None and old.state == "offline"):
                hb.updated_at = max(seen, hb.updated_at or seen)
    if old is not None and (
        old.state == hb.state
        and old.pid == hb.pid
        and old.pane_id == hb.pane_id
        and old.updated_at == hb.updated_at
    ):
        return False
    written = _write(team, worker, hb)
    was = old.state if old is not None else "live"
    if (
        written
        and (was == "offline") != (hb.state == "offline")
        and not os.path.lexists(team.shutdown)  # after a shutdown, going offline is no news
    ):
        from omp.record import history

        history.member(team, worker, "offline" if hb.state == "offline" else "online")
    return written


def mark_inactive(cfg: TeamConfig, worker: str, reason: str, now: float) -> bool:
    """Mark a worker inactive (the sweep: a cancel never acknowledged). Lifted by `touch`."""
    if worker == LEADER or worker not in cfg.worker_names:
        return False
    team = cfg.paths
    hb = read(team, worker) or Heartbeat(pane_id=cfg.pane_of(worker), updated_at=None)
    hb.inactive = {"reason": reason, "at": clock.iso(now)}
    hb.source = "sweep"
    return _write(team, worker, hb)
