"""A team's history: `team/<name>/events.jsonl`, appended by the commands that change the team,
read by `omp team events` from a byte offset.

Why a log of its own rather than a reading of the existing files: task records are rewritten in
place (a move between two looks leaves no trace), a worker's going offline is a heartbeat
overwritten, loops are project files rewritten on start and end. Only an append-only record kept
at the moment of each change lets a reader resume from a byte offset and see every change once,
in order. (The TypeScript tool reserves this very path for team events and never writes it.)

With a store selected (`OMP_STORE`, `[store] url`) the history is the store's `events` log
instead (`omp.record.stored_history`), one record per event, and `omp team events` reads it
from there; with none, nothing of that is imported and the file below is the history.

Writers append one line each, under the file's flock, after the change itself is on disk: the
files stay the truth, the log is their history. Appending is best-effort: a log that cannot be
written (a full disk, a team deleted meanwhile) never fails the change it describes, and it never
creates a team directory that is gone. Readers never write: no cursor file, no index.

Lines: `{"type": "task"|"message"|"member"|"loop"|"attention", "at": ISO, ...}`, after a first
line `{"type": "log", "log": <random>, "at": ISO}` that names this log (readers skip it; a cursor
carries a fingerprint of the first line, see `parse_cursor`):

- task: `taskId, from, to, owner?, result?` (`from` null when the task was created),
  `verify?` (`{status, log, exit?}`: a completion's check started, passed or failed),
  `commit?`, `commitsAhead?` (a worktree worker's completion)
- merge: `taskId?, worker, branch, target, status, commit?, conflicts?` (`omp team merge`)
- message: `id, from, to, event?, taskId?`: messages to or from the leader (no bodies)
- member: `worker, change` (`joined`, `left`, `removed`, `offline`, `online`), `reason?`
- loop: `mode, change` (`started`, `ended`)
- attention: `worker, change` (`started`, `ended`), `what, seq`: a worker needs a person (written
  by the monitor, `omp.monitor.attention`)
- handover: `taskId, worker, branch?`: a backlog's task handed to a worker (`omp.backlog`)
"""

from __future__ import annotations

import os

from omp import clock
from omp.errors import OmpError
from omp.store import fs, jsonl, project_config
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

    from omp.store.layout import TeamFiles
    from omp.store.paths import StatePaths, TeamPaths

    Team = TeamPaths | TeamFiles


def path(team: Team) -> str:
    return team.files.events


def record(team: Team, *events: dict[str, Any]) -> None:
    """Append events (best-effort; see the module docstring). On the per-call layer: a message
    to or from the leader, a task's move."""
    if not events:
        return
    if project_config.store_selected(team.files.project):
        # the project keeps its history in its store (`omp.store.select`): every host's
        # events go to the one log the leader reads
        from omp.record import stored_history

        stored_history.append(team, events)
        return
    try:
        if not os.path.isdir(team.files.dir) or os.path.islink(team.files.dir):
            return  # never resurrect a deleted team
        at = clock.iso()
        with jsonl.locked(path(team)) as fd:
            # under the lock: a team deleted, or deleted and made again, since its config was
            # loaded gets nothing (the new team of that name never inherits the old one's events)
            team.verify()
            data = b"".join(jsonl.encode({**e, "at": e.get("at") or at}) for e in events)
            if os.fstat(fd).st_size == 0:  # a new log: its first line names it (cursors)
                data = (
                    jsonl.encode({"type": LOG_HEADER, "log": os.urandom(8).hex(), "at": at}) + data
                )
            jsonl.append_locked(fd, data, path(team))
    except (OSError, OmpError):
        pass


def task(
    team: Team, before: str | None, now: dict[str, Any], extra: dict[str, Any] | None = None
) -> None:
    """A task moved (`extra`: what else a reader should see of the move, e.g. `verify`)."""
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
    if extra:
        ev.update(extra)
    record(team, ev)


def messages(team: Team, records: Iterable[dict[str, Any]]) -> None:
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


def member(team: Team, worker: str, change: str, reason: str | None = None) -> None:
    ev: dict[str, Any] = {"type": "member", "worker": worker, "change": change}
    if reason:
        ev["reason"] = reason
    record(team, ev)


def loop(project: StatePaths, mode: str, change: str) -> None:
    """A loop started or ended: recorded in every team that is not shut down."""
    from omp.record.config import list_teams

    for name in list_teams(project):
        team = project.team(name)
        if not os.path.lexists(team.shutdown):
            record(team, {"type": "loop", "mode": mode, "change": change})


# ---- reading (never writes) -------------------------------------------------------------------


LOG_HEADER = "log"

# A cursor names the team and the log it was read from: `<team>:<log>:<offset>`. `<log>` is a
# fingerprint of the log's first line (`-` while it has none), which never changes while the
# file lives (it is only appended to) and differs for a team deleted and made again (the first
# line of a log omp starts holds a random id; an older log's, the time it was written, to the
# millisecond). So a cursor from another team, or from an earlier team of the same name, is
# refused even when it falls on a line boundary.
NO_LOG = "-"
_FIRST_LINE_MAX = 64 * 1024


def _log_id(fd: int, size: int) -> str:
    """The fingerprint of the log open on `fd` (see above)."""
    import zlib

    data = os.pread(fd, min(size, _FIRST_LINE_MAX), 0)
    cut = data.find(b"\n")
    if cut < 0 and len(data) < _FIRST_LINE_MAX:
        return NO_LOG  # no complete line yet
    return f"{zlib.crc32(data[: cut + 1] if cut >= 0 else data):08x}"


def make_cursor(team: str, log: str, offset: int) -> str:
    return f"{team}:{log}:{offset}"


def cursor_at(team: Team, offset: int) -> str:
    """The cursor of `offset` in this team's log as it is now (read-only)."""
    try:
        fd = fs.open_file(path(team), os.O_RDONLY)
    except FileNotFoundError:
        return make_cursor(team.name, NO_LOG, offset)
    try:
        return make_cursor(team.name, _log_id(fd, os.fstat(fd).st_size), offset)
    finally:
        os.close(fd)


def parse_cursor(text: str | None, team: str) -> tuple[str | None, int]:
    """(log fingerprint or None, byte offset) of a cursor `omp team events TEAM` printed for
    this team; `invalid_cursor` for anything else."""
    if text is None or text == "0":  # from the start: safe whatever log it meant
        return None, 0
    if text.isdigit():
        raise OmpError(
            "invalid_cursor",
            f"cursor {text!r} is a bare byte offset (printed by an older omp): it names neither "
            "the team nor the log it was read from, so it could skip events of another log "
            f"without a word; read once without --since and use the cursor it prints "
            f"(like {team}:1a2b3c4d:{text})",
            cursor=text,
        )
    from omp.record.stored_history import split_cursor

    def byte_offset(offset: str) -> bool:
        return offset.isascii() and offset.isdigit() and len(offset) <= 18

    log, offset = split_cursor(text, team, "2216", byte_offset)
    return log, int(offset)


def read_since(team: Team, offset: int, log: str | None = None) -> tuple[list[dict[str, Any]], int]:
    """Events after byte `offset` and the offset after the last complete line. Read-only."""
    out: list[dict[str, Any]] = []
    cursor = offset
    for evs, end in iter_since(team, offset, log=log):
        out += evs
        cursor = end
    return out, cursor


def iter_since(
    team: Team, offset: int, block: int = 1 << 20, *, log: str | None = None
) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """(events, offset) a block at a time: memory follows the block, not the log. Each event
    carries its `cursor`. `log`: the fingerprint the cursor named; another log is refused.
    Read-only."""
    for _, chunk, lid in iter_chunks(team, offset, block, log=log):
        evs = []
        for off, length, rec in chunk.records:
            if rec.get("type") == LOG_HEADER:
                continue  # it names the log; it is no event
            rec["cursor"] = make_cursor(team.name, lid, off + length)
            evs.append(rec)
        yield evs, chunk.end


def iter_chunks(
    team: Team, offset: int, block: int = 1 << 20, *, log: str | None = None
) -> Iterator[tuple[bytes, jsonl.Chunk, str]]:
    """(the bytes read, their parsed lines, the log's fingerprint) a block at a time, from
    `offset`: `chunk.start` is where the bytes begin, `chunk.end` the offset after them. The
    lines are as written: the log's header line among them (`LOG_HEADER`), no cursors added.
    `log`: the fingerprint the cursor named; another log is refused. Read-only."""
    for data, start, lid in iter_blocks(team, offset, block, log=log):
        chunk = jsonl.Chunk(start=start, end=start)
        jsonl.parse_lines(data, start, chunk)
        yield data, chunk, lid


def iter_blocks(
    team: Team, offset: int, block: int = 1 << 20, *, log: str | None = None
) -> Iterator[tuple[bytes, int, str]]:
    """(bytes, the offset they start at, the log's fingerprint) a block at a time, from
    `offset`, unparsed: each block is whole lines, each ending in its newline (a line longer
    than the block comes whole; a last line still being written waits for its newline). `log`:
    the fingerprint the cursor named; another log is refused. Read-only."""
    p = path(team)
    try:
        fd = fs.open_file(p, os.O_RDONLY)
    except FileNotFoundError:
        if offset or log is not None:
            raise _stale(team, offset, 0) from None
        return
    try:
        size = os.fstat(fd).st_size
        lid = _log_id(fd, size)
        if log is not None and lid != log:
            raise _replaced(team)
        if offset > size or (offset and os.pread(fd, 1, offset - 1) != b"\n"):
            raise _stale(team, offset, size)
        pos = offset
        while pos < size:
            data = os.pread(fd, min(block, size - pos), pos)
            cut = data.rfind(b"\n") + 1
            if not cut:  # one line longer than the block: take it whole
                data = os.pread(fd, size - pos, pos)
                cut = data.rfind(b"\n") + 1
                if not cut:
                    break  # a last line still being written
            if lid == NO_LOG:  # its first line was completed since we looked
                lid = _log_id(fd, size)
            yield data[:cut], pos, lid
            pos += cut
    finally:
        os.close(fd)


def _replaced(team: Team) -> OmpError:
    return OmpError(
        "invalid_cursor",
        f"the cursor was read from another event log of team {team.name} (the team was deleted "
        "and made again since): its events would be skipped without a word; read from the start "
        "without --since",
        team=team.name,
    )


def _stale(team: Team, offset: int, size: int) -> OmpError:
    return OmpError(
        "invalid_cursor",
        f"cursor offset {offset} is not a line boundary of team {team.name}'s event log "
        f"({size} bytes): it belongs to another log; read from the start without --since",
        cursor=str(offset),
    )
