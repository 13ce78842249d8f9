"""The readers of Copilot's session transcript, on a recorded one (Copilot CLI 1.0.102 on the
scripted model): a `sleep 12` shell call running when a nudge line was typed and submitted. The
CLI took the line as steering and moved the command to the background."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.agents.copilot_session import (
    backgrounded,
    busy_periods,
    session_events,
    sessions,
    user_messages,
)
from tests.helpers import REPO

RECORDED = REPO / "tests" / "fixtures" / "copilot-sessions" / "backgrounded.jsonl"


def _home(tmp_path: Path) -> Path:
    state = tmp_path / ".copilot" / "session-state" / "adf03bdf"
    state.mkdir(parents=True)
    shutil.copy(RECORDED, state / "events.jsonl")
    return tmp_path


def test_a_backgrounded_command_and_a_steering_line_are_found(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert len(sessions(home)) == 1
    events = session_events(home, "run the sleep")
    assert backgrounded(events) == ["sleep 12; echo slept"]
    users = [(e.data["delivery"], e.data["content"]) for e in user_messages(events)]
    assert users == [
        ("idle", "run the sleep"),
        ("steering", "You have 1 new message(s). Read them: echo hi"),
    ]
    # one busy period: from the idle request to the last turn's end, the steering line inside
    ((start, end),) = busy_periods(events)
    steering = user_messages(events)[1].at
    assert start < steering < end


def test_an_undisturbed_session_has_none(tmp_path: Path) -> None:
    home = _home(tmp_path)
    assert session_events(home, "some other first message") == []
    events = [
        e for e in session_events(home, "run the sleep") if e.type != "tool.execution_complete"
    ]
    assert backgrounded(events) == []
