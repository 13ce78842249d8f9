"""Wall-clock helpers. Times on disk are ISO-8601 UTC with milliseconds, as in the TS tool.

`iso` and `parse_iso` run on every `omp team api` send (a stamp; the loop breakers read recent
stamps back), so they do without `datetime` (~1.5 ms of imports a process) for the one shape
both tools write; `parse_iso` hands any other text to `datetime.fromisoformat`.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing's own costs ~3 ms a process (see omp/typelite.py)
if TYPE_CHECKING:
    from collections.abc import Callable

    Clock = Callable[[], float]


def now() -> float:
    return time.time()


def iso(ts: float | None = None) -> str:
    """`2026-11-29T23:53:52.449Z` for a POSIX timestamp (default: now)."""
    t = time.time() if ts is None else ts
    # What `datetime.fromtimestamp(t, UTC)` does: microseconds rounded half to even, then cut
    # to milliseconds (tests/test_texts.py compares the two).
    whole = int(t)
    us = round((t - whole) * 1e6)
    if us >= 1_000_000:
        whole, us = whole + 1, us - 1_000_000
    elif us < 0:
        whole, us = whole - 1, us + 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(whole)) + f"{us // 1000:03d}Z"


_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _parse_stamp(t: str) -> float | None:
    """`YYYY-MM-DDTHH:MM:SS.mmmZ` (or 6 fraction digits) as `datetime` reads it, else None."""
    if len(t) not in (24, 27) or t[-1] != "Z" or t[19] != "." or t[4] + t[7] + t[10] != "--T":
        return None
    if t[13] + t[16] != "::":
        return None
    digits = t[:4] + t[5:7] + t[8:10] + t[11:13] + t[14:16] + t[17:19] + t[20:-1]
    if not (digits.isascii() and digits.isdigit()):
        return None
    y, mo, d = int(t[:4]), int(t[5:7]), int(t[8:10])
    h, mi, s = int(t[11:13]), int(t[14:16]), int(t[17:19])
    leap = mo == 2 and y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    if not (y and 1 <= mo <= 12 and 1 <= d <= _DAYS[mo - 1] + leap and h < 24 and mi < 60):
        return None
    if s > 59:
        return None
    us = int(t[20:-1]) * (1000 if len(t) == 24 else 1)
    secs = _days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s
    return (secs * 10**6 + us) / 10**6  # as `datetime.timestamp()` computes it


def parse_iso(text: str) -> float | None:
    """POSIX seconds for an ISO time written by omp or the TS tool; None if unparseable."""
    if isinstance(text, str) and (fast := _parse_stamp(text)) is not None:
        return fast
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None
