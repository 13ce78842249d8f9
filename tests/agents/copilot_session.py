"""A real Copilot CLI as the leader, in a pane of a private tmux server, and what its own session
transcript says.

`CopilotLeader` starts `copilot` in the first pane of a private tmux server (so `TMUX` and
`TMUX_PANE` point there, as for a user who runs Copilot inside tmux), answers the folder-trust
dialog, and types the user's requests. omp commands the leader runs launch from inside that pane:
the workers split its window.

Copilot CLI 1.0.102 writes every session to `$HOME/.copilot/session-state/<id>/events.jsonl`.
What the tests read there:
- `user.message` with `data.delivery`: `"idle"` when the line was submitted at an idle prompt,
  `"steering"` when it was submitted while a turn ran (the CLI then pushes a running shell
  command aside: see next);
- `tool.execution_complete` whose `data.result.content` starts `<command with shellId: N moved
  to background by the user. ... do NOT call any more tools for this command. ...>`: a shell
  command the CLI moved to the background because keys arrived while it ran (the screen then
  reads `Waiting for background shells`).
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.agents.clis import AgentTeam, omp_argv, poll

BACKGROUNDED = "moved to background by the user"
TRUST = ("Do you trust the files in this folder?", "Confirm folder trust")


@dataclass(frozen=True)
class Event:
    type: str
    at: float  # epoch seconds
    data: dict[str, Any]


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def sessions(home: Path) -> list[list[Event]]:
    """Every Copilot session under `home` (leader and workers share it), each in order."""
    out = []
    for path in sorted((home / ".copilot" / "session-state").glob("*/events.jsonl")):
        events: list[Event] = []
        for line in path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            data = e.get("data") if isinstance(e.get("data"), dict) else {}
            events.append(Event(str(e.get("type")), _epoch(str(e.get("timestamp"))), data))
        out.append(events)
    return out


def session_events(home: Path, first_words: str) -> list[Event]:
    """The events of the session whose first user message contains `first_words`."""
    for events in sessions(home):
        first = next((e for e in events if e.type == "user.message"), None)
        if first is not None and first_words in str(first.data.get("content", "")):
            return events
    return []


def user_messages(events: list[Event]) -> list[Event]:
    return [e for e in events if e.type == "user.message"]


def backgrounded(events: list[Event]) -> list[str]:
    """The commands Copilot moved to the background (from the tool results it recorded)."""
    started = {
        str(e.data.get("toolCallId")): str((e.data.get("arguments") or {}).get("command", ""))
        for e in events
        if e.type == "tool.execution_start"
    }
    out = []
    for e in events:
        if e.type != "tool.execution_complete":
            continue
        content = str((e.data.get("result") or {}).get("content", ""))
        if BACKGROUNDED in content:
            out.append(started.get(str(e.data.get("toolCallId")), content))
    return out


def busy_periods(events: list[Event]) -> list[tuple[float, float]]:
    """When the CLI was inside a turn: each user message submitted at an idle prompt opens one,
    the last `assistant.turn_end` before the next idle user message closes it."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    end: float | None = None
    for e in events:
        if e.type == "user.message" and e.data.get("delivery") == "idle":
            if start is not None:
                out.append((start, end if end is not None else e.at))
            start, end = e.at, None
        elif e.type == "assistant.turn_end" and start is not None:
            end = e.at
    if start is not None:
        out.append((start, end if end is not None else time.time()))
    return out


class CopilotLeader:
    """Copilot CLI in the leader's pane (`%0` of the private server of `team`)."""

    def __init__(self, team: AgentTeam, width: int = 200, height: int = 50) -> None:
        self.team = team
        venv_bin = Path(omp_argv()[0]).parent
        cmd = ["copilot", "--allow-all-tools", "--add-dir", str(venv_bin)]
        self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "lead", "-x", str(width),
            "-y", str(height), "-c", str(team.root), *cmd,
        )  # fmt: skip
        self.pane = self._tmux("display-message", "-p", "-t", "lead", "#{pane_id}").strip()
        self.typed: list[tuple[float, str]] = []

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.team.socket, *args],
            capture_output=True,
            text=True,
            env=self.team.env,
            timeout=30,
        )
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def capture(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.pane)

    def wait_ready(self, timeout: float = 90) -> None:
        """Past the trust dialog and the skill loading, at an empty input box."""

        answered = [0.0]

        def ready() -> bool:
            screen = self.capture()
            if any(t in screen for t in TRUST):
                if time.monotonic() - answered[0] > 2.0:  # once, unless it stays up
                    self._tmux("send-keys", "-t", self.pane, "1")
                    answered[0] = time.monotonic()
                return False
            return "Loading" not in screen and "/ commands · ? help" in screen

        poll(ready, f"Copilot ready in the leader's pane\n{self.capture()}", timeout)

    def type(self, text: str) -> None:
        """Type a request and submit it (Copilot >= 1.0.61 submits on Enter, not C-m)."""
        self._tmux("send-keys", "-t", self.pane, "-l", text)
        poll(lambda: text[-20:] in self.capture(), "the request echoed", 10)
        self._tmux("send-keys", "-t", self.pane, "Enter")
        self.typed.append((time.time(), text))

    def events(self) -> list[Event]:
        """The leader's session (its first message is the first request typed)."""
        return session_events(self.team.home, self.typed[0][1][:40]) if self.typed else []

    def idle(self) -> bool:
        """No turn runs: the footer under the box names the commands (it is cut short once the
        workers split the window), not `esc esc interrupt`."""
        bottom = self.capture().rstrip().splitlines()[-3:]
        return any("/ commands" in ln for ln in bottom) and not any(
            "interrupt" in ln for ln in bottom
        )
