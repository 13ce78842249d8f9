"""Wall-clock helpers. Times on disk are ISO-8601 UTC with milliseconds, as in the TS tool.

`iso` is `time.strftime` over `time.gmtime`, rounded as `datetime.fromtimestamp` rounds
(tests/test_clock.py compares): it is on every per-call command's way, and `datetime` is not
(see CONTRIBUTING.md, "The per-call layer"). `parse_iso` is `datetime`'s, imported when a stamp
is read back; `at_or_after` compares omp's own stamps without parsing them.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable

    Clock = Callable[[], float]


def now() -> float:
    return time.time()


def iso(ts: float | None = None) -> str:
    """`2026-11-29T23:53:52.449Z` for a POSIX timestamp (default: now)."""
    t = time.time() if ts is None else ts
    whole = int(t)  # as datetime: the microseconds rounded half-even, then cut to milliseconds
    us = round((t - whole) * 1e6)
    if us >= 1_000_000:
        whole, us = whole + 1, us - 1_000_000
    elif us < 0:
        whole, us = whole - 1, us + 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(whole)) + f"{us // 1000:03d}Z"


def parse_iso(text: str) -> float | None:
    """POSIX seconds for an ISO time written by omp or the TS tool; None if unparseable."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError, TypeError):
        return None


def _canonical(text: object) -> bool:
    """A stamp as `iso` (and the TS tool's `toISOString`) writes it: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    Such stamps sort as the times they stand for."""
    return (
        isinstance(text, str)
        and len(text) == 24
        and text[10] == "T"
        and text[19] == "."
        and text[23] == "Z"
        and text[:4].isdigit()
    )


def at_or_after(text: object, since: float) -> bool | None:
    """Is the stamp `text` at or after `since` (POSIX seconds, whole milliseconds apart)? A
    stamp of `iso`'s form is compared as text, without parsing (the limits read the recent
    messages' stamps on every send); another is parsed. None when it is no time at all."""
    if _canonical(text):
        assert isinstance(text, str)
        return text >= iso(since)
    ts = parse_iso(str(text)) if isinstance(text, str) else None
    return None if ts is None else ts >= since
