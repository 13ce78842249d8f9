"""How an agent's shell runs *this* omp: the command words every agent-facing text starts with.

A worker's pane does not reliably find `omp` on PATH: tmux 3.3a gives a new pane the PATH of the
tmux client (or of the server), not the one launch passes with `-e`; a login shell's profile may
rewrite PATH; the user may never have activated the venv omp lives in (or used pipx or
`pip --user`). So every command omp hands an agent (inbox, trigger, nudges, idle prompts, skill
examples, error hints) names the launching omp by absolute path, and the team records that command
in its config (`ompCommand`) so every later text for the team names the same omp. The pane's PATH
is also led by omp's bin directory, so a bare `omp` typed by hand works where the shell keeps it.

No imports beyond the standard library's cheapest: this runs on the `omp team api` path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

ENV_VAR = "OMP_COMMAND"  # set in every worker pane: the exact words that run the team's omp


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def omp_argv(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The argv prefix that runs this very omp (same install, same version), absolute.

    1. the `omp` script this process was started as (venv, pipx, `pip --user`: the console
       script's own path, made absolute but not resolved, so a pipx link keeps working after
       pipx reinstalls the venv behind it);
    2. the `omp` script next to the interpreter (a `python -m omp` run inside a venv);
    3. the interpreter itself with `-m omp`.
    """
    arg0 = sys.argv[0] if argv0 is None else argv0
    exe = sys.executable if executable is None else executable
    if arg0 and os.path.basename(arg0) == "omp":
        cand = os.path.abspath(arg0)
        if _executable(cand):
            return [cand]
    if exe:
        beside = os.path.join(os.path.dirname(os.path.abspath(exe)), "omp")
        if _executable(beside):
            return [beside]
        return [os.path.abspath(exe), "-m", "omp"]
    return ["omp"]


def omp_command(argv0: str | None = None, executable: str | None = None) -> str:
    """`omp_argv` as shell words (quoted only where a shell needs it)."""
    return " ".join(map(quote, omp_argv(argv0, executable)))


# What `shlex.quote` leaves bare: ASCII letters, digits and `_@%+=:,./-`
_BARE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def quote(word: str) -> str:
    """`shlex.quote(word)`, without `shlex` (it compiles a regular expression as it loads, on the
    way of `omp team status`, which names omp in its hints)."""
    if not word:
        return "''"
    if _BARE.issuperset(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def team_command(raw: Mapping[str, Any] | None) -> str:
    """The command recorded for a team at launch, or this process's own for an older config."""
    recorded = (raw or {}).get("ompCommand")
    if isinstance(recorded, str) and recorded.strip():
        return recorded
    env = os.environ.get(ENV_VAR)
    if env and env.strip():
        return env
    return omp_command()


def hint(rest: str) -> str:
    """A command to suggest in a message, e.g. `hint("team collect t")`: the words that run this
    very omp, absolute, so a pasted suggestion works in any shell of the project."""
    return f"{omp_command()} {rest}"
