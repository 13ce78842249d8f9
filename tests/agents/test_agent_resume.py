"""Real agent CLI workers resumed into their own conversation after their tmux server died:
GitHub Copilot CLI 1.0.102, Claude Code 2.1.328, pi 0.73.1, Codex 0.171 and Gemini CLI 0.61, on
the scripted model.

omp hands Copilot, Claude Code and pi workers its stop hook by an option of the CLI
(`omp.stophook.workers`: Copilot `--plugin-dir`, Claude Code `--settings`, pi `--extension`), so
the hook reaches the pane whatever directory it runs in; the hook records the session
(`workers/<w>/session.json`). Codex and Gemini workers get no hook: their session is the one
their record names, the record the monitor's usage index found from the pane while it ran.
`omp team resume` starts the CLI with its profile's `resume_args`. Proof that it worked is what
the scripted model receives next: the earlier conversation, then the resume trigger.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.clis import FAST_MONITOR, AgentTeam, poll
from tests.agents.scripted_model import message_text

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

HOOK_OPTION = {"copilot": "--plugin-dir", "claude": "--settings", "pi": "--extension"}


@pytest.fixture(params=["copilot", "claude", "pi", "codex", "gemini"])
def agent_team(request: pytest.FixtureRequest) -> Callable[..., AgentTeam]:
    factory: Callable[..., AgentTeam] = request.getfixturevalue(f"{request.param}_team")
    return factory


def session_file(team: AgentTeam) -> Any:
    path = team.root / ".omp" / "state" / "team" / team.name / "workers" / "worker-1"
    try:
        return json.loads((path / "session.json").read_text())
    except (OSError, ValueError):
        return None


def indexed_session(team: AgentTeam) -> str | None:
    """The session of worker-1's record in the monitor's usage index, once it found one."""
    from omp.record import config as team_config
    from omp.store.paths import StatePaths
    from omp.team.resume import _from_record

    cfg = team_config.load(StatePaths(team.root).team(team.name))
    return _from_record(cfg, "worker-1", (team.agent,))


def user_lines(messages: list[dict[str, Any]]) -> list[str]:
    return [message_text(m) for m in messages if m.get("role") == "user"]


def test_a_worker_comes_back_into_its_own_conversation(
    agent_team: Callable[..., AgentTeam],
) -> None:
    team = agent_team(monitor=FAST_MONITOR)  # the monitor's usage index finds the records
    team.launch(1, "write a haiku")
    try:
        poll(lambda: team.status()["allDone"], "the task done", timeout=180)
        if team.agent in HOOK_OPTION:
            rec = poll(lambda: session_file(team), "session.json from the hook", timeout=60)
            assert rec["agent"] == team.agent
            sid, source = rec["sessionId"], "hook"
        else:
            sid = poll(lambda: indexed_session(team), "the record in the index", timeout=60)
            source = "record"
    except AssertionError:
        print(team.debug())
        raise
    config = team.root / ".omp" / "state" / "team" / team.name / "config.json"
    command = json.loads(config.read_text())["workers"][0]["command"]
    if team.agent in HOOK_OPTION:
        assert HOOK_OPTION[team.agent] in command  # how omp's hook reached the pane
    else:
        assert session_file(team) is None  # no hook: the session came from the record
    before = len(team.model.requests)
    subprocess.run(["tmux", "-L", team.socket, "kill-server"], env=team.env, check=False)
    r = team.omp("team", "resume", team.name, "--json")
    assert r["ok"] is True, r
    (w,) = r["resumed"]
    assert w["conversation"] == "resumed" and w["sessionId"] == sid, r
    assert w["sessionFrom"] == source, r

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
