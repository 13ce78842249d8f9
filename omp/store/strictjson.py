"""JSON as omp writes it, and nothing else: the one parser of every state file and JSONL line.

Python's `json.loads` takes more than omp ever writes: `NaN`, `Infinity` and `-Infinity`, a
number past a double (`1e999` becomes infinity), nesting until the interpreter's recursion limit
(`RecursionError`, which no reader expects). Such a value read from `.omp/state` used to travel
into arithmetic, comparisons or the JSON answer (refused there as `internal`). Here it is refused
where the bytes are parsed, with a reason a person can act on; the reader that owns the file
decides what a damaged file means (`fs.read_json`: a `corrupt_state` error naming it; a JSONL
reader: one more bad line, skipped and kept).
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


def too_deep(obj: Any) -> bool:
    """Does `obj` nest deeper than MAX_DEPTH? Iterative, so it cannot overflow itself."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return False


def may_be_deep(data: bytes | str) -> bool:
    """Could `data` nest deeper than MAX_DEPTH? A count of brackets (C speed): only a value with
    more opening brackets than that needs the walk."""
    if isinstance(data, str):
        return data.count("[") + data.count("{") > MAX_DEPTH
    return data.count(b"[") + data.count(b"{") > MAX_DEPTH


def checked(obj: Any, data: bytes | str) -> Any:
    """`obj`, parsed from `data`, unless it nests too deeply."""
    if may_be_deep(data) and too_deep(obj):
        raise Damaged(f"is nested deeper than {MAX_DEPTH} levels")
    return obj


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
    try:
        obj = DECODER.decode(text)
    except Damaged:
        raise
    except RecursionError:
        raise Damaged(f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # not JSON, truncated, or an integer of more than 4300 digits
        if not text.strip():
            raise Damaged("is empty") from None
        raise Damaged(f"is not valid JSON ({exc})") from None
    return checked(obj, text)
