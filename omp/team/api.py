"""The `omp team api` operations: a JSON object in, a JSON object out.

Every check on the input happens before any file is touched, so a refused call changes nothing on
disk. Messages are persisted first and only then is the recipient's pane nudged: a failed nudge
never fails a send.

A worker's pane carries its identity (OMP_TEAM, OMP_WORKER, OMP_LAUNCH_TOKEN): a call from it that
names someone else is refused (`sender_mismatch`), and so is one from a pane of an earlier launch
(`stale_generation`). A worker's successful writing call refreshes its heartbeat; the read-only
operations (`mailbox-list`, `list-tasks`, `roster`) write nothing at all. A message with an event
goes through `omp.team.events`, imported only then, which keeps a plain send fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from omp.errors import OmpError
from omp.store import names
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths, find_root
from omp.team import config as team_config
from omp.team import limits, mailbox, nudge, presence, tasks
from omp.team.config import TeamConfig

MAX_BODY = 32 * 1024
# send-message fields that make a message an event (see omp.team.events, imported only for them)
EVENT_FIELDS = ("event", "intent", "need_reply", "task_id", "ref_message_id", "detail")
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000

Result = dict[str, Any]


class Reply:
    """An operation's result, plus work to do only after the result was printed."""

    __slots__ = ("after", "result")

    def __init__(self, result: Result, after: list[Callable[[], None]] | None = None) -> None:
        self.result = result
        self.after = after if after is not None else []


# ---- input helpers ------------------------------------------------------------------------


def text_field(inp: Result, key: str, *, required: bool = True) -> str | None:
    val = inp.get(key)
    if val is None:
        if required:
            raise OmpError("invalid_input", f"missing field {key!r}", field=key)
        return None
    if val == "" and required:
        raise OmpError("invalid_input", f"empty {key}: {key!r} must not be empty", field=key)
    if not isinstance(val, str):
        raise OmpError(
            "invalid_input", f"field {key!r} must be a string, got {type(val).__name__}", field=key
        )
    return val


def task_id_field(inp: Result) -> str:
    """`task_id` as a string; an integral JSON number (`3`, `3.0`) is the same id (`"3"`)."""
    val = inp.get("task_id")
    if isinstance(val, int) and not isinstance(val, bool) and val >= 0:
        inp = {**inp, "task_id": str(val)}
    elif isinstance(val, float) and val.is_integer() and val >= 0:
        inp = {**inp, "task_id": str(int(val))}
    return names.task_id(text_field(inp, "task_id"))


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


# ---- identity -----------------------------------------------------------------------------


def worker_identity() -> tuple[str, str | None, str | None] | None:
    """(OMP_WORKER, OMP_TEAM, OMP_LAUNCH_TOKEN) when this process was launched as a worker, else
    None: the leader, a person, a script (they have no worker identity and keep full power)."""
    worker = os.environ.get("OMP_WORKER") or None
    token = os.environ.get("OMP_LAUNCH_TOKEN") or None
    if worker is None and token is None:
        return None
    return worker or "?", os.environ.get("OMP_TEAM") or None, token


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
    env_worker, env_team, token = ident
    if env_team != cfg.name:
        raise OmpError(
            "sender_mismatch",
            f"this process is {env_worker} of team {env_team or '?'} (OMP_TEAM, OMP_WORKER); it "
            f"cannot act in team {cfg.name}",
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
    if token is not None and expected != token:
        raise OmpError(
            "stale_generation",
            f"this pane belongs to an earlier launch of team {cfg.name} (its OMP_LAUNCH_TOKEN no "
            "longer matches the team's); it cannot act for the current team",
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


def _revive(cfg: TeamConfig) -> Callable[[], None]:
    """A writing call's epilogue (after its answer is printed): restart the project's monitor if
    it died while this team still has panes to watch. Cheap when it runs (two small reads);
    fail-open and bounded (`omp.team.monitor_alive.revive`)."""

    def run() -> None:
        if cfg.tmux is None or os.path.lexists(cfg.paths.shutdown):
            return
        if not any(cfg.pane_of(w) for w in cfg.worker_names):
            return
        from omp.team.monitor_alive import revive

        revive(cfg.paths.project)

    return run


# ---- messaging ----------------------------------------------------------------------------


def send_message(inp: Result) -> Reply:
    team = _team(inp)
    sender = text_field(inp, "from")
    to = text_field(inp, "to")
    assert sender is not None and to is not None
    names.recipient_name(to)
    body = _body(inp)
    fields = None
    if any(inp.get(k) is not None for k in EVENT_FIELDS):
        from omp.team import events  # the conversation machinery, only for messages that need it

        fields = events.parse(inp, team.project.root, text_field(inp, "cwd", required=False))
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
        mailbox.Mailbox(team, to).append_messages([msg], check)
        result: Result = {"ok": True, "messageId": msg["id"], **_nudge_fields(cfg, to)}
    else:
        from omp.team import events

        outcome = events.send(cfg, sender, to, body, fields, lim)
        result = outcome.result
        # The recipient's nudge is the one reported; others (auto-replies) are best-effort.
        for r, _ in outcome.nudges:
            if r != to:
                nudge.nudge(cfg, r)
        result.update(_nudge_fields(cfg, to))
    _beat(cfg, who)
    return Reply(result, [_revive(cfg)])


def broadcast(inp: Result) -> Reply:
    team = _team(inp)
    sender = text_field(inp, "from")
    assert sender is not None
    body = _body(inp)
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
            mailbox.Mailbox(team, to).append_messages([msg], check)
        except OmpError as err:
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
    nudges = {to: nudge.nudge(cfg, to) for to in sent}
    out: Result = {
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
    return Reply(out, [_revive(cfg)])


def _nudge_fields(cfg: TeamConfig, to: str) -> Result:
    """`nudged` (typed, as before) and what happened: `nudge` typed | deferred | not_needed |
    no_pane | unreachable, and `nudgeReason` when it was not typed."""
    o = nudge.nudge(cfg, to)
    out: Result = {"nudged": o.typed, "nudge": o.state}
    if o.reason:
        out["nudgeReason"] = o.reason
    return out


def _mailbox_of(
    inp: Result, *, removed_ok: bool = False
) -> tuple[TeamConfig, mailbox.Mailbox, str | None]:
    team = _team(inp)
    worker = text_field(inp, "worker")
    assert worker is not None
    names.recipient_name(worker)
    cfg = team_config.load(team)
    who = _fence(cfg, worker)
    if not (removed_ok and _was_removed(cfg, worker, None)):
        _recipient(cfg, worker, "worker")
    return cfg, mailbox.Mailbox(team, worker), who


def mailbox_list(inp: Result) -> Reply:
    only = _flag(inp, "undelivered_only")
    limit = _limit(inp)
    _, box, _ = _mailbox_of(inp, removed_ok=True)  # a removed worker's mail stays readable
    msgs, omitted, bad = box.listing(undelivered_only=only, limit=limit)
    return Reply({"ok": True, "messages": msgs, "omitted": omitted, "badLines": bad})


def mailbox_mark_delivered(inp: Result) -> Reply:
    mid = text_field(inp, "message_id")
    assert mid is not None
    cfg, box, who = _mailbox_of(inp)
    done = box.mark([mid])
    _beat(cfg, who)
    return Reply(
        {"ok": True, "messageId": mid, "alreadyDelivered": done[mid] is None}, [_revive(cfg)]
    )


def mailbox_read(inp: Result) -> Reply:
    limit = _limit(inp)
    cfg, box, who = _mailbox_of(inp)
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
    tid = task_id_field(inp)
    cfg = team_config.load(team)
    who = _fence(cfg, text_field(inp, "worker"))
    worker = _worker(cfg, inp)
    assert worker is not None
    task, token = tasks.claim(team, tid, worker)
    _beat(cfg, who)
    return Reply(
        {"ok": True, "task": task, "claimToken": token, "claim_token": token}, [_revive(cfg)]
    )


def transition_task_status(inp: Result) -> Reply:
    team = _team(inp)
    tid = task_id_field(inp)
    from_s = text_field(inp, "from")
    to_s = text_field(inp, "to")
    token = text_field(inp, "claim_token", required=False)
    result = text_field(inp, "result", required=False)
    assert from_s is not None and to_s is not None
    cfg = team_config.load(team)
    who = _fence(cfg, text_field(inp, "worker", required=False))
    _worker(cfg, inp, required=False)
    # `who` is the named worker, or the pane's own worker when the call names none: either way
    # only that worker's task can move (the leader, with no worker identity, may name none).
    task = tasks.transition(
        team, tid, worker=who, from_status=from_s, to_status=to_s, token=token, result=result
    )
    _beat(cfg, who)
    return Reply({"ok": True, "task": task}, [_revive(cfg)])


def list_tasks(inp: Result) -> Reply:
    team = _team(inp)
    viewer = _fence(team_config.load(team), None)
    found = tasks.read_all(team)
    result: Result = {"ok": True, "tasks": tasks.shown_to(found, viewer)}
    if found.broken:
        result["broken"] = found.broken  # a task never silently disappears
    return Reply(result)


# ---- presence -----------------------------------------------------------------------------

DESCRIPTION_WIDTH = 120


def roster(inp: Result) -> Reply:
    """Every member but the caller: role, status, presence, one line about it. Read-only."""
    from omp import clock
    from omp.textsafe import one_line

    team = _team(inp)
    worker = text_field(inp, "worker", required=False)
    if worker is not None:
        names.recipient_name(worker)
    cfg = team_config.load(team)
    me = _fence(cfg, worker)
    if worker is not None:
        _recipient(cfg, worker, "worker")
    task_list = tasks.list_all(team)
    by_id = {t.get("id"): t for t in task_list}
    states = presence.member_states(cfg, clock.now(), task_list=task_list)
    members = []
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
        entry: Result = {
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


OPERATIONS: dict[str, Callable[[Result], Reply]] = {
    "send-message": send_message,
    "broadcast": broadcast,
    "mailbox-list": mailbox_list,
    "mailbox-read": mailbox_read,
    "mailbox-mark-delivered": mailbox_mark_delivered,
    "claim-task": claim_task,
    "transition-task-status": transition_task_status,
    "list-tasks": list_tasks,
    "roster": roster,
}

SUMMARIES: dict[str, str] = {
    "send-message": "{team_name, from, to, body, event?, intent?, need_reply?, task_id?,"
    " ref_message_id?, detail?} -> {ok, messageId, nudged, taskId?, status?, autoReplies?}",
    "broadcast": "{team_name, from, body} -> {ok, recipients, messageIds, nudged, errors?}",
    "mailbox-list": "{team_name, worker, undelivered_only?, limit?} -> {ok, messages, omitted}"
    " (read-only)",
    "mailbox-read": "{team_name, worker, limit?} -> {ok, messages, omitted}: undelivered mail,"
    " marked delivered",
    "mailbox-mark-delivered": "{team_name, worker, message_id} -> {ok}",
    "claim-task": "{team_name, task_id, worker} -> {ok, task, claimToken}",
    "transition-task-status": "{team_name, task_id, worker?, from, to, claim_token, result?}"
    " -> {ok, task}",
    "list-tasks": "{team_name} -> {ok, tasks, broken?} (read-only)",
    "roster": "{team_name, worker?} -> {ok, members: [{name, role, status, presence,"
    " description}]}: everyone but you (read-only)",
}
