"""The send pipeline: `send-message` and `broadcast`, each written out as its five stages.

    parse  →  authorize  →  guard  →  store  →  notify

1. parse: the declared fields were checked by `omp.api.spec`; here the event fields of a message
   become `EventFields` (`omp.conversations.events.parse`). Nothing is read from disk yet.
2. authorize: the team is loaded and the caller fenced (`omp.api.authorize`): a worker acts only
   as itself, and sender and recipients are members.
3. guard: what may refuse the message before anything is written: a message to oneself, and the
   loop-breaking limits (`omp.mail.limits`), which are checked under the recipient's lock in the
   next stage because only there is the count they read stable.
4. store: one append per recipient (`omp.mail.mailbox`), plus, for a message with an event, the
   conversation record and any automatic reply (`omp.conversations.events`, imported only then).
5. notify: the delivery policy for each recipient (`omp.mail.delivery`): type the unread count
   into an idle pane, or leave it to the monitor. Fail-open: the message is already safe.

Each stage returns a value the next one takes; none reaches back up a layer. What follows the
reply (a worker's heartbeat, a monitor that runs) is `omp.api.epilogue`. On the per-call layer
(CONTRIBUTING.md): the stages' values are plain classes, the team's files strings.
"""

from __future__ import annotations

from omp.api import authorize, epilogue
from omp.api.spec import Reply
from omp.errors import OmpError
from omp.mail import delivery, limits, mailbox
from omp.record import config as team_config
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.api.doc import BroadcastReply, NudgeFields, SendReply
    from omp.api.spec import Args
    from omp.conversations.events import EventFields
    from omp.record.config import TeamConfig
    from omp.store.layout import TeamFiles

# send-message fields that make a message an event (omp.conversations.events: imported for them)
EVENT_FIELDS = ("event", "intent", "need_reply", "task_id", "ref_message_id", "detail")


class Letter:
    """A parsed message: who sends what to whom (one recipient, or None for a broadcast)."""

    __slots__ = ("body", "fields", "sender", "team", "to")

    def __init__(
        self, team: TeamFiles, sender: str, to: str | None, body: str, fields: EventFields | None
    ) -> None:
        self.team, self.sender, self.to, self.body, self.fields = team, sender, to, body, fields


class Caller:
    """The loaded team and who is calling (None: a process without a worker identity)."""

    __slots__ = ("cfg", "who")

    def __init__(self, cfg: TeamConfig, who: str | None) -> None:
        self.cfg, self.who = cfg, who


class Admitted:
    """A letter cleared to be stored: its recipients and the limits their appends check."""

    __slots__ = ("letter", "limits", "recipients")

    def __init__(self, letter: Letter, recipients: list[str], limits: limits.Limits) -> None:
        self.letter, self.recipients, self.limits = letter, recipients, limits


class Stored:
    """What the appends did: the reply so far, who got mail, and who could not be written to."""

    __slots__ = ("errors", "ids", "others", "recipients", "result")

    def __init__(
        self,
        result: dict[str, Any],
        recipients: list[str],
        ids: list[str],
        others: list[str],  # recipients of automatic replies: nudged best-effort, not reported
        errors: list[str],
    ) -> None:
        self.result, self.recipients, self.ids = result, recipients, ids
        self.others, self.errors = others, errors


# ---- the two pipelines ----------------------------------------------------------------------


def send_message(a: Args) -> Reply[SendReply]:
    letter = parse(a)
    caller = authorize_letter(letter)
    admitted = guard(caller.cfg, letter)
    stored = store(caller.cfg, admitted)
    nudges = notify(caller.cfg, stored)
    epilogue.beat(caller.cfg, caller.who)
    assert letter.to is not None
    outcome = nudges[letter.to]
    result: SendReply = {**stored.result, **nudge_fields(outcome)}  # type: ignore[typeddict-item]
    return Reply(result, [epilogue.keep_monitor(caller.cfg, outcome.state == delivery.DEFERRED)])


def broadcast(a: Args) -> Reply[BroadcastReply]:
    letter = parse(a)
    caller = authorize_letter(letter)
    admitted = guard(caller.cfg, letter)
    stored = store(caller.cfg, admitted)
    nudges = notify(caller.cfg, stored)
    if stored.ids:
        epilogue.beat(caller.cfg, caller.who)
    out: BroadcastReply = {
        "ok": True,
        "recipients": stored.recipients,
        "messageIds": stored.ids,
        "nudged": [to for to, o in nudges.items() if o.typed],
        "nudges": {to: o.state for to, o in nudges.items()},
    }
    if stored.errors:
        out["errors"] = stored.errors
    deferred = any(o.state == delivery.DEFERRED for o in nudges.values())
    return Reply(out, [epilogue.keep_monitor(caller.cfg, deferred)])


# ---- 1. parse -------------------------------------------------------------------------------


def parse(a: Args) -> Letter:
    team: TeamFiles = a["team_name"]
    fields = None
    if any(a.get(k) is not None for k in EVENT_FIELDS):
        from omp.conversations import events  # only for messages that need it

        fields = events.parse(a, team.project.root, a.get("cwd"))
    return Letter(team, a["from"], a.get("to"), a["body"], fields)


# ---- 2. authorize ---------------------------------------------------------------------------


def authorize_letter(letter: Letter) -> Caller:
    cfg = team_config.load(letter.team)
    who = authorize.fence(cfg, letter.sender)
    authorize.sender(cfg, letter.sender)
    if letter.to is not None:
        authorize.recipient(cfg, letter.to)
    return Caller(cfg, who)


# ---- 3. guard -------------------------------------------------------------------------------


def guard(cfg: TeamConfig, letter: Letter) -> Admitted:
    if letter.to is None:  # a broadcast: every worker but the sender, and the leader
        recipients = [w for w in cfg.worker_names if w != letter.sender]
        if letter.sender != LEADER:
            recipients.append(LEADER)
    else:
        if letter.sender == letter.to:
            raise OmpError("self_send", f"{letter.sender} cannot send a message to itself")
        recipients = [letter.to]
    return Admitted(letter, recipients, limits.load(letter.team.project))


# ---- 4. store -------------------------------------------------------------------------------


def store(cfg: TeamConfig, admitted: Admitted) -> Stored:
    letter = admitted.letter
    if letter.fields is not None:
        assert letter.to is not None  # broadcast takes no event fields (its declaration)
        from omp.conversations import events

        # The conversation's rules are checked here, under its lock, where its state is stable.
        outcome = events.send(
            cfg, letter.sender, letter.to, letter.body, letter.fields, admitted.limits
        )
        others = [r for r, _ in outcome.nudges if r != letter.to]
        # The recipient's nudge is the one reported (as for a plain message); others are
        # automatic replies' recipients.
        return Stored(outcome.result, [letter.to], [], others, [])
    ids: list[str] = []
    sent: list[str] = []
    errors: list[str] = []
    for to in admitted.recipients:
        msg = mailbox.new_message(letter.sender, to, letter.body)
        check = limits.checker(admitted.limits, letter.sender, to, msg, is_answer=False)
        try:
            # cfg.paths: pinned to the team directory loaded, so a team deleted (or made again)
            # meanwhile is refused under the mailbox's lock, never "sent" into nobody's mailbox
            mailbox.Mailbox(cfg.files, to).append_messages([msg], check)
        except OmpError as err:
            if letter.to is not None or err.code == "unknown_team":
                raise  # one recipient, or a team deleted meanwhile: that is the answer
            errors.append(f"{to}: {err.code}: {err.message}")
            continue
        ids.append(msg["id"])
        sent.append(to)
    if letter.to is None and errors and not sent:
        # Nothing went out: an agent reading ok:true would believe everyone heard it.
        raise OmpError(
            "broadcast_failed",
            f"the broadcast reached nobody: {'; '.join(errors)}",
            errors=errors,
            recipients=[],
        )
    result: dict[str, Any] = {"ok": True, "messageId": ids[0]} if letter.to else {}
    return Stored(result, sent, ids, [], errors)


# ---- 5. notify ------------------------------------------------------------------------------


def notify(cfg: TeamConfig, stored: Stored) -> dict[str, delivery.Outcome]:
    """Each recipient's nudge outcome; automatic replies' recipients are nudged best-effort."""
    for other in stored.others:
        delivery.nudge(cfg, other)
    return {to: delivery.nudge(cfg, to) for to in stored.recipients}


def nudge_fields(o: delivery.Outcome) -> NudgeFields:
    """`nudged` (typed, as before) and what happened: `nudge` typed | deferred | not_needed |
    no_pane | unreachable, and `nudgeReason` when it was not typed."""
    out: NudgeFields = {"nudged": o.typed, "nudge": o.state}
    if o.reason:
        out["nudgeReason"] = o.reason
    return out
