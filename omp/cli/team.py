"""`omp team ...`: create, launch, status, collect, usage, shutdown, list, wait (and `api`,
dispatched before typer; it is listed here only so `omp team --help` shows it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.grammar import STATUS
from omp.cli.options import JsonOpt
from omp.cli.output import progress, run
from omp.invocation import hint
from omp.record.budget import MAX_TOKENS

if TYPE_CHECKING:
    from omp.cli.replies import (
        CollectReply,
        CreateReply,
        LaunchReply,
        ListReply,
        ListRow,
        ShutdownReply,
        TeamError,
        UsageReply,
    )
    from omp.record.config import TeamConfig
    from omp.store.paths import StatePaths

app = typer.Typer(
    help="Create, launch and follow a team of agent workers.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.command("launch")
def launch(
    spec: str = typer.Argument(
        ...,
        metavar="N[:AGENT]",
        help="Worker count, e.g. 3 or 3:codex.",
        callback=opt.text(max_len=256),
    ),
    task: str = typer.Argument(
        "", help="What the team should do (each worker gets a part).", callback=opt.text()
    ),
    agent: str = typer.Option(
        None,
        "--agent",
        "-a",
        help="Agent profile (default copilot).",
        callback=opt.text(max_len=256),
    ),
    name: str = typer.Option(
        None,
        "--name",
        "-n",
        help="Team name (default <agent>-<time>).",
        callback=opt.text(max_len=256),
    ),
    socket: str | None = opt.SocketOpt,
    new_session: bool = opt.NewSessionOpt,
    nudge_leader: bool = typer.Option(
        False, "--nudge-leader", help="Also type unread-mail nudges into the leader's pane."
    ),
    ready_timeout: float = opt.ReadyTimeoutOpt,
    leader_agent: str = typer.Option(
        None,
        "--leader-agent",
        help="The agent in the leader's pane (its screen decides when a nudge may be typed); "
        "detected when omp runs inside it.",
        callback=opt.text(max_len=256),
    ),
    budget_tokens: int = typer.Option(
        None,
        "--budget-tokens",
        metavar="N",
        help="A token budget for the workers together: once crossed, the leader is told and the "
        "loops stop being driven (nothing is killed). Default: team.budget_tokens in "
        ".omp/config.toml.",
        callback=opt.count(most=MAX_TOKENS),
    ),
    worker_budget: int = typer.Option(
        None,
        "--worker-budget",
        metavar="N",
        help="A token budget for each worker. Default: team.worker_budget_tokens in "
        ".omp/config.toml.",
        callback=opt.count(most=MAX_TOKENS),
    ),
    notify: str = typer.Option(
        None,
        "--notify",
        metavar="CMD",
        help="Run CMD when a worker needs you, all is done, a verify fails, a merge conflicts or "
        "the team is gone (the event as JSON on stdin and OMP_EVENT_*); `tmux`: show it in the "
        "leader's tmux client. Default: notify.command in .omp/config.toml.",
        callback=opt.text(),
    ),
    workspace: str = opt.WorkspaceOpt,
    carry_changes: bool = opt.CarryOpt,
    tasks: str = opt.TasksOpt,
    merge: str = opt.MergeOpt,
    host: list[str] = opt.HostOpt,
    verify: str = typer.Option(
        None,
        "--verify",
        metavar="CMD",
        help="A shell command every completion must pass, run in the worker's worktree in the "
        'background (default: team.verify in .omp/config.toml; "" for none).',
        callback=opt.text(max_len=4096),
    ),
    verify_timeout: float = typer.Option(
        None,
        "--verify-timeout",
        help="Seconds the check may take (default 900, or team.verify_timeout in "
        ".omp/config.toml).",
        callback=opt.seconds(positive=True),
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Open one tmux pane per worker, start an agent in each and hand each its task."""

    def body() -> LaunchReply:
        from omp.team.launch import LaunchRequest, parse_spec
        from omp.team.launch import launch as do_launch

        n, spec_agent = parse_spec(spec)
        if agent and spec_agent and agent != spec_agent:
            from omp.errors import OmpError

            raise OmpError("usage", f"agent given twice: {spec} and --agent {agent}")
        req = LaunchRequest(
            workers=n,
            task=task,
            agent=agent or spec_agent or "copilot",
            name=name,
            socket=socket,
            new_session=new_session,
            nudge_leader=nudge_leader,
            leader_agent=leader_agent,
            cwd=Path.cwd(),
            ready_timeout=ready_timeout,
            budget_tokens=budget_tokens,
            worker_budget=worker_budget,
            notify=notify,
            workspace=workspace,
            carry_changes=carry_changes,
            verify=verify,
            verify_timeout=verify_timeout,
            tasks_file=Path(tasks) if tasks is not None else None,
            merge=merge,
        )
        if host:
            from omp.team.hosts import parse_host

            req.hosts = [parse_host(h) for h in host]
        return cast("LaunchReply", do_launch(req, progress=progress))

    def human(r: dict[str, Any]) -> str:
        from omp.cli.output import invocation
        from omp.textsafe import inline

        omp = invocation()
        from omp.cli.team_text import backlog_line, workspace_lines

        ws = ", ".join(
            f"{inline(w['name'])}({inline(str(w['paneId'] or '@' + str(w.get('host'))))})"
            for w in r["workers"]
        )
        return (
            f"team {r['team']} launched: {ws}\n"
            + workspace_lines(r)
            + backlog_line(r)
            + f"  watch:    {omp} team status {r['team']} --watch\n"
            f"  attach:   {inline(r['attach'])}\n"
            + "".join(f"            {inline(line)}\n" for line in r.get("remoteAttach") or [])
            + f"  results:  {omp} team collect {r['team']}\n"
            + (
                f"  review:   {omp} team diff {r['team']}\n"
                f"  merge:    {omp} team merge {r['team']}\n"
                if (r.get("workspace") or {}).get("kind") == "worktree"
                else ""
            )
            + f"  stop:     {omp} team shutdown {r['team']}"
        )

    run(body, as_json=as_json, human=human)


@app.command("status")
def status(
    team: str = opt.declared(STATUS, "team"),
    watch: bool = opt.declared(STATUS, "watch"),
    as_json: bool = opt.declared(STATUS, "as_json"),
) -> None:
    """Tasks, workers and the monitor. Read-only: writes nothing, starts nothing."""
    if watch:
        from omp.cli.team_text import status_text
        from omp.cli.watch import watch_loop
        from omp.views.status import status as do_status

        # with --json: one JSON object per line, a line per frame (JSON Lines), nothing else
        watch_loop(lambda: do_status(_project(), team), status_text, as_json=as_json)
        return
    from omp.cli.status_cmd import status_once

    status_once(team, as_json=as_json)


@app.command("collect")
def collect(
    team: str = typer.Argument(
        None, help="Team name (default: the only team, if one).", callback=opt.text()
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Each worker's outcome with its result. Read-only."""

    def body() -> CollectReply:
        from omp.views.status import collect as do_collect

        return cast("CollectReply", do_collect(_config(team)))

    from omp.cli.team_text import collect_markdown

    run(body, as_json=as_json, human=collect_markdown)


@app.command("usage")
def usage(
    team: str = typer.Argument(
        None, help="Team name (default: the only team, if one).", callback=opt.text()
    ),
    watch: bool = opt.WatchOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Tokens each worker and the leader spent, from their agents' own session records.

    With a cost where .omp/config.toml gives prices, and the team's budgets. Read-only."""
    from omp.cli.usage_text import usage_text
    from omp.identity import worker_identity
    from omp.views.usage import for_worker
    from omp.views.usage import usage as everyone

    ident = worker_identity()

    def do_usage(cfg: Any) -> dict[str, Any]:
        return everyone(cfg) if ident is None else for_worker(cfg, ident)

    if watch:
        from omp.cli.watch import watch_loop

        watch_loop(lambda: do_usage(_config(team)), usage_text, as_json=as_json)
        return

    def body() -> UsageReply:
        return cast("UsageReply", do_usage(_config(team)))

    run(body, as_json=as_json, human=usage_text)


@app.command("shutdown")
def shutdown(
    team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    force: bool = typer.Option(
        False,
        "--force",
        help="Also for a team whose config cannot be read: kill only the panes omp can prove "
        "it started for this team (searching --socket's server too).",
    ),
    socket: str | None = opt.DeferredSocketOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Kill the team's worker panes (and its session if omp made it); keep all mail and state."""

    def body() -> ShutdownReply:
        from omp.errors import OmpError
        from omp.store.names import team_name
        from omp.team.shutdown import force_shutdown
        from omp.team.shutdown import shutdown as do_shutdown

        where = opt.checked_socket(socket) if force else None  # (only --force searches it)
        try:
            cfg = _config(team)
        except OmpError as err:
            if not force or err.code not in ("invalid_config", "storage_error"):
                if err.code == "invalid_config":
                    err.message += (
                        f"; to shut it down anyway: {hint(f'team shutdown --force {team}')}"
                    )
                raise
            return cast(
                "ShutdownReply", force_shutdown(_project().team(team_name(team)), socket=where)
            )
        return cast("ShutdownReply", do_shutdown(cfg))

    def human(r: dict[str, Any]) -> str:
        out = (
            f"team {r['team']} shut down: killed {len(r['killedPanes'])} pane(s)"
            + (", its session" if r["killedSession"] else "")
            + f", cleared {r['clearedLocks']} task lock(s); mail and state kept"
        )
        from omp.textsafe import inline

        for s in r["skipped"]:
            out += f"\n  left {inline(str(s['pane']))}: {inline(str(s['why']))}"
        out += remote_text(r)
        if r.get("worktrees"):
            out += "\n  " + kept_text(r["team"], r["worktrees"])
        return out

    run(body, as_json=as_json, human=human)


def remote_text(r: dict[str, Any]) -> str:
    """What shutdown did on other hosts, and what it left on a host that did not answer."""
    from omp.textsafe import inline

    out = ""
    for row in r.get("remote") or []:
        done = [
            *(["pane closed"] if row.get("closedPane") else []),
            *(["branch fetched"] if row.get("fetched") else []),
            *(["checkout removed"] if row.get("checkoutRemoved") else []),
        ]
        out += f"\n  {inline(str(row['worker']))}@{inline(str(row['host']))}: "
        out += ", ".join(done) or "nothing done there"
        if row.get("why"):
            out += f"; left: {inline(', '.join(row.get('left') or []))} ({inline(row['why'])})"
    for h in r.get("hostsLeft") or []:
        out += (
            f"\n  host {inline(str(h['host']))} did not answer: left there "
            f"{inline('; '.join(h['left']))}; run shutdown again once it answers"
        )
    return out


def kept_text(team: str, kept: list[dict[str, Any]]) -> str:
    """What shutdown says of the worktrees it kept: what to merge, what is merged, and which
    hold nothing committed (never called merged)."""
    empty = [k for k in kept if k.get("nothingCommitted")]
    todo = [k for k in kept if k.get("merged") is not True and not k.get("nothingCommitted")]
    done = [k for k in kept if k.get("merged") is True and not k.get("nothingCommitted")]
    out = f"kept {len(kept)} worktree(s) and branch(es) omp/{team}/*: "
    parts = []
    if todo:
        some = "" if len(todo) == len(kept) else f"{len(todo)} not merged yet: "
        parts.append(f"{some}merge them with {hint(f'team merge {team}')}")
    if done:
        whole = "all" if len(done) == len(kept) else str(len(done))
        parts.append(f"{whole} merged into {done[0].get('target')}")
    if empty:
        names = ", ".join(str(k["worker"]) for k in empty)
        whole = "all: " if len(empty) == len(kept) else ""
        parts.append(f"nothing committed ({whole}{names})")
    tail = " (delete or prune removes them)" if not todo else ""
    return out + "; ".join(parts) + tail


@app.command("list")
def list_(as_json: bool = JsonOpt) -> None:
    """The project's teams, one line each."""

    def body() -> ListReply:
        from omp.errors import OmpError
        from omp.record import config as team_config
        from omp.store import fs

        project = _project()
        rows: list[ListRow | TeamError] = []
        for n in team_config.list_teams(project):
            tp = project.team(n)
            try:
                cfg = team_config.load(tp)
                record = fs.read_json(tp.shutdown) if tp.shutdown.exists() else None
            except OmpError as err:  # one broken team does not hide the others
                rows.append({"team": n, "error": err.code, "message": err.message})
                continue
            rows.append(
                {
                    "team": n,
                    "workers": len(cfg.worker_names),
                    "agent": cfg.raw.get("agent") or cfg.raw.get("role"),
                    "shutdown": tp.shutdown.exists(),
                    "shutdownAt": record.get("shutdownAt") if isinstance(record, dict) else None,
                    "createdAt": cfg.raw.get("createdAt"),
                }
            )
        return {"ok": True, "teams": rows}

    def human(r: dict[str, Any]) -> str:
        if not r["teams"]:
            return "no teams in this project"
        from omp.textsafe import inline

        return "\n".join(
            f"{inline(t['team']):<24} unreadable: {inline(t['message'])} [{t['error']}]"
            if "error" in t
            else f"{inline(t['team']):<24} {t['workers']} x {inline(str(t['agent'] or '?')):<8} "
            + (
                f"shut down {inline(str(t['shutdownAt'] or '(time unknown)'))}"
                if t["shutdown"]
                else f"live, created {inline(str(t['createdAt']))}"
            )
            for t in r["teams"]
        )

    run(body, as_json=as_json, human=human)


@app.command("create")
def create(
    name: str = typer.Argument(..., help="Team name.", callback=opt.text()),
    workers: int = typer.Option(
        ..., "--workers", "-w", help="Number of workers (1-32).", callback=opt.count(most=32)
    ),
    task: str = typer.Option(
        "", "--task", help="Also write one pending task per worker.", callback=opt.text()
    ),
    tasks: str = opt.TasksOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write a team's config (and tasks) without tmux: for headless teams and scripts."""

    def body() -> CreateReply:
        from omp.team.setup import create_team

        tasks_file = Path(tasks) if tasks is not None else None
        return cast(
            "CreateReply", create_team(Path.cwd(), name, workers, task=task, tasks_file=tasks_file)
        )

    run(body, as_json=as_json, human=lambda r: f"created team {r['team']} ({r['config']})")


def _project() -> StatePaths:
    from omp.store.paths import StatePaths, find_root

    return StatePaths(find_root(Path.cwd()))


def _config(team: str | None) -> TeamConfig:
    from omp.errors import OmpError
    from omp.record import config as team_config

    project = _project()
    if team is None:
        teams = team_config.list_teams(project)
        if len(teams) != 1:
            raise OmpError(
                "usage",
                "name the team" + (f"; teams here: {', '.join(teams)}" if teams else ": no teams"),
            )
        team = teams[0]
    return team_config.load(project.team(team))


def _register_monitor() -> None:
    from omp.cli import board_cmds, lifecycle_cmds, monitor_cmds, task_cmds, worktree_cmds

    monitor_cmds.register(app)
    lifecycle_cmds.register(app)
    worktree_cmds.register(app)
    board_cmds.register(app)  # `board` and `answer`: neither imports the board's web framework
    task_cmds.register(app)


_register_monitor()


@app.command("api", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def api(ctx: typer.Context) -> None:
    """Machine-facing API, JSON in and out: `omp team api --help` lists the subcommands."""
    from omp.cli.api import main as api_main

    api_main(list(ctx.args))
