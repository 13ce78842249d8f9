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
more than the regex engine's scan of it):

1. A message line immediately followed by the receipt for its id (the usual layout: a member
   marks what it reads) is a pair; `re.sub` deletes every pair of a block without building an
   object per pair. A pair counts as the receipt alone: the message it carries was delivered,
   whatever the message line holds, and the receipt still takes its id out of the set, which
   only matters for that id's other lines (step 3 checks the few where it could).
2. What is left is read with two `findall`s: every line's id and every line's kind (message or
   receipt), and `dict(zip(ids, kinds))` keeps each id's last event; ids whose last event is a
   message are the block's unread ones. If any line left is not one of the two shapes (another
   key order or spacing, another type, a blank line, a torn line, a receipt that is not valid
   JSON) the answer is None.
3. Each id that ends unread (at most `MAX_CANDIDATES`) is checked in the file: no later message
   line of that id (which could only sit in a deleted pair), and its last message line parses
   as a JSON message with that id. Otherwise None.

The shapes are those both writers produce: keys in their order, compact (`JSON.stringify`,
omp's encoder) or with one blank after `:` and `,` (Python's `json.dumps` defaults). A receipt
is matched whole, so it is valid JSON: printable ASCII only, no escapes. A message is
recognised by its first two keys; like the rest of omp's byte-level reading (see
`omp.mail.mailbox`), a message line is trusted to carry no second `type` or `id` key, which no
JSON writer produces. 100,000 messages with their receipts: see benchmarks/bench_messaging.py.
"""

from __future__ import annotations

import os
import re
from itertools import compress

from omp.store import jsonl

BLOCK = 1 << 20
MAX_CANDIDATES = 64  # more unread ids than this: the usual rebuild (its cost does not grow)
_M = b"m"
_D = b"d"


class _Shape:
    """The patterns for one spelling of the two line shapes (compact, or `json.dumps`'s)."""

    __slots__ = ("ids", "kinds", "message", "pair")

    def __init__(self, colon: bytes, comma: bytes) -> None:
        def key(name: bytes) -> bytes:
            return b'"' + name + b'"' + colon

        def lit(raw: bytes) -> bytes:
            return re.escape(raw)

        text = rb"[ !#-\[\]-~]"  # printable ASCII but `"` and `\`: what the bytes say, JSON says
        message = b"{" + key(b"type") + b'"message"' + comma + key(b"id") + b'"'
        receipt = b"{" + key(b"type") + b'"delivery-receipt"' + comma + key(b"messageId") + b'"'
        receipt_tail = (
            lit(b'"' + comma + key(b"deliveredAt") + b'"') + text + rb'{0,64}"\}[ \t\r]*(?=\n)'
        )
        self.message = b"\n" + message  # the bytes a message line starts with
        # a message line and, on the next line, the receipt for its id (valid JSON, whole)
        self.pair = re.compile(
            rb"\n" + lit(message) + b"(" + text + rb'{1,128})"[^\n]*\n'
            + lit(receipt) + rb"\1" + receipt_tail
        )  # fmt: skip
        # every message or receipt line's id (a receipt's only if the whole line has its shape)
        self.ids = re.compile(
            rb"\n(?:" + lit(message) + b"|" + lit(receipt)
            + b"(?=" + text + b"{1,128}" + receipt_tail + b"))"
            + rb'([^"\n]{1,128})"'
        )  # fmt: skip
        # every line's kind: b"m", b"d", or for any other line its first byte (or b"")
        self.kinds = re.compile(
            rb"\n(?:" + lit(b"{" + key(b"type") + b'"') + rb'(?=message"|delivery-receipt")|)(.?)'
        )


_SHAPES: list[_Shape] = []


def _shapes() -> list[_Shape]:
    if not _SHAPES:  # compiled on first use: the per-call paths never need them
        _SHAPES.extend((_Shape(b":", b","), _Shape(b": ", b", ")))
    return _SHAPES


def count(fd: int) -> int | None:
    """How many messages of the mailbox open as `fd` are unread, or None if not sure.

    Reads the complete lines (a last line without its newline waits for it, as everywhere).
    Writes nothing."""
    size = os.fstat(fd).st_size
    shapes = list(_shapes())  # the one the last block had first: a file keeps its spelling
    unread: dict[bytes, int] = {}  # id -> where the block holding its last message line starts
    for base, block in _Blocks(fd, size):
        for shape in shapes:
            rest = shape.pair.sub(b"", block)
            if len(rest) == 1:  # only pairs: nothing else to read
                break
            ids: list[bytes] = shape.ids.findall(rest)
            kinds: list[bytes] = shape.kinds.findall(rest, 0, len(rest) - 1)
            if len(kinds) == len(ids) == kinds.count(_M) + kinds.count(_D):
                break
        else:
            return None  # a line of another shape: the full parse decides
        if shape is not shapes[0]:
            shapes.reverse()
        if not base and 2 * len(rest) > len(block):
            return None  # not mostly pairs: reading every line, the rebuild is as fast
        if len(rest) == 1:
            continue
        last = dict(zip(ids, kinds, strict=True))
        for key in last.keys() & unread.keys():  # seen again in this block: its last event rules
            del unread[key]
        unread.update(dict.fromkeys(compress(last, map(_M.__eq__, last.values())), base))
    if len(unread) > MAX_CANDIDATES:
        return None
    return _confirmed(fd, size, unread, shapes)


class _Blocks:
    """(offset, block): complete lines of about `BLOCK` bytes each, a newline put in front (every
    line then starts after one). A line longer than a block is read whole. The blocks are views
    of one buffer, read into again for the next (each is done with before that): no megabyte is
    copied or allocated per block, which is a fifth of the count's time."""

    __slots__ = ("_buf", "_fd", "_off", "_size")

    def __init__(self, fd: int, size: int) -> None:
        self._fd, self._off, self._size = fd, 0, size
        self._buf = bytearray(1)

    def __iter__(self) -> _Blocks:
        return self

    def __next__(self) -> tuple[int, memoryview]:
        off, size = self._off, self._size
        want = BLOCK
        while off < size:
            n = min(want, size - off)
            if len(self._buf) < n + 1:
                self._buf = bytearray(n + 1)
            buf = self._buf
            buf[0] = 10  # b"\n"
            view = memoryview(buf)
            got = _read_into(self._fd, view[1 : n + 1], off)
            cut = buf.rfind(b"\n", 1, got + 1)  # the buffer's index of the block's last newline
            if cut > 0:
                self._off = off + cut
                return off, view[: cut + 1]
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


def _confirmed(fd: int, size: int, unread: dict[bytes, int], shapes: list[_Shape]) -> int | None:
    """How many of the `unread` ids are unread in the file, or None if one is in doubt.

    An id's last message line in the file is either the one the count saw last (then it must
    parse as that message) or the message of a deleted pair (then the pair's receipt, later,
    delivered it). Read with `pread`, as the count was: a file cut short meanwhile reads short."""
    if not unread:
        return 0
    budget = 4 * size  # bytes searched back for the ids' lines: past that, rebuild instead
    found = 0
    for key, base in unread.items():
        start = max(_rfind(fd, s.message + key + b'"', max(base - 1, 0), size) for s in shapes) + 1
        budget -= size - start
        if budget < 0:
            return None
        if start == 0:  # not after a newline: only the file's first line may be it
            head = os.pread(fd, max(len(s.message) for s in shapes) + len(key), 0)
            if base or not any(head.startswith(s.message[1:] + key + b'"') for s in shapes):
                return None  # not where the count saw it: the file changed meanwhile
        lines = _two_lines(fd, start, size)
        if lines is None:
            return None
        line, both = lines
        if both is not None and any(_whole(s.pair.match(both), len(both) - 1) for s in shapes):
            continue  # a pair: its receipt follows it
        try:
            rec = jsonl.loads_line(line)
        except ValueError:
            return None
        if not (
            isinstance(rec, dict)
            and rec.get("type") == "message"
            and rec.get("id") == key.decode("utf-8", "surrogatepass")
        ):
            return None  # not the message its bytes promised: the full parse decides
        found += 1
    return found


def _rfind(fd: int, needle: bytes, lo: int, hi: int) -> int:
    """The offset of the last `needle` within [lo, hi) of the file, or -1."""
    end = hi
    while end > lo:
        start = max(lo, end - BLOCK)
        data = os.pread(fd, min(hi, end + len(needle) - 1) - start, start)
        at = data.rfind(needle)
        if at >= 0:
            return start + at
        end = start
    return -1


def _two_lines(fd: int, start: int, size: int) -> tuple[bytes, bytes | None] | None:
    """The line at `start` (without its newline), and it with the next line after a newline put
    in front (None if no complete next line); None if the line itself is not complete."""
    data = b""
    while True:
        data += os.pread(fd, min(BLOCK, size - start - len(data)), start + len(data))
        end = data.find(b"\n")
        after = data.find(b"\n", end + 1) if end >= 0 else -1
        if after >= 0 or start + len(data) >= size:
            break
    if end < 0:
        return None
    return data[:end], (b"\n" + data[: after + 1] if after >= 0 else None)


def _whole(m: re.Match[bytes] | None, end: int) -> bool:
    return m is not None and m.end() == end
