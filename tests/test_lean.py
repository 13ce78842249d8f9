"""The per-call paths' stand-ins behave as what they replace: `omp.typelite` as `typing`'s
`NamedTuple`/`Generic`/`cast`, `omp.clock` as `datetime`, `omp.textsafe`'s translate tables as
the regular expressions they replaced."""

from __future__ import annotations

import pickle
import re
import typing
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omp import clock, textsafe, typelite

# ---- typelite ---------------------------------------------------------------------------------


class Lite(typelite.NamedTuple):
    """A point."""

    x: int
    y: str = "y"
    z: float = 1.5

    @property
    def twice(self) -> int:
        return self.x * 2

    def label(self) -> str:
        return f"{self.x}{self.y}"


class Real(typing.NamedTuple):
    """A point."""

    x: int
    y: str = "y"
    z: float = 1.5

    @property
    def twice(self) -> int:
        return self.x * 2

    def label(self) -> str:
        return f"{self.x}{self.y}"


def test_named_tuple_is_typings() -> None:
    classes: list[Any] = [Lite, Real]  # mypy knows only typing's as a NamedTuple
    for cls in classes:
        p = cls(3)
        assert tuple(p) == (3, "y", 1.5)
        assert p == cls(3, "y", 1.5) == cls(x=3, z=1.5)
        assert p.twice == 6 and p.label() == "3y"
        assert p._replace(y="q").y == "q"
        assert p._asdict() == {"x": 3, "y": "y", "z": 1.5}
        assert cls._fields == ("x", "y", "z")
        assert cls._field_defaults == {"y": "y", "z": 1.5}
        assert cls.__doc__ == "A point."
        assert cls.__module__ == __name__
        assert pickle.loads(pickle.dumps(p)) == p
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(AttributeError):
            p.x = 4
    assert repr(classes[0](3)) == repr(Real(3)).replace("Real", "Lite")


def _lite_class(name: str, fields: list[str], defaults: list[object]) -> Any:
    """A typelite.NamedTuple subclass of these fields (the last ones with these defaults)."""
    ns: dict[str, object] = {"__annotations__": dict.fromkeys(fields, "int")}
    ns.update({"__module__": __name__, "__qualname__": name})
    ns.update(zip(fields[len(fields) - len(defaults) :], defaults, strict=True))
    meta: Any = type(typelite.NamedTuple)
    return meta(name, (typelite.NamedTuple,), ns)


def _behaviour(cls: Any, n: int) -> list[object]:
    """What can be seen of a named tuple class of `n` fields."""
    import copy
    import inspect

    seen: list[object] = [cls.__name__, cls.__doc__, cls._fields, cls._field_defaults]
    seen += [cls.__match_args__, str(inspect.signature(cls)), cls.__new__.__doc__, cls.__slots__]
    seen += [[getattr(cls, f).__doc__ for f in cls._fields], issubclass(cls, tuple)]
    args = list(range(100, 100 + n))
    p = cls(*args)
    seen += [repr(p), tuple(p), p._asdict(), repr(p._replace(**{cls._fields[-1]: "z"}))]
    seen += [repr(cls._make(args)), p == tuple(args), hash(p) == hash(tuple(args))]
    seen += [repr(copy.copy(p)), repr(copy.deepcopy(p)), p.__getnewargs__()]  # as pickle does
    seen += [
        [getattr(p, f) for f in cls._fields],
        repr(cls(**dict(zip(cls._fields, args, strict=True)))),
    ]
    for bad in (
        lambda: cls._make(args[:-1]),
        lambda: p._replace(nope=1),
        lambda: cls(*args, 1),
        lambda: cls(**{cls._fields[0]: 1}, nope=2),
        lambda: setattr(p, cls._fields[0], 1),
    ):
        try:
            bad()
            seen.append("no error")
        except (TypeError, ValueError, AttributeError) as exc:
            seen.append((type(exc), str(exc)))
    return seen


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 12, 13, 15])
@pytest.mark.parametrize("n_defaults", [0, 1, 3])
def test_named_tuples_of_any_size_are_collections_namedtuple(n: int, n_defaults: int) -> None:
    """typelite builds the class without `collections.namedtuple` (up to 12 fields): the same."""
    import collections

    fields = [f"f{i}" for i in range(n)]
    defaults: list[object] = [f"d{i}" for i in range(min(n_defaults, n))]
    lite = _lite_class("Pt", fields, defaults)
    real = collections.namedtuple("Pt", fields, defaults=defaults, module=__name__)  # type: ignore[misc]
    assert _behaviour(lite, n) == _behaviour(real, n)
    assert (lite._replace is typelite._replace) is (n <= 12)  # built without namedtuple


def test_a_field_named_with_an_underscore_is_refused_as_namedtuple_does() -> None:
    with pytest.raises(ValueError, match="cannot start with an underscore"):
        _lite_class("Bad", ["_x"], [])


def test_named_tuple_refuses_a_field_without_default_after_one_with() -> None:
    with pytest.raises(TypeError):

        class Bad(typelite.NamedTuple):
            a: int = 1
            b: int


def test_generic_and_cast_are_plain_at_run_time() -> None:
    class Box(typelite.Generic):
        pass

    assert Box[int] is Box  # type: ignore[misc]
    value = object()
    assert typelite.cast("int", value) is value


# ---- clock ------------------------------------------------------------------------------------


def _iso_by_datetime(t: float) -> str:
    dt = datetime.fromtimestamp(t, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_by_datetime(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


@given(st.floats(min_value=0, max_value=32503680000, allow_nan=False))
def test_iso_is_datetimes(t: float) -> None:
    assert clock.iso(t) == _iso_by_datetime(t)


@pytest.mark.parametrize("t", [0.0, 1.9999995, 1.0000005, 1767225599.9999996, 1767225599.9995])
def test_iso_rounds_as_datetime_does(t: float) -> None:
    assert clock.iso(t) == _iso_by_datetime(t)


@given(st.floats(min_value=0, max_value=32503680000, allow_nan=False), st.data())
def test_parse_iso_is_datetimes(t: float, data: st.DataObject) -> None:
    text = clock.iso(t)
    if data.draw(st.booleans()):  # a damaged stamp: same answer, None included
        k = data.draw(st.integers(0, len(text) - 1))
        text = text[:k] + data.draw(st.sampled_from("09:-TZ.x ٣")) + text[k + 1 :]
    assert clock.parse_iso(text) == _parse_by_datetime(text)


@pytest.mark.parametrize(
    "text",
    [
        "2024-02-29T23:59:59.999Z",
        "2023-02-29T00:00:00.000Z",
        "1900-02-29T00:00:00.000Z",
        "2000-02-29T12:00:00.000Z",
        "0000-01-01T00:00:00.000Z",
        "2026-01-01T24:00:00.000Z",
        "2026-01-01T00:00:60.000Z",
        "2026-11-29T23:53:52.449123Z",
        "2026-11-29T23:53:52Z",
        "2026-11-29T23:53:52.449+00:00",
        "",
    ],
)
def test_parse_iso_edges(text: str) -> None:
    assert clock.parse_iso(text) == _parse_by_datetime(text)


# ---- textsafe ---------------------------------------------------------------------------------

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_OLD_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_OLD_INLINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_OLD_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")


def _old_escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c in (0x0A, 0x09, 0x0D):
        return {0x0A: "\\n", 0x09: "\\t", 0x0D: "\\r"}[c]
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


_CHARS = st.one_of(
    st.characters(max_codepoint=0x2FF),
    st.sampled_from([chr(c) for c in range(0x2000, 0x2070)] + ["\u061c", "\x1b[31m", "\x9b1m"]),
)


@given(st.lists(_CHARS, max_size=20).map("".join))
def test_textsafe_tables_are_the_old_substitutions(text: str) -> None:
    assert textsafe.visible(text) == _OLD_UNSAFE.sub(_old_escape, text)
    assert textsafe.inline(text) == _OLD_INLINE.sub(_old_escape, text)
    assert textsafe.json_safe(text) == _OLD_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    assert textsafe.clean(text) == _OLD_UNSAFE.sub("", re.sub(textsafe._ESCAPES, "", text))


@given(st.lists(_CHARS, max_size=20).map("".join))
def test_unsafe_characters_are_what_visible_and_json_safe_change(text: str) -> None:
    """A text without them passes both unchanged (`omp.cli.events_json` looks before it
    translates); with one, one of them changes it."""
    unsafe = set(textsafe.unsafe_characters())
    kept = textsafe.visible(textsafe.json_safe(text)) == text
    assert kept == (not unsafe & set(text))
    for c in unsafe:
        assert textsafe.visible(c) != c or textsafe.json_safe(c) != c
