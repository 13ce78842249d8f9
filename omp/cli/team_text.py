"""The human forms of `omp team` results (without `--json`): status, collect, wait, and the
team-changing commands. Every line leaves through omp.cli.output, whose sanitiser escapes what
workers wrote; these functions also keep each table cell on one row (`omp.textsafe.inline`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omp.invocation import hint
from omp.textsafe import inline, visible

# ---- status and collect -------------------------------------------------------------------


def collect_markdown(result: dict[str, Any]) -> str:
    head = f"# team {inline(result['team'])}: {result['doneCount']}/{result['total']} done"
    if result["allDone"]:
        head += " — all finished"
    parts = [head]
    spent = _team_tokens(result.get("usage"))
    if spent:
        parts.append(spent.strip())
    for w in result["workers"]:
        task = f" (task {inline(str(w['taskId']))})" if w.get("taskId") else ""
        parts.append(f"\n## {inline(w['name'])}{task}: {w['outcome']}")
        if w.get("result"):
            parts.append(f"Result: {visible(str(w['result']))}")
        if w.get("resultMarkdown"):
            parts.append(f"\n{visible(w['resultMarkdown'].rstrip())}")
    for w in result.get("removed", []):
        parts.append(f"\n## {inline(w['name'])}: removed from the team")
        parts.append(f"\n{visible(w['resultMarkdown'].rstrip())}")
    for b in result.get("brokenTasks") or []:
        parts.append(f"\n## task {inline(str(b['id']))}: unreadable\n{inline(b['message'])}")
    return "\n".join(parts) + "\n"


def loops_text(loops: list[dict[str, Any]]) -> list[str]:
    """`loop ralph: step 2/10, last stop blocked at 2026-...` per active loop."""
    from omp.stophook.decision import WHY_TEXT

    lines = []
    for lp in loops:
        last = lp.get("lastDecision") or {}
        why = WHY_TEXT.get(str(last.get("why")), str(last.get("action")))
        when = f", last stop: {_cell(why)} at {_cell(last.get('at'))}" if last else ", no stop yet"
        lines.append(f"loop {lp['mode']}: step {lp['step']}/{lp['max']}{when}")
    return lines


def _cell(value: Any, default: str = "-") -> str:
    """A table cell: one row, every control character escaped (`omp.textsafe.inline`)."""
    return inline(str(value)) if value not in (None, "") else default


def status_text(result: dict[str, Any]) -> str:
    loops = loops_text(result.get("loops") or [])
    if not result["teams"]:
        start = hint('team launch 3 "<task>"')
        return "\n".join([f"no teams in this project (start one: {start})", *loops]) + "\n"
    lines: list[str] = []
    for t in result["teams"]:
        if "error" in t:
            lines.append(
                f"team {_cell(t['team'])} — unreadable: {_cell(t['message'])} [{t['error']}]"
            )
            continue
        if t["shutdown"]:
            tag = f" (shut down {_cell(t['shutdown'].get('shutdownAt'), '')})".replace(" )", ")")
        elif t.get("notRunning"):
            tag = f" (not running: {_cell(t['notRunning'])})"
        else:
            tag = ""
        lines.append(
            f"team {_cell(t['team'])} — {_cell(t['agent'], '?')}{tag}; "
            f"leader unread {t['leaderUnread']}"
        )
        lines.append("  tasks:")
        for task in t["tasks"]:
            if "error" in task:
                lines.append(
                    f"    {_cell(task.get('id'), '?'):>3}  unreadable: {_cell(task['message'])} "
                    f"[{task['error']}]"
                )
                continue
            res = f"  {_cell(task['result'])}" if task.get("result") else ""
            lines.append(
                f"    {_cell(task['id']):>3}  {_cell(task['status']):<11} "
                f"{_cell(task['owner']):<10}{res}"
            )
        lines.append("  workers:")
        for w in t["workers"]:
            lines.append(
                f"    {_cell(w['name']):<10} pane {_cell(w['paneId']):<5} {w['pane']:<7} "
                f"{_cell(w.get('presence')):<8} {_cell(w.get('status')):<9} "
                f"unread {w['unread']:<3} last {_cell(w['lastActivity'])}"
                f"{_tokens_cell(w.get('usage'))}"
            )
        spent = _team_tokens(t.get("usage"))
        if spent:
            lines.append(spent)
        lines.append(f"  allDone={str(t['allDone']).lower()}")
    mon = result.get("monitor")
    if mon:
        lines.append(_monitor_line(mon))
    lines += loops
    return "\n".join(lines) + "\n"


def _tokens_cell(u: dict[str, Any] | None) -> str:
    """` tokens 12,345 (40%)`, or why they are not known."""
    if not u:
        return ""
    if u.get("unreadable"):
        return f" tokens ? ({_cell(u['unreadable'])})"
    pct = u.get("budgetPercent")
    return f" tokens {u['total']:,}" + (f" ({pct:g}% of its budget)" if pct is not None else "")


def _team_tokens(u: dict[str, Any] | None) -> str:
    """`  tokens: 40,000 by the workers; budget 100,000: 40%` (empty when nothing is known)."""
    if not u or u.get("unreadable"):
        return ""
    line = f"  tokens: {u['total']:,} by the workers"
    if u.get("notCounted"):
        line += f" (not counted: {', '.join(_cell(w) for w in u['notCounted'])})"
    b = u.get("budget")
    if b:
        line += f"; budget {b['tokens']:,}: {b['percent']:g}% used"
    if u.get("crossed"):
        line += "; budget crossed: the loops are no longer driven"
    return line


def _monitor_line(mon: dict[str, Any]) -> str:
    state = mon.get("state", "?")
    if state == "running":
        head = f"monitor: running, pid {_cell(mon.get('pid'), '?')}"
    elif state == "dead":
        head = (
            f"monitor: dead since {_cell(mon.get('stateSince'), '?')} "
            f"({_cell(mon.get('stateWhy'), '?')}); the next writing call or launch restarts it"
        )
    elif state == "stopped":
        head = (
            f"monitor: stopped at {_cell(mon.get('stateSince'), '?')} "
            f"({_cell(mon.get('stateWhy'), '?')})"
        )
    else:
        head = f"monitor: {_cell(state)}"
    return (
        f"{head}; last scan {_cell(mon.get('updatedAt'), '?')}, "
        f"nudges {_cell(mon.get('nudgesSent'), '0')}, "
        f"idle prompts {_cell(mon.get('idlePromptsSent'), '0')}"
    )


# ---- wait ----------------------------------------------------------------------------------


def wait_text(r: dict[str, Any]) -> str:
    from omp.textsafe import inline

    lines: list[str] = []
    team, event = r["team"], r["event"]
    msgs = r["messages"]
    if msgs["count"]:
        who = ", ".join(f"{inline(s['from'])} ({s['count']})" for s in msgs["senders"])
        lines.append(f"{msgs['count']} unread message(s) for the leader from {who}")
        lines.append(f"  read them: {msgs['readCommand']}")
    for a in r.get("attention") or []:
        lines.append(f"needs you: {inline(str(a.get('text') or a.get('what')))}")
    for m in r["moved"]:
        owner = f" ({inline(str(m['owner']))})" if m.get("owner") else ""
        res = f": {inline(str(m['result']))}" if m.get("result") else ""
        lines.append(
            f"task {inline(str(m['id']))}: {inline(str(m['from'] or 'new'))} -> "
            f"{inline(str(m['to']))}{owner}{res}"
        )
    for b in r.get("brokenTasks") or []:
        lines.append(f"task {inline(str(b['id']))}: unreadable: {inline(b['message'])}")
    if event == "all_done":
        total = sum(r.get("tasks", {}).values())
        lines.append(f"all {total} task(s) done; results: {hint(f'team collect {team}')}")
    elif event == "shutdown":
        lines.append(f"team {team} was shut down")
    elif event == "gone":
        lines.append(f"team {team} is not running: {inline(str(r.get('why')))}")
    elif event == "timeout":
        again = r.get("next") or hint(f"team wait {team}")
        lines.append(f"nothing new after {r['waitedSeconds']:g}s; wait again: {again}")
    if r.get("next") and event in ("mail", "tasks", "attention"):
        lines.append(f"  wait again: {r['next']}")
    return "\n".join(lines)


# ---- add-worker, remove-worker, delete, prune -----------------------------------------------


def add_text(r: dict[str, Any]) -> str:
    ws = ", ".join(
        f"{w['name']}({w['paneId']})" if w.get("paneId") else w["name"] for w in r["workers"]
    )
    tasks_ = [f"{w['name']}: task {w['taskId']}" for w in r["workers"] if w.get("taskId")]
    out = f"team {r['team']}: added {ws}; members now {', '.join(r['members'])}"
    if tasks_:
        out += "\n  " + "; ".join(tasks_)
    return out


def remove_text(r: dict[str, Any]) -> str:
    lines = [f"{r['worker']} removed from team {r['team']}"]
    if r["killedPane"]:
        lines[0] += f" (closed its pane {r['killedPane']})"
    for a in r["interrupted"]:
        what = a.get("claimedTaskId") or a.get("taskId")
        lines.append(f"  task {what}: interrupted; {a.get('notify')} told (not replayed)")
    for a in r["cancelled"]:
        lines.append(f"  its request {a['taskId']} to {a['worker']}: cancelled")
    lines.append(f"  workers now: {', '.join(r['workers']) or 'none'}; its mail and results stay")
    return "\n".join(lines)


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def delete_text(r: dict[str, Any]) -> str:
    lines = [f"team {r['team']} deleted ({human_size(r['bytes'])} freed)"]
    for e in r["lost"]:
        run = f" (run {e['run']})" if e.get("run") else ""
        lines.append(
            f"  lost {e['unread']} unread message(s) for {e['recipient']}{run} "
            f"from {', '.join(e['from'])}"
        )
    if r["finished"]:
        lines.append(f"  finished {len(r['finished'])} interrupted removal(s)")
    return "\n".join(lines)


def prune_text(r: dict[str, Any]) -> str:
    verb = "would remove" if r["dryRun"] else "removed"
    lines: list[str] = []
    for e in r["removed"]:
        if e["kind"] == "team":
            label = f"team {e['team']} (shut down {_days(e['ageSeconds'])} ago)"
        elif e["kind"] == "run":
            label = f"run {Path(e['path']).name} of team {e['team']}"
        else:
            label = f"the interrupted removal of {e['of']} {e['team']}"
        lost = e.get("lost")
        extra = f"; lost {sum(x['unread'] for x in lost)} unread message(s)" if lost else ""
        lines.append(f"{verb:<12} {label}, {human_size(e['bytes'])}{extra}")
    for e in r["kept"]:
        what = f"run {Path(e['path']).name} of team" if e["kind"] == "run" else "team"
        lines.append(f"{'kept':<12} {what} {e['team']}: {e['why']}")
    total = human_size(r["bytes"])
    if not r["removed"]:
        lines.append("nothing to prune" + (f" ({len(r['kept'])} kept)" if r["kept"] else ""))
    else:
        lines.append(
            f"{len(r['removed'])} item(s), {total} {'to free' if r['dryRun'] else 'freed'}"
        )
    return "\n".join(lines)


def _days(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
