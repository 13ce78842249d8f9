"""`omp team events --json` a block of the log at a time, most lines without parsing them.

The reference is the parse path, `_print(evs, as_json=True)` of `history.iter_since` (what
`--follow` prints as lines come): each line parsed strictly (`jsonl.loads_line`), the header line
and lines that are no JSON object skipped, the event's `cursor` set and `output.dumps` of it
printed through `output.write_text`. This module prints the same bytes for every input; it only
skips the work where the bytes decide the answer:

A line with no backslash and no control character, valid UTF-8, splits on `"` into its strings
(the odd pieces) and the structure between them (the even pieces: brackets, `:`, `,`, numbers,
literals, blanks). Two such lines with the same structure and the same keys (the strings the
structure shows to be keys) differ only in the text of their string values, which the parse
takes and `json.dumps` writes back verbatim (no quote, backslash or control character in them to
escape). So whether the parse path prints a line as its own bytes with the cursor added before
its closing brace (compact, no key twice, numbers and literals as `json.dumps` writes them, no
`cursor` key of its own) is the same for every line of that shape. The first line of a shape is
parsed and its printing compared with the pass-through; the answer is kept for the shape, with
where the top-level `type` string stands (a header line, `"type":"log"`, is skipped, as the
parse path skips it). Every other line (escapes, blanks, floats, NaN, a torn or invalid line,
a shape that failed the comparison) takes the parse path itself.

A shape found to pass also becomes a pattern (`Shapes.add`): its structure and keys literally,
`[^"\\\x00-\x1f]*` for each string value, any integer `json.dumps` writes back as it stands
for each integer, the top-level `type` not `log`. A line the patterns match has that very shape
but for its integers (its quotes fall where the shape's do), so it is passed through after one
match, without splitting it; the rest are split as above.

The text is then made safe as the parse path makes it (`json_safe`, `visible`): a no-op for
ASCII without DEL, the usual block.
"""

from __future__ import annotations

import json
import re
from operator import itemgetter

from omp.record.history import LOG_HEADER
from omp.store import jsonl
from omp.textsafe import json_safe, unsafe_characters, visible

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


# `output.dumps` before its `json_safe`: the comparison is of what `json.dumps` wrote
_RAW = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# Every control character but the newline: raw in a string, the strict parse refuses the line
_CONTROLS = bytes(range(0x20)).replace(b"\n", b"")
# Integers are structure too: a shape keeps where each is zero, so `"seq":7` and `"seq":9` share
# one (whether `json.dumps` writes an integer back as it stands depends on nothing else; a float
# is never passed through)
_DIGITS = bytes.maketrans(b"23456789", b"11111111")
# A verdict: not passed through; passed through, no top-level `type` string; else its piece
_PARSE = -2
_NO_TYPE = -1
_HEADER = LOG_HEADER.encode()
# An integer in a passed shape's structure, and what matches any integer `json.dumps` writes back
# as it stands (fewer digits than the 4,300 the parse takes). (Patterns are compiled on first use:
# a poll with nothing new, the usual call, compiles none.)
_INTEGER = rb"(-?[0-9]+)"
_ANY_INTEGER = rb"(?:0|-?[1-9][0-9]{0,999})"
_VALUE = rb'[^"\\\x00-\x1f]*'  # a string value's text: what the parse takes as it stands


# The patterns of passed shapes tried at once, at most (a log of many shapes: the rest are split)
_MAX_PATTERNS = 32
# Every how many blocks a log whose lines mostly take the parse path is tried again
_PROBE = 8
# The structures and key sets kept, at most, all together: memory stays bounded whatever the log
# (a line of a shape beyond them takes the parse path)
_MAX_SHAPES = 4096


class Shapes:
    """The verdicts kept across the blocks of one read."""

    __slots__ = ("blocks", "kept", "known", "match", "patterns", "poor")

    def __init__(self) -> None:
        # structure -> (its keys getter, keys -> verdict)
        self.known: dict[bytes, tuple[Callable[[list[bytes]], Any], dict[Any, int]]] = {}
        self.patterns: list[bytes] = []
        self.match: Callable[[bytes], Any] = _no_match
        # Fewer than half the last block's lines passed (another writer's log: blanks, floats):
        # the next blocks take the parse path at once, but every `_PROBE`th, which tries again
        self.poor = False
        self.blocks = 0
        self.kept = 0  # structures and key sets in `known`, at most _MAX_SHAPES

    def add(self, parts: list[bytes], verdict: int) -> None:
        """The pattern of a shape that passes (`parts`: a line of it split on its quotes)."""
        if len(self.patterns) >= _MAX_PATTERNS:
            return
        out = []
        for i, p in enumerate(parts):
            if i % 2 == 0:  # structure: its integers (a passed shape has no float) any integer
                pieces = re.split(_INTEGER, p)
                pieces[0::2] = [re.escape(x) for x in pieces[0::2]]
                pieces[1::2] = [_ANY_INTEGER] * (len(pieces) // 2)
                out.append(b"".join(pieces))
            elif i == verdict:
                out.append(b'(?!log")' + _VALUE)
            elif parts[i + 1][:1] == b":":  # a key
                out.append(re.escape(p))
            else:
                out.append(_VALUE)
        self.patterns.append(b'"'.join(out))
        self.match = re.compile(b"|".join(b"(?:%s)" % x for x in self.patterns)).fullmatch


def _no_match(line: bytes) -> None:
    return None


def new_shapes() -> Shapes:
    return Shapes()


def render(data: bytes, start: int, prefix: str, shapes: Shapes) -> tuple[bytes, int]:
    """(the bytes the parse path prints for the whole lines of `data`, which begins at offset
    `start` of the log, and the number of events among them). `prefix`: the cursor of every
    event but its end offset (`team:log:`)."""
    head_text = _RAW.encode(prefix)[:-1]  # `"team:log:`: digits need no escape
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: nothing (blocks are whole lines)
    shapes.blocks += 1
    if not head_text.isascii() or (shapes.poor and shapes.blocks % _PROBE):
        return _parse_path(lines, start, prefix)  # (no team name holds such a character)
    head = head_text.encode().replace(b"%", b"%%")
    passed = b'%s,"cursor":' + head + b'%d"}\n'  # a passed line, its closing brace cut
    plain = b"\\" not in data and len(data.translate(None, _CONTROLS)) == len(data)
    utf8 = data.isascii() or _utf8(data)  # (one look at the block: then each line is)
    out: list[bytes] = []
    add = out.append
    known_shape = shapes.known.get
    match = shapes.match
    digits, header = _DIGITS, _HEADER
    end = start
    parsed = 0  # lines that took the parse path
    for line in lines:
        end += len(line) + 1
        if utf8 or _utf8(line):
            if match(line) is not None:  # a shape that passes, not the header
                add(passed % (line[:-1], end))
                continue
            if plain or _plain(line):
                parts = line.split(b'"')
                structure = b'"'.join(parts[0::2]).translate(digits)
                known = known_shape(structure)
                if known is None:
                    known = (_keys_getter(parts), {})
                    if shapes.kept < _MAX_SHAPES:
                        shapes.known[structure] = known
                        shapes.kept += 1
                keys = known[0](parts)
                verdict = known[1].get(keys)
                if verdict is None:
                    parsed += 1  # a shape's first line is parsed: a log of new shapes is poor
                    verdict, printed = _first_of_shape(line, parts, end, prefix, head_text)
                    if shapes.kept < _MAX_SHAPES:
                        known[1][keys] = verdict
                        shapes.kept += 1
                    if verdict != _PARSE:
                        shapes.add(parts, verdict)
                        match = shapes.match
                    if printed is not None:
                        add(printed)
                    continue
                if verdict >= 0:
                    if parts[verdict] != header:  # the header line names the log: no event
                        add(passed % (line[:-1], end))
                    continue
                if verdict == _NO_TYPE:
                    add(passed % (line[:-1], end))
                    continue
        parsed += 1
        printed = _parse_line(line, end, prefix)
        if printed is not None:
            add(printed)
    shapes.poor = parsed * 2 > len(lines)
    blob = b"".join(out)
    if not blob.isascii() or b"\x7f" in blob:
        # What the parse path makes of the passed lines' text (its own lines stay as they are:
        # nothing left to escape in them, and their bytes are UTF-8)
        blob = _made_safe(blob.decode("utf-8")).encode("utf-8")
    return blob, len(out)


def _made_safe(text: str) -> str:
    """`visible(json_safe(text))`, without the translation when it would change nothing: a
    translation costs a dictionary look-up a character, looking for a character it would write
    otherwise does not."""
    if (text.isascii() and "\x7f" not in text) or not _unsafe(text):
        return text
    return visible(json_safe(text))


_UNSAFE: list[re.Pattern[str]] = []  # compiled on first use


def _unsafe(text: str) -> bool:
    if not _UNSAFE:
        _UNSAFE.append(re.compile(f"[{re.escape(unsafe_characters())}]"))
    return _UNSAFE[0].search(text) is not None


def _plain(line: bytes) -> bool:
    return b"\\" not in line and len(line.translate(None, _CONTROLS)) == len(line)


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")  # strict: no surrogate (the parse path would print it as `?`)
    except UnicodeDecodeError:
        return False
    return True


def _keys_getter(parts: list[bytes]) -> Callable[[list[bytes]], Any]:
    """The pieces of `parts` that are keys: the strings the structure follows with `:`."""
    at = [i for i in range(1, len(parts) - 1, 2) if parts[i + 1][:1] == b":"]
    if not at:
        return _no_keys
    return itemgetter(*at)


def _no_keys(parts: list[bytes]) -> tuple[()]:
    return ()


def _float(parts: list[bytes]) -> bool:
    """Does the structure hold a float (`1.5`, `1e5`): its digits decide how it is written."""
    return any(
        b"." in p or b"e" in p.replace(b"true", b"").replace(b"false", b"") or b"E" in p
        for p in parts[0::2]
    )


def _type_piece(parts: list[bytes]) -> int:
    """The piece holding the value of the top-level key `type` when that value is a string, else
    `_NO_TYPE`. (Brackets in the even pieces are structure: strings are the odd ones.)"""
    depth = 0
    for i in range(0, len(parts) - 2, 2):
        p = parts[i]
        depth += p.count(b"{") + p.count(b"[") - p.count(b"}") - p.count(b"]")
        if depth == 1 and parts[i + 1] == b"type" and parts[i + 2] == b":":
            return i + 3
    return _NO_TYPE


def _first_of_shape(
    line: bytes, parts: list[bytes], end: int, prefix: str, head: str
) -> tuple[int, bytes | None]:
    """(the verdict for the shape of `line`, what the parse path prints of it)."""
    rec = _parse(line)
    if rec is None:
        return _PARSE, None
    rec["cursor"] = prefix + str(end)
    passed = b'%s,"cursor":%s%d"}' % (line[:-1], head.encode(), end)
    same = _RAW.encode(rec).encode("utf-8", "surrogatepass") == passed
    verdict = _type_piece(parts) if same and not _float(parts) else _PARSE
    kind = rec.get("type")
    if verdict != _PARSE and (
        parts[verdict].decode() != kind if verdict >= 0 else isinstance(kind, str)
    ):
        verdict = _PARSE  # (cannot be: the structure says where `type` is; but be sure)
    if rec.get("type") == LOG_HEADER:
        return verdict, None
    return verdict, _printed(rec)


def _parse(line: bytes) -> dict[str, Any] | None:
    """The line as `jsonl.parse_lines` takes it: a JSON object, else None (skipped)."""
    if not line.strip():
        return None
    try:
        rec = jsonl.loads_line(line)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _printed(rec: dict[str, Any]) -> bytes:
    """`_print(..., as_json=True)` of one event that carries its cursor: `visible` of
    `output.dumps` (`json_safe` of `json.dumps`), encoded as `output.write_text` encodes."""
    return _made_safe(_RAW.encode(rec) + "\n").encode("utf-8", "replace")


def _parse_line(line: bytes, end: int, prefix: str) -> bytes | None:
    rec = _parse(line)
    if rec is None or rec.get("type") == LOG_HEADER:
        return None
    rec["cursor"] = prefix + str(end)
    return _printed(rec)


def _parse_path(lines: list[bytes], start: int, prefix: str) -> tuple[bytes, int]:
    out: list[bytes] = []
    end = start
    for line in lines:
        end += len(line) + 1
        printed = _parse_line(line, end, prefix)
        if printed is not None:
            out.append(printed)
    return b"".join(out), len(out)
