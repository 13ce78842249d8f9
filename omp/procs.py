"""Processes on Linux `/proc`: is a pid alive, a pane's process tree, the processes that carry a
team's environment, and ending them all (SIGTERM, a short wait, SIGKILL).

Closing a tmux pane sends SIGHUP to its foreground process group and nothing else. An agent that
re-executes itself in a new session (Gemini CLI's node relaunches itself with a larger heap and
`setsid`s) escapes it and keeps running, orphaned, after the pane, its session and even the tmux
server are gone. So every command that closes panes (shutdown, remove-worker, delete, a launch's
rollback) ends the whole tree of each pane it closes:

1. `collect` before closing: the pane's pid and its descendants (by parent pid, which a child
   loses once its parent dies and it is re-parented), plus every process of this user whose
   environment matches the team's (`EnvMatch`: `OMP_TEAM`, `OMP_ROOT`, and the worker or the
   launch token): the ones that `setsid`'d away from the tree keep their environment;
2. close the pane (the caller's business);
3. `terminate`: SIGTERM to what survives, poll for up to `grace` seconds, SIGKILL the rest.

A process is named by (pid, start time) so a pid recycled meanwhile is never signalled; this
process and its ancestors are never collected (a worker's own `omp` call must not kill its
caller). Standard library only, a leaf module; without `/proc` (macOS) it collects nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import NamedTuple

PROC = "/proc"
GRACE = 3.0  # seconds between SIGTERM and SIGKILL
POLL = 0.02


class Proc(NamedTuple):
    pid: int
    start: int  # start time in clock ticks since boot (/proc/<pid>/stat field 22)


class EnvMatch:
    """Which processes belong to a team: `OMP_TEAM` and `OMP_ROOT` equal (the root compared by
    real path; `team` None: any team of that project), `OMP_WORKER` set (a leader's pane has
    none) and, when given, one of `workers` and one of `tokens` (`OMP_LAUNCH_TOKEN`)."""

    def __init__(
        self,
        team: str | None,
        root: str,
        workers: Collection[str] | None = None,
        tokens: Collection[str] | None = None,
    ) -> None:
        self.team, self.root, self.workers, self.tokens = team, root, workers, tokens

    def __call__(self, env: Mapping[str, str]) -> bool:
        if not env.get("OMP_TEAM") or not env.get("OMP_WORKER"):
            return False
        if self.team is not None and env.get("OMP_TEAM") != self.team:
            return False
        if self.workers is not None and env.get("OMP_WORKER") not in self.workers:
            return False
        if self.tokens is not None and env.get("OMP_LAUNCH_TOKEN") not in self.tokens:
            return False
        root = env.get("OMP_ROOT") or ""
        return bool(root) and os.path.realpath(root) == os.path.realpath(self.root)


class Ended(NamedTuple):
    found: int  # processes collected (alive when collected)
    terminated: int  # ended by SIGTERM (or by the pane's close) within the grace time
    killed: int  # needed SIGKILL
    left: list[int]  # still alive afterwards (another user's, or unkillable): reported


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state letter) of `pid`, or None if it is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        rest = data.rsplit(b")", 1)[1].split()
        return int(rest[1]), int(rest[19]), rest[0].decode("ascii", "replace")
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir(PROC) if n.isdigit()]
    except OSError:
        return []


def proc_of(pid: int) -> Proc | None:
    st = _stat(pid)
    return None if st is None else Proc(pid, st[1])


def alive(proc: Proc) -> bool:
    """The very process `proc` names still runs: same start time, not a zombie."""
    st = _stat(proc.pid)
    return st is not None and st[1] == proc.start and st[2] not in ("Z", "X")


def pid_alive(pid: int) -> bool:
    """`pid` runs (a zombie does not); `kill(0)` where there is no `/proc`."""
    if pid <= 0:
        return False
    if not os.path.isdir(f"{PROC}/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except (PermissionError, OverflowError):
            return True
        return True
    st = _stat(pid)
    return st is not None and st[2] not in ("Z", "X")


def start_of(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, `/proc/<pid>/stat` field 22), or None."""
    st = _stat(pid)
    return None if st is None else st[1]


def running(pid: int, start: int | None = None) -> bool:
    """`pid` runs (a zombie does not) and, when `start` is known and there is a `/proc`, is the
    process that started then: a recycled pid is not taken for it."""
    if start is None or not os.path.isdir(f"{PROC}/self"):
        return pid_alive(pid)
    return pid > 0 and alive(Proc(pid, start))


def environ(pid: int) -> dict[str, str] | None:
    """The environment `pid` started with, or None if it cannot be read (gone, another user)."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _spared() -> set[int]:
    """This process and its ancestors: never collected."""
    out = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = _stat(pid)
        if st is None:
            break
        pid = st[0]
    out.add(1)
    return out


def collect(roots: Iterable[int | None], match: EnvMatch | None = None) -> list[Proc]:
    """The processes to end: each root, its descendants, and (with `match`) every process of
    this user whose environment matches. Read before the panes close (see the module)."""
    pids = _pids()
    table: dict[int, tuple[int, int]] = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[2] not in ("Z", "X"):
            table[pid] = (st[0], st[1])
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    spared = _spared()
    found: set[int] = set()
    todo = [r for r in roots if r is not None and r in table]
    while todo:
        pid = todo.pop()
        if pid in found or pid in spared:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    if match is not None:
        uid = os.getuid()
        for pid in table:
            if pid in found or pid in spared:
                continue
            try:
                if os.stat(f"{PROC}/{pid}").st_uid != uid:
                    continue
            except OSError:
                continue
            env = environ(pid)
            if env is not None and match(env):
                found.add(pid)
                todo = list(children.get(pid, ()))  # and what it started
                while todo:
                    child = todo.pop()
                    if child not in found and child not in spared:
                        found.add(child)
                        todo.extend(children.get(child, ()))
    return sorted(Proc(pid, table[pid][1]) for pid in found)


def _signal(proc: Proc, sig: int) -> None:
    if not alive(proc):
        return
    try:
        os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate(
    procs: Iterable[Proc],
    *,
    grace: float = GRACE,
    poll: float = POLL,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Ended:
    """SIGTERM what is alive of `procs`, wait up to `grace` seconds for them to go, SIGKILL the
    rest (and wait briefly for the kernel to take them)."""
    live = [p for p in procs if alive(p)]
    if not live:
        return Ended(0, 0, 0, [])
    for p in live:
        _signal(p, signal.SIGTERM)
    end = clock() + grace
    rest = [p for p in live if alive(p)]
    while rest and clock() < end:
        sleep(poll)
        rest = [p for p in rest if alive(p)]
    for p in rest:
        _signal(p, signal.SIGKILL)
    end = clock() + 1.0
    left = [p for p in rest if alive(p)]
    while left and clock() < end:
        sleep(poll)
        left = [p for p in left if alive(p)]
    return Ended(len(live), len(live) - len(rest), len(rest) - len(left), [p.pid for p in left])


def end_after(
    close: Callable[[], object],
    roots: Iterable[int | None],
    match: EnvMatch | None = None,
    *,
    grace: float = GRACE,
) -> Ended:
    """Collect the processes, run `close` (closing the panes), then end what survived. `close`
    raising still ends what was collected, then the error goes on."""
    procs = collect(roots, match)
    try:
        close()
    finally:
        ended = terminate(procs, grace=grace)
        if match is not None:  # one started meanwhile (an agent relaunching itself): again
            seen = {p.pid for p in procs}
            late = [p for p in collect([], match) if p.pid not in seen]
            if late:
                more = terminate(late, grace=grace)
                procs += late
                ended = Ended(0, 0, ended.killed + more.killed, ended.left + more.left)
    # Count what was collected: most of it ends with its pane, before `terminate` looks.
    return ended._replace(found=len(procs), terminated=len(procs) - ended.killed - len(ended.left))
