"""`omp team status` printed once: reached from typer and, for the plain form, straight from
`omp.cli.main` without importing typer (leader agents poll it; typer costs ~60 ms a process)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from omp.cli.output import run

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.cli.replies import StatusReply


def status_once(team: str | None, *, as_json: bool) -> None:
    from omp.cli.team_text import status_text
    from omp.store.paths import StatePaths, find_root
    from omp.views.status import status

    def body() -> StatusReply:
        return cast("StatusReply", status(StatePaths(find_root(Path.cwd())), team))

    run(body, as_json=as_json, human=status_text)
