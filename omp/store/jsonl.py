"""Append-only JSONL files shared by many processes, read through byte-offset cursors.

Writers: O_APPEND + `flock(LOCK_EX)` + the whole line in one `os.write` (looping on a short write
while still holding the lock), so concurrent writers never tear or interleave a line. If the file
does not end in a newline, a writer died mid-line: a newline goes first so that fragment stays a
single bad line and the new line is whole.

Readers: consume only complete lines; a partial tail waits for its newline. A line that does not
parse is skipped and counted, never fatal, and never blocks the lines after it. A reader that must
not lose what it read uses `consume`: the cursor moves only after the handler returned, so a reader
killed in between reads the same lines again (at-least-once), never skips them.
"""

from __future__ import annotations

import json
import os

from omp.store import fs, locks, strictjson

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.store.tree import StrPath


def encode(record: dict[str, Any]) -> bytes:
    # JSON never holds a raw newline, so one record is always one line.
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class locked:
    """An O_APPEND descriptor of `path` holding the exclusive flock for a compound update.
    (A class rather than a `contextlib` generator: see `omp.store.locks`.)"""

    __slots__ = ("_create", "_fd", "path")

    def __init__(self, path: StrPath, *, create: bool = True) -> None:
        self.path, self._create, self._fd = path, create, -1

    def __enter__(self) -> int:
        try:
            fd = fs.open_file(self.path, os.O_RDWR | os.O_APPEND, create=self._create)
        except OSError as exc:
            raise fs.storage_error(self.path, exc) from exc
        try:
            locks.acquire(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing the last descriptor releases the flock


def append_locked(fd: int, data: bytes, path: StrPath, *, clean_end: int = -1) -> int:
    """Append under a lock the caller holds; returns the offset the data starts at.

    `clean_end`: a size at which the caller knows the file ends in a newline (its own last
    write), so the tail check can be skipped while nobody else has written.
    """
    end: int | None = None
    try:
        end = os.fstat(fd).st_size
        if end and end != clean_end and os.pread(fd, 1, end - 1) != b"\n":
            end += _write_all(fd, b"\n")
        _write_all(fd, data)
    except OSError as exc:
        _truncate_back(fd, end)
        raise fs.storage_error(path, exc) from exc
    return end


def append(path: StrPath, record: dict[str, Any]) -> int:
    """Append one record as one line; returns its byte offset."""
    data = encode(record)
    with locked(path) as fd:
        return append_locked(fd, data, path)


class Appender:
    """Many appends to one file from one process: the descriptor stays open between lines.

    Each line still takes the flock and checks the tail, so other processes' lines interleave
    safely at line boundaries; what is saved is the open, the safety checks and the close of
    every line (the library path that writes many records, e.g. an import or a benchmark).
    """

    def __init__(self, path: StrPath) -> None:
        self.path = path
        try:
            self.fd = fs.open_file(path, os.O_RDWR | os.O_APPEND, create=True)
        except OSError as exc:
            raise fs.storage_error(path, exc) from exc
        self._end = -1  # the size after our last line, known to end in a newline

    def append(self, record: dict[str, Any]) -> int:
        data = encode(record)
        with locks.holding(self.fd):
            start = append_locked(self.fd, data, self.path, clean_end=self._end)
        self._end = start + len(data)
        return start

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(fd: int, data: bytes) -> int:
    n = os.write(fd, data)
    if n < len(data):  # a short write (a full disk, a signal): finish it, still under the lock
        view = memoryview(data)[n:]
        while view:
            view = view[os.write(fd, view) :]
    return len(data)


def _truncate_back(fd: int, end: int | None) -> None:
    # A short write that then failed (ENOSPC) would leave a fragment that glues onto the next
    # writer's line; cut it back while we still hold the lock. Best effort: if even this fails the
    # next writer's newline repair still keeps later lines whole.
    if end is None:
        return
    try:
        if os.fstat(fd).st_size > end:
            os.ftruncate(fd, end)
    except OSError:
        pass


class Chunk:
    """What one read from a cursor produced.

    (A plain class, like the other records on the `omp team api` path: `dataclasses` imports
    `inspect`, ~10 ms of every call.)
    """

    __slots__ = ("bad", "end", "records", "reset", "start")

    def __init__(self, start: int = 0, end: int = 0) -> None:
        # (offset, length including the newline, record) of every complete line that parsed
        self.records: list[tuple[int, int, dict[str, Any]]] = []
        self.bad = 0
        self.start = start  # where reading began (0 after a truncation reset)
        self.end = end  # offset just past the last complete line: the next cursor
        self.reset = False  # the file was shorter than the cursor, so it was read from 0


_SCAN = strictjson.SCAN


def loads_line(raw: bytes) -> Any:
    """One line parsed as strictly as every state file (`omp.store.strictjson`: no `NaN`,
    `Infinity`, `1e999`, nesting past its limit; a `ValueError` for those, like for a line that
    is not JSON), about twice as fast for the usual line (an object with no blank around it,
    UTF-8): the scanner straight away, without the encoding detection and whitespace checks.
    Anything else, and any failure, is judged by the full parse."""
    if raw[:1] == b"{" and raw[-1:] == b"}":
        strictjson.refuse_deep(raw)  # before the scanner, which recurses
        try:
            text = raw.decode("utf-8", "surrogatepass")
            obj, end = _SCAN(text, 0)
            if end == len(text):
                return obj
        except strictjson.Damaged:
            raise
        except (ValueError, StopIteration):
            pass
    return strictjson.loads(raw)


def parse_lines(data: bytes, base: int, chunk: Chunk) -> None:
    """Parse complete lines of `data` (which starts at file offset `base`) into `chunk`."""
    pos = 0
    n = len(data)
    while pos < n:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        raw = data[pos:nl]
        if raw.strip():
            try:
                rec = loads_line(raw)
            except ValueError:
                rec = None
            if isinstance(rec, dict):
                chunk.records.append((base + pos, nl + 1 - pos, rec))
            else:
                chunk.bad += 1
        pos = nl + 1
    chunk.end = base + pos


def read_fd(fd: int, offset: int = 0) -> Chunk:
    """Complete lines of an open file from `offset` to its end."""
    chunk = Chunk(start=offset, end=offset)
    size = os.fstat(fd).st_size
    if size < offset:  # truncated or replaced: start again from the top
        offset = chunk.start = chunk.end = 0
        chunk.reset = True
    data = os.pread(fd, size - offset, offset) if size > offset else b""
    parse_lines(data, offset, chunk)
    return chunk


def read_from(path: StrPath, offset: int = 0) -> Chunk:
    """Complete lines from `offset` to the end of the file (missing file: nothing)."""
    try:
        fd = fs.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return Chunk(start=offset, end=offset)
    try:
        return read_fd(fd, offset)
    finally:
        os.close(fd)


def read_cursor(path: StrPath) -> int:
    """A cursor file `{"bytesRead": N}` (the TypeScript tool's format); 0 if missing.

    A damaged one is `corrupt_state` naming it, never read as 0: from 0 every line would be
    handled again (a notification run twice), so the reader stops and says so; the monitor logs
    it and goes on."""
    obj = fs.read_json(path)
    if obj is None:
        return 0
    val = obj.get("bytesRead") if isinstance(obj, dict) else None
    if type(val) is int and val >= 0:
        return val
    raise fs.corrupt(path, 'is not a cursor ({"bytesRead": N} with N a count of bytes)')


def write_cursor(path: StrPath, offset: int) -> None:
    fs.write_json_atomic(path, {"bytesRead": offset}, pretty=False)


def read_new(path: StrPath, cursor: StrPath) -> Chunk:
    """Read past the cursor and move it at once, before the caller sees the lines.

    A caller killed after this returns but before it handled the lines has lost them (the cursor
    is already past them): use `consume` when the lines must be handled at least once.
    """
    chunk = read_from(path, read_cursor(cursor))
    _advance(cursor, chunk)
    return chunk


def consume(path: StrPath, cursor: StrPath, handle: Callable[[Chunk], None]) -> Chunk:
    """Read past the cursor, hand the lines to `handle`, and only then move the cursor.

    At-least-once: if `handle` raises, or the process dies before it returns, the cursor stays
    where it was and the same lines come back next time. `handle` must tolerate seeing a line
    twice. Two processes consuming one cursor concurrently may both handle the same lines.
    """
    chunk = read_from(path, read_cursor(cursor))
    handle(chunk)
    _advance(cursor, chunk)
    return chunk


def _advance(cursor: StrPath, chunk: Chunk) -> None:
    if chunk.end != chunk.start or chunk.reset:
        write_cursor(cursor, chunk.end)


def peek_new(path: StrPath, cursor: StrPath) -> Chunk:
    """Like `read_new` but never moves the cursor."""
    return read_from(path, read_cursor(cursor))
