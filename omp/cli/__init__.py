"""The `omp` console script.

`omp team api ...` is called by agents hundreds of times a session, each call a fresh process, so
it is dispatched here without importing typer (measured: typer costs 60-100 ms per process on this
machine, more than the whole budget of an API call). So are the two commands a leader polls,
`omp team status` and `omp team events`, in their plain forms, `omp hook stop`, which runs at
every stop of every agent (omp/cli/hook_stop.py), and `omp --version`. `FAST_PATHS` is that list;
everything else goes through typer.

One error path for all of them (`omp.cli.output.guarded`, around the fast paths too): an
`OmpError` prints its code (one JSON object with `--json`) and exits 1 or 2, a bug exits 3,
Ctrl-C exits 130 with one line and no traceback. The stop hook alone answers every failure,
Ctrl-C included, by letting the agent stop (exit 0): it must never hold an agent.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from typer import Typer


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if argv is None:  # the console script (or `python -m omp`): this process is omp's own
        from omp.cli import output

        output.OWN_PROCESS = True
    try:
        for prefix, fast in FAST_PATHS.items():
            if tuple(args[: len(prefix)]) == prefix:
                from functools import partial

                from omp.cli.output import guarded

                rest = args[len(prefix) :]
                guarded(partial(fast, rest), "--json" in rest)  # returns only for typer's forms
                break
        from omp.cli.app import app

        _run_typer(app, args)
    except KeyboardInterrupt:
        from omp.cli.output import interrupted

        interrupted()


def _version(rest: list[str]) -> None:
    if not rest:  # doctor's pane check and scripts ask this often: no typer
        from omp import __version__

        sys.stdout.write(f"omp {__version__}\n")
        raise SystemExit(0)


def _api(rest: list[str]) -> None:
    from omp.cli.api import main as api_main

    api_main(rest)


def _hook_stop(rest: list[str]) -> None:
    from omp.cli.hook_stop import main as hook_main

    raise SystemExit(hook_main(rest))


def _status(rest: list[str]) -> None:
    """A leader agent polls status: same output as the typer command, without typer's cost."""
    if _plain_status(rest):
        from omp.cli.status_cmd import status_once

        team = next((a for a in rest if a != "--json"), None)
        status_once(team, as_json="--json" in rest)


def _events(rest: list[str]) -> None:
    """A leader polls its team's history with a cursor: no typer on that path either."""
    plain = _plain_events(rest)
    if plain is None:
        return
    from pathlib import Path

    from omp.cli.events_cmd import events_loop
    from omp.store.paths import StatePaths, find_root

    team, since = plain
    flags = set(rest)
    try:
        project = StatePaths(find_root(Path.cwd()))
    except Exception:
        return  # typer's command reports it
    events_loop(project, team, since=since, follow="--follow" in flags, as_json="--json" in flags)


# The commands dispatched without typer: argv prefix -> handler of the rest of argv. A handler
# exits, or returns when the form is one only typer parses (help, an option it does not know).
FAST_PATHS: dict[tuple[str, ...], Callable[[list[str]], None]] = {
    ("--version",): _version,
    ("team", "api"): _api,
    ("hook", "stop"): _hook_stop,
    ("team", "status"): _status,
    ("team", "events"): _events,
}


def _run_typer(app: Typer, args: list[str]) -> None:
    """Run the typer app; its usage errors follow omp's rules like every other error: with
    `--json` one JSON object on stdout (`usage`, exit 2), else the usage text on stderr through
    the one sanitiser (an argument echoed back cannot control the terminal). Ctrl-C is 130, as
    everywhere."""
    import io

    import typer

    from omp.cli import output
    from omp.errors import EXIT_USAGE

    as_json = "--json" in args

    def call() -> object:
        try:
            return _click_command(app).main(args=args, prog_name="omp", standalone_mode=False)
        except typer.TyperException as exc:  # click's usage errors (typer vendors click)
            code = getattr(exc, "exit_code", EXIT_USAGE) or EXIT_USAGE
            if as_json:  # a value omp.cli.options refused carries omp's own code
                error = getattr(exc, "omp_code", "usage")
                output.emit_json({"ok": False, "error": error, "message": exc.format_message()})
            else:
                buf = io.StringIO()
                show = getattr(exc, "show", None)
                if callable(show):
                    show(file=buf)
                else:
                    buf.write(f"Error: {exc.format_message()}\n")
                output.write_err(buf.getvalue())
            raise SystemExit(code) from None
        except typer.Abort:  # end of input at a prompt (typer answers Ctrl-C itself: 130)
            output.write_err("omp: aborted\n")
            raise SystemExit(1) from None

    # Failures a command body did not report itself take the same path as the fast paths'.
    rv = output.guarded(call, as_json)
    raise SystemExit(rv if isinstance(rv, int) else 0)


# The click command typer builds from an app, kept for the process: typer builds it again on
# every `app(...)` (~25 ms for omp's). A console script builds it once either way; a process
# that runs many commands (the tests' `run_cli`) builds it once instead of once a command. The
# app is kept with it, so an id is never reused for another app.
_CLICK: dict[int, tuple[Typer, Any]] = {}


def _click_command(app: Typer) -> Any:
    got = _CLICK.get(id(app))
    if got is None:
        import typer.main

        got = _CLICK[id(app)] = (app, typer.main.get_command(app))
    return got[1]


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
