"""`omp team status` and `omp team collect`: strictly read-only snapshots.

Nothing here writes a byte, creates a directory or starts anything: not a cursor, not an index,
not the monitor, not a tmux server. Tests pin the state tree byte-identical, mtimes included.
"""

from __future__ import annotations

import os
from pathlib import Path

from omp import clock
from omp.conversations import availability
from omp.errors import OmpError
from omp.invocation import team_command
from omp.mail import mailbox
from omp.mail.panes import PaneView, pane_views
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store import fs
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import tasks

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

MAX_RESULT_CHARS = 4000


def _last_activity(team: TeamPaths, worker: str) -> str | None:
    wdir = team.worker_dir(worker)
    newest = 0.0
    if not team.project.check(wdir):  # missing; an unsafe one raises unsafe_path
        return None
    try:
        with os.scandir(wdir) as it:
            for entry in it:
                if entry.is_file(follow_symlinks=False):
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return None
    return clock.iso(newest) if newest else None


def team_status(
    cfg: TeamConfig, *, branches: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One team's status. `branches`: the worktree workers' rows (`omp.views.worktrees.rows`)
    when the caller keeps them already (the board refreshes a row when its git refs move: git
    is most of the cost of a worktree team's status); computed here otherwise."""
    team = cfg.paths
    task_list = tasks.read_all(team)
    graph = None
    if any(t.get("backlog") is True for t in task_list):
        from omp.tasks.graph import Graph
        from omp.views import backlog

        graph = Graph(task_list)
    views = pane_views(cfg)
    states = availability.member_states(
        cfg,
        clock.now(),
        names=cfg.worker_names,
        # headless: heartbeat alone; a worker on another host: its pane there
        panes={w: v.state for w, v in views.items() if cfg.pane_of(w) or v.host},
        task_list=task_list,
    )
    from omp.views.usage import usage_columns

    spent, team_spent = usage_columns(cfg, views)
    shut = os.path.lexists(team.shutdown)
    needs = {} if shut else _needs_you(cfg)
    workers = []
    branches = _branches(cfg) if branches is None else branches
    held = graph.held() if graph is not None else {}
    for w in cfg.worker_names:
        view = views[w]
        info = cfg.worker(w) or {}
        workers.append(
            {
                "name": w,
                "paneId": cfg.pane_of(w),
                "pane": view.state,
                "deadStatus": view.dead_status,
                "unread": mailbox.Mailbox(team, w).unread_count(),
                # a backlog worker's task is the one it holds now, not its first
                "taskId": (held.get(w) if held else None) or info.get("taskId"),
                "lastActivity": _last_activity(team, w),
                "presence": states[w].presence,
                "status": states[w].status,
                "busyWith": states[w].busy_with,
                # tokens its agent's own session records say it spent (`omp team usage`)
                "usage": spent.get(w),
                # what only a person can answer now (`omp.monitor.attention`), or None
                "needsYou": needs.get(w) if view.state in ("alive", "unknown") else None,
                "workspace": branches.get(w) or _shared(info),
                **_host_fields(view),
            }
        )
    shutdown = (
        fs.read_json(team.shutdown) if fs.check_entry(team.shutdown, want_dir=False) else None
    )
    shut = shutdown is not None or os.path.lexists(team.shutdown)
    not_running = _not_running(cfg, views, shut)
    down = [w["name"] for w in workers if w["pane"] in ("dead", "gone")]
    return {
        "team": cfg.name,
        "agent": cfg.raw.get("agent") or cfg.raw.get("role"),
        "session": cfg.raw.get("tmuxSession"),
        "running": not_running is None,
        "notRunning": not_running,
        "shutdown": shutdown if isinstance(shutdown, dict) else None,
        "leaderUnread": mailbox.Mailbox(team, "leader").unread_count(),
        "tasks": [
            {
                "id": t.get("id"),
                "status": t.get("status"),
                "owner": t.get("owner"),
                "result": t.get("result"),
                "description": t.get("description"),
                **task_work(t),
                # a backlog's: state, title, what blocks it, its branch (`omp.views.backlog`)
                **(backlog.task_row(t, graph) if graph is not None else {}),
            }
            for t in task_list
        ]
        + task_list.broken,  # a broken task file is a row saying why, never a silent gap
        **({"backlog": backlog.summary(task_list, graph)} if graph is not None else {}),
        "workers": workers,
        "allDone": bool(task_list)
        and not task_list.broken
        and all(t.get("status") in tasks.TERMINAL for t in task_list),
        "usage": team_spent,  # the workers' tokens together, and the budgets (percent used)
        # members whose pane died or went with its tmux server: `omp team resume` brings them back
        "resume": {"workers": down, "command": resume_command(cfg)} if down and not shut else None,
        **_hosts(views),
    }


def _host_fields(view: PaneView) -> dict[str, Any]:
    """A worker on another host: `host`, and `hostUnreachable` (with ssh's words) when its host
    did not answer (its pane is then `unreachable`: not known gone)."""
    if view.host is None:
        return {}
    out: dict[str, Any] = {"host": view.host}
    if view.state == "unreachable":
        out["hostUnreachable"] = True
        out["hostError"] = view.note
    return out


def _hosts(views: dict[str, PaneView]) -> dict[str, Any]:
    """`hosts`: each host the team's workers run on, and whether it answered (only for a team
    with workers on other hosts)."""
    out: dict[str, dict[str, Any]] = {}
    for w, v in views.items():
        if v.host is None:
            continue
        row = out.setdefault(v.host, {"workers": [], "reachable": True})
        row["workers"].append(w)
        if v.state == "unreachable":
            row["reachable"] = False
            row["error"] = "host_unreachable"
            row["message"] = v.note
    return {"hosts": out} if out else {}


def _needs_you(cfg: TeamConfig) -> dict[str, dict[str, Any]]:
    from omp.monitor import attention

    return {
        w: {k: e.get(k) for k in ("what", "since", "lines", "attach", "seq")}
        for w, e in attention.read(cfg)["workers"].items()
    }


def resume_command(cfg: TeamConfig) -> str:
    return f"{team_command(cfg.raw)} team resume {cfg.name}"


def _branches(cfg: TeamConfig) -> dict[str, dict[str, Any]]:
    """Each worktree worker's branch (omp.views.worktrees; git runs only for such a team)."""
    if not any(
        isinstance(w.get("workspace"), dict) and w["workspace"].get("kind") == "worktree"
        for w in cfg.workers
    ):
        return {}
    from omp.views import worktrees

    try:
        return worktrees.rows(cfg, removed=False)
    except OmpError as exc:  # git missing: the rows say so, status still answers
        return {w: {"worker": w, "error": exc.message} for w in cfg.worker_names}


def _shared(info: dict[str, Any]) -> dict[str, Any] | None:
    ws = info.get("workspace")
    return ws if isinstance(ws, dict) else None


def task_work(t: dict[str, Any]) -> dict[str, Any]:
    """What a task's row shows of its check (`verify`: status, exit, log), its committed work
    (`work`: commit, commits ahead) and its merge (`mergedAt`, `mergedCommit`)."""
    out: dict[str, Any] = {}
    v = t.get("verify")
    if isinstance(v, dict):
        out["verify"] = {k: v.get(k) for k in ("status", "exit", "log", "command", "attempt")}
    w = t.get("work")
    if isinstance(w, dict):
        out["work"] = {k: w.get(k) for k in ("branch", "commit", "commitsAhead", "stat")}
        if w.get("nothingCommitted"):
            out["work"]["nothingCommitted"] = True  # completed as a review or an answer
    for key in ("mergedAt", "mergedCommit", "mergedInto"):
        if t.get(key) is not None:
            out[key] = t[key]
    return out


def _not_running(cfg: TeamConfig, views: dict[str, PaneView], shut: bool) -> str | None:
    """Why the team is not running, or None. A headless team (no panes) runs as long as it is
    not shut down; a team with panes runs while one of them is alive (or tmux did not answer)."""
    if shut:
        return "shut down"
    states = [v.state for w, v in views.items() if cfg.pane_of(w) or v.host]
    # a host that does not answer proves nothing: its workers may work on
    if not states or any(s in ("alive", "unknown", "unreachable") for s in states):
        return None
    if all(s == "gone" for s in states):
        return "every worker pane is gone (or its tmux server is)"
    return "every worker pane is dead or gone"


def monitor_summary(project: StatePaths) -> dict[str, Any] | None:
    """What the monitor last wrote about itself, with `state` judged now (`running` only when
    its pid is alive and it scanned recently; see `monitor_alive.judge`), or None when no monitor
    ever ran here. Never starts or touches it."""
    from omp.monitor.alive import judge

    try:
        if not project.check(project.monitor):
            return None
    except Exception:
        return None
    damaged: OmpError | None = None
    try:
        status = fs.read_json(project.monitor_status)
    except OmpError as exc:  # the monitor rewrites it every scan: shown, never the whole status
        if exc.code != "corrupt_state":
            raise
        status, damaged = None, exc
    out = dict(status) if isinstance(status, dict) else {}
    verdict = judge(project)
    if verdict["state"] == "none" and not out and damaged is None:
        return None
    out["state"] = verdict["state"]
    if damaged is not None:
        out["error"], out["message"] = damaged.code, damaged.message
    for key in ("since", "why"):
        if verdict.get(key) is not None:
            out["state" + key.title()] = verdict[key]
    return out


def status(project: StatePaths, name: str | None) -> dict[str, Any]:
    if name:
        teams = [team_status(team_config.load(project.team(name)))]
    else:
        teams = [_status_or_error(project, n) for n in team_config.list_teams(project)]
    from omp.modes import loop_summaries

    return {
        "ok": True,
        "teams": teams,
        "monitor": monitor_summary(project),
        "loops": loop_summaries(project),
    }


def _status_or_error(project: StatePaths, name: str) -> dict[str, Any]:
    """One team of the project's overview: a broken team is a row saying why, not a failure
    that hides every other team."""
    try:
        return team_status(team_config.load(project.team(name)))
    except OmpError as err:
        return {"team": name, "error": err.code, "message": err.message}


# ---- collect --------------------------------------------------------------------------------


def _result_text(team: TeamPaths, worker: str) -> str | None:
    path = team.result(worker)
    if not team.project.check(team.worker_dir(worker)):  # never read through a symlinked dir
        return None
    try:
        data = fs.read_bytes(path)
    except OSError:
        return None
    if not data or not data.strip():
        return None
    text = data.decode("utf-8", "replace")
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… (cut; full text in {path})"
    return text


def outcome_of(task_status: Any, pane: str) -> str:
    """What `collect` calls a worker's work: its task's state, as `status` and `wait` see it.
    A `result.md` is the worker's notes, never a verdict: every worker is told to write one
    before completing, and it stays there when a failed check or a merge conflict puts the task
    back in progress."""
    if task_status == "verifying":
        return "verifying"  # done by the worker, its check still running
    if task_status == "completed":
        return "done"
    if task_status in ("failed", "interrupted"):
        return str(task_status)
    if pane in ("dead", "gone"):
        return "dead"
    return "working"


def collect(cfg: TeamConfig) -> dict[str, Any]:
    team = cfg.paths
    views = pane_views(cfg)
    task_list = tasks.read_all(team)
    by_id = {t.get("id"): t for t in task_list}
    branches = _branches(cfg)
    out = []
    for w in cfg.worker_names:
        info = cfg.worker(w) or {}
        task = by_id.get(info.get("taskId")) or {}
        result_md = _result_text(team, w)
        tstatus = task.get("status")
        outcome = outcome_of(tstatus, views[w].state)
        out.append(
            {
                "name": w,
                "outcome": outcome,
                "taskId": info.get("taskId"),
                "taskStatus": tstatus,
                "result": task.get("result"),
                "resultFile": str(team.result(w)) if result_md else None,
                "resultMarkdown": result_md,
                **task_work(task),
                "workspace": branches.get(w) or _shared(info),
            }
        )
    done = sum(1 for x in out if x["outcome"] == "done")
    # workers taken off the team (`remove-worker`): their results stay readable
    from omp.team.membership import removed_names

    removed = []
    for w in dict.fromkeys(removed_names(cfg.raw)):
        result_md = _result_text(team, w) if w not in cfg.worker_names else None
        if result_md:
            removed.append(
                {
                    "name": w,
                    "outcome": "removed",
                    "resultFile": str(team.result(w)),
                    "resultMarkdown": result_md,
                }
            )
    from omp.views.usage import usage_columns

    return {
        "ok": True,
        "team": cfg.name,
        "workers": out,
        "usage": usage_columns(cfg, views)[1],  # the workers' tokens together (`team usage`)
        "removed": removed,
        "total": len(out),
        "doneCount": done,
        # the same rule as `status` and `wait`: every task finished (a dead pane is not)
        "allDone": bool(task_list)
        and not task_list.broken
        and all(t.get("status") in tasks.TERMINAL for t in task_list),
        "brokenTasks": task_list.broken,
    }


def result_path(team: TeamPaths, worker: str) -> Path:
    return team.result(worker)
