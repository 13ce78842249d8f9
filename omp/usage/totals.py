"""The numbers a usage read gives: tokens per model, the totals, and the reader's saved place.

One meaning for every CLI, whatever its record calls things:
- `input`: input tokens neither read from nor written to the prompt cache (the full price);
- `cache_read`: input tokens served from the cache; `cache_write`: input tokens written to it;
- `output`: generated tokens, reasoning ("thinking") tokens included;
- `calls`: model calls the record holds (a call reporting no tokens at all is not counted).
The three input kinds are disjoint, so they add up and each takes its own price.

NamedTuples and plain dicts, no dataclasses: `status` may show these on its fast path.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any

FIELDS = ("calls", "input", "output", "cache_read", "cache_write")
JSON_KEYS = ("calls", "input", "output", "cacheRead", "cacheWrite")
RECENT = 256  # message ids `Tally.once` remembers
# The agent CLIs whose session records omp reads (`omp.usage.read.READERS`, the same: a test keeps
# them one), named here so that a view of a team whose members have no records to read (status
# of a headless team, say) loads no reader, nor the JSON and regex modules they need
KINDS = frozenset(("copilot", "claude", "codex", "gemini", "pi"))
NOTHING: Mapping[str, Any] = MappingProxyType({})  # a state's empty default, never mutated
# The largest integer every JSON reader holds exactly (a double's 53 bits: JavaScript's
# Number.MAX_SAFE_INTEGER): a count a record gives beyond it, or a sum growing past it, is
# held there, so omp's JSON never prints a number a reader would round.
JSON_MAX = 2**53 - 1


def clamp(n: int) -> int:
    return n if n <= JSON_MAX else JSON_MAX


class Tokens(NamedTuple):
    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def plus(self, other: Tokens) -> Tokens:
        return Tokens(*(clamp(a + b) for a, b in zip(self, other, strict=True)))

    @property
    def total(self) -> int:
        """Every token the calls moved (input of all kinds and output)."""
        return clamp(self.input + self.output + self.cache_read + self.cache_write)

    def to_json(self) -> dict[str, int]:
        """camelCase, as omp's other JSON: calls, input, output, cacheRead, cacheWrite."""
        return dict(zip(JSON_KEYS, self, strict=True))


class UsageTotals(NamedTuple):
    """What one session record says was spent, so far."""

    tokens: Tokens  # the sum over models
    models: dict[str, Tokens]  # per model name as the record gives it ("" if it gives none)
    last_call: float | None  # epoch seconds of the latest call, None before the first
    skipped: int = 0  # lines that looked like usage but did not parse (a crash mid-write)
    long_lines: int = 0  # lines longer than `limits.MAX_LINE`: skipped, never parsed
    unread: int = 0  # bytes this read left for later: its allowance ran out (`limits`)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.tokens.to_json())
        out["lastCall"] = iso(self.last_call)
        out["models"] = {m: t.to_json() for m, t in sorted(self.models.items())}
        if self.skipped:
            out["skippedLines"] = self.skipped
        if self.long_lines:
            out["longLines"] = self.long_lines
        if self.unread:
            out["unreadBytes"] = self.unread
        return out


class Unreadable(NamedTuple):
    """The record could not be read: never shown as zero. `reason` is a stable word
    (`missing`, `permission`, `not_a_file`, `format`, `too_large`, `io_error`, `unknown_kind`),
    `why` a line for a person."""

    reason: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"unreadable": self.reason, "why": self.why}


class ReadState(NamedTuple):
    """Where the last read of one record stopped, and what it had counted by then.

    `offset` is just past the last complete line read; `ino`/`dev` and the hash of the first
    `head_len` bytes tell whether the file is still the one that was read (a truncated,
    replaced or rewritten file is read again from the top). `memo` is the reader's own
    (message ids seen lately, the model in force, ...). All of it is JSON (`to_json`), so a
    caller can keep it in a file between runs.
    """

    kind: str
    offset: int = 0
    ino: int = 0
    dev: int = 0
    head_len: int = 0
    head: str = ""
    models: Mapping[str, Tokens] = NOTHING
    last_call: float | None = None
    skipped: int = 0
    memo: Mapping[str, Any] = NOTHING
    long_lines: int = 0

    def to_json(self) -> dict[str, Any]:
        doc = self._asdict()
        doc["models"] = {m: list(t) for m, t in self.models.items()}
        return doc

    @classmethod
    def from_json(cls, doc: Any, kind: str) -> ReadState:
        """A saved state, or a fresh one for `kind` if `doc` is not a state of that kind (a
        damaged state file costs one full read, never a wrong number)."""
        try:
            if not isinstance(doc, dict) or doc.get("kind") != kind:
                raise ValueError(kind)
            models = {str(m): _tokens(t) for m, t in doc["models"].items()}
            last = doc.get("last_call")
            state = cls(
                kind=kind,
                offset=int(doc["offset"]),
                ino=int(doc["ino"]),
                dev=int(doc["dev"]),
                head_len=int(doc["head_len"]),
                head=str(doc["head"]),
                models=models,
                last_call=None if last is None else float(last),
                skipped=int(doc.get("skipped", 0)),
                memo=dict(doc.get("memo") or {}),
                long_lines=int(doc.get("long_lines", 0)),
            )
            if state.offset < 0 or state.head_len < 0 or state.head_len > state.offset:
                raise ValueError(state.offset)
            return state
        except (KeyError, TypeError, ValueError, AttributeError):
            return cls(kind=kind)

    def totals(self) -> UsageTotals:
        total = Tokens()
        for t in self.models.values():
            total = total.plus(t)
        return UsageTotals(total, dict(self.models), self.last_call, self.skipped, self.long_lines)


def _tokens(row: Any) -> Tokens:
    if not isinstance(row, list) or len(row) != len(FIELDS):
        raise ValueError(row)
    return Tokens(*(int(x) for x in row))


class Tally:
    """The counting during one read: the state's numbers, changed in place, then frozen."""

    def __init__(self, state: ReadState) -> None:
        self.models: dict[str, list[int]] = {m: list(t) for m, t in state.models.items()}
        self.last_call = state.last_call
        self.skipped = state.skipped
        self.long_lines = state.long_lines
        self.memo: dict[str, Any] = dict(state.memo)
        # `once`'s memory, oldest first: message id -> the largest usage counted for it
        self.recent: dict[str, list[int]] = {
            str(e[0]): [count(x) for x in e[1:5]]
            for e in self.memo.pop("recent", [])
            if isinstance(e, list) and len(e) == 5
        }

    def add(
        self,
        model: str,
        *,
        input: int,
        output: int,
        cache_read: int = 0,
        cache_write: int = 0,
        calls: int = 1,
        at: Any = None,
    ) -> None:
        row = self.models.setdefault(model, [0] * len(FIELDS))
        for i, n in enumerate((calls, input, output, cache_read, cache_write)):
            row[i] = clamp(row[i] + n)
        when = epoch(at)
        if when is not None and (self.last_call is None or when > self.last_call):
            self.last_call = when

    def once(
        self,
        key: Any,
        model: str,
        *,
        input: int,
        output: int,
        cache_read: int,
        cache_write: int,
        at: Any,
    ) -> None:
        """Count message `key` once, at the largest usage any of its lines reports.

        Claude Code writes one line per content block of a reply, each with the reply's usage;
        Gemini CLI writes a reply again when it learns its tokens or tool calls. A repeat adds
        only what it reports beyond the earlier lines (nothing, when they agree), never a
        second call. Repeats come close together, so the last RECENT ids are enough. A line
        without an id (`key` not a string) is counted as it comes.
        """
        new = [input, output, cache_read, cache_write]
        if not isinstance(key, str) or not key:
            if any(new):
                self.add(model, input=input, output=output, cache_read=cache_read,
                         cache_write=cache_write, at=at)  # fmt: skip
            return
        seen = self.recent.get(key)
        if seen is not None:
            grown = [max(n - old, 0) for n, old in zip(new, seen, strict=True)]
            if any(grown):
                self.add(model, input=grown[0], output=grown[1], cache_read=grown[2],
                         cache_write=grown[3], calls=0, at=at)  # fmt: skip
                self.recent[key] = [max(n, old) for n, old in zip(new, seen, strict=True)]
            return
        if not any(new):
            return  # no tokens yet: not a call (a later line of this message may bring them)
        self.add(model, input=input, output=output, cache_read=cache_read,
                 cache_write=cache_write, at=at)  # fmt: skip
        self.recent[key] = new
        if len(self.recent) > RECENT:
            del self.recent[next(iter(self.recent))]

    def state(self, base: ReadState, **changes: Any) -> ReadState:
        models = {m: Tokens(*row) for m, row in self.models.items()}
        memo = dict(self.memo)
        if self.recent:
            memo["recent"] = [[k, *v] for k, v in self.recent.items()]
        return base._replace(
            models=models,
            last_call=self.last_call,
            skipped=self.skipped,
            long_lines=self.long_lines,
            memo=memo,
            **changes,
        )


def count(value: Any) -> int:
    """A token count from a record: a non-negative integer up to `JSON_MAX`, anything else 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return clamp(max(value, 0))
    if isinstance(value, float) and value == value and value != float("inf"):
        return clamp(max(int(value), 0))
    return 0


# `datetime.datetime`, imported on first use (~2 ms): a view of a team whose members have no
# record to read never needs it
_DATETIME: list[type[datetime]] = []


def _datetime() -> type[datetime]:
    if not _DATETIME:
        from datetime import datetime

        _DATETIME.append(datetime)
    return _DATETIME[0]


def epoch(value: Any) -> float | None:
    """An ISO 8601 time (`...Z` or with an offset) or epoch milliseconds, as epoch seconds."""
    if isinstance(value, str) and value:
        try:
            return _datetime().fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value) / 1000.0 if value > 1e11 else float(value)
    return None


def iso(when: float | None) -> str | None:
    if when is None:
        return None
    from datetime import UTC

    at = _datetime().fromtimestamp(when, UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
