"""`omp hooks install`: omp's stop hook in each agent CLI's project hook file (omp/stophook)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from omp.cli.options import JsonOpt
from omp.cli.output import run

app = typer.Typer(
    help="The stop hook that keeps an agent working while a loop is active.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def register(root_app: typer.Typer) -> None:
    root_app.add_typer(app, name="hooks")
    root_app.add_typer(hook_app, name="hook")


@app.command("install")
def install(
    agent: Annotated[
        str,
        typer.Option(
            "--agent", help="copilot (default, omp's default agent), claude, codex, gemini or all."
        ),
    ] = "copilot",
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove omp's entries only."),
    force: bool = typer.Option(False, "--force", help="Replace an omp entry that was changed."),
    as_json: bool = JsonOpt,
) -> None:
    """Write `omp hook stop` into each agent CLI's hook file, keeping everything else."""

    def body() -> dict[str, Any]:
        from omp.stophook.install import install as do_install
        from omp.store.paths import find_root

        return do_install(find_root(Path.cwd()), agent, uninstall=uninstall, force=force)

    from omp.stophook.install import install_text

    run(body, as_json=as_json, human=install_text)


hook_app = typer.Typer(
    help="What agent CLIs run at every stop: `omp hook stop` (see `omp hooks install`).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@hook_app.command("stop")
def stop() -> None:
    """Read a stop hook's JSON on stdin; print the CLI's block or allow (never fails closed).

    Reached through typer only in odd spellings: `omp hook stop` itself takes the fast path in
    omp/cli/__init__.py.
    """
    from omp.stophook.run import main

    raise SystemExit(main([]))
