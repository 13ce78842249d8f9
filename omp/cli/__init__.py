"""The `omp` console script.

`omp team api ...` is called by agents hundreds of times a session, each call a fresh process, so
it is dispatched here without importing typer (measured: typer costs 60-100 ms per process on this
machine, more than the whole budget of an API call). `omp hook stop` runs at every stop of every
agent (omp/stophook/run.py) and takes the same kind of path. Every other command goes through typer.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["team", "api"]:
        from omp.cli.api import main as api_main

        api_main(args[2:])
        return
    if args[:2] == ["hook", "stop"]:
        from omp.stophook.run import main as hook_main

        raise SystemExit(hook_main(args[2:]))
    if args[:2] == ["team", "status"] and _plain_status(args[2:]):
        # A leader agent polls status: same output as the typer command, without typer's cost.
        from omp.cli.status_cmd import status_once

        team = next((a for a in args[2:] if a != "--json"), None)
        status_once(team, as_json="--json" in args)
    from omp.cli.app import app

    app(args=args, prog_name="omp")


def _plain_status(rest: list[str]) -> bool:
    """`[TEAM] [--json]` and nothing else; any other form (help, --watch) goes through typer."""
    positional = [a for a in rest if a != "--json"]
    return (
        rest.count("--json") <= 1
        and len(positional) <= 1
        and not any(a.startswith("-") for a in positional)
    )
