"""The `omp` console script.

`omp team api ...` is called by agents hundreds of times a session, each call a fresh process, so
it is dispatched here without importing typer (measured: typer costs 60-100 ms per process on this
machine, more than the whole budget of an API call). So are the two commands a leader polls,
`omp team status` and `omp team events`, in their plain forms, and `omp hook stop`, which runs at
every stop of every agent (omp/stophook/run.py). Everything else goes through typer.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typer import Typer


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:  # doctor's pane check and scripts ask this often: no typer
        from omp import __version__

        sys.stdout.write(f"omp {__version__}\n")
        raise SystemExit(0)
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
    if args[:2] == ["team", "events"] and (plain := _plain_events(args[2:])) is not None:
        # A leader polls its team's history with a cursor: no typer on that path either.
        from pathlib import Path

        from omp.cli.events_cmd import events_loop
        from omp.store.paths import StatePaths, find_root

        team, since = plain
        flags = set(args[2:])
        try:
            project = StatePaths(find_root(Path.cwd()))
        except Exception:
            project = None
        if project is not None:
            events_loop(
                project, team, since=since, follow="--follow" in flags, as_json="--json" in flags
            )
    from omp.cli.app import app

    _run_typer(app, args)


def _run_typer(app: Typer, args: list[str]) -> None:
    """Run the typer app; its usage errors follow omp's rules like every other error: with
    `--json` one JSON object on stdout (`usage`, exit 2), else the usage text on stderr through
    the one sanitiser (an argument echoed back cannot control the terminal)."""
    import io

    import typer

    from omp.cli import output
    from omp.errors import EXIT_USAGE

    try:
        rv = app(args=args, prog_name="omp", standalone_mode=False)
    except typer.TyperException as exc:  # click's usage errors (typer vendors click)
        code = getattr(exc, "exit_code", EXIT_USAGE) or EXIT_USAGE
        if "--json" in args:
            output.emit_json({"ok": False, "error": "usage", "message": exc.format_message()})
        else:
            buf = io.StringIO()
            show = getattr(exc, "show", None)
            if callable(show):
                show(file=buf)
            else:
                buf.write(f"Error: {exc.format_message()}\n")
            output.write_err(buf.getvalue())
        raise SystemExit(code) from None
    except typer.Abort:
        output.write_err("omp: aborted\n")
        raise SystemExit(1) from None
    raise SystemExit(rv if isinstance(rv, int) else 0)


def _plain_events(rest: list[str]) -> tuple[str, str | None] | None:
    """(TEAM, CURSOR) for `TEAM [--since CURSOR] [--json] [--follow]`, each at most once; None
    for anything else (help, `-f`, `--since=`, a typo), which goes through typer."""
    team: str | None = None
    since: str | None = None
    seen: set[str] = set()
    it = iter(rest)
    for a in it:
        if a in ("--json", "--follow") and a not in seen:
            seen.add(a)
        elif a == "--since" and a not in seen:
            seen.add(a)
            since = next(it, None)
            if since is None:
                return None
        elif not a.startswith("-") and team is None:
            team = a
        else:
            return None
    return (team, since) if team is not None else None


def _plain_status(rest: list[str]) -> bool:
    """`[TEAM] [--json]` and nothing else; any other form (help, --watch) goes through typer."""
    positional = [a for a in rest if a != "--json"]
    return (
        rest.count("--json") <= 1
        and len(positional) <= 1
        and not any(a.startswith("-") for a in positional)
    )
