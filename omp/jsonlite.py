"""`json.dumps` and `json.loads` for the per-call paths, without importing `json`.

`import json` costs ~1.5 ms a process, a tenth of what an `omp team api` call may cost above the
bare interpreter: `json.decoder`, `json.encoder` and `json.scanner` compile six regular
expressions as they load (and need `re`, ~5 ms more where the console script does not import it).
The work itself is done by `_json`, the C accelerator `json` uses anyway; these functions call it
the way `json.dumps` and `json.loads` do, and give the same text and the same values. Whatever
they do not cover themselves goes to `json`, imported then: an `indent`, a Python without
`_json`, and every failure (the C code needs `json.decoder` loaded to raise its error, so the
call is made again by `json` itself, which raises exactly what it always raises).
tests/test_jsonlite.py compares both with `json`'s.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own costs ~3 ms a process (see omp/typelite.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    from _json import encode_basestring, encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # another Python: `json` does it all
    make_encoder = make_scanner = None  # type: ignore[assignment,misc]

_BLANKS = " \t\n\r"  # JSON's whitespace, which `json` skips before and after the value
_INF = float("inf")
_CONSTANTS = {"-Infinity": -_INF, "Infinity": _INF, "NaN": float("nan")}


def _default(o: object) -> Any:
    """`json.JSONEncoder.default`: what cannot be encoded (its error is raised by `json` again)."""
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def dumps(
    obj: object,
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] | None = None,
    indent: int | None = None,
    allow_nan: bool = True,
) -> str:
    """`json.dumps(obj, ...)` with these arguments."""
    if indent is None and make_encoder is not None:
        if isinstance(obj, str):  # as `JSONEncoder.encode`: no check of the value
            return encode_basestring_ascii(obj) if ensure_ascii else encode_basestring(obj)
        item, key = separators or (", ", ": ")
        encode = encode_basestring_ascii if ensure_ascii else encode_basestring
        try:
            # the arguments `JSONEncoder.iterencode` gives it for a one-shot encoding
            chunks = make_encoder({}, _default, encode, None, key, item, False, False, allow_nan)(
                obj, 0
            )
            return "".join(chunks)
        except Exception:
            pass  # `json` raises its own error below
    import json

    return json.dumps(
        obj, ensure_ascii=ensure_ascii, separators=separators, indent=indent, allow_nan=allow_nan
    )


class _Context:
    """What `_json.make_scanner` reads of a `json.JSONDecoder`: its settings."""

    __slots__ = (
        "object_hook",
        "object_pairs_hook",
        "parse_constant",
        "parse_float",
        "parse_int",
        "strict",
    )

    def __init__(
        self, parse_constant: Callable[[str], Any], parse_float: Callable[[str], Any]
    ) -> None:
        self.strict = True
        self.object_hook = self.object_pairs_hook = None
        self.parse_float, self.parse_int, self.parse_constant = parse_float, int, parse_constant


class Decoder:
    """`json.JSONDecoder(parse_constant=..., parse_float=...)`: its `decode`, and `scan`, the
    scanner (`scan(text, index) -> (value, end)`) that `json.scanner.make_scanner` makes of it."""

    __slots__ = ("_parse_constant", "_parse_float", "scan")

    def __init__(
        self,
        parse_constant: Callable[[str], Any] | None = None,
        parse_float: Callable[[str], Any] | None = None,
    ) -> None:
        self._parse_constant = parse_constant
        self._parse_float = parse_float
        self.scan: Callable[[str, int], tuple[Any, int]]
        if make_scanner is not None:
            context = _Context(parse_constant or _CONSTANTS.__getitem__, parse_float or float)
            self.scan = make_scanner(context)  # type: ignore[arg-type]
        else:
            from json.scanner import make_scanner as json_scanner

            self.scan = json_scanner(self._json())

    def _json(self) -> Any:
        import json

        return json.JSONDecoder(parse_constant=self._parse_constant, parse_float=self._parse_float)

    def decode(self, text: str) -> Any:
        """`JSONDecoder.decode(text)`: the one value in `text`, blanks around it allowed."""
        if make_scanner is not None:
            try:
                obj, end = self.scan(text, len(text) - len(text.lstrip(_BLANKS)))
                if not text[end:].strip(_BLANKS):
                    return obj
            except Exception:
                pass  # `json` raises its own error below
        return self._json().decode(text)


_PLAIN = Decoder()


def loads(text: str) -> Any:
    """`json.loads(text)` of a `str`."""
    if not text.startswith("\ufeff"):  # `json.loads` refuses it: left to `json` below
        return _PLAIN.decode(text)
    import json

    return json.loads(text)
