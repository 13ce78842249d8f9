"""How much one look at agents' session records may cost: bytes, time, line length, document size.

A record's path can come from a worker (`omp hook stop` names its transcript), so a record may be
anything: a 3 GB sparse file whose second line never ends, a one-document `.json` of that size, a
line nested 200,000 deep. Every read is bounded, and every caller says what it can afford:

- `MAX_LINE`: a line longer than this is never held whole nor parsed; it is skipped, counted
  (`longLines`), and the read goes on after its newline (a line still growing is skipped as it
  grows, never read twice);
- `MAX_WHOLE`: a one-document record (Gemini's old `.json`) larger than this is not parsed: said
  (`too_large`), never counted as zero;
- `Allowance`: bytes and seconds one read may take (`READ_BYTES`, `READ_SECONDS`), or a whole
  command or scan (`VIEW_*`, `SCAN_*`), shared by its reads, and a stop flag (the monitor's
  SIGTERM). A read that runs out stops at a line boundary and keeps its place: the monitor's
  next scan reads on from there; a view says how much it left unread (`unreadBytes`).

Nesting is refused at `omp.store.strictjson.MAX_DEPTH`, before any parser runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CHUNK = 1 << 20  # bytes read at a time: memory follows the chunk, not the file
MAX_LINE = 8 << 20  # bytes of the longest line parsed
MAX_WHOLE = 32 << 20  # bytes of the largest one-document record parsed
READ_BYTES = 128 << 20  # bytes one read of one record may take
READ_SECONDS = 2.0  # ... and seconds
VIEW_BYTES = 256 << 20  # bytes `status`, `usage` or `collect` may read in all
VIEW_SECONDS = 3.0  # ... and seconds
SCAN_BYTES = 256 << 20  # bytes the monitor may read in one scan, every team together
SCAN_SECONDS = 2.0  # ... and seconds


class Allowance:
    """What is left to spend: bytes, a deadline (monotonic), and a stop flag. A read takes a
    share (`share`) charged to its parent too, so a command's or a scan's total holds."""

    __slots__ = ("_clock", "bytes_left", "deadline", "parent", "stop")

    def __init__(
        self,
        nbytes: int,
        seconds: float,
        *,
        stop: Callable[[], bool] | None = None,
        parent: Allowance | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.bytes_left = nbytes
        self.deadline = clock() + seconds
        self.stop = stop
        self.parent = parent

    def share(self, nbytes: int = READ_BYTES, seconds: float = READ_SECONDS) -> Allowance:
        """One read's allowance: at most `nbytes` and `seconds`, and never more than is left."""
        left = max(0.0, self.deadline - self._clock())
        return Allowance(
            min(nbytes, self.bytes_left),
            min(seconds, left),
            stop=self.stop,
            parent=self,
            clock=self._clock,
        )

    def take(self, n: int) -> None:
        a: Allowance | None = self
        while a is not None:
            a.bytes_left -= n
            a = a.parent

    def spent(self) -> bool:
        """Out of bytes or time, or told to stop (here or in a parent)."""
        a: Allowance | None = self
        while a is not None:
            if a.bytes_left <= 0 or a._clock() >= a.deadline:
                return True
            a = a.parent
        return self.stop is not None and self.stop()


def per_read() -> Allowance:
    """A read's own allowance, for a caller that gives none."""
    return Allowance(READ_BYTES, READ_SECONDS)


def for_view() -> Allowance:
    """What one `status`, `usage` or `collect` may spend on records, all of them together."""
    return Allowance(VIEW_BYTES, VIEW_SECONDS)
