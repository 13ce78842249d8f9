"""Message ids: ULID strings (26 Crockford base32 characters, time-ordered within a process).

python-ulid is the reference (tests check every id here parses there and carries the right
time), but importing it costs about five times a bare `python -c pass` (it pulls in
`importlib.metadata`; +35 ms on a quiet 2-core machine), twice a whole `send-message`. So the
per-call layer encodes the 128 bits itself: 48 bits of milliseconds and 80 random bits, incremented
within the same millisecond so ids made by one process (a broadcast) stay strictly increasing.
Across processes, order messages by their position in the file, never by id.
"""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_last_ms = -1
_last_rand = 0


def _encode(value: int) -> str:
    out = []
    for _ in range(26):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_id(now_ms: int | None = None) -> str:
    global _last_ms, _last_rand
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if ms <= _last_ms:
        ms = _last_ms
        _last_rand += 1
        if _last_rand >> 80:  # the random part overflowed: borrow the next millisecond
            ms += 1
            _last_rand = 0
    else:
        _last_rand = int.from_bytes(os.urandom(10), "big")
    _last_ms = ms
    return _encode((ms << 80) | _last_rand)
