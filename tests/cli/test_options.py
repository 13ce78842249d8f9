"""`--json` is one option, defined once (omp.cli.options), on every typer command that has it."""

from __future__ import annotations

import re
from typing import Any

import typer.main

from omp.cli.grammar import JSON_HELP, JSON_LINES_HELP


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
                assert p.help in (JSON_HELP, JSON_LINES_HELP), (path, p.help)
                assert p.default is False and p.is_flag, path
    assert seen >= 20


# What rich reads as a markup tag: `[team]` in a help text vanished from `--help` (typer renders
# help with rich markup), so "Default: [team] budget_tokens" printed "Default:  budget_tokens".
RICH_TAG = re.compile(r"(?<!\\)\[[a-z#/@][^\[\]]*\]")


def test_no_help_text_loses_words_to_rich_markup_or_breaks_its_summary_line() -> None:
    from omp.cli.app import app

    root: Any = typer.main.get_command(app)
    seen = 0
    for path, cmd in _commands(root):
        texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        for text in texts:
            assert not RICH_TAG.search(text), (path, RICH_TAG.findall(text))
            seen += 1
        # the commands list shows the first paragraph as it is: a line break there shows too
        summary = (cmd.help or "").strip().split("\n\n")[0]
        assert "\n" not in summary, (path, summary)
    assert seen > 100
