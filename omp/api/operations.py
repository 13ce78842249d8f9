"""The `omp team api` operations: a JSON object in, a JSON object out.

Every check on the input happens before any file is touched, so a refused call changes nothing on
disk. Messages are persisted first and only then is the recipient's pane nudged: a failed nudge
never fails a send.

A worker's pane carries its identity (OMP_TEAM, OMP_WORKER, OMP_LAUNCH_TOKEN): a call from it that
names someone else is refused (`sender_mismatch`), and so is one from a pane of an earlier launch
(`stale_generation`). A worker's successful writing call refreshes its heartbeat; the read-only
operations (`mailbox-list`, `list-tasks`, `roster`) write nothing at all. A message with an event
goes through `omp.mail.events`, imported only then, which keeps a plain send fast.

Each operation is declared once, at the end (`omp.api.spec.Operation`): its input fields
in the order they are checked, its reply type (`omp.api.doc`) and a note. The checks,
`omp team api --help` and the README's table come from those declarations.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from omp.api.spec import TEAM, Args, Field, Operation, Reply, Result, text_field
from omp.errors import OmpError
from omp.identity import worker_identity
from omp.mail import delivery, limits, mailbox
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store import names
from omp.store.names import LEADER
from omp.tasks import presence, tasks

if TYPE_CHECKING:
    from omp.api.doc import (
        BroadcastReply,
        ClaimReply,
        MailReply,
        MarkReply,
        Member,
        NudgeFields,
        RosterReply,
        SendReply,
        TaskReply,
        TasksReply,
    )

# send-message fields that make a message an event (see omp.mail.events, imported only for them)
EVENT_FIELDS = ("event", "intent", "need_reply", "task_id", "ref_message_id", "detail")


# ---- membership ---------------------------------------------------------------------------


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


# ---- identity -----------------------------------------------------------------------------


def _fence(cfg: TeamConfig, claimed: str | None) -> str | None:
    """Authorize the caller: returns the worker it is, or the name it gives when it has no worker
    identity. The one check every operation runs before touching anything.

    Launch gives each worker's pane OMP_TEAM, OMP_WORKER and OMP_LAUNCH_TOKEN (also recorded as
    `launchToken` in config.json). A process carrying a worker identity acts only as itself: not
    as another worker, not as the leader, and not in any other team (`sender_mismatch`); a pane
    of an earlier launch cannot act at all (`stale_generation`). A process with none of them (the
    leader, a person, a test) is identified by the name it gives.
    """
    ident = worker_identity()
    if ident is None:
        return claimed
    env_worker, env_team, token = ident.worker or "?", ident.team, ident.token
    if env_team != cfg.name:
        raise OmpError(
            "sender_mismatch",
            f"this process is {env_worker} of team {env_team or '?'} ({', '.join(ident.carried)}); "
            f"it cannot act in team {cfg.name}",
            worker=env_worker,
            team=env_team,
        )
    if env_worker != LEADER and env_worker not in cfg.worker_names:
        if _was_removed(cfg, env_worker, token):
            # `omp team remove-worker` took this name off the team: its process is fenced off
            raise OmpError(
                "worker_removed",
                f"{env_worker} was removed from team {cfg.name}; this pane can no longer act "
                "for it",
                team=cfg.name,
                worker=env_worker,
            )
        token = token or ""  # not a member under any launch: the check below refuses it
    # A worker added to a running team carries a token of its own (a new generation of its name)
    entry = cfg.worker(env_worker)
    expected = (entry or {}).get("launchToken") or cfg.raw.get("launchToken")
    # A missing token is judged like a wrong one: unsetting OMP_LAUNCH_TOKEN never widens what
    # a worker process may do. (A team `create` made has no token, and its workers carry none.)
    if expected != token:
        raise OmpError(
            "stale_generation",
            f"this pane belongs to an earlier launch of team {cfg.name} (its OMP_LAUNCH_TOKEN "
            + ("is missing" if token is None else "no longer matches the team's")
            + "); it cannot act for the current team",
            team=cfg.name,
        )
    if claimed is not None and claimed != env_worker:
        raise OmpError(
            "sender_mismatch",
            f"this pane is {env_worker} of team {cfg.name} (OMP_WORKER); it cannot act as "
            f"{claimed}",
            worker=env_worker,
            claimed=claimed,
        )
    return env_worker


def _was_removed(cfg: TeamConfig, worker: str, token: str | None) -> bool:
    gone = cfg.raw.get("removedWorkers")
    for g in gone if isinstance(gone, list) else []:
        if (
            isinstance(g, dict)
            and g.get("name") == worker
            and (token is None or g.get("launchToken") in (None, token))
        ):
            return True
    return False


def _beat(cfg: TeamConfig, who: str | None) -> None:
    """A writing call by a worker is a sign of life: refresh its heartbeat (best-effort)."""
    if who is None:
        return
    try:
        presence.touch(cfg, who)
    except Exception:
        pass  # presence never fails a call that already succeeded


def _revive(cfg: TeamConfig, deferred: bool = False) -> Callable[[], None]:
    """A writing call's epilogue (after its answer is printed): make sure the project's monitor
    runs while this team still has panes to watch. A nudge left to the monitor (`deferred`)
    starts one if none runs; otherwise only a monitor that died is restarted. Cheap when it runs
    (two small reads); fail-open and bounded (`omp.monitor.ctl`, imported only when needed)."""

    def run() -> None:
        try:
            if cfg.tmux is None or os.path.lexists(cfg.paths.shutdown):
                return
            if not any(cfg.pane_of(w) for w in cfg.worker_names) and not deferred:
                return
            from omp.monitor import alive

            state = alive.judge(cfg.paths.project)["state"]
            if state in ("running", "starting") or (state != "dead" and not deferred):
                return
            from omp.monitor import ctl

            if deferred:
                ctl.ensure_monitor(cfg.paths.project.root)
            else:
                ctl.revive(cfg.paths.project)
        except Exception:
            pass  # the call already succeeded; a monitor is best effort

    return run


# ---- messaging ----------------------------------------------------------------------------


def _send_message(a: Args) -> Reply[SendReply]:
    team = a["team_name"]
    sender: str = a["from"]
    to: str = a["to"]
    body: str = a["body"]
    fields = None
    if any(a[k] is not None for k in EVENT_FIELDS):
        from omp.mail import events  # the conversation machinery, only for messages that need it

        fields = events.parse(a, team.project.root, a["cwd"])
    cfg = team_config.load(team)
    who = _fence(cfg, sender)
    _sender(cfg, sender)
    _recipient(cfg, to)
    if sender == to:
        raise OmpError("self_send", f"{sender} cannot send a message to itself")
    lim = limits.load(team.project)
    if fields is None:
        msg = mailbox.new_message(sender, to, body)
        check = limits.checker(lim, sender, to, msg, is_answer=False)
        mailbox.Mailbox(cfg.paths, to).append_messages([msg], check)
        result = cast("SendReply", {"ok": True, "messageId": msg["id"], **_nudge_fields(cfg, to)})
    else:
        from omp.mail import events

        outcome = events.send(cfg, sender, to, body, fields, lim)
        # The recipient's nudge is the one reported; others (auto-replies) are best-effort.
        for r, _ in outcome.nudges:
            if r != to:
                delivery.nudge(cfg, r)
        result = cast("SendReply", {**outcome.result, **_nudge_fields(cfg, to)})
    _beat(cfg, who)
    return Reply(result, [_revive(cfg, result.get("nudge") == delivery.DEFERRED)])


def _broadcast(a: Args) -> Reply[BroadcastReply]:
    team = a["team_name"]
    sender: str = a["from"]
    body: str = a["body"]
    cfg = team_config.load(team)
    who = _fence(cfg, sender)
    _sender(cfg, sender)
    recipients = [w for w in cfg.worker_names if w != sender]
    if sender != LEADER:
        recipients.append(LEADER)
    ids: list[str] = []
    errors: list[str] = []
    sent: list[str] = []
    lim = limits.load(team.project)
    for to in recipients:
        msg = mailbox.new_message(sender, to, body)
        check = limits.checker(lim, sender, to, msg, is_answer=False)
        try:
            mailbox.Mailbox(cfg.paths, to).append_messages([msg], check)
        except OmpError as err:
            if err.code == "unknown_team":
                raise  # deleted meanwhile: nobody else can hear it either
            errors.append(f"{to}: {err.code}: {err.message}")
            continue
        ids.append(msg["id"])
        sent.append(to)
    if errors and not sent:
        # Nothing went out: an agent reading ok:true would believe everyone heard it.
        raise OmpError(
            "broadcast_failed",
            f"the broadcast reached nobody: {'; '.join(errors)}",
            errors=errors,
            recipients=[],
        )
    nudges = {to: delivery.nudge(cfg, to) for to in sent}
    out: BroadcastReply = {
        "ok": True,
        "recipients": sent,
        "messageIds": ids,
        "nudged": [to for to, o in nudges.items() if o.typed],
        "nudges": {to: o.state for to, o in nudges.items()},
    }
    if errors:
        out["errors"] = errors
    if ids:
        _beat(cfg, who)
    deferred = any(o.state == delivery.DEFERRED for o in nudges.values())
    return Reply(out, [_revive(cfg, deferred)])


def _nudge_fields(cfg: TeamConfig, to: str) -> NudgeFields:
    """`nudged` (typed, as before) and what happened: `nudge` typed | deferred | not_needed |
    no_pane | unreachable, and `nudgeReason` when it was not typed."""
    o = delivery.nudge(cfg, to)
    out: NudgeFields = {"nudged": o.typed, "nudge": o.state}
    if o.reason:
        out["nudgeReason"] = o.reason
    return out


def _mailbox_of(
    a: Args, *, removed_ok: bool = False
) -> tuple[TeamConfig, mailbox.Mailbox, str | None]:
    worker: str = a["worker"]
    cfg = team_config.load(a["team_name"])
    who = _fence(cfg, worker)
    if not (removed_ok and _was_removed(cfg, worker, None)):
        _recipient(cfg, worker, "worker")
    return cfg, mailbox.Mailbox(cfg.paths, worker), who


def _mailbox_list(a: Args) -> Reply[MailReply]:
    _, box, _ = _mailbox_of(a, removed_ok=True)  # a removed worker's mail stays readable
    msgs, omitted, bad = box.listing(undelivered_only=a["undelivered_only"], limit=a["limit"])
    return Reply({"ok": True, "messages": msgs, "omitted": omitted, "badLines": bad})


def _mailbox_mark_delivered(a: Args) -> Reply[MarkReply]:
    mid: str = a["message_id"]
    cfg, box, who = _mailbox_of(a)
    done = box.mark([mid])
    _beat(cfg, who)
    return Reply(
        {"ok": True, "messageId": mid, "alreadyDelivered": done[mid] is None}, [_revive(cfg)]
    )


def _mailbox_read(a: Args) -> Reply[MailReply]:
    limit: int = a["limit"]
    cfg, box, who = _mailbox_of(a)
    msgs, bad = box.undelivered(keep=True)
    shown = msgs[:limit] if limit else []
    ids = [m["id"] for m in shown]
    # Receipts go down only after the messages were printed: a reader killed in between shows
    # them again next time rather than losing them.
    after = [lambda: _mark_quietly(box, ids)] if ids else []
    after.append(lambda: _beat(cfg, who))
    after.append(_revive(cfg))
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


def _worker(cfg: TeamConfig, worker: str | None) -> str | None:
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


def _claim_task(a: Args) -> Reply[ClaimReply]:
    cfg = team_config.load(a["team_name"])
    worker = text_field(a, "worker")
    who = _fence(cfg, worker)
    _worker(cfg, worker)
    assert worker is not None
    task, token = tasks.claim(cfg.paths, a["task_id"], worker)
    _beat(cfg, who)
    return Reply(
        {"ok": True, "task": task, "claimToken": token, "claim_token": token}, [_revive(cfg)]
    )


def _transition_task_status(a: Args) -> Reply[TaskReply]:
    cfg = team_config.load(a["team_name"])
    worker = text_field(a, "worker", required=False)
    who = _fence(cfg, worker)
    _worker(cfg, worker)
    # `who` is the named worker, or the pane's own worker when the call names none: either way
    # only that worker's task can move (the leader, with no worker identity, may name none).
    task = tasks.transition(
        cfg.paths,
        a["task_id"],
        worker=who,
        from_status=a["from"],
        to_status=a["to"],
        token=a["claim_token"],
        result=a["result"],
    )
    _beat(cfg, who)
    return Reply({"ok": True, "task": task}, [_revive(cfg)])


def _list_tasks(a: Args) -> Reply[TasksReply]:
    team = a["team_name"]
    viewer = _fence(team_config.load(team), None)
    found = tasks.read_all(team)
    result: TasksReply = {"ok": True, "tasks": tasks.shown_to(found, viewer)}
    if found.broken:
        result["broken"] = found.broken  # a task never silently disappears
    return Reply(result)


# ---- presence -----------------------------------------------------------------------------

DESCRIPTION_WIDTH = 120


def _roster(a: Args) -> Reply[RosterReply]:
    """Every member but the caller: role, status, presence, one line about it. Read-only."""
    from omp import clock
    from omp.textsafe import one_line

    team = a["team_name"]
    worker: str | None = a["worker"]
    cfg = team_config.load(team)
    me = _fence(cfg, worker)
    if worker is not None:
        _recipient(cfg, worker, "worker")
    task_list = tasks.list_all(team)
    by_id = {t.get("id"): t for t in task_list}
    states = presence.member_states(cfg, clock.now(), task_list=task_list)
    members: list[Member] = []
    for name in cfg.recipients:
        if name == me:
            continue
        st = states[name]
        if name == LEADER:
            role, desc = LEADER, "the team leader: hands out work and collects results"
        else:
            info = cfg.worker(name) or {}
            role = str(info.get("role") or cfg.raw.get("agent") or "worker")
            given = info.get("description")
            if isinstance(given, str) and given.strip():
                desc = given
            else:
                task = by_id.get(info.get("taskId")) or {}
                what = task.get("description")
                desc = ("worker" if role == "worker" else f"{role} worker") + (
                    f"; task {task.get('id')}: {what}" if isinstance(what, str) and what else ""
                )
        entry: Member = {
            "name": name,
            "role": role,
            "status": st.status,
            "presence": st.presence,
            "description": one_line(desc, DESCRIPTION_WIDTH),
        }
        if st.busy_with:
            entry["busyWith"] = st.busy_with
        if st.inactive_reason:
            entry["inactiveReason"] = st.inactive_reason
        members.append(entry)
    return Reply({"ok": True, "team": cfg.name, "you": me, "members": members})


# ---- the declarations: fields in the order they are checked (as before the declarations) ----

CWD = Field("cwd", required=False)  # every input may carry it; read with `team_name`
WORKER = Field("worker", "recipient")

send_message = Operation(
    "send-message",
    _send_message,
    (
        TEAM,
        CWD,
        Field("from"),
        Field("to", "recipient"),
        Field("body", "body"),
        *(Field(k, "raw", required=False) for k in EVENT_FIELDS),
    ),
    "SendReply",
    "event to detail: a task conversation's message (README: Task conversations)",
)
broadcast = Operation(
    "broadcast",
    _broadcast,
    (TEAM, Field("from"), Field("body", "body")),
    "BroadcastReply",
    "to every worker but the sender, plus leader unless the leader sent it",
)
mailbox_list = Operation(
    "mailbox-list",
    _mailbox_list,
    (
        Field("undelivered_only", "flag", required=False),
        Field("limit", "limit", required=False),
        TEAM,
        WORKER,
    ),
    "MailReply",
    "the newest limit (default 50) messages, deliveredAt merged in",
    read_only=True,
)
mailbox_read = Operation(
    "mailbox-read",
    _mailbox_read,
    (Field("limit", "limit", required=False), TEAM, WORKER),
    "MailReply",
    "unread mail, oldest first, marked delivered in the same call",
)
mailbox_mark_delivered = Operation(
    "mailbox-mark-delivered",
    _mailbox_mark_delivered,
    (Field("message_id"), TEAM, WORKER),
    "MarkReply",
)
claim_task = Operation(
    "claim-task",
    _claim_task,
    (TEAM, Field("task_id", "task_id"), Field("worker", "late_text")),
    "ClaimReply",
)
transition_task_status = Operation(
    "transition-task-status",
    _transition_task_status,
    (
        TEAM,
        Field("task_id", "task_id"),
        Field("from"),
        Field("to"),
        Field("claim_token", required=False),
        Field("result", required=False),
        Field("worker", "late_text", required=False),
    ),
    "TaskReply",
    "pending -> in_progress -> completed / failed; a worker passes the claim_token its claim "
    "returned",
)
list_tasks = Operation("list-tasks", _list_tasks, (TEAM,), "TasksReply", read_only=True)
roster = Operation(
    "roster",
    _roster,
    (TEAM, Field("worker", "recipient", required=False)),
    "RosterReply",
    "everyone but you",
    read_only=True,
)

OPERATIONS: dict[str, Callable[[Result], Reply[Any]]] = {
    op.name: op
    for op in (
        send_message,
        broadcast,
        mailbox_list,
        mailbox_read,
        mailbox_mark_delivered,
        claim_task,
        transition_task_status,
        list_tasks,
        roster,
    )
}


def declared() -> list[Operation]:
    """The operations' declarations, in `OPERATIONS` order (for `--help` and the README)."""
    return [op for op in OPERATIONS.values() if isinstance(op, Operation)]


def __getattr__(name: str) -> Any:
    if name == "SUMMARIES":  # built on demand: `--help` and tests, never a plain call
        from omp.api.doc import summary

        return {op.name: summary(op) for op in declared()}
    raise AttributeError(name)
