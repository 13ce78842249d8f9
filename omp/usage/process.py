"""What a running agent CLI shows of itself, read from Linux's /proc: the working directory,
the environment variables that place its records (ENV_KEYS), the start time and the open files
of a process and its descendants.

A pane runs a shell or the agent CLI, which may run helpers (node, a native binary); the CLI
that writes the session record is somewhere in that tree. Another user's processes, or a
system without /proc, show less (fields empty), never an error: a locator then says it could
not tell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
PROC = Path("/proc")
# The environment is read for these only (where each CLI keeps its records, and omp's own
# variables naming a pane's team and worker): a process's environment holds API keys too.
ENV_KEYS = frozenset(
    {"HOME", "COPILOT_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME",
     "PI_CODING_AGENT_DIR"}
)  # fmt: skip


class Process(NamedTuple):
    pid: int
    cwd: Path | None
    env: Mapping[str, str]
    started: float | None  # epoch seconds
    open_files: tuple[str, ...]


def children_of(proc: Path = PROC) -> dict[int, list[int]]:
    """Every process's children (one pass over /proc; {} without it)."""
    children: dict[int, list[int]] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return children
    for entry in entries:
        if entry.name.isdigit():
            ppid = _stat_fields(entry)
            if ppid is not None:
                children.setdefault(ppid[0], []).append(int(entry.name))
    return children


def tree(
    pid: int, proc: Path = PROC, children: dict[int, list[int]] | None = None
) -> list[Process]:
    """`pid` and its descendants, parents first; [] when `pid` is gone or /proc is absent.
    `children` (`children_of`) saves the pass over /proc when several trees are wanted."""
    if children is None:
        children = children_of(proc)
    out: list[Process] = []
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop(0)
        if p in seen:
            continue
        seen.add(p)
        info = describe(p, proc)
        if info is not None:
            out.append(info)
            todo.extend(sorted(children.get(p, [])))
    return out


def describe(pid: int, proc: Path = PROC) -> Process | None:
    base = proc / str(pid)
    fields = _stat_fields(base)
    if fields is None:
        return None
    try:
        cwd: Path | None = Path(os.readlink(base / "cwd"))
    except OSError:
        cwd = None
    env: dict[str, str] = {}
    try:
        for item in (base / "environ").read_bytes().split(b"\0"):
            key, sep, value = item.partition(b"=")
            name = key.decode(errors="replace")
            if sep and (name in ENV_KEYS or name.startswith("OMP_")):
                env[name] = value.decode(errors="replace")
    except OSError:
        pass
    files: list[str] = []
    try:
        fds = list((base / "fd").iterdir())
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/"):
            files.append(target)
    return Process(pid, cwd, env, _started(fields[1], proc), tuple(sorted(files)))


def _stat_fields(base: Path) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks since boot) from `<base>/stat`."""
    try:
        raw = (base / "stat").read_text()
        rest = raw.rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
        return int(rest[1]), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def _started(ticks: int, proc: Path) -> float | None:
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    return None
