"""Reading a session record incrementally: only what was appended since the last read.

A record is a JSONL file that its agent CLI appends to. A read starts at the saved byte offset
and consumes complete lines only: a last line without its newline is being written and is left
for the next read. The file must still be the one read before: same inode and device, not
shorter than the offset, the same first bytes (a CLI that rewrites its file in place, or a file
replaced by another, is read again from the top).

Speed: a long session is mostly text and tool output, and only a few lines carry usage. Each
reader names the words its usage lines contain (`Reader.markers`); the scan finds them in the
raw bytes (`bytes.find`, C speed) and parses only the lines holding one, so a 50 MB record costs
a fraction of parsing every line.

Bounds (`omp.usage.limits`): a read takes at most its `Allowance` of bytes and time, one chunk
at a time, and stops at a line boundary when it runs out (`unread`: what it left; the next read
goes on from there); a line longer than `MAX_LINE` is skipped as it is read, never held, and
counted (`long_lines`; one still growing at the end is marked in `memo["longLine"]` and skipped
on by the next read); a one-document record larger than `MAX_WHOLE` is not parsed; a line nested
deeper than `strictjson.MAX_DEPTH` never reaches the parser.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from omp.store.strictjson import MAX_DEPTH, nests_deeper
from omp.usage import limits
from omp.usage.limits import CHUNK, MAX_LINE, MAX_WHOLE, Allowance
from omp.usage.totals import ReadState, Tally, Unreadable, UsageTotals

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

_decode = json.JSONDecoder().decode  # json.loads without its per-call checks
HEAD = 4096  # bytes of the file's start that must not change between reads
LONG = "longLine"  # memo: the read stopped inside a line longer than MAX_LINE


class Reader(NamedTuple):
    """One agent CLI's record format."""

    kind: str
    markers: tuple[bytes, ...]  # every line that counts contains one of these
    is_record: Callable[[dict[str, Any]], bool]  # does a first line look like this format?
    take: Callable[[dict[str, Any], Tally], None]  # count what one parsed line says
    what: str  # the format in a message: "a Copilot CLI events.jsonl"
    view: Callable[[ReadState], UsageTotals] = ReadState.totals  # the totals a state shows
    whole: Callable[[dict[str, Any], Tally], None] | None = None  # a one-document record
    whole_suffix: str = ""  # ... recognised by this name ending


Result = tuple[UsageTotals | Unreadable, ReadState]


def read(reader: Reader, path: Path, state: ReadState, allow: Allowance | None = None) -> Result:
    """The record's totals after reading what was added since `state`, and the new state;
    within `allow` (default: one read's, `limits.per_read`).

    On failure the state comes back unchanged: a passing problem (a permission fixed, a file
    back) loses nothing already counted.
    """
    allow = allow if allow is not None else limits.per_read()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return Unreadable("missing", f"{path}: no such file"), state
    except PermissionError:
        return Unreadable("permission", f"{path}: permission denied"), state
    except OSError as exc:
        return Unreadable("io_error", f"{path}: {exc.strerror or exc}"), state
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Unreadable("not_a_file", f"{path}: not a regular file"), state
        if reader.whole is not None and path.name.endswith(reader.whole_suffix):
            return _read_whole(reader, fd, st, path, state, allow)
        if not _same_file(fd, st, state):
            state = ReadState(kind=reader.kind, ino=st.st_ino, dev=st.st_dev)
        elif st.st_size == state.offset:
            return reader.view(state), state  # nothing new: the common case of a poll
        return _read_lines(reader, fd, st.st_size, path, state, allow)
    except OSError as exc:
        return Unreadable("io_error", f"{path}: {exc.strerror or exc}"), state
    finally:
        os.close(fd)


def _same_file(fd: int, st: os.stat_result, state: ReadState) -> bool:
    if (st.st_ino, st.st_dev) != (state.ino, state.dev) or st.st_size < state.offset:
        return False
    return not state.head_len or _crc(os.pread(fd, state.head_len, 0)) == state.head


def _crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def _read_lines(
    reader: Reader, fd: int, size: int, path: Path, state: ReadState, allow: Allowance
) -> Result:
    tally = Tally(state)
    skipping = bool(tally.memo.pop(LONG, False))  # inside a line too long to keep
    offset = pos = state.offset  # consumed up to `offset`; `carry` holds what follows it
    carry = b""
    cut = False
    while pos < size:
        if allow.spent():
            cut = True
            break
        chunk = os.pread(fd, min(CHUNK, size - pos), pos)
        if not chunk:
            break  # the file shrank under us: the next read notices and starts again
        at, pos = pos, pos + len(chunk)
        allow.take(len(chunk))
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                offset = pos  # still inside the long line: nothing of it is kept
                continue
            skipping, offset, chunk = False, at + nl + 1, chunk[nl + 1 :]
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n") + 1
        if not end:
            if len(buf) <= MAX_LINE:
                carry = buf  # one line, not complete yet
                continue
            if offset == 0:  # the first line says what the file is: it cannot be skipped
                why = f"{path}: its first line is longer than {MAX_LINE} bytes, not {reader.what}"
                return Unreadable("too_large", why), state
            tally.long_lines += 1
            skipping, offset, carry = True, pos, b""
            continue
        block, carry = buf[:end], buf[end:]
        if offset == 0:
            wrong = _check_first(reader, block, path)
            if wrong is not None:
                return wrong, state
        _scan(reader, block, tally)
        offset += len(block)
    if skipping:
        tally.memo[LONG] = True
    head_len = min(offset, HEAD)
    changes: dict[str, Any] = {"offset": offset}
    if head_len != state.head_len:
        changes.update(head_len=head_len, head=_crc(os.pread(fd, head_len, 0)))
    new = tally.state(state, **changes)
    shown = reader.view(new)
    return (shown._replace(unread=size - offset) if cut else shown), new


def _check_first(reader: Reader, block: bytes, path: Path) -> Unreadable | None:
    line = block[: block.find(b"\n")]
    if len(line) > MAX_LINE:
        why = f"{path}: its first line is longer than {MAX_LINE} bytes, not {reader.what}"
        return Unreadable("too_large", why)
    if nests_deeper(line):
        why = f"{path}: its first line is nested deeper than {MAX_DEPTH} levels"
        return Unreadable("format", why)
    try:
        first = json.loads(line)
    except ValueError:
        return Unreadable("format", f"{path}: the first line is not JSON, not {reader.what}")
    if not isinstance(first, dict) or not reader.is_record(first):
        return Unreadable("format", f"{path}: the first line is not that of {reader.what}")
    return None


def _scan(reader: Reader, block: bytes, tally: Tally) -> None:
    """Parse and count, in file order, each complete line of `block` holding a marker; a line
    longer than MAX_LINE or nested too deeply is counted aside, never parsed."""
    take = reader.take
    find = block.find
    for start in _marked(block, reader.markers):
        line = block[start : find(b"\n", start)]
        if len(line) > MAX_LINE:
            tally.long_lines += 1
            continue
        if nests_deeper(line):
            tally.skipped += 1
            continue
        try:
            rec = _decode(line.decode())
        except ValueError:
            tally.skipped += 1  # a line cut by a crash, then written over by the next line
        else:
            if isinstance(rec, dict):
                take(rec, tally)


def _marked(block: bytes, markers: tuple[bytes, ...]) -> list[int]:
    """The start offsets of the lines of `block` (which ends with a newline) holding a marker."""
    find, rfind = block.find, block.rfind
    starts: list[int] = []
    for marker in markers:
        at = find(marker)
        while at >= 0:
            starts.append(rfind(b"\n", 0, at) + 1)
            at = find(marker, find(b"\n", at) + 1)
    return starts if len(markers) == 1 else sorted(set(starts))


def has_marker(reader: Reader, line: bytes) -> bool:
    return any(m in line for m in reader.markers)


def _read_whole(
    reader: Reader, fd: int, st: os.stat_result, path: Path, state: ReadState, allow: Allowance
) -> Result:
    """A record kept as one JSON document, rewritten whole by its CLI: read again when its
    identity, size or time changes (`memo["stamp"]`), else the counts already made. Larger
    than MAX_WHOLE, it is not parsed (`too_large`); with its allowance spent, the counts
    already made stand, its bytes left for a later read."""
    assert reader.whole is not None
    stamp = [st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns]
    if state.memo.get("stamp") == stamp:
        return reader.view(state), state
    if st.st_size > MAX_WHOLE:
        why = f"{path}: {st.st_size} bytes, more than the {MAX_WHOLE} omp reads as one document"
        return Unreadable("too_large", why), state
    chunks: list[bytes] = []
    got = 0
    while got < st.st_size:
        if allow.spent():
            return reader.view(state)._replace(unread=st.st_size), state
        chunk = os.pread(fd, min(CHUNK, st.st_size - got), got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        allow.take(len(chunk))
    data = b"".join(chunks)
    try:
        if nests_deeper(data):
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        doc = json.loads(data)
    except ValueError:
        # Half written (its CLI writes it in place): keep what the last whole read counted.
        if state.memo.get("stamp"):
            return reader.view(state), state
        return Unreadable("format", f"{path}: not a JSON document, not {reader.what}"), state
    if not isinstance(doc, dict) or not reader.is_record(doc):
        return Unreadable("format", f"{path}: not {reader.what}"), state
    fresh = ReadState(kind=reader.kind, ino=st.st_ino, dev=st.st_dev)
    tally = Tally(fresh)
    reader.whole(doc, tally)
    tally.memo["stamp"] = stamp
    new = tally.state(fresh, offset=st.st_size)
    return reader.view(new), new
