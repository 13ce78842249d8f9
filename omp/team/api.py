"""The `omp team api` operations: a JSON object in, a JSON object out.

Every check on the input happens before any file is touched, so a refused call changes nothing on
disk. Messages are persisted first and only then is the recipient's pane nudged: a failed nudge
never fails a send.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omp.errors import OmpError
from omp.store import names
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths, find_root
from omp.team import config as team_config
from omp.team import limits, mailbox, nudge, tasks
from omp.team.config import TeamConfig

MAX_BODY = 32 * 1024
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000

Result = dict[str, Any]


@dataclass
class Reply:
    """An operation's result, plus work to do only after the result was printed."""

    result: Result
    after: list[Callable[[], None]] = field(default_factory=list)


# ---- input helpers ------------------------------------------------------------------------


def text_field(inp: Result, key: str, *, required: bool = True) -> str | None:
    val = inp.get(key)
    if val is None or (isinstance(val, str) and val == "" and required):
        if required:
            raise OmpError("invalid_input", f"missing field {key!r}", field=key)
        return None
    if not isinstance(val, str):
        raise OmpError(
            "invalid_input", f"field {key!r} must be a string, got {type(val).__name__}", field=key
        )
    return val


def _team(inp: Result) -> TeamPaths:
    name = names.team_name(text_field(inp, "team_name"))
    cwd = text_field(inp, "cwd", required=False)
    return StatePaths(find_root(cwd)).team(name)


def _recipient(cfg: TeamConfig, name: str, field_name: str = "to") -> str:
    names.recipient_name(name)
    if name not in cfg.recipients:
        raise OmpError(
            "unknown_recipient",
            f"{name!r} is not a member of team {cfg.name}; recipients: {', '.join(cfg.recipients)}",
            field=field_name,
            candidates=cfg.recipients,
        )
    return name


def _sender(cfg: TeamConfig, name: str) -> str:
    if not names.is_valid_name(name) or name not in cfg.recipients:
        raise OmpError(
            "unknown_sender",
            f"sender {name!r} is neither a worker of team {cfg.name} nor {LEADER!r}",
            candidates=cfg.recipients,
        )
    return name


def _body(inp: Result) -> str:
    body = text_field(inp, "body")
    assert body is not None
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY:
        raise OmpError(
            "body_too_large",
            f"body is {size} bytes of UTF-8, over the {MAX_BODY}-byte limit; write the content "
            "to a file in the project and send its path instead",
            size=size,
            limit=MAX_BODY,
        )
    return body


def _limit(inp: Result) -> int:
    val = inp.get("limit", DEFAULT_LIMIT)
    if isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= MAX_LIMIT:
        raise OmpError("invalid_input", f"limit must be an integer from 0 to {MAX_LIMIT}")
    return val


def _flag(inp: Result, key: str) -> bool:
    val = inp.get(key, False)
    if not isinstance(val, bool):
        raise OmpError("invalid_input", f"field {key!r} must be true or false", field=key)
    return val


# ---- messaging ----------------------------------------------------------------------------


def send_message(inp: Result) -> Reply:
    team = _team(inp)
    sender = text_field(inp, "from")
    to = text_field(inp, "to")
    assert sender is not None and to is not None
    names.recipient_name(to)
    body = _body(inp)
    cfg = team_config.load(team)
    _sender(cfg, sender)
    _recipient(cfg, to)
    if sender == to:
        raise OmpError("self_send", f"{sender} cannot send a message to itself")
    msg = mailbox.new_message(sender, to, body)
    check = limits.checker(limits.load(team.project), sender, to, msg, is_answer=False)
    unread = mailbox.Mailbox(team, to).append_messages([msg], check)
    nudged = _nudge(cfg, to, unread)
    return Reply({"ok": True, "messageId": msg["id"], "nudged": nudged})


def broadcast(inp: Result) -> Reply:
    team = _team(inp)
    sender = text_field(inp, "from")
    assert sender is not None
    body = _body(inp)
    cfg = team_config.load(team)
    _sender(cfg, sender)
    recipients = [w for w in cfg.worker_names if w != sender]
    if sender != LEADER:
        recipients.append(LEADER)
    ids: list[str] = []
    errors: list[str] = []
    sent: list[tuple[str, int]] = []
    lim = limits.load(team.project)
    for to in recipients:
        msg = mailbox.new_message(sender, to, body)
        check = limits.checker(lim, sender, to, msg, is_answer=False)
        try:
            unread = mailbox.Mailbox(team, to).append_messages([msg], check)
        except OmpError as err:
            errors.append(f"{to}: {err.code}: {err.message}")
            continue
        ids.append(msg["id"])
        sent.append((to, unread))
    nudged = [to for to, unread in sent if _nudge(cfg, to, unread)]
    out: Result = {
        "ok": True,
        "recipients": [to for to, _ in sent],
        "messageIds": ids,
        "nudged": nudged,
    }
    if errors:
        out["errors"] = errors
    return Reply(out)


def _nudge(cfg: TeamConfig, to: str, unread: int) -> bool:
    try:
        return nudge.nudge(cfg, to, unread)
    except Exception:
        return False  # the message is already safe on disk; a nudge is best-effort


def _mailbox_of(inp: Result) -> tuple[TeamConfig, mailbox.Mailbox]:
    team = _team(inp)
    worker = text_field(inp, "worker")
    assert worker is not None
    names.recipient_name(worker)
    cfg = team_config.load(team)
    _recipient(cfg, worker, "worker")
    return cfg, mailbox.Mailbox(team, worker)


def mailbox_list(inp: Result) -> Reply:
    only = _flag(inp, "undelivered_only")
    limit = _limit(inp)
    _, box = _mailbox_of(inp)
    msgs, omitted, bad = box.listing(undelivered_only=only, limit=limit)
    return Reply({"ok": True, "messages": msgs, "omitted": omitted, "badLines": bad})


def mailbox_mark_delivered(inp: Result) -> Reply:
    mid = text_field(inp, "message_id")
    assert mid is not None
    _, box = _mailbox_of(inp)
    done = box.mark([mid])
    return Reply({"ok": True, "messageId": mid, "alreadyDelivered": done[mid] is None})


def mailbox_read(inp: Result) -> Reply:
    limit = _limit(inp)
    _, box = _mailbox_of(inp)
    msgs, bad = box.undelivered()
    shown = msgs[:limit] if limit else []
    ids = [m["id"] for m in shown]
    # Receipts go down only after the messages were printed: a reader killed in between shows
    # them again next time rather than losing them.
    after = [lambda: _mark_quietly(box, ids)] if ids else []
    return Reply(
        {"ok": True, "messages": shown, "omitted": len(msgs) - len(shown), "badLines": bad},
        after,
    )


def _mark_quietly(box: mailbox.Mailbox, ids: list[str]) -> None:
    try:
        box.mark(ids)
    except OmpError:
        pass  # marked by a concurrent reader, or the mailbox vanished: nothing to lose


# ---- tasks --------------------------------------------------------------------------------


def _worker(cfg: TeamConfig, inp: Result, *, required: bool = True) -> str | None:
    worker = text_field(inp, "worker", required=required)
    if worker is None:
        return None
    names.worker_name(worker)
    if worker not in cfg.worker_names:
        raise OmpError(
            "unknown_worker",
            f"{worker!r} is not a worker of team {cfg.name}; "
            f"workers: {', '.join(cfg.worker_names)}",
            candidates=cfg.worker_names,
        )
    return worker


def claim_task(inp: Result) -> Reply:
    team = _team(inp)
    tid = names.task_id(text_field(inp, "task_id"))
    cfg = team_config.load(team)
    worker = _worker(cfg, inp)
    assert worker is not None
    task, token = tasks.claim(team, tid, worker)
    return Reply({"ok": True, "task": task, "claimToken": token, "claim_token": token})


def transition_task_status(inp: Result) -> Reply:
    team = _team(inp)
    tid = names.task_id(text_field(inp, "task_id"))
    from_s = text_field(inp, "from")
    to_s = text_field(inp, "to")
    token = text_field(inp, "claim_token", required=False)
    result = text_field(inp, "result", required=False)
    assert from_s is not None and to_s is not None
    cfg = team_config.load(team)
    worker = _worker(cfg, inp, required=False)
    task = tasks.transition(
        team, tid, worker=worker, from_status=from_s, to_status=to_s, token=token, result=result
    )
    return Reply({"ok": True, "task": task})


def list_tasks(inp: Result) -> Reply:
    team = _team(inp)
    team_config.load(team)
    return Reply({"ok": True, "tasks": tasks.list_all(team)})


OPERATIONS: dict[str, Callable[[Result], Reply]] = {
    "send-message": send_message,
    "broadcast": broadcast,
    "mailbox-list": mailbox_list,
    "mailbox-read": mailbox_read,
    "mailbox-mark-delivered": mailbox_mark_delivered,
    "claim-task": claim_task,
    "transition-task-status": transition_task_status,
    "list-tasks": list_tasks,
}

SUMMARIES: dict[str, str] = {
    "send-message": "{team_name, from, to, body} -> {ok, messageId, nudged}",
    "broadcast": "{team_name, from, body} -> {ok, recipients, messageIds, nudged, errors?}",
    "mailbox-list": "{team_name, worker, undelivered_only?, limit?} -> {ok, messages, omitted}"
    " (read-only)",
    "mailbox-read": "{team_name, worker, limit?} -> {ok, messages, omitted}: undelivered mail,"
    " marked delivered",
    "mailbox-mark-delivered": "{team_name, worker, message_id} -> {ok}",
    "claim-task": "{team_name, task_id, worker} -> {ok, task, claimToken}",
    "transition-task-status": "{team_name, task_id, worker?, from, to, claim_token, result?}"
    " -> {ok, task}",
    "list-tasks": "{team_name} -> {ok, tasks} (read-only)",
}
