"""`omp team ...`: create, launch, status, collect, shutdown, list, wait (and `api`, dispatched
before typer; it is listed here only so `omp team --help` shows it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from omp.cli.output import run

app = typer.Typer(
    help="Create, launch and follow a team of agent workers.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonOpt = typer.Option(False, "--json", help="Print exactly one JSON object.")


@app.command("create")
def create(
    name: str = typer.Argument(..., help="Team name."),
    workers: int = typer.Option(..., "--workers", "-w", help="Number of workers (1-32)."),
    task: str = typer.Option("", "--task", help="Also write one pending task per worker."),
    as_json: bool = JsonOpt,
) -> None:
    """Write a team's config (and tasks) without tmux: for headless teams and scripts."""

    def body() -> dict[str, Any]:
        from omp.team.setup import create_team

        return create_team(Path.cwd(), name, workers, task=task)

    run(body, as_json=as_json, human=lambda r: f"created team {r['team']} ({r['config']})")


@app.command("api", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def api(ctx: typer.Context) -> None:
    """Machine-facing API, JSON in and out: `omp team api --help` lists the subcommands."""
    from omp.cli.api import main as api_main

    api_main(list(ctx.args))
