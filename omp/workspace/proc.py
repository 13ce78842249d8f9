"""Which process is which: a pid plus its start time, so a recycled pid is not taken for ours.

(Candidates for the shared `omp/procs.py` once it lands.)
"""

from __future__ import annotations

import os


def _stat_fields(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    return data.rsplit(b")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (`/proc/<pid>/stat` field 22); None when
    there is no such process or no procfs (macOS)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def alive(pid: int, start: int | None = None) -> bool:
    """True if `pid` runs, is not a zombie, and (when `start` is known and procfs is there)
    is the process that started at `start`."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process holds the pid: it exists
    except OverflowError:
        return False
    fields = _stat_fields(pid)
    if fields is None:
        return not os.path.isdir("/proc/self")  # no procfs: kill(0) is all there is
    if fields[0] in (b"Z", b"X"):
        return False  # exited, not yet reaped by its parent
    if start is not None:
        try:
            return int(fields[19]) == start
        except (IndexError, ValueError):
            return True
    return True
