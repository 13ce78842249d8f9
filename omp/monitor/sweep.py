"""Timeouts and orphaned work, swept by the monitor on every scan.

`sweep_team(cfg, now, pane_states)` is called once per team per scan. It decides from what it
already has (the pane states the monitor looked at, and the small summary of open conversations,
re-parsed only when it changed) whether anything needs doing, and touches nothing when not. Only
then does it take the conversation lock, re-read the records and act; a record that moved
meanwhile is judged again from the fresh copy, so two sweeps, or a sweep and a worker's own
answer, never both settle one task.

- Timeout (pi-teammate): an acknowledged `task_req` with no event from its worker for
  `task_seconds` (default 20 min; any task event from the worker resets it, and the clock stops
  while a `task_clarify` waits for the requester) gets an automatic `task_cancel` with intent
  `task_timeout`. No `task_cancel_ack` within `cancel_ack_seconds` (default 20 s) after a cancel,
  automatic or not: the worker is marked inactive, the conversation closes as `timed_out`, and the
  requester gets a `task_fail` saying why.
- Orphans (pi-team): a worker that is offline (its pane dead or gone, its process exited) while
  holding a claimed `in_progress` task or an open conversation: the task becomes `interrupted`, the
  conversation closes as `interrupted`, and the requester (the leader for claimed tasks) gets a
  `task_fail` naming the interruption. Work is never replayed: edits may already have happened.

Timeouts are set per project in `.omp/config.toml`:

    [timeouts]
    task_seconds = 1200
    cancel_ack_seconds = 20

Automatic messages are not nudged here: the monitor re-nudges panes with unread mail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from omp import clock
from omp.conversations import record as conversations
from omp.conversations.record import Conversation
from omp.errors import OmpError
from omp.mail import mailbox
from omp.record.config import TeamConfig
from omp.record.placement import placed_of
from omp.store import project_config
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths, task_id_of_lock
from omp.tasks import presence, tasks

Action = dict[str, Any]


class Settings(NamedTuple):
    task_seconds: float = 20 * 60.0
    cancel_ack_seconds: float = 20.0


def load_settings(project: StatePaths) -> Settings:
    """`[timeouts]` of `.omp/config.toml` (defaults when absent)."""
    return project_config.load_section(project, "timeouts", Settings, "timeout")


def pane_state(value: object) -> str:
    """alive, dead, gone or unknown from what the monitor has: a PaneView, a PaneState, a
    string, or None (the pane was not found)."""
    if value is None:
        return "gone"
    if isinstance(value, str):
        return value
    state = getattr(value, "state", None)
    if isinstance(state, str):
        return state
    dead = getattr(value, "dead", None)
    if isinstance(dead, bool):
        return "dead" if dead else "alive"
    return "unknown"


def offline_reason(cfg: TeamConfig, worker: str, pane_states: Mapping[str, object]) -> str | None:
    """Why `worker` counts as offline, or None. Pane first (free), heartbeat only if unknown."""
    if worker == LEADER:
        return None
    # A worker with no pane of its own (a headless team) is judged by its heartbeat only: "gone"
    # would otherwise sweep every worker of a team that never had panes. A worker on another
    # host has its pane there (`omp.record.placement`); the monitor leaves it out while its
    # host does not answer, and says why when it counts as gone (`reason`).
    has_pane = cfg.pane_of(worker) is not None or placed_of(cfg.worker(worker)) is not None
    if has_pane and worker in pane_states:
        value = pane_states[worker]
        state = pane_state(value)
        if state in presence.DEAD_PANES:
            reason = getattr(value, "reason", None)
            return reason if isinstance(reason, str) and reason else f"its pane is {state}"
        if state == "alive":
            return None
    hb = presence.read(cfg.paths, worker)
    if hb is None:
        return None
    if hb.state == "offline":
        return "its pane was seen dead"
    if hb.pid is not None and not presence.pid_alive(hb.pid):
        return f"its process {hb.pid} exited"
    return None


def sweep_team(
    cfg: TeamConfig,
    now: float,
    pane_states: Mapping[str, object],
    *,
    settings: Settings | None = None,
) -> list[Action]:
    """Act on timed-out and orphaned work of one team; returns the actions taken ([] = none).

    `pane_states` maps worker names to what the monitor saw of their panes this scan (see
    `pane_state`); a worker left out is judged by its heartbeat alone.
    """
    team = cfg.paths
    if os.path.lexists(team.shutdown):
        return []  # a team that was shut down has no work left to rescue
    s = settings or load_settings(team.project)
    summary = conversations.open_summary(team)
    offline: dict[str, str] = {}
    for w in cfg.worker_names:
        reason = offline_reason(cfg, w, pane_states)
        if reason:
            offline[w] = reason
    due: list[tuple[str, str]] = []
    for tid, e in summary.items():
        if e.get("worker") in offline:
            continue
        if e.get("state") == "active" and not e.get("clarifyOpen"):
            base = clock.parse_iso(str(e.get("timerBase", "")))
            if base is None or now - base > s.task_seconds:
                due.append(("timeout", tid))
        elif e.get("state") == "cancelling":
            sent = clock.parse_iso(str(e.get("cancelSentAt", "")))
            if sent is None or now - sent > s.cancel_ack_seconds:
                due.append(("no_ack", tid))
    if not offline and not due:
        return []
    actions: list[Action] = []
    for w, reason in offline.items():
        held = [tid for tid, e in summary.items() if e.get("worker") == w]
        actions += _interrupt(cfg, w, reason, held, now)
    for kind, tid in due:
        actions += _timeout(cfg, tid, now, s) if kind == "timeout" else _no_ack(cfg, tid, now, s)
    return actions


# ---- orphans --------------------------------------------------------------------------------


def interrupt_worker(cfg: TeamConfig, worker: str, reason: str, now: float) -> list[Action]:
    """Settle everything `worker` holds (claimed tasks, requests addressed to it) as interrupted,
    telling each requester; what `omp team remove-worker` does for the member it removes."""
    summary = conversations.open_summary(cfg.paths)
    held = [tid for tid, e in summary.items() if e.get("worker") == worker]
    return _interrupt(cfg, worker, reason, held, now)


def _claimed_by(team: TeamPaths, worker: str) -> list[dict[str, Any]]:
    """Claimed tasks of `worker`: a lock file exists only while a task is claimed (a store keeps
    no lock files: its tasks are read)."""
    if tasks.in_store(team):
        return [
            t
            for t in tasks.read_all(team)
            if t.get("status") == "in_progress" and t.get("owner") == worker
        ]
    try:
        if not team.project.check(team.tasks_dir):
            return []
        names = os.listdir(team.tasks_dir)
    except (OSError, OmpError):
        return []
    out = []
    for n in sorted(names):
        tid = task_id_of_lock(n)
        if tid is None or n.startswith("."):
            continue
        try:
            task = tasks.read(team, tid)
        except OmpError:
            continue
        if task and task.get("status") == "in_progress" and task.get("owner") == worker:
            out.append(task)
    return out


def _interrupt(
    cfg: TeamConfig, worker: str, reason: str, held: list[str], now: float
) -> list[Action]:
    team = cfg.paths
    actions: list[Action] = []
    for task in _claimed_by(team, worker):
        tid = str(task["id"])
        why = f"{worker} went offline ({reason}) holding task {tid}"
        try:
            tasks.transition(
                team,
                tid,
                worker=None,
                from_status="in_progress",
                to_status="interrupted",
                token=task.get("claimToken"),
                # begins with `tasks.offline_result`: what `omp team resume` gives back
                result=f"{tasks.offline_result(worker)} ({reason}) holding task {tid}; "
                "not replayed",
            )
        except OmpError:
            continue  # it moved meanwhile (finished, or another sweep got there first)
        body = (
            f"{why}: the task is now interrupted and will not be replayed (edits may already "
            "have happened). Check its state and reassign it if it is still needed."
        )
        msg = _auto(worker, LEADER, "task_fail", body, intent="worker_offline")
        msg["claimed_task_id"] = tid
        action: Action = {
            "action": "interrupted",
            "team": cfg.name,
            "worker": worker,
            "claimedTaskId": tid,
            "notify": LEADER,
            "reason": reason,
        }
        try:
            mailbox.Mailbox(team, LEADER).append_messages([msg])
            action["messageId"] = msg["id"]
        except OmpError as err:
            action["error"] = f"{err.code}: {err.message}"
        actions.append(action)
    for tid in held:
        with conversations.locked(team):
            conv = _fresh(team, tid)
            if conv is None or conv.worker != worker:
                continue
            why = f"{worker} went offline ({reason}) while working on task {tid}"
            body = (
                f"{why}: the task is interrupted and will not be replayed (edits may already "
                "have happened). Reassign it if it is still needed."
            )
            msg = _auto(worker, conv.requester, "task_fail", body, intent="worker_offline")
            actions.append(_close(cfg, conv, msg, "interrupted", why, now, "interrupted"))
    return actions


# ---- timeouts -------------------------------------------------------------------------------


def _fresh(team: TeamPaths, tid: str) -> Conversation | None:
    """The record of an open conversation under the lock; fixes a stale summary entry."""
    try:
        conv = conversations.load(team, tid)
    except OmpError:
        return None  # a damaged record is left for a person; status shows it as not open
    if conv is None or not conv.is_open:
        with contextlib.suppress(OmpError, OSError):
            conversations.drop_stale_entry(team, tid)
        return None
    return conv


def _timeout(cfg: TeamConfig, tid: str, now: float, s: Settings) -> list[Action]:
    team = cfg.paths
    with conversations.locked(team):
        conv = _fresh(team, tid)
        if (
            conv is None
            or conv.state != "active"
            or conv.clarify_open
            or now - conv.timer_base() <= s.task_seconds
        ):
            return []
        minutes = _span(s.task_seconds)
        body = (
            f"No word from {conv.worker} on task {tid} for {minutes}: the task is cancelled "
            f"(sent by omp for {conv.requester}). Stop work on it and confirm with "
            f"task_cancel_ack within {_span(s.cancel_ack_seconds)}."
        )
        msg = _auto(conv.requester, conv.worker, "task_cancel", body, intent="task_timeout")
        msg["task_id"] = tid
        msg["ref_message_id"] = tid
        before = conv.payload()
        conv.state = "cancelling"
        conv.cancel = {
            "messageId": msg["id"],
            "sentAt": clock.iso(now),
            "intent": "task_timeout",
            "auto": True,
        }
        conv.add_event(msg, now)
        action: Action = {
            "action": "task_cancel",
            "team": cfg.name,
            "taskId": tid,
            "worker": conv.worker,
            "requester": conv.requester,
            "messageId": msg["id"],
            "notify": conv.worker,
        }
        commit(team, conv, before, conv.worker, msg, action)
    return [action]


def _no_ack(cfg: TeamConfig, tid: str, now: float, s: Settings) -> list[Action]:
    team = cfg.paths
    with conversations.locked(team):
        conv = _fresh(team, tid)
        sent = conv.cancel_sent_at if conv is not None else None
        if conv is None or conv.state != "cancelling":
            return []
        if sent is not None and now - sent <= s.cancel_ack_seconds:
            return []
        timed_out = bool(conv.cancel and conv.cancel.get("intent") == "task_timeout")
        wait = _span(s.cancel_ack_seconds)
        if timed_out:
            why = (
                f"{conv.worker} sent nothing on task {tid} for {_span(s.task_seconds)} and did "
                f"not acknowledge its cancel within {wait}"
            )
        else:
            why = f"{conv.worker} did not acknowledge the cancel of task {tid} within {wait}"
        body = (
            f"{why}: it is marked inactive and the task is closed, not replayed. Reassign it "
            "if it is still needed."
        )
        intent = "task_timeout" if timed_out else "cancel_unacknowledged"
        msg = _auto(conv.worker, conv.requester, "task_fail", body, intent=intent)
        action = _close(cfg, conv, msg, "timed_out", why, now, "timed_out")
        if "error" not in action and presence.mark_inactive(cfg, conv.worker, why, now):
            action["inactive"] = conv.worker
    return [action]


# ---- shared ---------------------------------------------------------------------------------


def _auto(sender: str, to: str, event: str, body: str, *, intent: str) -> dict[str, Any]:
    return mailbox.new_message(sender, to, body, {"event": event, "intent": intent, "auto": True})


def _close(
    cfg: TeamConfig,
    conv: Conversation,
    msg: dict[str, Any],
    state: str,
    why: str,
    now: float,
    action_name: str,
) -> Action:
    msg["task_id"] = conv.task_id
    msg["ref_message_id"] = conv.task_id
    before = conv.payload()
    conv.state = state
    conv.reason = why
    conv.closed_at = now
    conv.clarify_open = None
    conv.add_event(msg, now)
    action: Action = {
        "action": action_name,
        "team": cfg.name,
        "taskId": conv.task_id,
        "worker": conv.worker,
        "requester": conv.requester,
        "messageId": msg["id"],
        "notify": conv.requester,
        "reason": why,
    }
    commit(cfg.paths, conv, before, conv.requester, msg, action)
    return action


def commit(
    team: TeamPaths,
    conv: Conversation,
    before: dict[str, Any],
    to: str,
    msg: dict[str, Any],
    action: Action,
) -> bool:
    """Record, then deliver; a failed delivery puts the record back so the next scan retries.

    The caller holds the conversation lock and read `conv` under it (revision = what it saw).
    """
    expected = conv.revision
    try:
        conversations.publish(team, conv, expected=expected)
        mailbox.Mailbox(team, to).append_messages([msg])
        return True
    except OmpError as err:
        action["error"] = f"{err.code}: {err.message}"
        if conv.revision != expected:
            with contextlib.suppress(OmpError, OSError):
                back = Conversation.from_payload(before, conv.revision)
                conversations.publish(team, back, expected=conv.revision)
        return False


def _span(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        m = int(seconds // 60)
        return f"{m} min"
    return f"{seconds:g} s"
