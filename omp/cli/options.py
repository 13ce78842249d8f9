"""The options many typer commands share, defined once (the typer side only: the fast paths in
omp/cli/__init__.py read `--json` from argv themselves)."""

from __future__ import annotations

from typing import Any

import typer

JSON_HELP = "Print exactly one JSON object."

# `as_json: bool = JsonOpt`: with it, stdout is exactly one JSON object (omp.cli.output).
JsonOpt: Any = typer.Option(False, "--json", help=JSON_HELP)

# The streaming form, for a command that prints until stopped (`team events`): JSON Lines.
JsonLinesOpt: Any = typer.Option(
    False, "--json", help="One JSON object per event (JSON lines), each with its cursor."
)
