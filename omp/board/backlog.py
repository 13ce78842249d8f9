"""The backlog from the board: each action runs the function its command runs, after the checks
that command makes, as the leader:

- add, cancel, retry: `omp team task add|cancel|retry` (`omp.backlog.changes`);
- merge a task's branch: `omp team merge TEAM --task ID` (`omp.backlog.landing.land_report`);
- a task's diff: `omp team diff TEAM --task ID` (`omp.views.backlog.task_diff`), and a comment
  on one of its lines, mailed to the worker that holds the task now (in progress, or verifying:
  a failed check gives it back to that worker). A task no worker holds (ready, to merge, done,
  failed...) has nobody to read a comment: refused (`no_task_worker`), nothing sent.

The CLI checks each value it is typed before the command's body runs (the `omp.cli.options`
callbacks on the command's parameters). The page's values go through those very callbacks, read
off the command functions (`cli_value`), so what `omp team task add` refuses is refused here with
its code and message, and what it takes goes on to the same function. Nothing is written before
every check passed: the functions check whole before they write.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from omp.errors import OmpError
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store import names
from omp.store.names import LEADER
from omp.store.paths import StatePaths

HOLDING = ("in_progress", "verifying")


# ---- the CLI's checks ----------------------------------------------------------------------


def cli_value(command: Callable[..., Any], param: str, value: Any) -> Any:
    """`value` as `command`'s typer parameter `param` checks it (its `omp.cli.options` callback),
    or `invalid_input` with the message the CLI prints for it."""
    info = inspect.signature(command).parameters[param].default
    decls = getattr(info, "param_decls", None) or ()
    label = decls[0] if decls else (getattr(info, "metavar", None) or param)
    return _checked(getattr(info, "callback", None), label, value)


def _checked(callback: Callable[..., Any] | None, label: str, value: Any) -> Any:
    import typer  # (its own click: typer vendors it)

    if callback is None:
        return value
    try:
        return callback(None, None, value)
    except typer.BadParameter as exc:
        raise OmpError("invalid_input", f"Invalid value for '{label}': {exc.message}") from None


_REQUIRED: Any = object()


def _string(data: dict[str, Any], key: str, default: Any = _REQUIRED) -> Any:
    """A JSON field that must be a string (a command line only has strings); `default` when it
    is absent or null, unless it is required."""
    val = data.get(key)
    if val is None:
        if default is _REQUIRED:
            raise OmpError("invalid_input", f"{key!r} is missing", field=key)
        return default
    if not isinstance(val, str):
        raise OmpError("invalid_input", f"{key!r} must be a string", field=key)
    return val


def _team(project: StatePaths, data: dict[str, Any]) -> TeamConfig:
    from omp.cli import task_cmds

    name = cli_value(task_cmds.add, "team", _string(data, "team"))
    return team_config.load(project.team(name))


def _task_id(data: dict[str, Any], command: Callable[..., Any] | None = None) -> str:
    """The task id as `omp team task cancel|retry ID` (or `--task ID`) checks it."""
    raw = _string(data, "task")
    if command is not None:
        raw = cli_value(command, "task_id", raw)
    else:  # `omp team merge|diff --task ID`: text of at most 64 characters
        from omp.cli import options as opt

        raw = _checked(opt.text(max_len=64), "--task", raw)
    return names.task_id(raw)


# ---- add, cancel, retry ----------------------------------------------------------------------


def add(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, title, description?, blockedBy?: [id], agent?, priority?}`: `omp team task
    add`; a free worker gets the task once it is ready."""
    from omp.backlog import changes
    from omp.cli import task_cmds

    cmd = task_cmds.add
    cfg = _team(project, data)
    title = cli_value(cmd, "title", _string(data, "title"))
    description = cli_value(cmd, "description", _string(data, "description", ""))
    blocked = data.get("blockedBy")
    if blocked is None:
        blocked = []
    if not isinstance(blocked, list) or not all(isinstance(b, str) for b in blocked):
        raise OmpError("invalid_input", "'blockedBy' must be a list of task ids", field="blockedBy")
    blocked_by = cli_value(cmd, "blocked_by", blocked)
    agent = cli_value(cmd, "agent", _string(data, "agent", None))
    priority = data.get("priority", 0)
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise OmpError("invalid_input", "'priority' must be a whole number", field="priority")
    priority = cli_value(cmd, "priority", priority)
    return changes.add(
        cfg, title, description=description, blocked_by=list(blocked_by), agent=agent,
        priority=priority,
    )  # fmt: skip


def cancel(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, task, reason?}`: `omp team task cancel`; its worker, if it held it, is told."""
    from omp.backlog import changes
    from omp.cli import task_cmds

    cfg = _team(project, data)
    tid = _task_id(data, task_cmds.cancel)
    reason = cli_value(task_cmds.cancel, "reason", _string(data, "reason", ""))
    return changes.cancel(cfg, tid, reason)


def retry(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, task}`: `omp team task retry`: a failed, interrupted or cancelled task queued
    again."""
    from omp.backlog import changes
    from omp.cli import task_cmds

    cfg = _team(project, data)
    return changes.retry(cfg, _task_id(data, task_cmds.retry))


# ---- merge, diff, comment ----------------------------------------------------------------


def merge(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, task}`: `omp team merge TEAM --task ID` (the check first when the result is not
    a fast-forward; a conflict changes nothing and the task goes back with the way to rebase)."""
    from omp.backlog.landing import land_report

    cfg = _team(project, data)
    return land_report(cfg, _task_id(data))


def holder(cfg: TeamConfig, tid: str) -> tuple[str | None, str]:
    """The worker that holds task `tid` now (None when none does) and the task's state, as
    `omp team status` computes it."""
    from omp.tasks import graph as graphs
    from omp.tasks import tasks

    found = tasks.list_all(cfg.paths)
    task = next((t for t in found if str(t.get("id")) == tid), None)
    if task is None:
        known = [str(t["id"]) for t in found]
        raise OmpError(
            "task_not_found",
            f"task {tid} not found; tasks of team {cfg.name}: {', '.join(known[:50]) or 'none'}",
            task_id=tid,
        )
    state = graphs.Graph(found).state_of(task)
    owner = task.get("owner")
    if task.get("status") in HOLDING and isinstance(owner, str) and owner in cfg.worker_names:
        return owner, state
    return None, state


def no_worker(tid: str, state: str) -> str:
    """Why a comment on task `tid`'s diff has nobody to go to."""
    why = {
        "blocked": "no worker has it yet",
        "ready": "no worker has it yet",
        "to_merge": "its worker finished it (merge it, or message a worker)",
        "done": "its worker finished it",
    }.get(state, "it ended (retry it, then comment)")
    return f"task {tid} is {state}: no worker holds it now to read a comment; {why}"


def diff(project: StatePaths, team: str, task: str) -> dict[str, Any]:
    """A task's branch and its diff, file by file (`omp team diff TEAM --task ID`), and who a
    comment on it goes to."""
    from omp.board.actions import diff_reply
    from omp.views.backlog import task_diff

    cfg = _team(project, {"team": team})
    tid = _task_id({"task": task})
    rep = task_diff(cfg, tid)
    worker, state = holder(cfg, tid)
    out = diff_reply(cfg, rep, worker or "")
    out.update(task=tid, state=state, worker=worker)
    out["commentTo"] = worker
    out["commentWhy"] = None if worker else no_worker(tid, state)
    return out


def comment(project: StatePaths, data: dict[str, Any]) -> dict[str, Any]:
    """`{team, task, path, line, text}`: a comment on a line of a task's diff, mailed from the
    leader to the worker that holds the task now and nudged."""
    from omp.board import actions, diffs
    from omp.views.backlog import task_diff

    cfg = _team(project, data)
    tid = _task_id(data)
    path = actions.text_field(data, "path", most=4096)
    line = actions.int_field(data, "line")
    text = actions.text_field(data, "text", most=actions.COMMENT_MAX)
    worker, state = holder(cfg, tid)
    if worker is None:
        raise OmpError("no_task_worker", no_worker(tid, state), task_id=tid, state=state)
    rows = task_diff(cfg, tid)["workers"]
    files = diffs.split(rows[0].get("diff") or "") if rows else []
    found = diffs.line_of(files, path, line)
    if found is None:
        raise OmpError(
            "invalid_input",
            f"task {tid}'s diff shows no line {line} in {path}: comment on a line the diff shows",
            field="line",
        )
    branch = rows[0].get("branch") if rows else None
    body = actions.comment_body(
        path, line, found["text"], text, where=f"task {tid}" + (f", {branch}" if branch else "")
    )
    sent = actions.api(
        "send-message",
        {"team_name": cfg.name, "cwd": str(project.root), "from": LEADER, "to": worker,
         "body": body},
    )  # fmt: skip
    return {**sent, "body": body, "worker": worker, "task": tid}
