"""One grammar for the commands with a fast path: `omp.cli.grammar` declares `team status` and
`team events` once; the fast path parses argv with it, and typer's command is built from it.
Every form the fast path takes, typer reads the same way; every other form is left to typer."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from omp.cli.app import app
from omp.cli.grammar import EVENTS, STATUS, Grammar


def _command(name: str) -> Any:
    """The click command typer builds (typer vendors click: read by its attributes)."""
    return typer.main.get_command(app).commands["team"].commands[name]  # type: ignore[attr-defined]


def _typer_reads(name: str, argv: list[str]) -> dict[str, Any]:
    ctx = _command(name).make_context(name, list(argv))
    return dict(ctx.params)


STATUS_FORMS = [[], ["t"], ["--json"], ["t", "--json"], ["--json", "t"]]
EVENTS_FORMS = [
    ["t"],
    ["t", "--json"],
    ["t", "--since", "t:-:0"],
    ["--since", "t:1a2b3c4d:9", "t", "--follow"],
    ["t", "-f", "--json"],
]


@pytest.mark.parametrize(
    ("name", "grammar", "argv"),
    [("status", STATUS, a) for a in STATUS_FORMS] + [("events", EVENTS, a) for a in EVENTS_FORMS],
)
def test_the_fast_path_reads_a_plain_form_as_typer_does(
    name: str, grammar: Grammar, argv: list[str]
) -> None:
    fast = grammar.parse(argv)
    assert fast is not None
    assert fast == _typer_reads(name, argv)


@pytest.mark.parametrize(
    ("grammar", "argv"),
    [
        (STATUS, ["--help"]),
        (STATUS, ["-h"]),
        (STATUS, ["--watch"]),  # typer's alone
        (STATUS, ["t", "-w", "--json"]),
        (STATUS, ["a", "b"]),
        (STATUS, ["--json", "--json"]),
        (STATUS, ["--jsn"]),
        (EVENTS, []),  # the team is required: typer says so
        (EVENTS, ["t", "--since"]),  # a value missing
        (EVENTS, ["t", "--since=t:-:0"]),
        (EVENTS, ["t", "--follow", "--follow"]),
        (EVENTS, ["t", "u"]),
        (EVENTS, ["t", "--help"]),
    ],
)
def test_any_other_form_is_left_to_typer(grammar: Grammar, argv: list[str]) -> None:
    assert grammar.parse(argv) is None


@pytest.mark.parametrize(("name", "grammar"), [("status", STATUS), ("events", EVENTS)])
def test_typers_command_is_the_declaration(name: str, grammar: Grammar) -> None:
    params = {p.name: p for p in _command(name).params}
    assert set(params) == {grammar.arg.name, *(o.dest for o in grammar.opts)}
    arg = params[grammar.arg.name]
    assert arg.param_type_name == "argument" and arg.required is grammar.arg.required
    for o in grammar.opts:
        p = params[o.dest]
        assert p.param_type_name == "option"
        assert tuple(p.opts) + tuple(p.secondary_opts) == o.names
        assert p.help == o.help
        assert p.is_flag is not o.value
