"""Events on messages, task correlation, and the answers omp gives at send time.

The vocabulary is pi-teammate's. A `task_req` starts a conversation whose `task_id` is the
request's own message id; every later message of it carries that `task_id` and a
`ref_message_id` naming the message it answers. What pi-teammate's guardian (MAMORU) does without
a model, omp does inside `send-message`, from the files, before anything reaches a pane:

| sent                     | what omp does                                                        |
|--------------------------|----------------------------------------------------------------------|
| task_req, worker busy    | not delivered; an automatic `task_reject` ("busy") to the requester  |
|   ... worker inactive    | not delivered; an automatic `task_reject` saying why                 |
|   ... worker available   | delivered; an automatic `task_ack` to the requester; worker is busy  |
| ping                     | not delivered; an automatic `pong` from the target's presence        |
| task_done / task_fail    | delivered; the conversation closes and the worker is available again |
| task_cancel              | delivered; the worker owes a `task_cancel_ack` (the sweep waits 20s) |
| task_cancel_ack          | delivered; the conversation closes as cancelled; worker available    |

Agents never send `task_ack`, `task_reject` or `pong` themselves (`reserved_event`). Automatic
messages carry `"auto": true` and are not subject to the loop-breaking limits: each answers
exactly one message that was.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from omp import clock
from omp.conversations import availability, record
from omp.conversations.record import Conversation
from omp.errors import OmpError
from omp.mail import limits, mailbox
from omp.record.config import TeamConfig
from omp.store.names import is_task_id
from omp.store.names import task_id as check_task_id
from omp.store.paths import TeamPaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

EVENTS = (
    "broadcast",
    "info_only",
    "ping",
    "pong",
    "task_req",
    "task_ack",
    "task_reject",
    "task_clarify",
    "task_clarify_res",
    "task_update",
    "task_done",
    "task_fail",
    "task_cancel",
    "task_cancel_ack",
)
RESERVED = frozenset({"task_ack", "task_reject", "pong"})
TASK_EVENTS = frozenset(e for e in EVENTS if e.startswith("task_"))
# Who sends each event of a conversation: the worker or the requester.
WORKER_EVENTS = frozenset(
    {"task_clarify", "task_update", "task_done", "task_fail", "task_cancel_ack"}
)
CLOSING = {"task_done": "done", "task_fail": "failed", "task_cancel_ack": "cancelled"}
FIELDS = ("event", "intent", "need_reply", "task_id", "ref_message_id", "detail")
MAX_INTENT = 64


@dataclass(frozen=True)
class EventFields:
    event: str | None = None
    intent: str | None = None
    need_reply: bool | None = None
    task_id: str | None = None
    ref_message_id: str | None = None
    detail: str | None = None

    def line_fields(self) -> dict[str, Any]:
        """The extra fields of the message line: only those given."""
        out: dict[str, Any] = {}
        for key in FIELDS:
            val = getattr(self, key)
            if val is not None:
                out[key] = val
        return out


def given(inp: dict[str, Any]) -> bool:
    """Whether a send-message input uses any event field (else it is a plain message)."""
    return any(inp.get(k) is not None for k in FIELDS)


# ---- validation (before any file is touched) -----------------------------------------------


def parse(inp: dict[str, Any], root: str | os.PathLike[str], cwd: str | None) -> EventFields:
    event = inp.get("event")
    if event is not None:
        if not isinstance(event, str) or event not in EVENTS:
            raise OmpError(
                "invalid_event",
                f"unknown event {event!r}; events: {', '.join(EVENTS)}",
                candidates=list(EVENTS),
            )
        if event in RESERVED:
            raise OmpError(
                "reserved_event",
                f"{event} is sent by omp itself, never by an agent: omp acknowledges or rejects "
                "a task_req and answers a ping for the recipient",
                event=event,
            )
    intent = inp.get("intent")
    if intent is not None and (
        not isinstance(intent, str) or not 0 < len(intent) <= MAX_INTENT or not intent.isprintable()
    ):
        raise OmpError(
            "invalid_input",
            f"intent must be a short one-line string (1-{MAX_INTENT} characters)",
            field="intent",
        )
    need_reply = inp.get("need_reply")
    if need_reply is not None and not isinstance(need_reply, bool):
        raise OmpError("invalid_input", "need_reply must be true or false", field="need_reply")
    tid = inp.get("task_id")
    if tid is not None:
        check_task_id(tid)
    ref = inp.get("ref_message_id")
    if ref is not None and not is_task_id(ref):
        raise OmpError(
            "invalid_input",
            "ref_message_id must be a message id (1-64 letters, digits, '_' or '-')",
            field="ref_message_id",
        )
    if event == "task_req":
        if tid is not None or ref is not None:
            raise OmpError(
                "invalid_input",
                "a task_req starts a conversation: its task_id is its own message id; leave "
                "task_id and ref_message_id out",
                field="task_id" if tid is not None else "ref_message_id",
            )
    elif event in TASK_EVENTS:
        if tid is None:
            raise OmpError(
                "invalid_input",
                f"{event} needs task_id: the id of the task_req that started the task",
                field="task_id",
            )
    elif tid is not None:
        raise OmpError(
            "invalid_input",
            "task_id belongs only on task events (task_clarify, task_update, task_done, ...)",
            field="task_id",
        )
    detail = inp.get("detail")
    return EventFields(
        event=event,
        intent=intent,
        need_reply=need_reply,
        task_id=tid,
        ref_message_id=ref,
        detail=None if detail is None else check_detail(detail, root, cwd),
    )


def check_detail(value: Any, root: str | os.PathLike[str], cwd: str | None) -> str:
    """An existing regular file inside the project: its absolute path (symlinks resolved)."""
    if not isinstance(value, str) or not value or "\x00" in value:
        raise OmpError("invalid_detail", "detail must be the path of a file", field="detail")
    path = Path(value)
    if not path.is_absolute():
        path = Path(cwd if cwd is not None else os.getcwd()) / path
    try:
        real = path.resolve(strict=True)
        base = Path(root).resolve(strict=True)
    except (OSError, RuntimeError):
        raise OmpError(
            "invalid_detail", f"detail {value!r}: no such file", field="detail"
        ) from None
    if not real.is_relative_to(base):
        raise OmpError(
            "invalid_detail",
            f"detail {value!r} lies outside the project ({base}); put the file inside it",
            field="detail",
        )
    if not real.is_file():
        raise OmpError("invalid_detail", f"detail {value!r} is not a regular file", field="detail")
    return str(real)


# ---- sending --------------------------------------------------------------------------------


@dataclass
class Outcome:
    result: dict[str, Any]
    nudges: list[tuple[str, int]] = field(default_factory=list)  # (recipient, unread)


def auto_message(sender: str, to: str, event: str, body: str, **extra: Any) -> dict[str, Any]:
    fields = {"event": event, **{k: v for k, v in extra.items() if v is not None}, "auto": True}
    return mailbox.new_message(sender, to, body, fields)


def _append(team: TeamPaths, to: str, msg: dict[str, Any], check: mailbox.Check | None) -> int:
    return mailbox.Mailbox(team, to).append_messages([msg], check)


def send(
    cfg: TeamConfig, sender: str, to: str, body: str, f: EventFields, lim: limits.Limits
) -> Outcome:
    """Send one message carrying event fields (the caller validated names, body and fields)."""
    team = cfg.paths
    if f.event == "task_req":
        return _task_req(cfg, sender, to, body, f, lim)
    if f.event == "ping":
        return _ping(cfg, sender, to, body, f, lim)
    if f.event in TASK_EVENTS:
        return _task_event(cfg, sender, to, body, f, lim)
    # broadcast, info_only, or no event: a labelled message, correlated only by ref_message_id
    msg = mailbox.new_message(sender, to, body, f.line_fields())
    answer = f.ref_message_id is not None and (
        record.open_refs(team).get(f.ref_message_id) == sender
    )
    unread = _append(team, to, msg, limits.checker(lim, sender, to, msg, is_answer=answer))
    out: dict[str, Any] = {"ok": True, "messageId": msg["id"]}
    if f.event:
        out["event"] = f.event
    return Outcome(out, [(to, unread)])


def _ping(
    cfg: TeamConfig, sender: str, to: str, body: str, f: EventFields, lim: limits.Limits
) -> Outcome:
    now = clock.now()
    ping_id = mailbox.new_message(sender, to, body)["id"]
    state = availability.member_states(cfg, now, names=[to])[to]
    text = availability.describe(state, now)
    pong = auto_message(
        to,
        sender,
        "pong",
        text,
        ref_message_id=ping_id,
        presence=state.presence,
        status=state.status,
    )
    # The ping itself is answered here and never disturbs the target. Pongs land in the pinger's
    # own mailbox under the usual limits, so a ping loop ends like any other.
    _append(cfg.paths, sender, pong, limits.checker(lim, to, sender, pong, is_answer=True))
    return Outcome(
        {
            "ok": True,
            "messageId": ping_id,
            "event": "ping",
            "delivered": False,
            "pong": {
                "messageId": pong["id"],
                "presence": state.presence,
                "status": state.status,
                "body": text,
            },
        }
    )


def _task_req(
    cfg: TeamConfig, sender: str, to: str, body: str, f: EventFields, lim: limits.Limits
) -> Outcome:
    team = cfg.paths
    msg = mailbox.new_message(sender, to, body, f.line_fields())
    tid = msg["id"]
    msg["task_id"] = tid
    with record.locked(team):
        now = clock.now()
        conv = record.new(tid, sender, to, now=now, intent=f.intent, body=body, detail=f.detail)
        conv.add_event(msg, now)
        state = availability.member_states(cfg, now, names=[to])[to]
        if state.status != "available":
            return _reject(team, conv, msg, state, now)
        conv.acked_at = now
        check = limits.checker(lim, sender, to, msg, is_answer=False)

        def check_then_record(view: mailbox.View) -> None:
            check(view)  # a refused request leaves no record behind
            record.publish(team, conv, expected=0)

        try:
            unread = _append(team, to, msg, check_then_record)
        except OmpError:
            if conv.revision:  # recorded, then the append itself failed: take it back
                with contextlib.suppress(OmpError, OSError):
                    record.remove_unpublished(team, tid)
            raise
        ack = auto_message(
            to,
            sender,
            "task_ack",
            f"{to} accepted task {tid} and is working on it (sent by omp for {to}).",
            task_id=tid,
            ref_message_id=tid,
        )
        out: dict[str, Any] = {
            "ok": True,
            "messageId": tid,
            "event": "task_req",
            "taskId": tid,
            "status": "acknowledged",
            "delivered": True,
        }
        try:
            _append(team, sender, ack, None)
            conv.add_event(ack, now)
            record.publish(team, conv, expected=conv.revision)
            out["autoReplies"] = [{"messageId": ack["id"], "event": "task_ack", "to": sender}]
        except OmpError as err:  # the request is delivered and recorded; the ack is a courtesy
            out["ackError"] = f"{err.code}: {err.message}"
    return Outcome(out, [(to, unread)])


def _reject(
    team: TeamPaths,
    conv: Conversation,
    msg: dict[str, Any],
    state: availability.MemberState,
    now: float,
) -> Outcome:
    to, sender, tid = conv.worker, conv.requester, conv.task_id
    if state.status == "busy":
        reason = "busy"
        why = f"{to} is busy" + (f" with {', '.join(state.busy_with)}" if state.busy_with else "")
    else:
        reason = "inactive"
        why = f"{to} is inactive ({state.inactive_reason or state.presence})"
    text = (
        f"{why}; task {tid} was not delivered (sent by omp for {to}). Try again later or "
        "ask another teammate (see roster)."
    )
    rej = auto_message(to, sender, "task_reject", text, task_id=tid, ref_message_id=tid)
    rej["reason"] = reason
    conv.state = "rejected"
    conv.reason = why
    conv.closed_at = now
    conv.add_event(rej, now)
    # Recorded first: if the reply cannot be written the caller still sees the refusal.
    record.publish(team, conv, expected=0)
    _append(team, sender, rej, None)
    return Outcome(
        {
            "ok": True,
            "messageId": msg["id"],
            "event": "task_req",
            "taskId": tid,
            "status": "rejected",
            "reason": reason,
            "delivered": False,
            "message": text,
            "autoReplies": [{"messageId": rej["id"], "event": "task_reject", "to": sender}],
        }
    )


def _party_error(conv: Conversation, sender: str, to: str, event: str) -> OmpError | None:
    parties = f"{conv.requester} (requester) and {conv.worker} (worker)"
    if sender not in (conv.requester, conv.worker):
        return OmpError(
            "not_task_party",
            f"{sender} is not a party to task {conv.task_id}, which is between {parties}",
            task_id=conv.task_id,
        )
    role, other = (
        ("worker", conv.requester) if event in WORKER_EVENTS else ("requester", conv.worker)
    )
    owner = conv.worker if role == "worker" else conv.requester
    if sender != owner or to != other:
        return OmpError(
            "not_task_party",
            f"in task {conv.task_id} ({parties}) only the {role} sends {event}, to {other}",
            task_id=conv.task_id,
        )
    return None


def _task_event(
    cfg: TeamConfig, sender: str, to: str, body: str, f: EventFields, lim: limits.Limits
) -> Outcome:
    team = cfg.paths
    event = f.event
    tid = f.task_id
    assert event is not None and tid is not None
    with record.locked(team):
        conv = record.load(team, tid)
        if conv is None:
            raise OmpError(
                "unknown_task",
                f"no task conversation {tid}: task_id must be the id of a task_req",
                task_id=tid,
            )
        err = _party_error(conv, sender, to, event)
        if err is not None:
            raise err
        if not conv.is_open:
            raise OmpError(
                "task_closed",
                f"task {tid} is closed ({conv.state}"
                + (f": {conv.reason}" if conv.reason else "")
                + "); nothing more can be sent in it",
                task_id=tid,
                state=conv.state,
            )
        if event == "task_cancel_ack" and conv.state != "cancelling":
            raise OmpError(
                "invalid_transition",
                f"task {tid} was not cancelled; finish it with task_done or task_fail",
                task_id=tid,
            )
        ref = f.ref_message_id
        if ref is None:
            ref = conv.clarify_open if event == "task_clarify_res" and conv.clarify_open else tid
        elif ref not in conv.message_ids() and not conv.events_omitted:
            raise OmpError(
                "message_not_found",
                f"ref_message_id {ref} is not a message of task {tid}",
                task_id=tid,
                message_id=ref,
            )
        line = f.line_fields()
        line["ref_message_id"] = ref
        msg = mailbox.new_message(sender, to, body, line)
        now = clock.now()
        answer = event in limits.ANSWER_EVENTS or conv.open_refs().get(ref) == sender
        expected = conv.revision
        before = Conversation.from_payload(conv.payload(), expected)
        _apply(conv, event, msg, now)
        check = limits.checker(lim, sender, to, msg, is_answer=answer)

        def check_then_record(view: mailbox.View) -> None:
            check(view)  # a refused message leaves the record as it was
            record.publish(team, conv, expected=expected)

        try:
            unread = _append(team, to, msg, check_then_record)
        except OmpError:
            if conv.revision != expected:  # recorded, then the append failed: put it back
                with contextlib.suppress(OmpError, OSError):
                    record.publish(team, before, expected=conv.revision)
            raise
    out: dict[str, Any] = {
        "ok": True,
        "messageId": msg["id"],
        "event": event,
        "taskId": tid,
        "taskState": conv.state,
    }
    return Outcome(out, [(to, unread)])


def _apply(conv: Conversation, event: str, msg: dict[str, Any], now: float) -> None:
    """The conversation after `event` (already checked to be allowed)."""
    conv.add_event(msg, now)
    if event in WORKER_EVENTS:
        conv.last_worker_event_at = now
    if event == "task_clarify":
        conv.clarify_open = msg["id"]
    elif event == "task_clarify_res":
        conv.clarify_open = None
        conv.clarify_answered_at = now
    elif event == "task_cancel":
        conv.state = "cancelling"
        if conv.cancel is None:
            conv.cancel = {
                "messageId": msg["id"],
                "sentAt": clock.iso(now),
                "intent": msg.get("intent"),
                "auto": False,
            }
    elif event in CLOSING:
        conv.state = CLOSING[event]
        conv.closed_at = now
        conv.clarify_open = None
