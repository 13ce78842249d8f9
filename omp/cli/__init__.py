"""The `omp` console script.

`omp team api ...` is called by agents hundreds of times a session, each call a fresh process, so
it is dispatched here without importing typer (measured: typer costs 60-100 ms per process on this
machine, more than the whole budget of an API call). Every other command goes through typer.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["team", "api"]:
        from omp.cli.api import main as api_main

        api_main(args[2:])
        return
    from omp.cli.app import app

    app(args=args, prog_name="omp")
