"""The `omp team api` operations: a JSON object in, a JSON object out.

Every check on the input happens before any file is touched, so a refused call changes nothing on
disk. `send-message` and `broadcast` are the send pipeline (`omp.api.send`: parse, authorize,
guard, store, notify); the other operations authorize the caller the same way
(`omp.api.authorize`). A worker's successful writing call refreshes its heartbeat
(`omp.api.epilogue`); the read-only operations (`mailbox-list`, `list-tasks`, `roster`) write
nothing at all.

Each operation is declared once, at the end (`omp.api.spec.Operation`): its input fields
in the order they are checked, its reply type (`omp.api.doc`) and a note. The checks,
`omp team api --help` and the table in docs/commands.md come from those declarations.
"""

from __future__ import annotations

from omp.api import authorize, epilogue, send
from omp.api.send import EVENT_FIELDS
from omp.api.spec import TEAM, Field, Operation, Reply, text_field
from omp.errors import OmpError
from omp.mail import mailbox
from omp.record import config as team_config
from omp.store import names
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.api.doc import (
        ClaimReply,
        CreateTaskReply,
        MailReply,
        MarkReply,
        Member,
        RosterReply,
        TaskReply,
        TasksReply,
    )
    from omp.api.spec import Args, Result
    from omp.record.config import TeamConfig


# ---- messaging ----------------------------------------------------------------------------


def _mailbox_of(
    a: Args, *, removed_ok: bool = False
) -> tuple[TeamConfig, mailbox.Mailbox, str | None]:
    worker: str = a["worker"]
    cfg = team_config.load(a["team_name"])
    who = authorize.fence(cfg, worker)
    if not (removed_ok and authorize.was_removed(cfg, worker, None)):
        authorize.recipient(cfg, worker, "worker")
    return cfg, mailbox.Mailbox(cfg.files, worker), who


def _mailbox_list(a: Args) -> Reply[MailReply]:
    _, box, _ = _mailbox_of(a, removed_ok=True)  # a removed worker's mail stays readable
    msgs, omitted, bad = box.listing(undelivered_only=a["undelivered_only"], limit=a["limit"])
    return Reply({"ok": True, "messages": msgs, "omitted": omitted, "badLines": bad})


def _mailbox_mark_delivered(a: Args) -> Reply[MarkReply]:
    mid: str = a["message_id"]
    cfg, box, who = _mailbox_of(a)
    done = box.mark([mid])
    epilogue.beat(cfg, who)
    return Reply(
        {"ok": True, "messageId": mid, "alreadyDelivered": done[mid] is None},
        [epilogue.keep_monitor(cfg)],
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
    after.append(lambda: epilogue.beat(cfg, who))
    after.append(epilogue.keep_monitor(cfg))
    return Reply(
        {"ok": True, "messages": shown, "omitted": len(msgs) - len(shown), "badLines": bad},
        after,
    )


def _mark_quietly(box: mailbox.Mailbox, ids: list[str]) -> None:
    try:
        box.mark(ids)
    except OmpError:
        pass  # marked by a concurrent reader, or the mailbox vanished: nothing to lose


# ---- tasks (`omp.tasks` is imported by these operations only: a send never loads it) -------


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
    from omp.tasks import tasks

    cfg = team_config.load(a["team_name"])
    worker = text_field(a, "worker")
    who = authorize.fence(cfg, worker)
    _worker(cfg, worker)
    assert worker is not None
    task, token = tasks.claim(cfg.files, a["task_id"], worker)
    epilogue.beat(cfg, who)
    return Reply(
        {"ok": True, "task": task, "claimToken": token, "claim_token": token},
        [epilogue.keep_monitor(cfg)],
    )


def _transition_task_status(a: Args) -> Reply[TaskReply]:
    from omp.tasks import tasks

    cfg = team_config.load(a["team_name"])
    worker = text_field(a, "worker", required=False)
    who = authorize.fence(cfg, worker)
    _worker(cfg, worker)
    amend = None
    if a["to"] == "completed" and a["from"] == "in_progress":
        from omp.api import completion  # git and the check's machinery: this path only

        if completion.involved(cfg):
            amend = completion.prepare(cfg, a["task_id"], who, a.get("nothing_to_commit") is True)
    # `who` is the named worker, or the pane's own worker when the call names none: either way
    # only that worker's task can move (the leader, with no worker identity, may name none).
    task = tasks.transition(
        cfg.files,
        a["task_id"],
        worker=who,
        from_status=a["from"],
        to_status=a["to"],
        token=a["claim_token"],
        result=a["result"],
        amend=amend,
    )
    epilogue.beat(cfg, who)
    # a check runs in the background: a monitor must be there to settle what its own
    # supervisor could not (`omp.monitor.verifying`)
    verifying = task.get("status") == "verifying"
    reply: TaskReply = {"ok": True, "task": task}
    if task.get("backlog") is True:  # the worker is free: its next task, if that is cheap
        from omp.backlog import handover

        owner = who or (task.get("owner") if isinstance(task.get("owner"), str) else None)
        for act in handover.after_move(cfg, owner, str(task.get("status"))):
            if act.get("action") == "handed_over" and act.get("worker") == owner:
                reply["next"] = {"taskId": act["taskId"], "how": "omp mailed it to you"}
    return Reply(reply, [epilogue.keep_monitor(cfg, deferred=verifying)])


def _create_task(a: Args) -> Reply[CreateTaskReply]:
    """A task for the team's backlog, made by an agent (a worker splitting its own task) or the
    leader; it records who made it (`omp.backlog.changes`)."""
    cfg = team_config.load(a["team_name"])
    worker = text_field(a, "worker", required=False)
    who = authorize.fence(cfg, worker)
    _worker(cfg, worker)
    from omp.backlog import changes

    blocked = a["blocked_by"]
    if blocked is None:
        blocked = []
    elif not isinstance(blocked, list):
        blocked = [blocked]
    result = changes.add(
        cfg,
        a["title"],
        description=a["description"] or "",
        blocked_by=blocked,
        agent=a["agent"],
        priority=a["priority"] if a["priority"] is not None else 0,
        created_by=who or LEADER,
        cheap=True,
    )  # fmt: skip
    epilogue.beat(cfg, who)
    reply: CreateTaskReply = {
        "ok": True,
        "team": cfg.name,
        "task": result["task"],
        "handedOver": result["handedOver"],
    }
    return Reply(reply, [epilogue.keep_monitor(cfg)])


def _list_tasks(a: Args) -> Reply[TasksReply]:
    from omp.tasks import tasks

    team = a["team_name"]
    viewer = authorize.fence(team_config.load(team), None)
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
    from omp.conversations import availability
    from omp.tasks import tasks
    from omp.textsafe import one_line

    team = a["team_name"]
    worker: str | None = a["worker"]
    cfg = team_config.load(team)
    me = authorize.fence(cfg, worker)
    if worker is not None:
        authorize.recipient(cfg, worker, "worker")
    task_list = tasks.list_all(team)
    by_id = {t.get("id"): t for t in task_list}
    states = availability.member_states(cfg, clock.now(), task_list=task_list)
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
    send.send_message,
    (
        TEAM,
        CWD,
        Field("from"),
        Field("to", "recipient"),
        Field("body", "body"),
        *(Field(k, "raw", required=False) for k in EVENT_FIELDS),
    ),
    "SendReply",
    "event to detail: a task conversation's message (docs/commands.md: Task conversations)",
)
broadcast = Operation(
    "broadcast",
    send.broadcast,
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
        Field("nothing_to_commit", "flag", required=False),
    ),
    "TaskReply",
    "pending -> in_progress -> completed / failed; a worker passes the claim_token its claim "
    "returned; a worktree worker commits first (else uncommitted_changes, or nothing_committed "
    "unless nothing_to_commit is true: a review, an answer); in a team that verifies, a "
    "completion is verifying until its check passes",
)
create_task = Operation(
    "create-task",
    _create_task,
    (
        TEAM,
        Field("title", "body"),
        Field("description", "raw", required=False),
        Field("blocked_by", "raw", required=False),
        Field("agent", "raw", required=False),
        Field("priority", "raw", required=False),
        Field("worker", "late_text", required=False),
    ),
    "CreateTaskReply",
    "a backlog task (blocked_by: ids it waits for); records who made it; a worker may make "
    "at most 20 (task_limit)",
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
        create_task,
        list_tasks,
        roster,
    )
}


def declared() -> list[Operation]:
    """The operations' declarations, in `OPERATIONS` order (for `--help` and docs/commands.md)."""
    return [op for op in OPERATIONS.values() if isinstance(op, Operation)]


def __getattr__(name: str) -> Any:
    if name == "SUMMARIES":  # built on demand: `--help` and tests, never a plain call
        from omp.api.doc import summary

        return {op.name: summary(op) for op in declared()}
    raise AttributeError(name)
