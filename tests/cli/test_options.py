"""`--json` is one option, defined once (omp.cli.options), on every typer command that has it."""

from __future__ import annotations

from typing import Any

import typer.main

from omp.cli.options import JSON_HELP, JsonLinesOpt


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    return [c for name, sub in subs.items() for c in _commands(sub, (*path, name))]


def test_every_json_option_is_the_shared_one() -> None:
    from omp.cli.app import app

    root: Any = typer.main.get_command(app)
    seen = 0
    for path, cmd in _commands(root):
        for p in cmd.params:
            if "--json" in getattr(p, "opts", []):
                seen += 1
                assert p.help in (JSON_HELP, JsonLinesOpt.help), (path, p.help)
                assert p.default is False and p.is_flag, path
    assert seen >= 20
