"""The grammar of the commands with a fast path, declared once and read two ways.

A leader polls `omp team status` and `omp team events`: their plain forms run without typer
(omp/cli/__init__.py). Each command's argument and options are declared here once (`Grammar`):
`parse` reads argv with them on the fast path, and `omp.cli.options.declared` builds the typer
parameter of the same option for the typer command (omp/cli/team.py, omp/cli/lifecycle_cmds.py),
with the same names, help and checks. An option typer alone handles (`status --watch`) is
declared with `fast=False`.

`parse` takes only the plain forms: each option at most once, a value as the next word
(`--since CURSOR`), one positional; anything else (help, `--since=X`, an option of typer's alone,
a typo) is None, and goes to typer, which parses it by the same declaration or reports it. So
both ways agree on every form the fast path takes (tests/cli/test_grammar.py). No typer here at
import time: the fast path loads this module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

JSON_HELP = "Print exactly one JSON object."
JSON_LINES_HELP = "One JSON object per event (JSON lines), each with its cursor."
WATCH_HELP = "Redraw about once a second (with --json: one JSON object per line, each second)."


class Arg:
    """The one positional argument: its name, whether it must be given, its help."""

    __slots__ = ("help", "name", "required")

    def __init__(self, name: str, help: str, *, required: bool = True) -> None:
        self.name, self.help, self.required = name, help, required


class Opt:
    """An option: its spellings (long first), where its value goes, and whether it takes one
    (`value`, shown as `metavar`) or is a flag. `fast=False`: typer's form alone."""

    __slots__ = ("dest", "fast", "help", "max_len", "metavar", "names", "value")

    def __init__(
        self,
        names: tuple[str, ...],
        dest: str,
        help: str,
        *,
        value: bool = False,
        metavar: str | None = None,
        max_len: int | None = None,
        fast: bool = True,
    ) -> None:
        self.names, self.dest, self.help, self.value = names, dest, help, value
        self.metavar, self.max_len, self.fast = metavar, max_len, fast


class Grammar:
    """One command's argument and options (see the module docstring)."""

    __slots__ = ("arg", "opts")

    def __init__(self, arg: Arg, *opts: Opt) -> None:
        self.arg, self.opts = arg, opts

    def parse(self, argv: list[str]) -> dict[str, Any] | None:
        """The values of a plain form (flags False and values None when not given), or None
        for a form only typer parses."""
        spelled = {name: o for o in self.opts for name in o.names}
        out: dict[str, Any] = {o.dest: None if o.value else False for o in self.opts}
        out[self.arg.name] = None
        seen: set[str] = set()
        it = iter(argv)
        for word in it:
            opt = spelled.get(word)
            if opt is not None:
                if not opt.fast or opt.dest in seen:
                    return None
                seen.add(opt.dest)
                out[opt.dest] = next(it, None) if opt.value else True
                if opt.value and out[opt.dest] is None:
                    return None
            elif not word.startswith("-") and out[self.arg.name] is None:
                out[self.arg.name] = word
            else:
                return None
        if self.arg.required and out[self.arg.name] is None:
            return None
        return out


STATUS = Grammar(
    Arg("team", "Team name (default: every team of the project).", required=False),
    Opt(("--watch", "-w"), "watch", WATCH_HELP, fast=False),
    Opt(("--json",), "as_json", JSON_HELP),
)
EVENTS = Grammar(
    Arg("team", "Team name."),
    Opt(
        ("--since",),
        "since",
        "Only what came after this cursor.",
        value=True,
        metavar="CURSOR",
        max_len=1 << 16,
    ),
    Opt(("--follow", "-f"), "follow", "Keep printing new events until Ctrl-C."),
    Opt(("--json",), "as_json", JSON_LINES_HELP),
)
