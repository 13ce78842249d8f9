"""A team's history: `team/<name>/events.jsonl`, appended by the commands that change the team,
read by `omp team events` from a byte offset.

Why a log of its own rather than a reading of the existing files: task records are rewritten in
place (a move between two looks leaves no trace), a worker's going offline is a heartbeat
overwritten, loops are project files rewritten on start and end. Only an append-only record kept
at the moment of each change lets a reader resume from a byte offset and see every change once,
in order. (The TypeScript tool reserves this very path for team events and never writes it.)

Writers append one line each, under the file's flock, after the change itself is on disk: the
files stay the truth, the log is their history. Appending is best-effort: a log that cannot be
written (a full disk, a team deleted meanwhile) never fails the change it describes, and it never
creates a team directory that is gone. Readers never write: no cursor file, no index.

Lines: `{"type": "task"|"message"|"member"|"loop", "at": ISO, ...}`:

- task: `taskId, from, to, owner?, result?` (`from` null when the task was created)
- message: `id, from, to, event?, taskId?`: messages to or from the leader (no bodies)
- member: `worker, change` (`joined`, `left`, `removed`, `offline`, `online`), `reason?`
- loop: `mode, change` (`started`, `ended`)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.store import fs, jsonl
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths


def path(team: TeamPaths) -> Path:
    return team.events


def record(team: TeamPaths, *events: dict[str, Any]) -> None:
    """Append events (best-effort; see the module docstring)."""
    if not events:
        return
    try:
        if not os.path.isdir(team.dir) or os.path.islink(team.dir):
            return  # never resurrect a deleted team
        at = clock.iso()
        with jsonl.locked(path(team)) as fd:
            data = b"".join(jsonl.encode({**e, "at": e.get("at") or at}) for e in events)
            jsonl.append_locked(fd, data, path(team))
    except (OSError, OmpError):
        pass


def task(team: TeamPaths, before: str | None, now: dict[str, Any]) -> None:
    ev: dict[str, Any] = {
        "type": "task",
        "taskId": now.get("id"),
        "from": before,
        "to": now.get("status"),
    }
    if now.get("owner"):
        ev["owner"] = now["owner"]
    if now.get("result") is not None and now.get("status") != before:
        ev["result"] = now["result"]
    record(team, ev)


def messages(team: TeamPaths, records: Iterable[dict[str, Any]]) -> None:
    """Messages to or from the leader (ids and events, no bodies)."""
    evs = []
    for r in records:
        if LEADER not in (r.get("from"), r.get("to")):
            continue
        ev: dict[str, Any] = {"type": "message", "id": r.get("id"), "from": r.get("from")}
        ev["to"] = r.get("to")
        for src, dst in (("event", "event"), ("task_id", "taskId")):
            if r.get(src) is not None:
                ev[dst] = r[src]
        evs.append(ev)
    record(team, *evs)


def member(team: TeamPaths, worker: str, change: str, reason: str | None = None) -> None:
    ev: dict[str, Any] = {"type": "member", "worker": worker, "change": change}
    if reason:
        ev["reason"] = reason
    record(team, ev)


def loop(project: StatePaths, mode: str, change: str) -> None:
    """A loop started or ended: recorded in every team that is not shut down."""
    from omp.team.config import list_teams

    for name in list_teams(project):
        team = project.team(name)
        if not os.path.lexists(team.shutdown):
            record(team, {"type": "loop", "mode": mode, "change": change})


# ---- reading (never writes) -------------------------------------------------------------------


def parse_cursor(text: str | None) -> int:
    if text is None:
        return 0
    if not (text.isascii() and text.isdigit()) or len(text) > 18:  # `²` is a digit, no int
        raise OmpError(
            "invalid_cursor",
            f"--since takes the cursor an earlier `omp team events` printed (a byte offset), "
            f"got {text!r}",
            cursor=text,
        )
    return int(text)


def read_since(team: TeamPaths, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Events after byte `offset` and the cursor after the last complete line. Read-only."""
    out: list[dict[str, Any]] = []
    cursor = offset
    for evs, end in iter_since(team, offset):
        out += evs
        cursor = end
    return out, cursor


def iter_since(
    team: TeamPaths, offset: int, block: int = 1 << 20
) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """(events, cursor) a block at a time: memory follows the block, not the log. Read-only."""
    p = path(team)
    try:
        fd = fs.open_file(p, os.O_RDONLY)
    except FileNotFoundError:
        if offset:
            raise _stale(offset, 0) from None
        return
    try:
        size = os.fstat(fd).st_size
        if offset > size or (offset and os.pread(fd, 1, offset - 1) != b"\n"):
            raise _stale(offset, size)
        pos = offset
        while pos < size:
            data = os.pread(fd, min(block, size - pos), pos)
            chunk = jsonl.Chunk(start=pos, end=pos)
            jsonl.parse_lines(data, pos, chunk)
            if chunk.end == pos:  # one line longer than the block: take it whole
                data = os.pread(fd, size - pos, pos)
                jsonl.parse_lines(data, pos, chunk)
                if chunk.end == pos:
                    break  # a last line still being written
            evs = []
            for off, length, rec in chunk.records:
                rec["cursor"] = str(off + length)
                evs.append(rec)
            pos = chunk.end
            yield evs, pos
    finally:
        os.close(fd)


def _stale(offset: int, size: int) -> OmpError:
    return OmpError(
        "invalid_cursor",
        f"cursor {offset} is not a line boundary of this team's event log ({size} bytes): it "
        "belongs to another log (a deleted and recreated team?); read from the start without "
        "--since",
        cursor=str(offset),
    )
