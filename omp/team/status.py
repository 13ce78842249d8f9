"""`omp team status` and `omp team collect`: strictly read-only snapshots.

Nothing here writes a byte, creates a directory or starts anything: not a cursor, not an index,
not the monitor, not a tmux server. Tests pin the state tree byte-identical, mtimes included.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint
from omp.store import fs
from omp.store.paths import StatePaths, TeamPaths
from omp.team import config as team_config
from omp.team import mailbox, presence, tasks
from omp.team.config import TeamConfig

if TYPE_CHECKING:
    from omp.tmux import PaneState

RESULT_FILE = "result.md"
MAX_RESULT_CHARS = 4000


@dataclass
class PaneView:
    state: str  # alive | dead | gone | unknown | none (a headless worker: no pane at all)
    dead_status: int | None = None


def pane_views(cfg: TeamConfig) -> dict[str, PaneView]:
    """Each worker's pane as tmux sees it now, checked against the identity in the config.

    A pane id that a restarted server handed to someone else reads as `gone`, never `alive`.
    One tmux call for all panes; no server is started.
    """
    panes = {w: cfg.pane_of(w) for w in cfg.worker_names}
    # "none": a headless worker never had a pane (not one that went away)
    out = {w: PaneView("unknown" if p else "none") for w, p in panes.items()}
    ident = cfg.tmux
    wanted = [p for p in panes.values() if p]
    if not wanted or not ident:
        return out
    try:
        from omp.team.panes import same_server, tmux_for

        tmux = tmux_for(cfg)
        server = tmux.server_identity()
        if server is None or not same_server(ident, server):
            return {w: PaneView("gone" if p else "none") for w, p in panes.items()}
        states = tmux.pane_states(wanted)
    except Exception:
        return out
    for w, p in panes.items():
        if p:
            out[w] = _view(states.get(p), ident)
    return out


def _view(st: PaneState | None, ident: dict[str, Any]) -> PaneView:
    if st is None:
        return PaneView("gone")
    if ident.get("windowId") and st.window_id != ident.get("windowId"):
        return PaneView("gone")
    if st.dead:
        return PaneView("dead", st.dead_status)
    return PaneView("alive")


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


def team_status(cfg: TeamConfig) -> dict[str, Any]:
    team = cfg.paths
    task_list = tasks.list_all(team)
    views = pane_views(cfg)
    states = presence.member_states(
        cfg,
        clock.now(),
        names=cfg.worker_names,
        panes={w: v.state for w, v in views.items() if cfg.pane_of(w)},  # headless: heartbeat
        task_list=task_list,
    )
    workers = []
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
                "taskId": info.get("taskId"),
                "lastActivity": _last_activity(team, w),
                "presence": states[w].presence,
                "status": states[w].status,
                "busyWith": states[w].busy_with,
            }
        )
    shutdown = (
        fs.read_json(team.shutdown) if fs.check_entry(team.shutdown, want_dir=False) else None
    )
    return {
        "team": cfg.name,
        "agent": cfg.raw.get("agent") or cfg.raw.get("role"),
        "session": cfg.raw.get("tmuxSession"),
        "shutdown": shutdown if isinstance(shutdown, dict) else None,
        "leaderUnread": mailbox.Mailbox(team, "leader").unread_count(),
        "tasks": [
            {
                "id": t.get("id"),
                "status": t.get("status"),
                "owner": t.get("owner"),
                "result": t.get("result"),
                "description": t.get("description"),
            }
            for t in task_list
        ],
        "workers": workers,
        "allDone": bool(task_list) and all(t.get("status") in tasks.TERMINAL for t in task_list),
    }


def monitor_summary(project: StatePaths) -> dict[str, Any] | None:
    """What the monitor last wrote about itself, or None; never starts or touches it."""
    try:
        if not project.check(project.monitor):
            return None
    except Exception:
        return None
    status = fs.read_json(project.monitor / "status.json")
    return status if isinstance(status, dict) else None


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
    path = team.worker_dir(worker) / RESULT_FILE
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


def collect(cfg: TeamConfig) -> dict[str, Any]:
    team = cfg.paths
    views = pane_views(cfg)
    by_id = {t.get("id"): t for t in tasks.list_all(team)}
    out = []
    for w in cfg.worker_names:
        info = cfg.worker(w) or {}
        task = by_id.get(info.get("taskId")) or {}
        result_md = _result_text(team, w)
        tstatus = task.get("status")
        if tstatus == "completed" or (result_md and tstatus not in ("failed", "interrupted")):
            outcome = "done"
        elif tstatus in ("failed", "interrupted"):
            outcome = tstatus
        elif views[w].state in ("dead", "gone"):
            outcome = "dead"
        else:
            outcome = "working"
        out.append(
            {
                "name": w,
                "outcome": outcome,
                "taskId": info.get("taskId"),
                "taskStatus": tstatus,
                "result": task.get("result"),
                "resultFile": str(team.worker_dir(w) / RESULT_FILE) if result_md else None,
                "resultMarkdown": result_md,
            }
        )
    done = sum(1 for x in out if x["outcome"] == "done")
    task_list = list(by_id.values())
    return {
        "ok": True,
        "team": cfg.name,
        "workers": out,
        "total": len(out),
        "doneCount": done,
        # the same rule as `status` and `wait`: every task finished (a dead pane is not)
        "allDone": bool(task_list) and all(t.get("status") in tasks.TERMINAL for t in task_list),
    }


def collect_markdown(result: dict[str, Any]) -> str:
    head = f"# team {result['team']}: {result['doneCount']}/{result['total']} done"
    if result["allDone"]:
        head += " — all finished"
    parts = [head]
    for w in result["workers"]:
        task = f" (task {w['taskId']})" if w.get("taskId") else ""
        parts.append(f"\n## {w['name']}{task}: {w['outcome']}")
        if w.get("result"):
            parts.append(f"Result: {w['result']}")
        if w.get("resultMarkdown"):
            parts.append(f"\n{w['resultMarkdown'].rstrip()}")
    return "\n".join(parts) + "\n"


def loops_text(loops: list[dict[str, Any]]) -> list[str]:
    """`loop ralph: step 2/10, last stop blocked at 2026-...` per active loop."""
    from omp.stophook.decision import WHY_TEXT

    lines = []
    for lp in loops:
        last = lp.get("lastDecision") or {}
        why = WHY_TEXT.get(str(last.get("why")), str(last.get("action")))
        when = f", last stop: {why} at {last.get('at')}" if last else ", no stop yet"
        lines.append(f"loop {lp['mode']}: step {lp['step']}/{lp['max']}{when}")
    return lines


def status_text(result: dict[str, Any]) -> str:
    loops = loops_text(result.get("loops") or [])
    if not result["teams"]:
        start = hint('team launch 3 "<task>"')
        return "\n".join([f"no teams in this project (start one: {start})", *loops]) + "\n"
    lines: list[str] = []
    for t in result["teams"]:
        if "error" in t:
            lines.append(f"team {t['team']} — unreadable: {t['message']} [{t['error']}]")
            continue
        tag = " (shut down)" if t["shutdown"] else ""
        lines.append(
            f"team {t['team']} — {t['agent'] or '?'}{tag}; leader unread {t['leaderUnread']}"
        )
        lines.append("  tasks:")
        for task in t["tasks"]:
            res = f"  {task['result']}" if task.get("result") else ""
            lines.append(
                f"    {task['id']:>3}  {task['status']:<11} {task['owner'] or '-':<10}{res}"
            )
        lines.append("  workers:")
        for w in t["workers"]:
            lines.append(
                f"    {w['name']:<10} pane {w['paneId'] or '-':<5} {w['pane']:<7} "
                f"{w.get('presence', '-'):<8} {w.get('status', '-'):<9} "
                f"unread {w['unread']:<3} last {w['lastActivity'] or '-'}"
            )
        lines.append(f"  allDone={str(t['allDone']).lower()}")
    mon = result.get("monitor")
    if mon:
        lines.append(
            f"monitor: pid {mon.get('pid', '?')}, {mon.get('reason', '?')}, "
            f"last scan {mon.get('updatedAt', '?')}, nudges {mon.get('nudgesSent', 0)}, "
            f"idle prompts {mon.get('idlePromptsSent', 0)}"
        )
    lines += loops
    return "\n".join(lines) + "\n"


def result_path(team: TeamPaths, worker: str) -> Path:
    return team.worker_dir(worker) / RESULT_FILE
