"""What the monitor sends, decided without I/O: observations and a clock in, reservations out.

Two kinds of line go into a worker's pane:

- the unread-count line (`omp.mail.nudge.nudge_text`) when the worker has undelivered mail and its
  screen is idle: at most `UNREAD_MAX` times for one unread batch (a message the worker has not
  been told about starts a new batch), at least `unread_repeat` seconds after the batch's newest
  message (whose own send already nudged once) and between repeats;
- `IDLE_PROMPT`, only while a loop is active, when the screen has been idle for `idle_delay`
  seconds: at most `IDLE_MAX` times per pane for the life of the team generation.

A pane gets at most one line per scan. Every send is reserved first: `decide` returns the tracker
with the count already taken, the caller persists it, and only then types. `record_outcome` notes
how it went and never gives the slot back, so a crash between the write and the send costs a
nudge, never adds a fourth.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from omp.errors import OmpError
from omp.invocation import omp_command
from omp.mail.delivery import UNREAD_REPEAT, UNREAD_REPEAT_ENV
from omp.mail.nudge import nudge_text

IDLE_PROMPT = "Continue working on your assigned task and report concrete progress (not ACK-only)."
IDLE_MAX = 3
UNREAD_MAX = 3
BATCH_IDS = 128  # newest undelivered ids remembered per batch (enough to tell a new message)
SCHEMA = 1

Kind = Literal["unread", "idle"]
Outcome = Literal["reserved", "sent", "failed", "skipped"]


# ---- intervals ------------------------------------------------------------------------------

_ENV = {
    "scan": "OMP_MONITOR_SCAN_SECONDS",
    "idle_delay": "OMP_MONITOR_IDLE_SECONDS",
    "unread_repeat": UNREAD_REPEAT_ENV,
    "pending_stale": "OMP_MONITOR_PENDING_STALE_SECONDS",
    "running_stale": "OMP_MONITOR_RUNNING_STALE_SECONDS",
    "target_ttl": "OMP_MONITOR_TARGET_TTL_SECONDS",
    "host_grace": "OMP_MONITOR_HOST_GRACE_SECONDS",
    "host_backoff": "OMP_MONITOR_HOST_BACKOFF_SECONDS",
}


@dataclass(frozen=True)
class Intervals:
    """Every time the monitor waits for, in seconds. Tests shrink them to milliseconds."""

    scan: float = 5.0  # between scans
    idle_delay: float = 30.0  # idle this long (with a loop active) before an idle prompt
    unread_repeat: float = UNREAD_REPEAT  # between unread-count lines for one batch
    pending_stale: float = 15.0  # a pending owner lock (child never adopted) is reclaimed after
    running_stale: float = 20.0  # a running owner without a heartbeat is reclaimed after
    target_ttl: float = 86400.0  # tracker files of panes not seen for this long are removed
    empty_scans: int = 2  # consecutive scans with no live team before the monitor stops
    # a worker's host that does not answer for this long (and on two tries) counts as gone
    host_grace: float = 60.0
    host_backoff: float = 30.0  # the longest wait between two tries of an unreachable host

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: float) -> Intervals:
        """Defaults, then `OMP_MONITOR_*_SECONDS` from `env`, then `overrides`."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, var in _ENV.items():
            raw = env.get(var, "").strip()
            if raw:
                values[name] = _seconds(var, raw)
        values.update(overrides)
        return cls(**values)

    @property
    def heartbeat(self) -> float:
        """How often the owner lock must be refreshed, so it is never judged stale while alive."""
        return max(0.001, self.running_stale / 4)


def _seconds(var: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 7 * 86400):
        raise OmpError("invalid_input", f"{var}={raw!r}: expected seconds, > 0 and <= 604800")
    return value


# ---- the persisted tracker of one target (a pane of one team generation) --------------------


@dataclass(frozen=True)
class Attempt:
    id: str
    kind: Kind
    reserved_at: float
    outcome: Outcome = "reserved"
    completed_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "attemptId": self.id,
            "kind": self.kind,
            "reservedAt": _ms(self.reserved_at),
            "outcome": self.outcome,
        }
        if self.completed_at is not None:
            out["completedAt"] = _ms(self.completed_at)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Attempt:
        kind = obj["kind"]
        outcome = obj["outcome"]
        if kind not in ("unread", "idle") or outcome not in (
            "reserved",
            "sent",
            "failed",
            "skipped",
        ):
            raise ValueError("bad attempt")
        return cls(
            id=str(obj["attemptId"]),
            kind=kind,
            reserved_at=_sec(obj["reservedAt"]),
            outcome=outcome,
            completed_at=_opt_sec(obj.get("completedAt")),
        )


@dataclass(frozen=True)
class Episode:
    """A stretch of time a worker needs a person (`omp.monitor.attention`): what it needs,
    since when, and its number in the team (`seq`, for `wait`'s cursor)."""

    what: str
    since: float
    seq: int

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "since": _ms(self.since), "seq": self.seq}

    @classmethod
    def from_json(cls, obj: Any) -> Episode | None:
        if obj is None:
            return None
        what = obj["what"]
        if not isinstance(what, str):
            raise ValueError("attention")
        return cls(what=what, since=_sec(obj["since"]), seq=_count(obj["seq"]))


@dataclass(frozen=True)
class Tracker:
    """Counts and timers of one target. Counts only ever grow (see the module docstring)."""

    idle_count: int = 0  # idle prompts reserved, ever
    first_idle_at: float | None = None  # start of the current idle stretch (loop active only)
    last_idle_at: float | None = None
    batch: tuple[str, ...] = ()  # the undelivered ids of the current unread batch (newest last)
    batch_since: float | None = None  # when the batch's newest message was sent
    batch_count: int = 0  # unread lines reserved for this batch
    last_unread_at: float | None = None
    unread_total: int = 0  # unread lines reserved, ever
    last_attempt: Attempt | None = None
    attempts: int = 0  # sequence for attempt ids
    attention: Episode | None = None  # the open "needs you" episode (mailed when it opened)

    def to_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA,
            "nudgeCount": self.idle_count,
            "firstIdleAt": _opt_ms(self.first_idle_at),
            "lastNudgeAt": _opt_ms(self.last_idle_at),
            "unread": {
                "batch": list(self.batch),
                "since": _opt_ms(self.batch_since),
                "count": self.batch_count,
                "lastNudgeAt": _opt_ms(self.last_unread_at),
                "total": self.unread_total,
            },
            "attempts": self.attempts,
            "lastAttempt": self.last_attempt.to_json() if self.last_attempt else None,
            "attention": self.attention.to_json() if self.attention else None,
        }

    @classmethod
    def from_json(cls, obj: Any) -> Tracker:
        """Parse `to_json()`; ValueError if it is not one (the caller fails closed)."""
        try:
            if obj.get("schemaVersion") != SCHEMA:
                raise ValueError("schema")
            un = obj["unread"]
            batch = un["batch"]
            if not isinstance(batch, list) or not all(isinstance(x, str) for x in batch):
                raise ValueError("batch")
            last = obj.get("lastAttempt")
            return cls(
                idle_count=_count(obj["nudgeCount"]),
                first_idle_at=_opt_sec(obj.get("firstIdleAt")),
                last_idle_at=_opt_sec(obj.get("lastNudgeAt")),
                batch=tuple(batch),
                batch_since=_opt_sec(un.get("since")),
                batch_count=_count(un["count"]),
                last_unread_at=_opt_sec(un.get("lastNudgeAt")),
                unread_total=_count(un.get("total", 0)),
                last_attempt=Attempt.from_json(last) if last is not None else None,
                attempts=_count(obj.get("attempts", 0)),
                attention=Episode.from_json(obj.get("attention")),
            )
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(str(exc)) from exc

    @classmethod
    def exhausted(cls) -> Tracker:
        """What an unreadable tracker file counts as: no idle prompt left (fail closed).

        Unread lines start again with the next batch seen, as they would after a delivery.
        """
        return cls(idle_count=IDLE_MAX)


def _count(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError("count")
    return v


def _ms(t: float) -> int:
    # Down, never up: a time read back is never later than the one written, so an interval
    # measured from it is never cut short.
    return math.floor(t * 1000)


def _opt_ms(t: float | None) -> int | None:
    return None if t is None else _ms(t)


def _sec(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError("time")
    return float(v) / 1000


def _opt_sec(v: Any) -> float | None:
    return None if v is None else _sec(v)


# ---- observations and decisions -------------------------------------------------------------


@dataclass(frozen=True)
class Unread:
    """A worker's undelivered mail: ids oldest first (the newest `BATCH_IDS` at most)."""

    count: int = 0
    ids: tuple[str, ...] = ()
    newest_at: float | None = None  # the newest undelivered message's timestamp


@dataclass(frozen=True)
class Observation:
    team: str
    worker: str
    unread: Unread = field(default_factory=Unread)
    # ready | busy | dialog | starting | copy_mode | unknown; None when the screen was not read
    screen: str | None = None
    idle_prompts: bool = False  # a loop is active and the team still has work (the gate)
    omp: str = field(default_factory=omp_command)  # the team's omp (`invocation.team_command`)
    # When a nudge last covering the newest unread message was typed (`delivery.covered_since`),
    # by the send path or by us; None: never, so it is due as soon as the pane is idle.
    covered: float | None = None


@dataclass(frozen=True)
class Send:
    kind: Kind
    text: str
    attempt_id: str


def with_batch(tr: Tracker, unread: Unread, now: float, covered: float | None = None) -> Tracker:
    """The tracker with its unread batch brought up to date (no reservation)."""
    ids = unread.ids[-BATCH_IDS:]
    if unread.count <= 0 or not ids:
        if not tr.batch and tr.batch_count == 0 and tr.batch_since is None:
            return tr
        return dataclasses.replace(tr, batch=(), batch_count=0, batch_since=None)
    known = set(tr.batch)
    if any(i not in known for i in ids):
        # A message the worker has not been nudged about by us: a new batch. If a nudge typed
        # after it (by its send, which types only into an idle pane) covers it, our first
        # repeat waits `unread_repeat` from then; if none did (the send found the agent busy
        # and deferred to us), it is due at once, as soon as the pane is idle.
        since = min(now, covered) if covered is not None else 0.0
        return dataclasses.replace(tr, batch=ids, batch_count=0, batch_since=since)
    if ids != tr.batch:  # some were delivered; the rest are still this batch
        return dataclasses.replace(tr, batch=ids)
    return tr


def unread_due(tr: Tracker, now: float, iv: Intervals) -> bool:
    if not tr.batch or tr.batch_count >= UNREAD_MAX or tr.batch_since is None:
        return False
    ref = tr.batch_since
    if tr.batch_count > 0 and tr.last_unread_at is not None:
        ref = max(ref, tr.last_unread_at)
    return now - ref >= iv.unread_repeat


def wants_screen(tr: Tracker, obs: Observation, now: float, iv: Intervals) -> bool:
    """Whether `decide` needs the screen: only panes that could get a line are captured."""
    tr = with_batch(tr, obs.unread, now, obs.covered)
    return unread_due(tr, now, iv) or (obs.idle_prompts and tr.idle_count < IDLE_MAX)


def decide(tr: Tracker, obs: Observation, now: float, iv: Intervals) -> tuple[Tracker, Send | None]:
    """The tracker after this observation and what to send (already reserved in the tracker).

    `obs.screen` must be given whenever `wants_screen` said so; None reads as "not idle".
    """
    tr = with_batch(tr, obs.unread, now, obs.covered)
    idle = obs.screen == "ready"
    first_idle: float | None = None
    if obs.idle_prompts and tr.idle_count < IDLE_MAX and idle:
        first_idle = tr.first_idle_at if tr.first_idle_at is not None else now
    if first_idle != tr.first_idle_at:
        tr = dataclasses.replace(tr, first_idle_at=first_idle)
    if not idle:
        return tr, None
    if unread_due(tr, now, iv):
        tr, attempt = _reserve(tr, "unread", now)
        tr = dataclasses.replace(
            tr,
            batch_count=tr.batch_count + 1,
            last_unread_at=now,
            unread_total=tr.unread_total + 1,
            first_idle_at=None,  # it has been given something to do: idle time starts over
        )
        return tr, Send(
            "unread", nudge_text(obs.team, obs.worker, obs.unread.count, obs.omp), attempt
        )
    if (
        obs.idle_prompts
        and tr.idle_count < IDLE_MAX
        and tr.first_idle_at is not None
        and now - tr.first_idle_at >= iv.idle_delay
    ):
        tr, attempt = _reserve(tr, "idle", now)
        tr = dataclasses.replace(
            tr, idle_count=tr.idle_count + 1, last_idle_at=now, first_idle_at=None
        )
        return tr, Send("idle", IDLE_PROMPT, attempt)
    return tr, None


def _reserve(tr: Tracker, kind: Kind, now: float) -> tuple[Tracker, str]:
    n = tr.attempts + 1
    attempt = Attempt(id=f"{kind}-{n}", kind=kind, reserved_at=now)
    return dataclasses.replace(tr, attempts=n, last_attempt=attempt), attempt.id


def record_outcome(tr: Tracker, attempt_id: str, outcome: Outcome, now: float) -> Tracker:
    """Note how a reserved send ended. The count it took is kept whatever the outcome."""
    last = tr.last_attempt
    if last is None or last.id != attempt_id:
        return tr
    return dataclasses.replace(
        tr, last_attempt=dataclasses.replace(last, outcome=outcome, completed_at=now)
    )


# ---- the monitor's life ---------------------------------------------------------------------


def empty_streak(previous: int, live_teams: int) -> int:
    """Consecutive scans that found no live team (one transient tmux miss is not the end)."""
    return 0 if live_teams > 0 else previous + 1


def should_stop(streak: int, iv: Intervals) -> bool:
    return streak >= iv.empty_scans


def generation(raw: Mapping[str, Any]) -> str:
    """One launch of a team: a re-created team of the same name is a new generation."""
    return f"{raw.get('createdAt', '')}|{raw.get('launchToken', '')}"


def target_id(team: str, gen: str, pane: str, ident: Mapping[str, Any]) -> str:
    """A pane of one team generation on one tmux server incarnation: 32 hex characters."""
    parts = [
        "runtime",
        team,
        gen,
        pane,
        *(str(ident.get(k, "")) for k in ("socketPath", "serverPid", "serverStartedAt")),
        *(str(ident.get(k, "")) for k in ("sessionId", "windowId")),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
