"""Which processes of a test's team are still running: a real-CLI test's last check.

A process belongs to the team when its environment names the team's project (`OMP_ROOT`, which
launch gives every worker pane) or its working directory lies under the test's temporary
directory (an agent's helpers, the team's tmux server, a monitor). Linux `/proc` only; a process
of another user (unreadable) is never counted, nor this test process and its ancestors.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def team_processes(root: Path, under: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every live process of the team whose project is `root`, or whose
    working directory is under `under`."""
    mine = _ancestors()
    want = f"OMP_ROOT={root}".encode()
    base = str(under.resolve())
    found: list[tuple[int, str]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue  # a zombie is gone, only not yet reaped
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if want in env or cwd == base or cwd.startswith(base + os.sep):
            found.append((pid, argv))
    return found


def assert_none_left(root: Path, under: Path, timeout: float = 15.0) -> None:
    """Wait up to `timeout` for the team's processes to end; any still running fail the test
    (and are ended here, by pid, so they do not outlive it)."""
    deadline = time.monotonic() + timeout
    left = team_processes(root, under)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = team_processes(root, under)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes of the team outlived it:\n" + "\n".join(
        f"  {pid} {argv[:200]}" for pid, argv in left
    )
