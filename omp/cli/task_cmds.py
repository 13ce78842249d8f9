"""`omp team task add|list|show|cancel|retry`: the leader's hand on a team's backlog while it
runs (docs/backlog.md), added to the `team` app by `register`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run
from omp.textsafe import inline

app = typer.Typer(
    help="A team's backlog: add, list, show, cancel or retry tasks while it runs.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

BLOCKED_BY: Any = typer.Option(
    None,
    "--blocked-by",
    metavar="ID",
    help="A task this one waits for (repeat for more); it starts once they are done.",
    callback=opt.text_list(max_len=64),
)


def _config(team: str) -> Any:
    from omp.record import config as team_config
    from omp.store.paths import StatePaths, find_root

    return team_config.load(StatePaths(find_root(Path.cwd())).team(team))


def _handed(r: dict[str, Any]) -> str:
    given = [a for a in r.get("handedOver") or [] if a.get("action") == "handed_over"]
    return "".join(
        f"\n  handed task {inline(str(a['taskId']))} to {inline(str(a['worker']))}" for a in given
    )


def task_line(t: dict[str, Any]) -> str:
    """One task of `task list` / `status`: id, state, owner, title, what blocks it, its branch."""
    if "error" in t:
        return f"  {inline(str(t['id'])):>5}  unreadable: {inline(str(t['message']))}"
    state = str(t.get("state") or t.get("status"))
    owner = f" {inline(str(t['owner']))}" if t.get("owner") else ""
    title = inline(str(t.get("title") or t.get("description") or ""))[:70]
    extra = []
    if t.get("blockedByFailed"):
        extra.append("blocked by failed " + ", ".join(map(str, t["blockedByFailed"])))
    elif t.get("waitingFor"):
        extra.append("waits for " + ", ".join(map(str, t["waitingFor"])))
    if t.get("branch"):
        extra.append(inline(str(t["branch"])))
    if t.get("priority"):
        extra.append(f"priority {t['priority']}")
    if t.get("agent"):
        extra.append(f"for {inline(str(t['agent']))}")
    tail = f"  ({'; '.join(extra)})" if extra else ""
    return f"  {inline(str(t['id'])):>5}  {state:<11}{owner:<10} {title}{tail}"


def list_text(r: dict[str, Any]) -> str:
    lines = [f"team {inline(r['team'])}: {len(r['tasks'])} task(s)"]
    s = r.get("summary")
    if isinstance(s, dict):
        counts = ", ".join(f"{n} {k}" for k, n in s["states"].items())
        lines[0] += f" ({counts})" + ("; nothing more can run" if s.get("finished") else "")
    lines += [task_line(t) for t in r["tasks"]]
    return "\n".join(lines)


def show_text(r: dict[str, Any]) -> str:
    t = r["task"]
    lines = [
        f"task {inline(str(t['id']))}: {r['state']}"
        + (f", {inline(str(t['owner']))}" if t.get("owner") else ""),
        f"  {inline(str(r.get('title') or t.get('description') or ''))}",
    ]
    for b in r["blockers"]:
        lines.append(f"  blocked by {inline(str(b['id']))} ({b['state']})")
    if r["dependents"]:
        lines.append("  waited for by " + ", ".join(inline(str(d)) for d in r["dependents"]))
    if r.get("branch"):
        lines.append(f"  branch {inline(str(r['branch']))} at {inline(str(r.get('worktree')))}")
    if t.get("result"):
        lines.append(f"  result: {inline(str(t['result']))}")
    desc = str(t.get("description") or "")
    if "\n" in desc:
        lines += ["", desc.split("\n", 1)[1].strip()]
    return "\n".join(lines)


@app.command("add")
def add(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    title: str = typer.Argument(..., help="The task, in one line.", callback=opt.text()),
    description: str = typer.Option(
        "", "--description", "-d", help="More about it.", callback=opt.text()
    ),
    blocked_by: list[str] = BLOCKED_BY,
    agent: str = typer.Option(
        None, "--agent", help="Only workers of this agent profile take it.", callback=opt.text()
    ),
    priority: int = typer.Option(
        0,
        "--priority",
        help="Higher goes first (default 0).",
        callback=opt.count(least=-1_000_000, most=1_000_000),
    ),
    retries: int = typer.Option(
        0,
        "--retries",
        help="Hand it out again this many times if it fails (default 0, at most 10).",
        callback=opt.count(least=0, most=10),
    ),
    verify: str = typer.Option(
        None,
        "--verify",
        metavar="CMD",
        help="Its own check, instead of the team's.",
        callback=opt.text(max_len=4096),
    ),
    task_id: str = typer.Option(
        None, "--id", help="Its id (default: the next number).", callback=opt.text(max_len=64)
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Add a task to a team's backlog; a free worker gets it once it is ready."""

    def body() -> dict[str, Any]:
        from omp.backlog import changes

        return changes.add(
            _config(team), title, description=description, blocked_by=list(blocked_by or []),
            agent=agent, priority=priority, retries=retries, verify=verify, tid=task_id,
        )  # fmt: skip

    run(
        body,
        as_json=as_json,
        human=lambda r: (
            f"added task {inline(str(r['task']['id']))} to team {inline(r['team'])}" + _handed(r)
        ),
    )


@app.command("list")
def list_(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    as_json: bool = JsonOpt,
) -> None:
    """Every task: its state, owner, what blocks it, its branch. Read-only."""

    def body() -> dict[str, Any]:
        from omp.views.backlog import rows

        return rows(_config(team))

    run(body, as_json=as_json, human=list_text)


@app.command("show")
def show(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    task_id: str = typer.Argument(..., metavar="ID", help="Task id.", callback=opt.text()),
    as_json: bool = JsonOpt,
) -> None:
    """One task whole, its blockers and the tasks that wait for it. Read-only."""

    def body() -> dict[str, Any]:
        from omp.store.names import task_id as check
        from omp.views.backlog import show as do_show

        return do_show(_config(team), check(task_id))

    run(body, as_json=as_json, human=show_text)


@app.command("cancel")
def cancel(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    task_id: str = typer.Argument(..., metavar="ID", help="Task id.", callback=opt.text()),
    reason: str = typer.Option(
        "", "--reason", help="Why (its worker is told).", callback=opt.text()
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Take a task off; the tasks waiting for it show as blocked by a cancelled task."""

    def body() -> dict[str, Any]:
        from omp.backlog import changes
        from omp.store.names import task_id as check

        return changes.cancel(_config(team), check(task_id), reason)

    def human(r: dict[str, Any]) -> str:
        told = f"; told {inline(str(r['told']))} to stop" if r.get("told") else ""
        return f"cancelled task {inline(str(r['task']['id']))} (was {r['was']}){told}" + _handed(r)

    run(body, as_json=as_json, human=human)


@app.command("retry")
def retry(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    task_id: str = typer.Argument(..., metavar="ID", help="Task id.", callback=opt.text()),
    as_json: bool = JsonOpt,
) -> None:
    """Queue a failed, interrupted or cancelled task again."""

    def body() -> dict[str, Any]:
        from omp.backlog import changes
        from omp.store.names import task_id as check

        return changes.retry(_config(team), check(task_id))

    run(
        body,
        as_json=as_json,
        human=lambda r: f"task {inline(str(r['task']['id']))} is queued again" + _handed(r),
    )


def register(team_app: typer.Typer) -> None:
    team_app.add_typer(app, name="task")
