"""The demo agent's shell tool: the omp commands it learns from what it reads, run through a shell.

An LLM agent never builds omp's argv itself: it copies a command line from its inbox or from a
nudge, fills the slots (`<claimToken>`, `<text>`), and hands the line to its shell tool. The demo
agent does the same, so a demo team walks the path a real one does: the omp named in the texts
(absolute, see `omp.invocation`), a shell with the pane's own environment, and the JSON quoted
the way the text quotes it. A command it has not read anywhere is a command it cannot run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from typing import Any, NamedTuple

Result = dict[str, Any]

API_TIMEOUT = 60.0

# `<omp words> team api <sub> --input '<json>' --json`, where the omp words are one shell word
# (a path, quoted if it has spaces) or an interpreter followed by `-m omp`.
_API_LINE = re.compile(
    r"(?P<omp>(?:'[^']*'|[^\s'`]+)(?: -m omp)?) team api (?P<sub>[a-z][a-z-]*) "
    r"--input (?P<arg>'[^']*') --json"
)


class Printed(NamedTuple):
    line: str  # the command exactly as the text printed it
    omp: str  # its omp words
    sub: str
    payload: Result


def find_commands(text: str) -> list[Printed]:
    """Every `omp team api` command a text prints, in order."""
    out: list[Printed] = []
    for m in _API_LINE.finditer(text):
        try:
            payload = json.loads(shlex.split(m.group("arg"))[0])
        except (ValueError, IndexError):
            continue
        if isinstance(payload, dict):
            out.append(Printed(m.group(0), m.group("omp"), m.group("sub"), payload))
    return out


def shell_line(omp: str, sub: str, payload: Result) -> str:
    """A command in the printed form, its JSON filled in (what an agent types after copying)."""
    arg = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"{omp} team api {sub} --input {shlex.quote(arg)} --json"


def _shell() -> str:
    sh = os.environ.get("SHELL", "")
    return sh if os.path.isabs(sh) and os.access(sh, os.X_OK) else "/bin/sh"


def run_line(line: str) -> Result:
    """Run one command line through the pane's shell; its JSON reply, or an error result."""
    try:
        # stdin is not inherited: the child must never read what is typed into this pane.
        proc = subprocess.run(
            [_shell(), "-c", line],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=API_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error": "api_unavailable", "message": f"{line[:60]}: {exc}"}
    try:
        obj = json.loads(proc.stdout)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        return obj
    tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
    return {"ok": False, "error": "bad_output", "message": f"exited {proc.returncode}: {tail}"}


class ShellApi:
    """`(sub, payload) -> result` for the demo agent, through the commands it has read.

    A payload equal to a printed one runs the printed line itself, byte for byte; otherwise the
    printed command's omp words carry the filled-in JSON. With nothing read yet there is no way
    to reach omp, and the call says so.
    """

    def __init__(self) -> None:
        self.printed: dict[str, list[Printed]] = {}
        self.omp: str | None = None
        self.ran: list[str] = []  # every line handed to the shell, for the screen and tests

    def learn(self, text: str) -> None:
        for cmd in find_commands(text):
            known = self.printed.setdefault(cmd.sub, [])
            if cmd not in known:
                known.append(cmd)
            self.omp = cmd.omp

    def line_for(self, sub: str, payload: Result) -> str | None:
        for cmd in self.printed.get(sub, []):
            if cmd.payload == payload:
                return cmd.line
        return None if self.omp is None else shell_line(self.omp, sub, payload)

    def __call__(self, sub: str, payload: Result) -> Result:
        line = self.line_for(sub, payload)
        if line is None:
            return {
                "ok": False,
                "error": "no_command",
                "message": "no omp command in anything I was given to read",
            }
        self.ran.append(line)
        return run_line(line)
