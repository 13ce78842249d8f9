"""A mailbox's unread count read from its bytes, for a read-only caller that has no index.

`omp team status` needs only how many messages each member has not had delivered. With no index
(a history the TypeScript tool wrote, or one no omp writer has indexed yet) the mailbox's state
would have to be rebuilt line by line, ~0.15 s for 100,000 messages; read-only calls may not keep
an index. This module counts instead, exactly, and returns None whenever it is not sure (the
caller then rebuilds the state the usual way, `mailbox._catch_up`).

What "unread" means is the full parse's rule (`MailState.apply`): going down the file, a message
line puts its id in the unread set and a receipt takes it out; the count is the set's size at the
end. Lines that are not valid JSON, blank lines and other types change nothing.

How it counts without touching most lines from Python (every Python-level step per line costs
more than the regex engine's scan of it), a block of about a MiB at a time:

1. One `re.sub` deletes the *delivered units*: a message line whose receipt follows it, with the
   whole receipt lines after it. "Follows" is either a run (up to `RUN` messages, then their
   receipts in the same order: a member marking what it read, one by one or a burst at a time;
   each line is read once) or, for any other order, a lookahead that finds the message's receipt
   within `WINDOW` lines. The lookahead reads on past the block's end (`SLACK` bytes of the next
   block's lines are in the buffer for it). A message so followed is delivered whatever its own
   line holds, unless its id comes again later (see 2). A receipt matched whole is valid JSON;
   deleting it changes nothing but for the messages that wait (step 3 reads the buffer itself).
2. What is left is a few lines: each must be a message line with a plain id (a *candidate*, its
   receipt further away or missing) or a whole receipt; a line of another shape (another key
   order or spacing, another type, a blank line, an id the bytes do not say plainly) is the full
   parse's to judge: None. Only an id's last message line counts, so each candidate waits in
   `pending` with the offset of the last message line of its id in the block (`rfind`; when that
   is a deleted one, its receipt is found in step 3).
3. While something waits, one regex over each block finds receipt lines for the waiting ids; one
   after the waiting line that is a valid receipt (matched whole or parsed) takes the id out.
   More than `MAX_CANDIDATES` waiting: None (the rebuild's cost does not grow with them).
4. What still waits at the end is unread if its line parses as the JSON message its bytes
   promised; otherwise None.

The shapes are those both writers produce: keys in their order, compact (`JSON.stringify`,
omp's encoder) or with one blank after `:` and `,` (Python's `json.dumps` defaults). A receipt
matched whole is printable ASCII only, no escapes. A message is recognised by its first two
keys; like the rest of omp's byte-level reading (see `omp.mail.mailbox`), a message line is
trusted to carry no second `type` or `id` key, which no JSON writer produces. 100,000 messages
with their receipts: see benchmarks/bench_messaging.py.
"""

from __future__ import annotations

import os
import re

from omp.store import jsonl

BLOCK = 1 << 20
SLACK = 1 << 16  # read past a block's end, so that a receipt a few lines on is in sight
RUN = 16  # the longest run of messages followed by their receipts in order read in one pass
WINDOW = 16  # lines after a message within which the lookahead looks for its receipt (any order)
MAX_CANDIDATES = 64  # more messages than this waiting: the usual rebuild (its cost does not grow)
MAX_REST = 512  # more lines than this left by the deletion: another shape, or not worth it


class _Shape:
    """The patterns for one spelling of the two line shapes (compact, or `json.dumps`'s)."""

    __slots__ = ("candidate", "message", "receipt", "units", "whole")

    def __init__(self, colon: bytes, comma: bytes) -> None:
        def key(name: bytes) -> bytes:
            return b'"' + name + b'"' + colon

        lit = re.escape
        text = rb"[ !#-\[\]-~]"  # printable ASCII but `"` and `\`: what the bytes say, JSON says
        self.message = b"\n{" + key(b"type") + b'"message"' + comma + key(b"id") + b'"'
        self.receipt = (
            b"\n{" + key(b"type") + b'"delivery-receipt"' + comma + key(b"messageId") + b'"'
        )
        # the rest of a whole receipt line after its id, up to its newline (valid JSON, whole)
        tail = lit(b'"' + comma + key(b"deliveredAt") + b'"') + text + rb'{0,64}"\}[ \t\r]*'
        msg, rcpt = lit(self.message), lit(self.receipt)

        def message(name: bytes) -> bytes:  # a message line, its plain id captured as `name`
            return msg + b"(?P<" + name + b">" + text + b'{1,128}+)".*+'

        def receipt_for(name: bytes) -> bytes:
            return rcpt + b"(?P=" + name + b")" + tail + b"(?=\n)"

        names = [b"m%d" % i for i in range(RUN)]
        later = b""  # messages 2.. of a run, each optional; then receipts 2.. if they were there
        for name in reversed(names[1:]):
            later = b"(?:" + message(name) + later + b")?"
        receipts = b""
        for name in reversed(names[1:]):
            receipts = b"(?(" + name + b")" + receipt_for(name) + receipts + b")"
        run = message(names[0]) + later + receipt_for(names[0]) + receipts
        ahead = message(b"x") + rb"(?=(?:\n.*+){1,%d}?" % WINDOW + rcpt + b"(?P=x)" + tail + b"\n)"
        self.units = re.compile(
            b"(?:" + run + b"|" + ahead + b")(?:" + rcpt + text + b"{1,128}+" + tail + b"(?=\n))*+"
        )
        self.candidate = re.compile(msg[2:] + b"(" + text + b'{1,128}+)"')  # (no newline)
        self.whole = re.compile(rcpt[2:] + text + b"{1,128}" + tail + b"\n")  # with its newline


_SPELLINGS = ((b":", b","), (b": ", b", "))  # (colon, comma): compact, then `json.dumps`'s
_SHAPES: dict[int, _Shape] = {}


def _shape(spelling: int) -> _Shape:
    """One spelling's patterns, compiled on first use (~2-4 ms each): the per-call paths never
    need them, and a file of one spelling never compiles the other's."""
    shape = _SHAPES.get(spelling)
    if shape is None:
        shape = _SHAPES[spelling] = _Shape(*_SPELLINGS[spelling])
    return shape


def count(fd: int) -> int | None:
    """How many messages of the mailbox open as `fd` are unread, or None if not sure.

    Reads the complete lines (a last line without its newline waits for it, as everywhere).
    Writes nothing."""
    size = os.fstat(fd).st_size
    spellings = [0, 1]  # the one the last block had first: a file keeps its spelling
    if _first_is_spaced(fd):
        spellings.reverse()  # (the other's patterns are then never compiled)
    pending: dict[bytes, int] = {}  # a waiting id -> the file offset of its last message line
    for base, buf, owned, end in _Blocks(fd, size):
        view = memoryview(buf)[:end]
        for spelling in spellings:
            shape = _shape(spelling)
            candidates = _left(shape, shape.units.sub(b"", view))
            if candidates is not None:
                break
        else:
            return None  # a line of another shape: the full parse decides
        if spelling != spellings[0]:
            spellings.reverse()
        for key in candidates:
            at = buf.rfind(shape.message + key + b'"', 0, end)
            if at >= owned:
                continue  # its last line is the next block's: judged there
            pending.pop(key, None)  # (re-inserted: the later line is the one that counts)
            pending[key] = base + at
        if len(pending) > MAX_CANDIDATES:
            return None
        if pending:
            _deliver(pending, shape, buf, base, owned, end)
    return _confirmed(fd, size, pending)


def _first_is_spaced(fd: int) -> bool:
    """Whether the file's first line is spelled as `json.dumps` spells it (`{"type": "...`)."""
    return os.pread(fd, 10, 0) == _SPACED_HEAD


_SPACED_HEAD = b'{"type": "'


def _left(shape: _Shape, rest: bytes) -> set[bytes] | None:
    """The ids of the message lines the deletion left, or None if a line left is neither such a
    message nor a whole receipt (or too many are left)."""
    if rest.count(b"\n") > MAX_REST:
        return None
    ids: set[bytes] = set()
    for line in rest.split(b"\n")[1:-1]:
        hit = shape.candidate.match(line)
        if hit is not None:
            ids.add(hit[1])
        elif shape.whole.fullmatch(line + b"\n") is None:
            return None
    return ids


def _deliver(
    pending: dict[bytes, int], shape: _Shape, buf: bytearray, base: int, owned: int, end: int
) -> None:
    """Take out of `pending` each id a receipt line of the block's own delivers (one after the
    id's line). Each is whole, so valid: a receipt line that is not was left by the deletion,
    and `_left` refused the block."""
    ids = b"|".join(re.escape(k) for k in pending)
    finder = re.compile(re.escape(shape.receipt) + b"(" + ids + b')"')
    for hit in finder.finditer(buf, 0, end):
        at = hit.start()
        if at >= owned:
            break  # the next block's: read there
        key = hit[1]
        line_at = pending.get(key)
        if line_at is None or base + at <= line_at:
            continue  # delivered already, or a receipt before the line that waits
        del pending[key]
        if not pending:
            break


class _Blocks:
    """(base, buffer, owned, end) for the file's complete lines, about `BLOCK` bytes a block:
    `buffer[0]` is a newline put in front of the block (every line then starts after one), and
    `buffer[i]` is the file's byte at `base - 1 + i`. The block's own lines are those starting
    before index `owned` (the newline ending its last line); up to `end` follow more complete
    lines (`SLACK` bytes of them), read for a lookahead only: the next block starts with them.
    A line longer than a block is read whole. One buffer is read into again for each block (each
    is done with before that): no megabyte is copied or allocated per block."""

    __slots__ = ("_buf", "_fd", "_off", "_size")

    def __init__(self, fd: int, size: int) -> None:
        self._fd, self._off, self._size = fd, 0, size
        self._buf = bytearray(1)

    def __iter__(self) -> _Blocks:
        return self

    def __next__(self) -> tuple[int, bytearray, int, int]:
        off, size = self._off, self._size
        want = BLOCK
        while off < size:
            n = min(want + SLACK, size - off)
            if len(self._buf) < n + 1:
                self._buf = bytearray(n + 1)
            buf = self._buf
            buf[0] = 10  # b"\n"
            got = _read_into(self._fd, memoryview(buf)[1 : n + 1], off)
            last = buf.rfind(b"\n", 1, got + 1)  # the newline ending the last complete line
            if last > 0:
                owned = buf.rfind(b"\n", 1, min(want, got) + 1)
                if owned <= 0:
                    owned = last  # a line longer than the block: all that was read
                self._off = off + owned
                return off, buf, owned, last + 1
            if got < n or off + n >= size:
                break  # a last line without its newline (or a file cut short): not read yet
            want *= 2
        raise StopIteration


def _read_into(fd: int, view: memoryview, offset: int) -> int:
    if _PREADV is not None:
        return int(_PREADV(fd, [view], offset))
    data = os.pread(fd, len(view), offset)  # (no preadv here: one copy more)
    view[: len(data)] = data
    return len(data)


_PREADV = getattr(os, "preadv", None)


def _confirmed(fd: int, size: int, pending: dict[bytes, int]) -> int | None:
    """How many `pending` ids are unread: each if its line parses as the message with that id,
    else None (the full parse decides). Read with `pread`, as the count was."""
    for key, at in pending.items():
        line = _line(fd, at, size)
        if line is None:
            return None
        try:
            rec = jsonl.loads_line(line)
        except ValueError:
            return None
        if not (
            isinstance(rec, dict)
            and rec.get("type") == "message"
            and rec.get("id") == key.decode("ascii")
        ):
            return None  # not the message its bytes promised: the full parse decides
    return len(pending)


def _line(fd: int, start: int, size: int) -> bytes | None:
    """The complete line at file offset `start`, without its newline; None if it is not
    complete (the file changed meanwhile)."""
    data = b""
    while start + len(data) < size:
        data += os.pread(fd, min(BLOCK, size - start - len(data)), start + len(data))
        end = data.find(b"\n")
        if end >= 0:
            return data[:end]
        if not data:
            break
    return None
