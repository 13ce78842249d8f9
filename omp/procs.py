"""Processes, through psutil: is a pid alive, a pane's process tree, the processes that carry a
team's environment, and ending them all (SIGTERM, a short wait, SIGKILL). Linux and macOS alike.

Closing a tmux pane sends SIGHUP to its foreground process group and nothing else. An agent that
re-executes itself in a new session (Gemini CLI's node relaunches itself with a larger heap and
`setsid`s) escapes it and keeps running, orphaned, after the pane, its session and even the tmux
server are gone. So every command that closes panes (shutdown, remove-worker, delete, a launch's
rollback) ends the whole tree of each pane it closes:

1. `collect` before closing: the pane's pid and its descendants (`children(recursive=True)`,
   by parent pid, which a child loses once its parent dies and it is re-parented), plus every
   process of this user whose environment matches the team's (`EnvMatch`: `OMP_TEAM`,
   `OMP_ROOT`, and the worker or the launch token): the ones that `setsid`'d away from the tree
   keep their environment;
2. close the pane (the caller's business);
3. `terminate`: SIGTERM to what survives, `wait_procs` up to `grace` seconds, SIGKILL the rest.

A collected process is held as a `psutil.Process`, which knows its own start: one whose pid was
recycled meanwhile is never signalled. This process and its ancestors are never collected (a
worker's own `omp` call must not kill its caller). A zombie counts as gone: only its parent can
reap it, and it runs nothing.

psutil costs ~15-30 ms to import: only the commands that end processes import this module
(shutdown, remove-worker, delete/prune, rollbacks, resume, and the worktree and verify code
that must tell a live process from a recycled pid), never the per-call ones
(tests/test_procs.py checks).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import NamedTuple

import psutil

GRACE = 3.0  # seconds between SIGTERM and SIGKILL
POLL = 0.05  # seconds of one `wait_procs` round: a zombie is looked for between rounds
# `start_of` is a process's start, in hundredths of a second since the epoch. It is computed from
# the boot time, which moves by a second or so when the wall clock is stepped: compare with this
# slack (a recycled pid would have to start within it of the original to be mistaken).
START_SLACK = 200
# Starts recorded by omp before it used psutil: clock ticks since boot (a few days of uptime are
# some 10**7); today's starts are some 10**11. Such a start says nothing: the pid alone is used.
_OLD_STARTS = 10**10
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)
_DEAD = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})


class Proc:
    """One process as collected: its pid, its start (`start_of`'s unit) and the psutil handle
    that tells it from a later process given the same pid."""

    __slots__ = ("handle", "pid", "start")

    def __init__(self, handle: psutil.Process) -> None:
        self.handle = handle
        self.pid: int = handle.pid
        self.start: int = _start(handle)

    def __repr__(self) -> str:
        return f"Proc(pid={self.pid}, start={self.start})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proc) and (self.pid, self.start) == (other.pid, other.start)

    def __hash__(self) -> int:
        return hash((self.pid, self.start))


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


def _start(p: psutil.Process) -> int:
    return round(p.create_time() * 100)


def _runs(p: psutil.Process) -> bool:
    """`p` (the very process, not a successor with its pid) runs, and is not a zombie."""
    try:
        return p.is_running() and p.status() not in _DEAD
    except psutil.Error:
        return False


def _process(pid: int) -> psutil.Process | None:
    if pid <= 0:
        return None
    try:
        return psutil.Process(pid)
    except (psutil.Error, OverflowError, ValueError):
        return None


def proc_of(pid: int) -> Proc | None:
    p = _process(pid)
    try:
        return None if p is None else Proc(p)
    except psutil.Error:
        return None


def alive(proc: Proc) -> bool:
    """The very process `proc` names still runs: not a successor with its pid, not a zombie."""
    return _runs(proc.handle)


def pid_alive(pid: int) -> bool:
    """`pid` runs (a zombie does not)."""
    p = _process(pid)
    return p is not None and _runs(p)


def start_of(pid: int) -> int | None:
    """When `pid` started (hundredths of a second since the epoch; for `running`), or None."""
    p = _process(pid)
    try:
        return None if p is None else _start(p)
    except psutil.Error:
        return None


def running(pid: int, start: int | None = None) -> bool:
    """`pid` runs (a zombie does not) and, when `start` (`start_of`) is known, is the process
    that started then: a recycled pid is not taken for it."""
    if not pid_alive(pid):
        return False
    if start is None or not isinstance(start, int) or start < _OLD_STARTS:
        return True
    now = start_of(pid)
    return now is not None and abs(now - start) <= START_SLACK


def environ(pid: int) -> dict[str, str] | None:
    """The environment `pid` started with, or None if it cannot be read (gone, another user,
    a platform psutil reads none on)."""
    p = _process(pid)
    if p is None:
        return None
    try:
        return dict(p.environ())
    except (psutil.Error, OSError, AttributeError):  # AttributeError: no environ() here
        return None


def environ_readable() -> bool:
    """Whether this platform lets a process's environment be read (Linux, macOS: yes)."""
    return pid_alive(os.getpid()) and environ(os.getpid()) is not None


def lineage(pid: int | None = None, depth: int = 12) -> list[list[str]]:
    """The command lines of `pid` (default: this process) and its ancestors below init, nearest
    first, at most `depth`; the walk stops at the first one that cannot be read."""
    p = _process(os.getpid() if pid is None else pid)
    out: list[list[str]] = []
    while p is not None and p.pid > 1 and len(out) < depth:
        try:
            out.append(p.cmdline())
            p = p.parent()
        except psutil.Error:
            break
    return out


def _spared() -> set[int]:
    """This process and its ancestors (and the kernel's and init's pids): never collected."""
    out = {0, 1, os.getpid()}
    try:
        out.update(p.pid for p in psutil.Process().parents())
    except psutil.Error:
        out.add(os.getppid())
    return out


def _tree(p: psutil.Process) -> list[psutil.Process]:
    """`p` and its descendants (none when it is gone)."""
    try:
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return [p]


def _mine(p: psutil.Process, uid: int) -> bool:
    try:
        return bool(p.uids().real == uid)
    except psutil.Error:
        return False


def collect(roots: Iterable[int | None], match: EnvMatch | None = None) -> list[Proc]:
    """The processes to end: each root, its descendants, and (with `match`) every process of
    this user whose environment matches, with its descendants. Read before the panes close (see
    the module)."""
    spared = _spared()
    found: dict[int, Proc] = {}

    def take(tree: list[psutil.Process]) -> None:
        for q in tree:
            if q.pid in spared or q.pid in found or not _runs(q):
                continue
            try:
                found[q.pid] = Proc(q)
            except psutil.Error:
                continue  # gone meanwhile

    for root in roots:
        p = None if root is None else _process(root)
        if p is not None:
            take(_tree(p))
    if match is not None:
        uid = os.getuid()
        for p in psutil.process_iter():
            if p.pid in spared or p.pid in found or not _mine(p, uid):
                continue
            try:
                env = p.environ()
            except (psutil.Error, OSError, AttributeError):  # AccessDenied: not ours to end
                continue
            if match(env):
                take(_tree(p))  # and what it started
    return sorted(found.values(), key=lambda p: p.pid)


def _signal(procs: Iterable[Proc], sig: int) -> None:
    for p in procs:
        try:
            if alive(p):  # psutil's send_signal refuses a successor with the pid too
                p.handle.send_signal(sig)
        except psutil.Error:
            pass


def _wait(procs: list[Proc], seconds: float, clock: Callable[[], float]) -> list[Proc]:
    """What of `procs` still runs after up to `seconds`: `wait_procs` in short rounds, since a
    zombie (another parent's child) never ends for it but counts as gone here."""
    end = clock() + seconds
    rest = [p for p in procs if alive(p)]
    while rest and clock() < end:
        handles = {id(p.handle): p for p in rest}
        wait = max(0.0, min(POLL, end - clock()))
        _, still = psutil.wait_procs([p.handle for p in rest], timeout=wait)
        rest = [handles[id(h)] for h in still if _runs(h)]
    return rest


def terminate(
    procs: Iterable[Proc],
    *,
    grace: float = GRACE,
    clock: Callable[[], float] = time.monotonic,
) -> Ended:
    """SIGTERM what is alive of `procs`, wait up to `grace` seconds for them to go, SIGKILL the
    rest (and wait briefly for the kernel to take them)."""
    live = [p for p in procs if alive(p)]
    if not live:
        return Ended(0, 0, 0, [])
    _signal(live, signal.SIGTERM)
    rest = _wait(live, grace, clock)
    _signal(rest, signal.SIGKILL)
    left = _wait(rest, 1.0, clock)
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
