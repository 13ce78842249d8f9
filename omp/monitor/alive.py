"""Is the project's monitor really running? One judgement for `status`, `doctor` and the API.

`running` only when its owner lock says running, its pid is alive and is the monitor holding that
lock's token, and it scanned recently (`status.json`'s `updatedAt` within the stale interval plus
one scan). Anything else reads as what it is: `starting` (a fresh pending lock), `stopped` (it
ended on its own and said why), `dead` (since its last sign of life), or `none` (never started).

Read-only and cheap (two small files, one `kill(0)`, one `/proc` read; standard library only):
it runs on the `omp team api` path, where a writing call uses it to restart a dead monitor
(`omp.monitor.ctl.revive`, fail-open and bounded; one monitor per project is kept by its lock).
"""

from __future__ import annotations

import os
from pathlib import Path

from omp import clock
from omp.store import fs, strictjson
from omp.store.paths import StatePaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

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


def json_file(path: Path) -> dict[str, Any] | None:
    try:
        data = fs.read_bytes(path)
        obj = strictjson.loads(data) if data else None
    except (OSError, ValueError, Exception):
        return None
    return obj if isinstance(obj, dict) else None


def _time(value: Any) -> float | None:
    return clock.parse_iso(value) if isinstance(value, str) else None


def judge(paths: StatePaths, now: float | None = None) -> dict[str, Any]:
    """`{"state", "since"?, "pid"?, "why"?}`: the monitor as it really is now. Read-only."""
    t = clock.now() if now is None else now
    try:
        if not paths.check(paths.monitor):
            return {"state": "none"}
    except Exception:
        return {"state": "none"}
    stale = _seconds("OMP_MONITOR_RUNNING_STALE_SECONDS", RUNNING_STALE)
    scan = _seconds("OMP_MONITOR_SCAN_SECONDS", SCAN)
    owner = json_file(paths.monitor_owner)
    status = json_file(paths.monitor_status) or {}
    last_scan = _time(status.get("updatedAt"))
    since = status.get("updatedAt") if last_scan is not None else None
    if owner is None:
        if status.get("terminal") is True and since:
            return {"state": "stopped", "since": since, "why": str(status.get("reason", "?"))}
        if status:
            return {"state": "dead", "since": since, "why": "no owner lock"}
        return {"state": "none"}
    token, pid, phase = owner.get("token"), owner.get("pid"), owner.get("phase")
    if phase == "pending":
        created = _time(owner.get("createdAt"))
        pending_stale = _seconds("OMP_MONITOR_PENDING_STALE_SECONDS", PENDING_STALE)
        if created is not None and t - created <= pending_stale:
            return {"state": "starting", "since": owner.get("createdAt")}
        return {"state": "dead", "since": owner.get("createdAt"), "why": "never started"}
    beat = _time(owner.get("updatedAt"))
    if not isinstance(token, str) or not isinstance(pid, int) or isinstance(pid, bool):
        return {"state": "dead", "since": since, "why": "unreadable owner lock"}
    if not pid_alive(pid, token):
        return {"state": "dead", "since": since or owner.get("updatedAt"), "pid": pid,
                "why": f"pid {pid} is not running"}  # fmt: skip
    if beat is None or t - beat > stale or last_scan is None or t - last_scan > stale + scan:
        return {"state": "dead", "since": since or owner.get("updatedAt"), "pid": pid,
                "why": "no scan recently (hung)"}  # fmt: skip
    return {"state": "running", "since": status.get("startedAt"), "pid": pid}
