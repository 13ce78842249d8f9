"""omp.jsonlite gives what `json` gives: the same text, the same values, the same errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from json.scanner import make_scanner

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omp import jsonlite

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

TEXT = st.text(alphabet=st.characters(codec=None), max_size=12) | st.sampled_from(
    ["", "é", "\u2028", "\x00\x1f\x7f", "\ud800", '"\\/', "\u202e", "😀"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too
    | TEXT
)
KEYS = TEXT | st.integers() | st.floats() | st.booleans() | st.none()
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS, inner, max_size=4)
    ),
    max_leaves=12,
)
ARGS = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "separators": st.sampled_from([None, (",", ":"), (", ", ": ")]),
        "indent": st.sampled_from([None, None, 2]),
        "allow_nan": st.booleans(),
    }
)


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """What `fn` gives: its value (NaN-safe, as its repr), or its error's type and message."""
    try:
        value = fn()
    except Exception as exc:
        return "error", (type(exc), str(exc))
    return "value", repr(value)


@pytest.mark.slow  # a property test; the close calls below stay in the quick loop
@settings(max_examples=300)
@given(VALUES, ARGS)
def test_dumps_is_json_dumps(value: Any, args: dict[str, Any]) -> None:
    assert outcome(lambda: jsonlite.dumps(value, **args)) == outcome(
        lambda: json.dumps(value, **args)
    )


@pytest.mark.parametrize(
    "value",
    [{1, 2}, b"bytes", {"a": object()}, [math.nan], {"k": math.inf}, {(1, 2): 3}, -math.inf],
    ids=["set", "bytes", "object", "nan", "inf", "tuple-key", "-inf"],
)
@pytest.mark.parametrize("allow_nan", [True, False])
def test_what_json_refuses_is_refused_alike(value: object, allow_nan: bool) -> None:
    got = outcome(lambda: jsonlite.dumps(value, allow_nan=allow_nan))
    assert got == outcome(lambda: json.dumps(value, allow_nan=allow_nan))


def test_a_circular_value_is_refused_alike() -> None:
    loop: list[object] = []
    loop.append(loop)
    got = outcome(lambda: jsonlite.dumps(loop))
    assert got == outcome(lambda: json.dumps(loop))
    assert got[0] == "error"


# Texts near JSON: valid documents with blanks around and inside, cut short, with extra data.
DOCS = st.builds(
    lambda value, pad, cut, tail: (pad + json.dumps(value, indent=cut % 3 or None) + pad + tail)[
        : None if cut % 5 else -1
    ],
    VALUES,
    st.sampled_from(["", " ", "\n\t \r", "\u00a0", "\x0c"]),
    st.integers(0, 30),
    st.sampled_from(["", "", "x", "1", "]", " {}", "\ufeff"]),
)
CLOSE_CALLS = [
    "",
    " ",
    "\ufeff{}",
    "{}\ufeff",
    "NaN",
    "-Infinity",
    "[Infinity, 1e999]",
    "1" * 5000,
    "[" * 100 + "]" * 100,
    '"\\ud800"',
    '"\\x"',
    '"a\nb"',
    "{'a': 1}",
    '{"a" 1}',
    "[1,]",
    "tru",
    "0x10",
    "01",
    "-",
    "1.",
    '{"a": 1, "a": 2}',
]


@pytest.mark.slow  # a property test; the close calls below stay in the quick loop
@settings(max_examples=300)
@given(DOCS | st.text(max_size=20))
def test_loads_is_json_loads(text: str) -> None:
    assert outcome(lambda: jsonlite.loads(text)) == outcome(lambda: json.loads(text))


@pytest.mark.parametrize("text", CLOSE_CALLS, ids=repr)
def test_loads_is_json_loads_on_close_calls(text: str) -> None:
    assert outcome(lambda: jsonlite.loads(text)) == outcome(lambda: json.loads(text))


def _refuse(name: str) -> Any:
    raise ValueError(f"no {name}")


def _half(literal: str) -> float:
    return float(literal) / 2


@pytest.mark.parametrize("text", [*CLOSE_CALLS, ' {"a": [1.5, NaN]} ', "2.5", "[-Infinity]"])
def test_a_decoder_with_hooks_is_json_decoder(text: str) -> None:
    ours = jsonlite.Decoder(parse_constant=_refuse, parse_float=_half)
    theirs = json.JSONDecoder(parse_constant=_refuse, parse_float=_half)
    assert outcome(lambda: ours.decode(text)) == outcome(lambda: theirs.decode(text))
    start = len(text) - len(text.lstrip())
    scan = make_scanner(theirs)  # type: ignore[arg-type]  # (typeshed types it oddly)
    assert outcome(lambda: ours.scan(text, start)) == outcome(lambda: scan(text, start))


def test_ordinary_use_does_not_import_json() -> None:
    code = (
        "import sys\n"
        "from omp import jsonlite\n"
        "t = jsonlite.dumps({'a': [1, 2.5, 'é', None, True]}, ensure_ascii=False)\n"
        "assert jsonlite.loads(t) == {'a': [1, 2.5, 'é', None, True]}\n"
        "assert jsonlite.Decoder().decode(' [1] ') == [1]\n"
        "print(sorted(m for m in sys.modules if m == 'json' or m.startswith('json.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_failure_imports_json_and_raises_its_error() -> None:
    code = (
        "from omp import jsonlite\n"
        "try:\n"
        "    jsonlite.loads('[1,')\n"
        "except ValueError as exc:\n"
        "    print(type(exc).__module__, type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "json.decoder JSONDecodeError Expecting value: line 1 column 4 (char 3)"
    )
