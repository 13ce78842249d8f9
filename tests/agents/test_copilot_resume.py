"""A real GitHub Copilot CLI worker, resumed into its own conversation after its tmux server died.

omp hands the worker's Copilot its stop hook through `--plugin-dir` (a plugin of omp's own under
`.omp/state/hooks/workers/`), so the hook reaches the pane whatever directory it runs in; the
hook records the session (`workers/<w>/session.json`); `omp team resume` starts Copilot with
`--resume=<id>`. Proof that it worked is what the scripted model receives next: the earlier
conversation, then the resume trigger.
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


def session_file(team: AgentTeam) -> Any:
    path = team.root / ".omp" / "state" / "team" / team.name / "workers" / "worker-1"
    try:
        return json.loads((path / "session.json").read_text())
    except (OSError, ValueError):
        return None


def user_lines(messages: list[dict[str, Any]]) -> list[str]:
    return [message_text(m) for m in messages if m.get("role") == "user"]


def test_a_copilot_worker_comes_back_into_its_own_conversation(
    copilot_team: Callable[..., AgentTeam],
) -> None:
    team = copilot_team()
    team.launch(1, "write a haiku")
    try:
        poll(lambda: team.status()["allDone"], "the task done", timeout=180)
        rec = poll(lambda: session_file(team), "session.json from the hook", timeout=60)
        poll(lambda: (session_file(team) or {}).get("transcriptPath"), "a stop recorded", 60)
    except AssertionError:
        print(team.debug())
        raise
    assert rec["agent"] == "copilot" and rec["cwd"] == str(team.root)
    sid = rec["sessionId"]
    cfg = json.loads((team.root / ".omp/state/team/t1/config.json").read_text())
    command = cfg["workers"][0]["command"]
    assert "--plugin-dir" in command  # how omp's hook reached the pane
    before = len(team.model.requests)
    first = user_lines(list(team.model.requests)[-1].chat.messages)
    assert any("inbox.md and follow it." in t for t in first)
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
    tool_calls = [c for m in msgs for c in m.get("tool_calls") or []]
    assert any("claim-task" in json.dumps(c) for c in tool_calls)  # done before the crash
    assert (
        json.loads((team.root / ".omp/state/team/t1/config.json").read_text())["workers"][0][
            "command"
        ]
        == command
    )  # the resume option is not recorded: the next resume adds its own
