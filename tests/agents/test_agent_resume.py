"""Real agent CLI workers resumed into their own conversation after their tmux server died:
GitHub Copilot CLI 1.0.102, Claude Code 2.1.328 and pi 0.73.1, on the scripted model.

omp hands each worker's CLI its stop hook by an option of the CLI (`omp.stophook.workers`:
Copilot `--plugin-dir`, Claude Code `--settings`, pi `--extension`), so the hook reaches the
pane whatever directory it runs in; the hook records the session (`workers/<w>/session.json`);
`omp team resume` starts the CLI with its profile's `resume_args`. Proof that it worked is what
the scripted model receives next: the earlier conversation, then the resume trigger.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.clis import AgentTeam, poll
from tests.agents.scripted_model import message_text

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

HOOK_OPTION = {"copilot": "--plugin-dir", "claude": "--settings", "pi": "--extension"}


@pytest.fixture(params=["copilot", "claude", "pi"])
def agent_team(request: pytest.FixtureRequest) -> Callable[..., AgentTeam]:
    factory: Callable[..., AgentTeam] = request.getfixturevalue(f"{request.param}_team")
    return factory


def session_file(team: AgentTeam) -> Any:
    path = team.root / ".omp" / "state" / "team" / team.name / "workers" / "worker-1"
    try:
        return json.loads((path / "session.json").read_text())
    except (OSError, ValueError):
        return None


def user_lines(messages: list[dict[str, Any]]) -> list[str]:
    return [message_text(m) for m in messages if m.get("role") == "user"]


def test_a_worker_comes_back_into_its_own_conversation(
    agent_team: Callable[..., AgentTeam],
) -> None:
    team = agent_team()
    team.launch(1, "write a haiku")
    try:
        poll(lambda: team.status()["allDone"], "the task done", timeout=180)
        rec = poll(lambda: session_file(team), "session.json from the hook", timeout=60)
    except AssertionError:
        print(team.debug())
        raise
    assert rec["agent"] == team.agent
    sid = rec["sessionId"]
    config = team.root / ".omp" / "state" / "team" / team.name / "config.json"
    command = json.loads(config.read_text())["workers"][0]["command"]
    assert HOOK_OPTION[team.agent] in command  # how omp's hook reached the pane
    before = len(team.model.requests)
    subprocess.run(["tmux", "-L", team.socket, "kill-server"], env=team.env, check=False)
    r = team.omp("team", "resume", team.name, "--json")
    assert r["ok"] is True, r
    (w,) = r["resumed"]
    assert w["conversation"] == "resumed" and w["sessionId"] == sid, r

    def resumed_request() -> list[dict[str, Any]] | None:
        for ex in list(team.model.requests)[before:]:
            if any("resume.md and follow it." in t for t in user_lines(ex.chat.messages)):
                return ex.chat.messages
        return None

    try:
        msgs = poll(resumed_request, "the resumed worker's first request", timeout=120)
    except AssertionError:
        print(team.debug())
        raise
    texts = user_lines(msgs)
    # the earlier conversation comes first: the launch's trigger and the work done on it
    at_launch = next(i for i, t in enumerate(texts) if "inbox.md and follow it." in t)
    at_resume = next(i for i, t in enumerate(texts) if "resume.md and follow it." in t)
    assert at_launch < at_resume
    assert "claim-task" in json.dumps(msgs)  # done before the crash, remembered after it
    # the resume option is not recorded: the next resume adds its own
    assert json.loads(config.read_text())["workers"][0]["command"] == command
