"""Text someone else wrote, made safe for a person's terminal: the one sanitiser of omp.

Every human-form output goes through `visible` at the door (`omp.cli.output.write_text`, the error
line, launch progress, `--watch` frames), so a worker's result, a peer's message body, a file name
or a task description never controls the reader's terminal, whatever command printed it:

- no C0 control but newline and tab, no DEL, no C1 control (U+0080-U+009F, which some terminals
  read as CSI/OSC/DCS), no bidi override, embedding, isolate or mark (text that reads in another
  order than it is stored);
- what is taken out stays visible, escaped (`\\x1b`, `\\u202e`). Escaping the ESC byte itself
  defuses every escape sequence (CSI, OSC, DCS, APC, PM, SOS, SS2/SS3): what follows it is plain
  printable text.

JSON output keeps the text exact: `omp.cli.output.dumps` writes the same characters as `\\u`
escapes instead (`json_safe`), so a JSON answer shown on a terminal is safe too.
"""

from __future__ import annotations

# Bidi: ALM, LRM, RLM, embeddings/overrides (LRE RLE PDF LRO RLO), isolates (LRI RLI FSI PDI).
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_C1 = range(0x7F, 0xA0)  # DEL and the C1 controls


def _escape(c: int) -> str:
    if c == 0x0A:
        return "\\n"
    if c == 0x09:
        return "\\t"
    if c == 0x0D:
        return "\\r"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


# `str.translate` tables rather than regular expressions: compiling them cost ~0.7 ms of every
# `omp team api` call, and a table maps each character exactly as the substitution did.
_JSON_UNSAFE = {c: f"\\u{c:04x}" for c in (*_C1, *_BIDI)}  # json.dumps already escapes C0
# (visible, inline, clean)'s: built on first use (~0.1 ms), as a call answering in JSON needs none
_TABLES: list[dict[int, str | None]] = []


def _tables() -> list[dict[int, str | None]]:
    if not _TABLES:
        unsafe: dict[int, str | None] = {
            c: _escape(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *_C1, *_BIDI)
        }
        unsafe_inline: dict[int, str | None] = {
            c: _escape(c) for c in (*range(0x00, 0x20), *_C1, *_BIDI)
        }
        _TABLES.extend((unsafe, unsafe_inline, dict.fromkeys(unsafe)))
    return _TABLES


def unsafe_characters() -> str:
    """Every character `visible` or `json_safe` writes as something else: a text holding none of
    them comes out of both as it went in (a reader of much text can look before it translates)."""
    return "".join(map(chr, sorted({*_tables()[0], *_JSON_UNSAFE})))


def visible(text: str) -> str:
    """`text` with every control character but newline and tab escaped, visibly."""
    return text.translate(_tables()[0])


def inline(text: str) -> str:
    """`visible`, and newline and tab escaped too: for a field that must stay on its row (a
    table cell, a name), so text cannot forge the lines after it."""
    return text.translate(_tables()[1])


def json_safe(dumped: str) -> str:
    """A `json.dumps(..., ensure_ascii=False)` text with C1, DEL and bidi characters written as
    `\\u` escapes: the same JSON value, no raw control character on the wire. (These characters
    can only stand inside JSON strings, where the escape means exactly them.)"""
    if dumped.isascii() and "\x7f" not in dumped:
        return dumped
    return dumped.translate(_JSON_UNSAFE)


# `clean` drops instead of escaping: for a screen that shows only what the text says (the demo
# agent's). omp's own human output uses `visible`, so a reader sees that something was there.
_ESCAPES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -/]*[0-~]?"
)


def clean(text: str) -> str:
    """`text` with escape sequences and controls (but newline and tab) removed, bidi too."""
    import re  # compiled on first use (re's cache): the per-call paths never clean

    return re.sub(_ESCAPES, "", text).translate(_tables()[2])


def one_line(text: str, width: int) -> str:
    """First line of `text`, made visible, cut to `width` characters with an ellipsis."""
    first, _, rest = visible(text).partition("\n")
    if rest or len(first) > width:
        return first[: max(0, width - 1)] + "…"
    return first
