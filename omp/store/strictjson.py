"""JSON as omp writes it, and nothing else: the one parser of every state file and JSONL line.

Python's `json.loads` takes more than omp ever writes: `NaN`, `Infinity` and `-Infinity`, a
number past a double (`1e999` becomes infinity), nesting until the interpreter's recursion limit
(`RecursionError`, which no reader expects; its scanner recurses once per level). Such a value
read from `.omp/state` used to travel into arithmetic, comparisons or the JSON answer (refused
there as `internal`). Here it is refused where the bytes are parsed, with a reason a person can
act on; the reader that owns the file decides what a damaged file means (`fs.read_json`: a
`corrupt_state` error naming it; a JSONL reader: one more bad line, skipped and kept).

Nesting is refused before any parser runs (`nests_deeper`), at MAX_DEPTH: every other reader of
JSON omp did not write (agents' session records and settings, a hook's stdin, `--input`) asks
the same function, so no input reaches a recursion.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

# Deeper than anything omp writes (its deepest file, the usage index, nests 5 levels) and than
# `omp team api` accepts as input; far below the interpreter's recursion limit, so no reader or
# writer that walks a parsed value recursively can be made to overflow.
MAX_DEPTH = 64
# An agent CLI's settings file is the user's own, and `omp hooks install` rewrites it in place:
# whatever nesting it holds is kept (a value 600 deep round-trips), up to this depth, which no
# parser's recursion reaches; deeper, it is refused before parsing, like everything else.
SETTINGS_DEPTH = 900
_INF = float("inf")


class Damaged(ValueError):
    """The bytes are not JSON omp could have written; `why` says what is wrong, for a person."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _constant(name: str) -> Any:
    raise Damaged(f"holds {name}, which is not JSON")


def _number(literal: str) -> float:
    value = float(literal)
    if value == _INF or value == -_INF:
        raise Damaged(f"holds the number {literal[:40]}, beyond what JSON readers hold")
    return value


DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_number)
# `(value, end)` of the JSON value that starts at an index, without `loads`'s wrappers
SCAN = DECODER.raw_decode


# `re`, imported when a text holds more than MAX_DEPTH brackets (never on a send's usual path)
_PATTERNS: list[Any] = []  # [a JSON string, a run of parens], compiled at first use
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_PARENS = bytes.maketrans(b"[{]}", b"(())")  # arrays and objects nest alike
_PASSES = 4


def nests_deeper(data: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Would parsing `data` open more than `limit` arrays and objects at once?

    Decided before any parser runs: `json`'s scanner recurses once per level (its C scanner
    too), so a line nested 200,000 deep must never reach it. All in C but the last step, and
    never recursive:
    - a count of brackets (a text holding no more than `limit` of them cannot nest deeper:
      the usual case, two passes of `bytes.count`);
    - else strings are left out and the brackets alone kept, as `(` and `)`; `limit + 1`
      opened in a row is deep at once (the 200,000-deep line);
    - else a few passes take out every innermost pair (`replace`): each pass lowers the depth
      by exactly one, and most texts are empty after them;
    - what is left is walked run by run (a run of `(` or of `)`), stopping as soon as it is
      deeper than what is left of `limit`.
    Text that is not JSON (a bracket unclosed, a string not ended) may be called deep: it is
    refused either way."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if not _PATTERNS:
        import re

        _PATTERNS.append(re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S))
        _PATTERNS.append(re.compile(rb"\(+|\)+"))
    strings, runs = _PATTERNS
    bare = strings.sub(b"", raw) if b'"' in raw else raw
    left = bare.translate(_PARENS, _NOT_BRACKETS)
    if b"(" * (limit + 1) in left:
        return True
    passes = min(_PASSES, limit)
    for _ in range(passes):
        left = left.replace(b"()", b"")
        if not left:
            return False
    room, depth = limit - passes, 0
    for run in runs.finditer(left):
        n = run.end() - run.start()
        if left[run.start()] == 0x28:  # "("
            depth += n
            if depth > room:
                return True
        else:
            depth -= n
    return False


def refuse_deep(data: bytes | str) -> None:
    """`Damaged` when `data` nests deeper than MAX_DEPTH (`nests_deeper`)."""
    if nests_deeper(data):
        raise Damaged(f"is nested deeper than {MAX_DEPTH} levels")


def loads(data: bytes) -> Any:
    """The value in `data`, or `Damaged` saying why it is not JSON omp writes."""
    try:
        # surrogatepass: a lone surrogate written as UTF-8 bytes, as `json.loads` of bytes takes
        # it (the text layer escapes it on output); any other byte that is not UTF-8 is refused
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise Damaged(f"is not UTF-8 (byte {exc.start})") from None
    if text.startswith("\ufeff"):  # as `json.loads` of bytes takes it (an editor's)
        text = text[1:]
    refuse_deep(data)  # before the scanner, which recurses
    try:
        return DECODER.decode(text)
    except Damaged:
        raise
    except ValueError as exc:  # not JSON, truncated, or an integer of more than 4300 digits
        if not text.strip():
            raise Damaged("is empty") from None
        raise Damaged(f"is not valid JSON ({exc})") from None
