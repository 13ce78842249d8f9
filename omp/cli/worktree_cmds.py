"""`omp team diff` (read-only) and `omp team merge` (the leader's): workers' branches reviewed and
brought back, added to the `team` app by `register`. See docs/worktrees.md."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run
from omp.cli.team_text import branch_line
from omp.textsafe import inline

if TYPE_CHECKING:
    from omp.cli.replies import DiffReply, MergeReply


def _config(team: str) -> Any:
    from omp.record import config as team_config
    from omp.store.paths import StatePaths, find_root

    return team_config.load(StatePaths(find_root(Path.cwd())).team(team))


def diff_text(r: dict[str, Any]) -> str:
    if not r["workers"]:
        return f"team {inline(r['team'])}: no worker has a worktree (every one is shared)\n"
    out: list[str] = []
    for row in r["workers"]:
        out.append(branch_line(row))
        for c in row.get("commits") or []:
            out.append(f"  {c['sha'][:10]} {inline(c['subject'])}")
        for f in row.get("uncommitted") or []:
            out.append(f"  uncommitted: {inline(f)}")
        if row.get("diff"):
            out.append(row["diff"].rstrip("\n"))
        out.append("")
    return "\n".join(out)


def merge_text(r: dict[str, Any]) -> str:
    verb = "would merge" if r["dryRun"] else "merged"
    where = f" (checkout {inline(r['checkout'])})" if r.get("checkout") else ""
    into = f" into {inline(r['target'])}" if r.get("target") else ""
    lines = [f"team {inline(r['team'])}{into}{where}:"]
    for row in r["results"]:
        commit = str(row.get("commit") or "")[:10]
        extra = f" -> {commit}" if commit else ""
        v = row.get("verify")
        if isinstance(v, dict):
            extra += f" (check {v.get('status')}, log {inline(str(v.get('log')))})"
        if row.get("uncommittedInWorktree"):
            extra += f"; {len(row['uncommittedInWorktree'])} uncommitted file(s) left behind"
        hook = row.get("hook")
        if isinstance(hook, dict) and hook.get("status") != "passed":
            how = "did not finish in time" if hook.get("status") == "timed_out" else "failed"
            extra += f"; then its post-merge hook {how} (the merge stands)"
        if row.get("warning"):
            extra += f"; git said after the move: {inline(str(row['warning']))}"
        lines.append(f"  {inline(row['worker']):<10} {row['status']:<14}{extra}")
    for s in r["skipped"]:
        lines.append(f"  {inline(s['worker']):<10} skipped: {inline(s['why'])}")
    if not r["results"] and not r["skipped"]:
        lines.append("  nothing to merge: no worker has a worktree")
    merged = ", ".join(inline(m) for m in r["merged"]) or "nothing"
    lines.append(f"{verb}: {merged}")
    if r["dryRun"]:
        lines.append(f"(a dry run: each branch alone against {inline(r['target'])} as it is now)")
    return "\n".join(lines) + "\n"


def _task_branches(cfg: Any) -> bool:
    """The team's tasks have branches of their own (a backlog with a worktree per task)."""
    found = cfg.raw.get("backlog")
    return isinstance(found, dict) and found.get("worktrees") is True


# a module-level default: a list argument's default must not be built per call (ruff B008)
WORKERS: Any = typer.Argument(
    None,
    metavar="[WORKER]...",
    help="Workers whose branches to merge (default: every completed one, verified when the "
    "team verifies), in the order their tasks completed.",
    callback=opt.text_list(),
)


def register(team_app: typer.Typer) -> None:
    @team_app.command("diff")
    def diff(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        worker: str = typer.Argument(
            None, help="One worker (default: every worker with a worktree).", callback=opt.text()
        ),
        stat: bool = typer.Option(False, "--stat", help="Files and line counts, not the diff."),
        task: str = typer.Option(
            None,
            "--task",
            metavar="ID",
            help="One backlog task's branch (default for a backlog team: every task's not "
            "merged yet).",
            callback=opt.text(max_len=64),
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Each worker's (or backlog task's) commits and diff since its base. Read-only."""

        def body() -> DiffReply:
            from omp.views.worktrees import diff as do_diff

            cfg = _config(team)
            if task is not None or (worker is None and _task_branches(cfg)):
                from omp.store.names import task_id
                from omp.views.backlog import task_diff

                tid = task_id(task) if task is not None else None
                return cast("DiffReply", task_diff(cfg, tid, stat=stat))
            return cast("DiffReply", do_diff(cfg, worker, stat=stat))

        run(body, as_json=as_json, human=diff_text)

    @team_app.command("merge")
    def merge(
        team: str = typer.Argument(..., help="Team name.", callback=opt.text()),
        worker: list[str] = WORKERS,
        into: str = typer.Option(
            None,
            "--into",
            metavar="BRANCH",
            help="The branch to merge into (default: your checkout's).",
            callback=opt.text(max_len=255),
        ),
        squash: bool = typer.Option(
            False, "--squash", help="One commit per worker: its task's subject and result."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Say what would happen; change nothing."
        ),
        stop_on_conflict: bool = typer.Option(
            False, "--stop-on-conflict", help="Stop at the first branch that cannot be merged."
        ),
        task: str = typer.Option(
            None,
            "--task",
            metavar="ID",
            help="One backlog task's branch (default for a backlog team: every completed task's, "
            "in the order they completed).",
            callback=opt.text(max_len=64),
        ),
        as_json: bool = JsonOpt,
    ) -> None:
        """Merge workers' branches into your branch, the team's check first.

        A fast-forward or a merge commit; a conflict changes nothing and the worker is told
        how to rebase."""

        def body() -> MergeReply:
            from omp.team.merging import merge_team

            cfg = _config(team)
            if task is not None or (not worker and _task_branches(cfg)):
                from omp.backlog.landing import land_report
                from omp.store.names import task_id

                tid = task_id(task) if task is not None else None
                if into or squash or stop_on_conflict:
                    from omp.errors import OmpError

                    raise OmpError(
                        "usage",
                        "a backlog's tasks merge into the team's target one by one: --into, "
                        "--squash and --stop-on-conflict do not apply to them",
                    )
                return cast("MergeReply", land_report(cfg, tid, dry_run=dry_run))
            report = merge_team(
                cfg,
                list(worker or []),
                into=into,
                squash=squash,
                dry_run=dry_run,
                stop_on_conflict=stop_on_conflict,
            )
            return cast("MergeReply", report)

        run(body, as_json=as_json, human=merge_text)
