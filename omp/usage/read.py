"""`read_usage(kind, path, state)`: what one agent CLI session record says was spent.

    totals, state = read_usage("copilot", path)          # the whole file
    totals, state = read_usage("copilot", path, state)   # only what was added since
    if isinstance(totals, Unreadable): ...               # say why, never show 0

`kind` is the agent profile's name (`copilot`, `claude`, `codex`, `gemini`, `pi`). The state is
JSON (`state.to_json()`, `ReadState.from_json(doc, kind)`), for a caller that keeps it between
runs, as the mailbox keeps its byte cursor.
"""

from __future__ import annotations

from pathlib import Path

from omp.usage import claude, codex, copilot, gemini, pi
from omp.usage.limits import Allowance
from omp.usage.scan import Reader, Result, read
from omp.usage.totals import ReadState, Unreadable

READERS: dict[str, Reader] = {
    r.kind: r for r in (copilot.READER, claude.READER, codex.READER, gemini.READER, pi.READER)
}


def unknown_kind(kind: str) -> Unreadable:
    known = ", ".join(READERS)
    why = f"omp has no reader for {kind!r} session records (it reads: {known})"
    return Unreadable("unknown_kind", why)


def read_usage(
    kind: str, path: Path, state: ReadState | None = None, allow: Allowance | None = None
) -> Result:
    """What the record says, reading at most `allow` (default: one read's, `omp.usage.limits`)."""
    reader = READERS.get(kind)
    if reader is None:
        return unknown_kind(kind), state or ReadState(kind=kind)
    if state is None or state.kind != kind:
        state = ReadState(kind=kind)
    return read(reader, Path(path), state, allow)
