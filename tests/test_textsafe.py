"""omp.textsafe's translate tables do what the regular expressions they replaced did."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from omp import textsafe

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
