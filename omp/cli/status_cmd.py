"""`omp team status` printed once: reached from typer and, for the plain form, straight from
`omp.cli.main` without importing typer (leader agents poll it; typer costs ~60 ms a process)."""

from __future__ import annotations

from pathlib import Path

from omp.cli.output import run


def status_once(team: str | None, *, as_json: bool) -> None:
    from omp.cli.team_text import status_text
    from omp.store.paths import StatePaths, find_root
    from omp.views.status import status

    run(lambda: status(StatePaths(find_root(Path.cwd())), team), as_json=as_json, human=status_text)
