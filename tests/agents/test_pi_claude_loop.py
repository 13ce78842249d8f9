"""The stop-hook loop end to end with a real leader in a tmux pane, offline on the scripted
model: pi 0.73.1 through omp's pi extension, and Claude Code 2.1.328 through its Stop hook.

pi has no stop hook; `omp hooks install --agent pi` writes `.pi/extensions/omp-stop.ts`, which
runs `omp hook stop` at each `agent_end` and sends a block's reason as the next user message.
Claude Code runs `omp hook stop` from `.claude/settings.json` (`omp hooks install --agent
claude`). The leader's model is the Copilot test's `LoopPolicy`: it starts a ralph loop capped at
3 steps; the word RALPH_COMPLETE on its own line at step 2 ends it, never saying it hits the cap,
and running `omp ralph cancel` lets the next stop through. Each test checks at the end that no
process of its team is left.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from omp import modes
from omp.agents import BUILTIN_PROFILES, classify_screen
from omp.store.paths import StatePaths
from tests.agents.clis import AgentTeam, poll
from tests.agents.scripted_model import ScriptedModel
from tests.agents.test_copilot_loop import KICKOFF, LoopPolicy, hook_log, state

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]


class Leader:
    """The agent CLI in a pane of the team's private tmux server, in the team's project."""

    def __init__(self, team: AgentTeam) -> None:
        self.team = team
        self.profile = BUILTIN_PROFILES[team.agent]
        self.target = "lead:0.0"

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.team.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=self.team.env,
            check=True,
            timeout=30,
        ).stdout

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.target).splitlines()

    def start(self) -> None:
        self.tmux(
            "new-session", "-d", "-s", "lead", "-x", "160", "-y", "45", "-c", str(self.team.root),
            *self.profile.command,
        )  # fmt: skip
        poll(lambda: classify_screen(self.profile, self.screen()) == "ready", "leader ready")

    def say(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)
        poll(lambda: text[:30] in "\n".join(self.screen()), "prompt typed", timeout=30)
        self.tmux("send-keys", "-t", self.target, "Enter")


@pytest.fixture(params=["pi", "claude"])
def leader_team(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_team")
    return factory


def run_loop(team: AgentTeam, policy: LoopPolicy, answers: int) -> Leader:
    """Install the hook, start the leader, kick it off, and wait for `answers` hook log lines
    and the leader idle again."""
    installed = team.omp("hooks", "install", "--agent", team.agent, "--json")
    assert installed["hooks"][0]["action"] == "created", installed
    if team.agent == "claude":  # the leader's own directory: trusted, as a person would have
        config = team.home / ".claude-config" / ".claude.json"
        doc = json.loads(config.read_text())
        doc["projects"] = {str(team.root): {"hasTrustDialogAccepted": True}}
        config.write_text(json.dumps(doc))
        (config.parent / "settings.json").write_text('{"skipDangerousModePermissionPrompt": true}')
    team.model.policy = policy
    leader = Leader(team)
    leader.start()
    leader.say(KICKOFF)
    try:
        poll(lambda: len(hook_log(team)) >= answers, f"{answers} hook answers", 120)
        poll(
            lambda: classify_screen(leader.profile, leader.screen()) == "ready",
            "the leader idle",
            60,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{team.model.dump()}\n" + "\n".join(leader.screen())) from None
    return leader


def test_the_loop_ends_when_the_model_prints_the_word_on_its_second_continuation(
    leader_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = leader_team()
    policy = LoopPolicy(team.root, word_at=2)
    run_loop(team, policy, answers=3)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "complete", s
    assert s["iteration"] == 2 and s["maxIterations"] == 3
    assert policy.seen_steps == [(1, 3), (2, 3)]
    assert policy.loop_active_at_step == [True, True]
    assert not modes.is_loop_active(StatePaths(team.root))
    log = hook_log(team)
    assert [x["why"] for x in log] == ["continue", "continue", "complete"]
    assert {x["cli"] for x in log} == {team.agent}


def test_a_model_that_never_prints_the_word_stops_at_the_cap(
    leader_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = leader_team()
    policy = LoopPolicy(team.root, word_at=None)
    run_loop(team, policy, answers=4)
    s = state(team)
    assert s["active"] is False and s["endReason"] == "cap", s
    assert s["iteration"] == 3
    assert policy.seen_steps == [(1, 3), (2, 3), (3, 3)]
    assert [x["why"] for x in hook_log(team)] == ["continue"] * 3 + ["cap"]


def test_a_cancel_mid_loop_lets_the_next_stop_through(
    leader_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = leader_team()
    policy = LoopPolicy(team.root, cancel_at=1)
    run_loop(team, policy, answers=1)
    # the model cancels at step 1, then answers the command's output in words and stops
    poll(
        lambda: any(
            x.reply and x.reply.text.startswith("Done with that command")
            for x in list(scripted_model.requests)[-3:]
        ),
        "the answer after the cancel",
    )
    s = state(team)
    assert s["active"] is False and "cancelledAt" in s and "endReason" not in s, s
    assert s["iteration"] == 1 and policy.seen_steps == [(1, 3)]
    assert [x["why"] for x in hook_log(team)] == ["continue"]  # the last stop found no loop
    steps: Any = [x for x in scripted_model.requests if "[omp ralph step" in str(x.chat.body)]
    assert steps  # the block's reason reached the model as the next user message
