"""A real Copilot CLI leading a team: `omp team usage` gives the leader's row the sum the
scripted model reported to the leader (issue 22: "for each worker and the leader").

The leader runs in its own tmux pane with omp's hook installed in the project (`omp hooks
install --agent copilot`), follows the `team` skill (launch two demo workers, wait, collect,
shut down, answer). Its stop hook, fired in the team's recorded leader pane, records
`workers/leader/session.json`; the leader pane's process leads to the same record.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from omp.usage.locate import from_process
from omp.usage.process import tree
from omp.usage.totals import Tokens
from tests.agents.clis import FAST_MONITOR, AgentTeam, poll
from tests.agents.copilot_session import CopilotLeader
from tests.agents.leader_policy import LeaderPolicy, Router
from tests.agents.scripted_model import ScriptedModel
from tests.agents.test_copilot_leader import (
    REQUEST,
    TEAM,
    answers,
    await_answer,
    leader_requests,
)

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
PER_CALL = Tokens(1, 10, 10, 0, 0)  # the scripted model reports 10 prompt, 10 completion tokens
CLAUDE_CALL = Tokens(
    1, 10, 10, 0, 0
)  # Anthropic's wire: 10 input at the start, 10 output at the end


def served_to_leader(model: ScriptedModel, per_call: Tokens = PER_CALL) -> Tokens:
    """What the model reported to the leader's conversation (its side requests apart)."""
    total = Tokens()
    for ex in leader_requests(model):
        if ex.reply is not None:
            total = total.plus(per_call)
    return total


def tokens(row: dict[str, Any]) -> Tokens:
    return Tokens(row.get("calls", -1), row.get("input", -1), row.get("output", -1),
                  row.get("cacheRead", -1), row.get("cacheWrite", -1))  # fmt: skip


def pane_pid(team: AgentTeam, pane: str) -> int:
    out = subprocess.run(
        ["tmux", "-L", team.socket, "display-message", "-p", "-t", pane, "#{pane_pid}"],
        capture_output=True, text=True, env=team.env, check=True,
    ).stdout  # fmt: skip
    return int(out.strip())


def test_omp_team_usage_gives_the_copilot_leader_what_the_model_reported_to_it(
    copilot_team: Factory, scripted_model: ScriptedModel
) -> None:
    scripted_model.policy = Router(LeaderPolicy(team=TEAM, agent="demo"))
    team = copilot_team(monitor=FAST_MONITOR | {"OMP_DEMO_WORK_SECONDS": "3"})
    team.name = TEAM
    assert team.omp("skills", "install", "--json")["ok"] is True
    assert team.omp("hooks", "install", "--agent", "copilot", "--json")["ok"] is True
    lead = CopilotLeader(team)
    lead.wait_ready()
    lead.type(REQUEST)
    text = await_answer(lead, scripted_model, f"Team {TEAM}:", 150)
    assert "2/2 done" in text and "shut down" in text, text
    state = team.root / ".omp" / "state" / "team" / TEAM
    cfg = json.loads((state / "config.json").read_text())
    assert cfg["leaderPaneId"] == lead.pane and cfg["leaderAgent"] == "copilot", cfg

    want = served_to_leader(scripted_model)
    assert want.calls >= 5, scripted_model.dump()  # launch, wait, ..., collect, shutdown, answer

    def agrees() -> dict[str, Any] | None:
        got: dict[str, Any] = team.omp("team", "usage", TEAM, "--json")
        row = next(m for m in got["members"] if m["name"] == "leader")
        return got if tokens(row) == want else None

    try:  # the last reply's line may land a moment after the screen went idle
        got = poll(agrees, "the leader's usage == what the model served it", 30)
    except AssertionError:
        seen = team.omp("team", "usage", TEAM, "--json")
        raise AssertionError(f"{seen}\nserved: {want}\n{scripted_model.dump()}") from None
    row = next(m for m in got["members"] if m["name"] == "leader")
    # its own stop hook, fired in the recorded leader pane, recorded the session
    session = json.loads((state / "workers" / "leader" / "session.json").read_text())
    assert session["agent"] == "copilot" and session["transcriptPath"], session
    assert row["how"].startswith("the stop hook's record"), row
    assert row["records"] == [session["transcriptPath"]], (row, session)
    assert row["models"].keys() == {"scripted-model"}, row
    # the leader pane's process leads to the same record
    found = from_process("copilot", tree(pane_pid(team, lead.pane)))
    assert [str(found.path)] == row["records"], found
    # counted in the totals (the demo workers' CLI has no record: not counted), never a budget
    assert got["totals"]["counted"] == ["leader"], got["totals"]
    assert tokens(got["totals"]) == want
    # the workers' panes never wrote the leader's record, nor one of their own (demo workers)
    assert not (state / "workers" / "worker-1" / "session.json").exists()


def test_omp_team_usage_gives_the_claude_leader_what_the_model_reported_to_it(
    claude_team: Factory, scripted_model: ScriptedModel
) -> None:
    """Claude Code leading, its hook from the project's `.claude/settings.json`; the pane's
    process finds the record by the cwd (it shares the project root with nobody here)."""
    from tests.agents.test_claude_leader import ClaudeLeader

    skill = ".claude/skills/team/SKILL.md"
    scripted_model.policy = Router(LeaderPolicy(team=TEAM, skill_path=skill))
    team = claude_team(monitor=FAST_MONITOR | {"OMP_DEMO_WORK_SECONDS": "3"})
    team.name = TEAM
    assert team.omp("skills", "install", "--target", ".claude/skills", "--json")["ok"] is True
    assert team.omp("hooks", "install", "--agent", "claude", "--json")["ok"] is True
    lead = ClaudeLeader(team)
    lead.type(REQUEST)

    def answered() -> str:
        return next((a for a in answers(scripted_model) if a.startswith(f"Team {TEAM}:")), "")

    try:
        text = poll(answered, "the leader's answer", 180)
        poll(lead.idle, "the leader idle after answering", 60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{scripted_model.dump()}\n{lead.capture()}") from None
    assert "2/2 done" in text and "shut down" in text, text
    state = team.root / ".omp" / "state" / "team" / TEAM
    want = served_to_leader(scripted_model, CLAUDE_CALL)

    def agrees() -> dict[str, Any] | None:
        got: dict[str, Any] = team.omp("team", "usage", TEAM, "--json")
        row = next(m for m in got["members"] if m["name"] == "leader")
        return got if tokens(row) == want else None

    try:
        got = poll(agrees, "the leader's usage == what the model served it", 30)
    except AssertionError:
        seen = team.omp("team", "usage", TEAM, "--json")
        side = len(scripted_model.side)
        raise AssertionError(
            f"{seen}\nserved: {want}, side: {side}\n{scripted_model.dump()}"
        ) from None
    row = next(m for m in got["members"] if m["name"] == "leader")
    session = json.loads((state / "workers" / "leader" / "session.json").read_text())
    assert session["agent"] == "claude" and session["transcriptPath"], session
    assert row["how"].startswith("the stop hook's record"), row
    assert row["records"][0] == session["transcriptPath"], (row, session)
    found = from_process("claude", tree(pane_pid(team, lead.pane)))
    assert str(found.path) == row["records"][0], found
