"""The stop-hook loop with the real Codex CLI 0.171 (`codex exec`) and Gemini CLI 0.61 (`-p`) as
the leader, offline on the scripted model (issue 11, section 4: "the same for them").

`omp hooks install --agent codex|gemini` writes `.codex/hooks.json` / `.gemini/settings.json`;
Codex runs a project hook only in a trusted project (the harness's config.toml trusts it) with
the hook itself trusted (`--dangerously-bypass-hook-trust`), Gemini only in a trusted folder
(`GEMINI_CLI_TRUST_WORKSPACE=true`). The model is the Copilot test's `LoopPolicy`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.clis import AgentTeam
from tests.agents.scripted_model import ScriptedModel
from tests.agents.test_copilot_loop import KICKOFF, LoopPolicy, hook_log, state

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow]

Factory = Callable[..., AgentTeam]


@pytest.fixture(params=["codex", "gemini"])
def leader_team(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_team")
    return factory


def run_leader(team: AgentTeam) -> subprocess.CompletedProcess[str]:
    if team.agent == "codex":
        argv = [
            "codex", "exec", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust",
            KICKOFF,
        ]  # fmt: skip
    else:
        argv = ["gemini", "-p", KICKOFF, "--yolo"]
    env = {**team.env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return subprocess.run(argv, cwd=team.root, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize(("word_at", "steps", "end"), [(2, 2, "complete"), (None, 3, "cap")])
def test_the_loop_ends_on_the_word_or_at_the_cap(
    leader_team: Factory,
    scripted_model: ScriptedModel,
    word_at: int | None,
    steps: int,
    end: str,
) -> None:
    team = leader_team()
    installed = team.omp("hooks", "install", "--agent", team.agent, "--json")
    assert installed["hooks"][0]["action"] == "created", installed
    policy = LoopPolicy(team.root, word_at=word_at)
    scripted_model.policy = policy
    proc = run_leader(team)
    why: Any = (proc.returncode, proc.stderr[-3000:], scripted_model.dump())
    assert proc.returncode == 0, why
    s = state(team)
    assert s["active"] is False and s.get("endReason") == end, (s, why)
    assert s["iteration"] == steps
    assert policy.seen_steps == [(n, 3) for n in range(1, steps + 1)], why
    log = hook_log(team)
    assert [x["why"] for x in log] == ["continue"] * steps + [end]
    assert {x["cli"] for x in log} == {team.agent}
