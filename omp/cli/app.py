"""The typer application: one sub-app per command group, each in its own module."""

from __future__ import annotations

import typer

from omp import __version__

app = typer.Typer(
    name="omp",
    help="omp: a leader/worker runtime for terminal coding agents on tmux.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"omp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """omp: a leader/worker runtime for terminal coding agents on tmux."""


def _register() -> None:
    from omp.cli import demo, team

    demo.register(app)
    app.add_typer(team.app, name="team")
    from omp.cli import loops

    loops.register(app)
    from omp import demo_agent

    demo_agent.register(app)
    from omp.cli import doctor, hooks, skills

    doctor.register(app)
    skills.register(app)
    hooks.register(app)


_register()
# Last, once every command is registered: a worker process may run only the commands listed in
# omp.cli.guard.WORKER_MAY_RUN; every other one, present or added later, refuses it.
from omp.cli.guard import guard_all  # noqa: E402

guard_all(app)
