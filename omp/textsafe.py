"""Peer text printed to a terminal: escape sequences and control characters removed."""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes, then any C0/C1 control
# except tab and newline. A peer's message must not recolour, retitle or rewrite a terminal.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"  # any other escape: intermediates, then its final byte (ESC c...)
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def one_line(text: str, width: int) -> str:
    """First line of `text`, cleaned, cut to `width` characters with an ellipsis."""
    first, _, rest = clean(text).partition("\n")
    if rest or len(first) > width:
        return first[: max(0, width - 1)] + "…"
    return first
