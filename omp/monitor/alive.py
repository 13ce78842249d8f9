"""Is the project's monitor really running? One judgement for `status`, `doctor` and the API.

`running` only when its owner lock says running, its pid is alive and is the monitor holding that
lock's token, and it scanned recently (`status.json`'s `updatedAt` within the stale interval plus
one scan). Anything else reads as what it is: `starting` (a fresh pending lock), `stopped` (it
ended on its own and said why), `dead` (since its last sign of life), or `none` (never started).

Read-only and cheap (two small files, one `kill(0)`, one `/proc` read; standard library only):
it runs on the per-call layer (CONTRIBUTING.md), where a writing call of a team with panes uses
it to restart a dead monitor (`omp.monitor.ctl.revive`, fail-open and bounded; one monitor per
project is kept by its lock). The tree as strings; the monitor's stamps compared, not parsed.
"""

from __future__ import annotations

import os

from omp import clock
from omp.store import fs, strictjson

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.store.layout import ProjectFiles
    from omp.store.paths import StatePaths

RUNNING_STALE = 20.0  # as monitor_policy.Intervals; OMP_MONITOR_RUNNING_STALE_SECONDS overrides
PENDING_STALE = 15.0
SCAN = 5.0
MAX_RESTARTS = 3  # per RESTART_WINDOW: a monitor that dies at once is not restarted forever
RESTART_WINDOW = 600.0


def _seconds(var: str, default: float) -> float:
    try:
        value = float(os.environ.get(var, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def pid_alive(pid: int, token: str) -> bool:
    """True if `pid` runs and (where /proc tells) is the monitor holding `token`.

    A recycled pid, or a killed child not yet reaped (a zombie has an empty command line), is
    not alive.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    if not os.path.isdir("/proc/self"):
        return True  # no procfs (macOS): kill(0) is all there is
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except FileNotFoundError:
        return False  # it exited between the two looks
    except OSError:
        return True
    return token.encode() in cmdline.split(b"\0")


def json_file(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        data = fs.read_bytes(path)
        obj = strictjson.loads(data) if data else None
    except (OSError, ValueError, Exception):
        return None
    return obj if isinstance(obj, dict) else None


def _since(value: Any, t: float) -> bool | None:
    """Is the stamp `value` at or after `t`? None when it is no time."""
    return clock.at_or_after(value, t) if isinstance(value, str) else None


def judge(paths: StatePaths | ProjectFiles, now: float | None = None) -> dict[str, Any]:
    """`{"state", "since"?, "pid"?, "why"?}`: the monitor as it really is now. Read-only."""
    t = clock.now() if now is None else now
    files = paths.files
    try:
        if not files.check(files.monitor):
            return {"state": "none"}
    except Exception:
        return {"state": "none"}
    stale = _seconds("OMP_MONITOR_RUNNING_STALE_SECONDS", RUNNING_STALE)
    scan = _seconds("OMP_MONITOR_SCAN_SECONDS", SCAN)
    owner = json_file(files.monitor_owner)
    status = json_file(files.monitor_status) or {}
    scanned = _since(status.get("updatedAt"), t - stale - scan)  # None: no scan recorded
    since = status.get("updatedAt") if scanned is not None else None
    if owner is None:
        if status.get("terminal") is True and since:
            return {"state": "stopped", "since": since, "why": str(status.get("reason", "?"))}
        if status:
            return {"state": "dead", "since": since, "why": "no owner lock"}
        return {"state": "none"}
    token, pid, phase = owner.get("token"), owner.get("pid"), owner.get("phase")
    if phase == "pending":
        pending_stale = _seconds("OMP_MONITOR_PENDING_STALE_SECONDS", PENDING_STALE)
        if _since(owner.get("createdAt"), t - pending_stale):
            return {"state": "starting", "since": owner.get("createdAt")}
        return {"state": "dead", "since": owner.get("createdAt"), "why": "never started"}
    if not isinstance(token, str) or not isinstance(pid, int) or isinstance(pid, bool):
        return {"state": "dead", "since": since, "why": "unreadable owner lock"}
    if not pid_alive(pid, token):
        return {"state": "dead", "since": since or owner.get("updatedAt"), "pid": pid,
                "why": f"pid {pid} is not running"}  # fmt: skip
    if not _since(owner.get("updatedAt"), t - stale) or not scanned:
        return {"state": "dead", "since": since or owner.get("updatedAt"), "pid": pid,
                "why": "no scan recently (hung)"}  # fmt: skip
    return {"state": "running", "since": status.get("startedAt"), "pid": pid}
