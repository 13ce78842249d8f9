"""The human forms of `omp team` results (without `--json`): status, collect, wait, and the
team-changing commands. Every line leaves through omp.cli.output, whose sanitiser escapes what
workers wrote; these functions also keep each table cell on one row (`omp.textsafe.inline`)."""

from __future__ import annotations

from pathlib import Path

from omp.invocation import hint
from omp.textsafe import inline, visible

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

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
        parts.append(f"\n## {inline(w['name'])}{task}: {w['outcome']}{task_notes(w)}")
        ws = w.get("workspace")
        if isinstance(ws, dict) and ws.get("branch"):
            parts.append(f"{branch_line(ws, name=False)}")
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


def task_notes(task: dict[str, Any]) -> str:
    """A task's check and merge, in brackets: `[verifying, log …]`, `[merged 1a2b3c into main]`."""
    notes: list[str] = []
    v = task.get("verify")
    if isinstance(v, dict) and v.get("status"):
        st = str(v["status"])
        if st == "running":
            notes.append(f"verifying, log {_cell(v.get('log'))}")
        elif st == "passed":
            notes.append("verified")
        else:
            code = f" (exit {v['exit']})" if v.get("exit") is not None else ""
            notes.append(f"check {st.replace('_', ' ')}{code}, log {_cell(v.get('log'))}")
    if task.get("blockedByFailed"):
        notes.append("blocked by failed " + ", ".join(_cell(b) for b in task["blockedByFailed"]))
    elif task.get("waitingFor"):
        notes.append("waits for " + ", ".join(_cell(b) for b in task["waitingFor"]))
    if task.get("branch") and not task.get("mergedAt"):
        notes.append(_cell(task["branch"]))
    work = task.get("work")
    if isinstance(work, dict) and work.get("nothingCommitted"):
        notes.append("nothing committed")
    if task.get("mergedAt"):
        notes.append(
            f"merged {_cell(str(task.get('mergedCommit') or '')[:10])} into "
            f"{_cell(task.get('mergedInto'))} at {_cell(task.get('mergedAt'))}"
        )
    return "".join(f" [{n}]" for n in notes)


def branch_line(row: dict[str, Any], *, name: bool = True) -> str:
    """`worker-1  omp/t/worker-1  2 commits ahead, 3 files, +10 -2, merged into main`."""
    head = f"{inline(row['worker'])}  " if name else "branch "
    head += inline(str(row.get("branch") or "?"))
    if row.get("error"):
        return f"{head}  ({inline(str(row['error']))})"
    n = int(row.get("commitsAhead") or 0)
    if n == 0:  # no commit since its base: "0 commits ahead, +0 -0, merged into main" misled
        parts = ["nothing committed yet"]
    else:
        parts = [f"{n} commit{'s' if n != 1 else ''} ahead", inline(str(row.get("stat") or ""))]
        if row.get("merged") is not None and row.get("target"):
            parts.append(("merged into " if row["merged"] else "not merged into ") + row["target"])
    if row.get("uncommittedCount"):
        parts.append(f"{row['uncommittedCount']} uncommitted")
    if row.get("removed"):
        parts.append("removed from the team")
    if row.get("worktreeExists") is False:
        parts.append("worktree gone")
    return f"{head}: " + ", ".join(p for p in parts if p)


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
            if not res and task.get("title"):  # a backlog task: what it is, until its result
                res = f"  {_cell(task['title'])}"
            lines.append(
                f"    {_cell(task['id']):>3}  {_cell(task.get('state') or task['status']):<11} "
                f"{_cell(task['owner']):<10}{res}{task_notes(task)}"
            )
        lines.append("  workers:")
        for w in t["workers"]:
            needs = w.get("needsYou")
            # a worker on another host: `@build1` where a local pane id stands
            where = f"@{_cell(w['host'])}" if w.get("host") else _cell(w["paneId"])
            lines.append(
                f"    {_cell(w['name']):<10} pane {where:<5} {w['pane']:<7} "
                f"{_cell(w.get('presence')):<8} {_cell(w.get('status')):<9} "
                f"unread {w['unread']:<3} last {_cell(w['lastActivity'])}"
                f"{_tokens_cell(w.get('usage'))}"
                + (f"  needs you: {_cell(needs.get('what'))}" if needs else "")
                + ("  host unreachable" if w.get("hostUnreachable") else "")
            )
            ws = w.get("workspace")
            if isinstance(ws, dict) and ws.get("branch"):
                lines.append(f"      {branch_line(ws, name=False)}")
        for name, h in (t.get("hosts") or {}).items():
            if not h.get("reachable"):
                lines.append(
                    f"  host {_cell(name)} unreachable: {_cell(h.get('message'))} (its workers "
                    "may still be working; their mail and tasks go through the store)"
                )
        spent = _team_tokens(t.get("usage"))
        if spent:
            lines.append(spent)
        down = t.get("resume")
        if down:
            names = ", ".join(_cell(w) for w in down["workers"])
            lines.append(
                f"  {len(down['workers'])} worker pane(s) dead or gone ({names}); "
                f"resume with: {_cell(down['command'])}"
            )
        lines.append(f"  allDone={str(t['allDone']).lower()}")
    mon = result.get("monitor")
    if mon:
        lines.append(_monitor_line(mon))
    lines += loops
    return "\n".join(lines) + "\n"


def _tokens_cell(u: dict[str, Any] | None) -> str:
    """` tokens 12,345 (40%)`, or why they are not known; nothing for an agent that keeps no
    record omp reads (the demo agent, a command of one's own): `omp team usage` says why."""
    if not u or u.get("unreadable") == "unknown_kind":
        return ""
    if u.get("unreadable"):
        return f" tokens ? ({_cell(u['unreadable'])})"
    pct = u.get("budgetPercent")
    more = "+" if u.get("unreadBytes") else ""  # some of its record not read yet
    cell = f" tokens {u['total']:,}{more}"
    return cell + (f" ({pct:g}% of its budget)" if pct is not None else "")


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
    line = (
        f"{head}; last scan {_cell(mon.get('updatedAt'), '?')}, "
        f"nudges {_cell(mon.get('nudgesSent'), '0')}, "
        f"idle prompts {_cell(mon.get('idlePromptsSent'), '0')}"
    )
    if mon.get("error"):  # its status file is damaged (`corrupt_state`): said, not hidden
        line += f"\n  {_cell(mon.get('error'))}: {_cell(mon.get('message'))}"
    return line


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
    for m in r["moved"]:
        owner = f" ({inline(str(m['owner']))})" if m.get("owner") else ""
        res = f": {inline(str(m['result']))}" if m.get("result") else ""
        lines.append(
            f"task {inline(str(m['id']))}: {inline(str(m['from'] or 'new'))} -> "
            f"{inline(str(m['to']))}{owner}{res}{task_notes(m)}"
        )
    for b in r.get("brokenTasks") or []:
        lines.append(f"task {inline(str(b['id']))}: unreadable: {inline(b['message'])}")
    for a in r.get("attention") or []:
        lines += attention_lines(a)
    if event == "all_done":
        total = sum(r.get("tasks", {}).values())
        lines.append(f"all {total} task(s) done; results: {hint(f'team collect {team}')}")
    elif event == "shutdown":
        lines.append(f"team {team} was shut down")
    elif event == "gone":
        lines.append(f"team {team} is not running: {inline(str(r.get('why')))}")
        if r.get("resume"):
            lines.append(f"  resume with: {r['resume']}")
    elif event == "timeout":
        again = r.get("next") or hint(f"team wait {team}")
        lines.append(f"nothing new after {r['waitedSeconds']:g}s; wait again: {again}")
    if r.get("next") and event in ("mail", "tasks", "attention"):
        lines.append(f"  wait again: {r['next']}")
    return "\n".join(lines)


def attention_lines(a: dict[str, Any]) -> list[str]:
    """A worker that needs a person: what, what its screen shows, how to reach it."""
    # a token budget of the whole team names no worker (`omp.monitor.budget`)
    who = _cell(a.get("worker"), "the team")
    what, since = _cell(a.get("what")), _cell(a.get("since"))
    out = [f"{who} needs you: {what} (since {since})"]
    shown = [str(x) for x in a.get("lines") or []]
    if shown:
        out.append("  its screen: " + " | ".join(inline(x) for x in shown))
    if a.get("attach"):
        out.append(f"  attach:     {_cell(a['attach'])}")
    return out


# ---- add-worker, remove-worker, delete, prune -----------------------------------------------


def add_text(r: dict[str, Any]) -> str:
    ws = ", ".join(
        f"{_cell(w['name'])}({_cell(w['paneId'])})"
        if w.get("paneId")
        else f"{_cell(w['name'])}(@{_cell(w['host'])})"
        if w.get("host")
        else _cell(w["name"])
        for w in r["workers"]
    )
    tasks_ = [
        f"{_cell(w['name'])}: task {_cell(w['taskId'])}" for w in r["workers"] if w.get("taskId")
    ]
    members = ", ".join(_cell(m) for m in r["members"])
    out = f"team {_cell(r['team'])}: added {ws}; members now {members}"
    if tasks_:
        out += "\n  " + "; ".join(tasks_)
    for line in r.get("remoteAttach") or []:
        out += f"\n  attach:   {_cell(line)}"
    for row in r.get("hostsNotUpdated") or []:
        out += (
            f"\n  warning:  host {_cell(row.get('host'))} did not take the team's new config "
            f"({_cell(row.get('why'))}); its workers learn of the newcomers at the next change"
        )
    more = workspace_lines(r)
    return out + ("\n" + more.rstrip("\n") if more else "")


def workspace_lines(r: dict[str, Any]) -> str:
    """Launch's and add-worker's lines about where the new workers work (each ends in \\n)."""
    ws = r.get("workspace") or {}
    lines: list[str] = []
    found = r.get("backlog")
    bl: dict[str, Any] = found if isinstance(found, dict) else {}
    if ws.get("kind") == "worktree" and bl.get("worktrees"):
        lines.append(
            f"  workspace: a git worktree per task, branch omp/{_cell(r['team'])}/task-<id> from "
            f"{_cell(bl.get('target'))} as it is when the task starts"
        )
    elif ws.get("kind") == "worktree":
        base = _cell(str(ws.get("base") or "")[:12])
        lines.append(
            f"  workspace: a git worktree each, branch omp/{_cell(r['team'])}/<worker> from {base}"
        )
        n = ws.get("uncommitted") or {}
        tracked, untracked = int(n.get("tracked") or 0), int(n.get("untracked") or 0)
        if tracked or untracked:
            if ws.get("carried") and tracked:
                note = "tracked changes carried over"
            else:
                note = "not in the worktrees (--carry-changes brings the tracked ones)"
            lines.append(
                f"  note:     your checkout has {tracked + untracked} uncommitted file(s), {note}"
            )
    elif ws:
        lines.append("  workspace: shared (every worker in your checkout)")
    check = ws.get("verify")
    if isinstance(check, dict):
        lines.append(
            f"  verify:   `{_cell(check.get('command'))}` on each completion "
            f"(limit {float(check.get('timeout') or 0):g} s)"
        )
    return "".join(line + "\n" for line in lines)


def backlog_line(r: dict[str, Any]) -> str:
    """Launch's line about a backlog (`--tasks`): how many tasks, who starts with what."""
    bl = r.get("backlog")
    if not isinstance(bl, dict):
        return ""
    first = ", ".join(f"{_cell(w)}: {_cell(t)}" for w, t in (bl.get("first") or {}).items())
    merge = (
        f"each merged into {_cell(bl.get('target'))} once done"
        if bl.get("merge") == "auto" and bl.get("worktrees")
        else "you merge (omp team merge)"
        if bl.get("worktrees")
        else "shared checkout"
    )
    return f"  backlog:  {bl.get('tasks')} task(s), {bl.get('ready')} ready at start; {merge}\n" + (
        f"  first:    {first}\n" if first else ""
    )


def resume_text(r: dict[str, Any]) -> str:
    lines: list[str] = []
    for w in r["resumed"]:
        talk = (
            f"its conversation {inline(str(w['sessionId']))}"
            if w["conversation"] == "resumed"
            else "a new session"
        )
        where = f" in {inline(str(w['cwd']))}" if w.get("worktree") else ""
        pane = w["paneId"] or f"{inline(str(w.get('pane')))}@{inline(str(w.get('host')))}"
        lines.append(
            f"{inline(w['name'])}: resumed in pane {pane}{where}, {talk} ({inline(str(w['why']))})"
        )
        if w["missingEnv"]:
            lines.append(f"  not in your environment, not passed on: {', '.join(w['missingEnv'])}")
    for t in r["reclaimed"]:
        lines.append(f"  task {inline(str(t['taskId']))}: {inline(str(t['worker']))}'s again")
    for w in r["skipped"]:
        lines.append(f"{inline(w['name'])}: left as it is ({inline(str(w['why']))})")
    if not r["resumed"]:
        lines.append(f"team {inline(r['team'])}: nothing to resume")
    elif r.get("attach"):
        lines.append(f"attach: {r['attach']}")
    return "\n".join(lines)


def remove_text(r: dict[str, Any]) -> str:
    lines = [f"{_cell(r['worker'])} removed from team {_cell(r['team'])}"]
    if r["killedPane"]:
        lines[0] += f" (closed its pane {_cell(r['killedPane'])})"
    for a in r["interrupted"]:
        what = _cell(a.get("claimedTaskId") or a.get("taskId"))
        lines.append(f"  task {what}: interrupted; {_cell(a.get('notify'))} told (not replayed)")
    for a in r["cancelled"]:
        lines.append(f"  its request {_cell(a['taskId'])} to {_cell(a['worker'])}: cancelled")
    workers = ", ".join(_cell(w) for w in r["workers"]) or "none"
    lines.append(f"  workers now: {workers}; its mail and results stay")
    far = r.get("remote")
    if isinstance(far, dict):
        done = [
            *(["pane closed"] if far.get("closedPane") else []),
            *(["branch fetched"] if far.get("fetched") else []),
            *(["checkout removed"] if far.get("checkoutRemoved") else []),
        ]
        line = f"  on {_cell(far.get('host'))}: {', '.join(done) or 'nothing done'}"
        if far.get("why"):
            line += f"; left {_cell(', '.join(far.get('left') or []))} ({_cell(far['why'])})"
        lines.append(line)
    tree = r.get("worktree")
    if isinstance(tree, dict):
        how = "removed" if tree.get("removed") else "kept (it holds uncommitted work)"
        lines.append(
            f"  its worktree {_cell(tree.get('path'))}: {how}; its branch "
            f"{_cell(tree.get('branch'))} stays"
        )
    return "\n".join(lines)


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def delete_text(r: dict[str, Any]) -> str:
    lines = [f"team {_cell(r['team'])} deleted ({human_size(r['bytes'])} freed)"]
    for e in r["lost"]:
        run = f" (run {_cell(e['run'])})" if e.get("run") else ""
        if e.get("unread") is None:  # a mailbox omp would not read: whatever it held is gone
            lines.append(
                f"  lost the mailbox of {_cell(e['recipient'])}{run}, unread mail unknown "
                f"(omp could not read it: {_cell(str(e.get('cannotTell')))})"
            )
            continue
        lines.append(
            f"  lost {e['unread']} unread message(s) for {_cell(e['recipient'])}{run} "
            f"from {', '.join(_cell(f) for f in e['from'])}"
        )
    if r["finished"]:
        lines.append(f"  finished {len(r['finished'])} interrupted removal(s)")
    lines += worktree_removals(r.get("worktrees") or [])
    return "\n".join(lines)


def worktree_removals(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    """What delete, prune and remove-worker did to workers' worktrees, and what it threw away."""
    out: list[str] = []
    for w in rows:
        what = "removed" if w.get("removed") else "kept"
        why = f" ({_cell(w.get('why'))})" if w.get("why") else ""
        if w.get("host"):  # a checkout on another host: only its branch here
            out.append(
                f"{indent}{what} {_cell(w.get('worker'))}'s branch {_cell(w.get('branch'))}{why}"
                f" (its checkout {_cell(w.get('path'))} is the host's: shutdown removes it)"
            )
        else:
            out.append(
                f"{indent}{what} {_cell(w.get('worker'))}'s worktree {_cell(w.get('path'))} "
                f"and branch {_cell(w.get('branch'))}{why}"
            )
        lost = w.get("lost") or {}
        for c in lost.get("commits") or []:
            out.append(f"{indent}  threw away commit {_cell(c['sha'])[:10]} {_cell(c['subject'])}")
        for f in lost.get("files") or []:
            out.append(f"{indent}  threw away uncommitted {_cell(f)}")
    return out


def prune_text(r: dict[str, Any]) -> str:
    verb = "would remove" if r["dryRun"] else "removed"
    lines: list[str] = []
    for e in r["removed"]:
        if e["kind"] == "team":
            label = f"team {_cell(e['team'])} (shut down {_days(e['ageSeconds'])} ago)"
        elif e["kind"] == "run":
            label = f"run {_cell(Path(e['path']).name)} of team {_cell(e['team'])}"
        else:
            label = f"the interrupted removal of {_cell(e['of'])} {_cell(e['team'])}"
        lost = e.get("lost") or []
        count = sum(x["unread"] for x in lost if x.get("unread") is not None)
        unknown = sum(1 for x in lost if x.get("unread") is None)
        extra = f"; lost {count} unread message(s)" if lost else ""
        if unknown:
            extra += f" and {unknown} mailbox(es) omp could not read"
        lines.append(f"{verb:<12} {label}, {human_size(e['bytes'])}{extra}")
        lines += worktree_removals(e.get("worktrees") or [], indent="             ")
    for p in r.get("worktreesForgotten") or []:
        lines.append(f"{'forgot':<12} the vanished worktree {_cell(p)} (its branch is kept)")
    for e in r["kept"]:
        what = f"run {_cell(Path(e['path']).name)} of team" if e["kind"] == "run" else "team"
        lines.append(f"{'kept':<12} {what} {_cell(e['team'])}: {_cell(e['why'])}")
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
