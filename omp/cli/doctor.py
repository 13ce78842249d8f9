"""`omp doctor`: check what a first run needs. Read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import run


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor(
    agent: str = typer.Option(
        "copilot",
        "--agent",
        "-a",
        help="The agent the team will run (default copilot).",
        callback=opt.text(max_len=256),
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Check tmux, agent programs, state permissions, the monitor lock and teams' panes.

    Exit 0 when everything the agent needs is there, 1 otherwise. Writes nothing.
    """

    def body() -> dict[str, Any]:
        from omp.doctor.checks import diagnose
        from omp.store.paths import find_root

        return diagnose(find_root(Path.cwd()), agent=agent)

    run(body, as_json=as_json, human=doctor_text, exit_code=lambda r: 0 if r["ok"] else 1)


def doctor_text(r: dict[str, Any]) -> str:
    from omp.doctor.checks import summary
    from omp.textsafe import inline

    lines = []
    for c in r["checks"]:
        lines.append(f"{c['status']:<4}  {inline(str(c['message']))}")
        if c["fix"] and c["status"] != "ok":
            lines.append(f"      fix: {inline(str(c['fix']))}")
    lines.append(summary(r))
    return "\n".join(lines)
