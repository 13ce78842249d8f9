"""Whether to type a nudge now, leave it to the monitor, or skip it: one policy for the send path
and the monitor, for workers and leader alike.

Keys typed while an agent is busy disturb it: Copilot CLI moves a running shell command to the
background when keys arrive, and queues typed lines to replay as turns later, by which time the
mail has often been read. So a nudge is typed only into a pane whose screen its agent's profile
reads as idle (`ready`), and only while the recipient still has unread mail. Otherwise the
monitor nudges once the pane is idle, with the unread count of that moment.

At most one nudge is outstanding per pane: the record beside the mailbox
(`mailbox/.<recipient>.nudge.json`: when a nudge was last typed and the unread ids it covered)
says one was typed for mail that is still unread, and until that mail is read or the re-nudge
interval passes, no other is typed. The send path and the monitor race for a new message (the
monitor nudges mail no nudge covers as soon as the pane is idle, and cannot tell a send still
on its way to the pane from one that deferred), so both check the record and the unread mail
again under the pane's typing lock (`still_due`), and write the record after a verified nudge
before they let the lock go: whichever gets the lock first types, the other finds the record.
It is advisory (a lost record costs at most one extra nudge), written atomically.

On the per-call layer (CONTRIBUTING.md): a send decides here, and imports the tmux side
(`omp.mail.panes`) only when a pane is to be typed into.
"""

from __future__ import annotations

import os

from omp import clock
from omp.store import fs
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.record.config import TeamConfig

UNREAD_REPEAT = 60.0  # seconds between nudges about the same unread mail
UNREAD_REPEAT_ENV = "OMP_MONITOR_UNREAD_REPEAT_SECONDS"

# What happened to a nudge, as `send-message` reports it (`nudge`):
TYPED = "typed"  # typed into an idle pane and seen submitted
DEFERRED = "deferred"  # the pane was busy (or not idle): the monitor nudges once it is idle
NOT_NEEDED = "not_needed"  # the mail was read meanwhile, or a nudge for it is outstanding
NO_PANE = "no_pane"  # nobody to nudge: a headless team, a leader launched without nudges
UNREACHABLE = "unreachable"  # the pane or its tmux server is gone: stored, not nudged


class Outcome:
    """What happened to one nudge: a state above, and why when it was not typed."""

    __slots__ = ("reason", "state")

    def __init__(self, state: str, reason: str | None = None) -> None:
        self.state, self.reason = state, reason

    @property
    def typed(self) -> bool:
        return self.state == TYPED

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and (self.state, self.reason) == (
            other.state,
            other.reason,
        )

    def __repr__(self) -> str:
        return f"Outcome({self.state!r}, {self.reason!r})"


class Record:
    """The nudge record: when the last nudge was typed, and the unread ids it covered."""

    __slots__ = ("ids", "typed_at")

    def __init__(self, typed_at: float, ids: tuple[str, ...]) -> None:
        self.typed_at = typed_at  # epoch seconds
        self.ids = ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and (self.typed_at, self.ids) == (
            other.typed_at,
            other.ids,
        )

    def __repr__(self) -> str:
        return f"Record({self.typed_at!r}, {self.ids!r})"


def unread_repeat() -> float:
    raw = os.environ.get(UNREAD_REPEAT_ENV, "").strip()
    try:
        value = float(raw) if raw else UNREAD_REPEAT
    except ValueError:
        return UNREAD_REPEAT
    return value if 0 < value < float("inf") else UNREAD_REPEAT  # not NaN, not infinite


def read_record(cfg: TeamConfig, recipient: str) -> Record | None:
    try:
        obj = fs.read_json(cfg.files.nudge_record(recipient))
    except Exception:
        return None  # unreadable: as if none (costs at most one extra nudge)
    if not isinstance(obj, dict):
        return None
    at, ids = obj.get("typedAt"), obj.get("ids")
    if isinstance(at, bool) or not isinstance(at, int | float) or not isinstance(ids, list):
        return None
    return Record(float(at) / 1000, tuple(str(i) for i in ids))


def write_record(cfg: TeamConfig, recipient: str, ids: tuple[str, ...], now: float) -> None:
    try:
        cfg.files.verify()  # never into a team made again under the name
        fs.write_json_atomic(
            cfg.files.nudge_record(recipient),
            {"typedAt": int(now * 1000), "ids": list(ids)},  # now > 0: floor
            pretty=False,
        )
    except Exception:
        pass  # advisory: the nudge itself happened


def outstanding(rec: Record | None, unread_ids: tuple[str, ...], now: float) -> bool:
    """A nudge was typed for mail still unread, less than the re-nudge interval ago."""
    if rec is None or now - rec.typed_at >= unread_repeat():
        return False
    still = set(unread_ids)
    return any(i in still for i in rec.ids)


def covered_since(rec: Record | None, newest_at: float | None) -> float | None:
    """When the newest unread message was last nudged about, or None if it never was (the
    monitor then nudges as soon as the pane is idle)."""
    if rec is None:
        return None
    if newest_at is not None and rec.typed_at + 0.001 < newest_at:
        return None
    return rec.typed_at


class Due:
    """A nudge decided on while the record read `seen`: checked again under the pane's typing
    lock (`type_line`'s `guard`), and recorded there once typed (`on_submitted`, at `now()`).
    See the module docstring. No clock in the check: a record other than the one the decision
    saw was written since, by a nudge typed meanwhile."""

    __slots__ = ("cfg", "ids", "now", "recipient", "refused", "seen")

    def __init__(
        self,
        cfg: TeamConfig,
        recipient: str,
        seen: Record | None,
        now: Callable[[], float] = clock.now,
    ) -> None:
        self.cfg, self.recipient, self.seen, self.now = cfg, recipient, seen, now
        self.ids: tuple[str, ...] = ()
        self.refused: str | None = None

    def guard(self) -> str | None:
        """None while the nudge is still due; else why not (its mail read, or a nudge about it
        typed since the decision)."""
        from omp.mail.mailbox import Mailbox

        msgs, _ = Mailbox(self.cfg.files, self.recipient).undelivered()
        self.ids = tuple(str(m.get("id")) for m in msgs)
        rec = read_record(self.cfg, self.recipient)
        if not self.ids:
            self.refused = READ
        elif rec is not None and rec != self.seen and not set(rec.ids).isdisjoint(self.ids):
            self.refused = COVERED
        return self.refused

    def typed(self) -> None:
        write_record(self.cfg, self.recipient, self.ids, self.now())


READ = "no unread mail any more"
COVERED = "a nudge for this mail is still outstanding"


def pane_for(cfg: TeamConfig, recipient: str) -> tuple[str | None, str | None]:
    """(pane, None), or (None, why nobody is to be nudged)."""
    if os.path.exists(cfg.files.shutdown):
        return None, "the team was shut down"
    if recipient == LEADER and cfg.raw.get("nudgeLeader") is not True:
        return None, "the leader is not nudged (launch with --nudge-leader); it polls with wait"
    pane = cfg.pane_of(recipient)
    if pane is None:
        return None, f"{recipient} has no pane (a headless team)"
    return pane, None


def remote_host(cfg: TeamConfig, recipient: str) -> str | None:
    """The host a worker runs on (`omp.record.placement`), or None: a dictionary lookup, so the
    send path stays free of ssh (the monitor types the nudge over the host's connection)."""
    w = cfg.worker(recipient) if recipient != LEADER else None
    placed = w.get("remote") if w is not None else None
    host = placed.get("host") if isinstance(placed, dict) else None
    return host if isinstance(host, str) and host else None


def nudge_now(cfg: TeamConfig, recipient: str, omp: str | None) -> Outcome:
    """The send path: type the nudge (naming `omp`, the team's command; None: the one its
    config records) if the pane is idle and mail is still unread, else say why not. Never
    raises."""
    try:
        return _nudge_now(cfg, recipient, omp)
    except Exception as exc:  # the message is already safe on disk; a nudge is best-effort
        return Outcome(DEFERRED, f"nudge failed ({type(exc).__name__}); the monitor retries")


def _nudge_now(cfg: TeamConfig, recipient: str, omp: str | None) -> Outcome:
    pane, why = pane_for(cfg, recipient)
    host = remote_host(cfg, recipient) if pane is None else None
    if host is not None and not os.path.exists(cfg.files.shutdown):
        return Outcome(DEFERRED, f"{recipient} runs on {host}: the monitor nudges it there")
    if pane is None:
        return Outcome(NO_PANE, why)
    from omp.mail.mailbox import Mailbox

    msgs, _ = Mailbox(cfg.files, recipient).undelivered()
    ids = tuple(str(m.get("id")) for m in msgs)
    if not ids:
        return Outcome(NOT_NEEDED, READ)
    seen = read_record(cfg, recipient)
    if outstanding(seen, ids, clock.now()):
        return Outcome(NOT_NEEDED, COVERED)
    from omp.mail.nudge import nudge_text
    from omp.mail.panes import deliver_line

    if omp is None:
        from omp.invocation import team_command

        omp = team_command(cfg.raw)
    text = nudge_text(cfg.name, recipient, len(ids), omp)
    due = Due(cfg, recipient, seen)  # checked again, and recorded, under the pane's lock
    res = deliver_line(
        cfg, recipient, pane, text, only_idle=True, guard=due.guard, on_submitted=due.typed
    )
    if res.ok:
        return Outcome(TYPED)
    if res.reason == "unwanted":  # the monitor (or another send) nudged about it meanwhile
        return Outcome(NOT_NEEDED, res.screen)
    if res.reason in ("gone", "dead", "pane_mismatch", "server_gone"):
        from omp.mail.panes import why_unreachable

        why = why_unreachable(cfg) if res.reason in ("gone", "server_gone") else None
        return Outcome(UNREACHABLE, why or _UNREACHABLE.get(res.reason, res.reason))
    if res.reason == "needs_person":  # never typed into: a keystroke could answer its dialog
        return Outcome(DEFERRED, f"its screen needs a person ({res.screen}); nudged once cleared")
    return Outcome(DEFERRED, _DEFERRED.get(res.reason, res.reason))


_UNREACHABLE = {
    "gone": "its pane is gone",
    "dead": "its agent exited (the pane is dead)",
    "pane_mismatch": "its pane id now belongs to another pane (the tmux server restarted)",
    "server_gone": "the team's tmux server is gone",
}
_DEFERRED = {
    "busy": "the agent is busy; the monitor nudges once it is idle",
    "not_ready": "the screen is not at an idle prompt; the monitor nudges once it is",
    "copy_mode": "the pane is in copy mode; the monitor nudges once it leaves it",
    "lock_timeout": "another nudge was being typed; the monitor follows up",
    "unverified": "the nudge was not seen submitted; the monitor follows up",
    "no_echo": "the nudge was not seen submitted; the monitor follows up",
    "agent_not_running": "the agent is not running in its pane",
}


def nudge(cfg: TeamConfig, recipient: str) -> Outcome:
    """After a message is stored: type the unread-count line if the recipient's pane is idle,
    else leave it to the monitor (a `deferred` outcome: the caller sees that a monitor runs).
    Never raises."""
    return nudge_now(cfg, recipient, None)


def auto_mail(cfg: TeamConfig, worker: str, body: str, meta: dict[str, Any]) -> str | None:
    """omp's own mail to `worker` in the leader's name (`meta` marks it `auto`, with its
    intent), stored and then nudged (best-effort: the monitor re-nudges unread mail); its id,
    or None when it could not be stored."""
    from omp.errors import OmpError
    from omp.mail import mailbox

    msg = mailbox.new_message(LEADER, worker, body, {"auto": True, **meta})
    try:
        mailbox.Mailbox(cfg.paths, worker).append_messages([msg])  # its history line too
    except OmpError:
        return None
    nudge(cfg, worker)
    return str(msg["id"])
