"""The `omp` console script.

`omp team api ...` is called by agents hundreds of times a session, each call a fresh process, so
it is dispatched here without importing typer (measured: importing typer alone costs about five
times a bare `python -c pass`, twice the whole budget of an API call). So are the two commands a
leader polls, `omp team status` and `omp team events`, in their plain forms (their grammar
declared once, for both ways: `omp.cli.grammar`), `omp hook stop`, which runs at every stop of
every agent (omp/cli/hook_stop.py), and `omp --version`. `FAST_PATHS` is that list; everything
else goes through typer. What the per-call commands may load is budgeted
(tests/cli/test_import_budget.py).

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
    """A leader agent polls status: same output as the typer command, without typer's cost.
    Its grammar is the typer command's (`omp.cli.grammar.STATUS`)."""
    from omp.cli.grammar import STATUS

    got = STATUS.parse(rest)
    if got is not None:
        from omp.cli.status_cmd import status_once

        status_once(got["team"], as_json=got["as_json"])


def _events(rest: list[str]) -> None:
    """A leader polls its team's history with a cursor: no typer on that path either."""
    from omp.cli.grammar import EVENTS

    got = EVENTS.parse(rest)
    if got is None:
        return
    from omp.cli.events_cmd import events_loop
    from omp.store.paths import StatePaths, find_root

    try:
        project = StatePaths(find_root())
    except Exception:
        return  # typer's command reports it
    events_loop(
        project, got["team"], since=got["since"], follow=got["follow"], as_json=got["as_json"]
    )


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
# every `app(...)` (for omp's, about twice a bare `python -c pass` of CPU). A console script
# builds it once either way; a process that runs many commands (the tests' `run_cli`) builds it
# once instead of once a command. The app is kept with it, so an id is never reused for another.
_CLICK: dict[int, tuple[Typer, Any]] = {}


def _click_command(app: Typer) -> Any:
    got = _CLICK.get(id(app))
    if got is None:
        import typer.main

        got = _CLICK[id(app)] = (app, typer.main.get_command(app))
    return got[1]
