"""The agent session a record belongs to, from the record itself: for `omp team resume` when no
stop hook told omp a worker's session (Codex and Gemini workers get no hook of omp's; a crash
may come before a hook's first fire), but the monitor's usage index found the record from the
worker's pane while it ran.

Each CLI names its record after its session (the layouts: docs/usage.md), except Gemini, whose
file name keeps only the id's first 8 characters: its id is the first line's `sessionId`,
checked against the name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
FIRST_LINE_MAX = 64 * 1024


def session_id(kind: str, path: Path) -> str | None:
    """The session id of the record at `path` written by CLI `kind`, or None when the record
    does not say it plainly (then the worker starts a fresh session, never a guessed one)."""
    name = path.name
    if kind == "copilot":  # session-state/<id>/events.jsonl
        return _uuid(path.parent.name) if name == "events.jsonl" else None
    if kind == "claude":  # projects/<cwd>/<id>.jsonl
        return _uuid(path.stem)
    if kind in ("codex", "pi"):  # rollout-<time>-<id>.jsonl, <time>_<id>.jsonl
        found = UUID.findall(path.stem)
        return found[-1] if found and path.stem.endswith(found[-1]) else None
    if kind == "gemini":  # session-<time>-<id[:8]>.jsonl, first line {"sessionId", ...}
        sid = _uuid(str(_first_line(path).get("sessionId", "")))
        return sid if sid and path.stem.endswith(sid[:8]) else None
    return None


def _uuid(text: str) -> str | None:
    return text if UUID.fullmatch(text) else None


def _first_line(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as fh:
            line = fh.readline(FIRST_LINE_MAX)
        doc = json.loads(line)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
