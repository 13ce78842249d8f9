"""Wall-clock helpers. Times on disk are ISO-8601 UTC with milliseconds, as in the TS tool."""

from __future__ import annotations

import time
from datetime import UTC, datetime

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable

    Clock = Callable[[], float]


def now() -> float:
    return time.time()


def iso(ts: float | None = None) -> str:
    """`2026-11-29T23:53:52.449Z` for a POSIX timestamp (default: now)."""
    dt = datetime.fromtimestamp(time.time() if ts is None else ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> float | None:
    """POSIX seconds for an ISO time written by omp or the TS tool; None if unparseable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError, TypeError):
        return None
