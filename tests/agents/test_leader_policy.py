"""The leader policy on its own: the conversation a Copilot CLI would send, built by hand from the
real skill text and real-looking command outputs; no CLI, no tmux. The live runs are in
test_copilot_leader.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agents.leader_policy import LeaderPolicy, Skill
from tests.agents.scripted_model import Chat, Reply, ToolCall
from tests.agents.worker_policy import PolicyError
from tests.helpers import REPO

OMP = "/opt/omp/bin/omp"
SKILL = (REPO / "skills" / "team" / "SKILL.md").read_text().replace("\nomp ", f"\n{OMP} ")
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {
                "properties": {"command": {}, "description": {}},
                "required": ["command", "description"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "skill", "parameters": {"properties": {"skill": {}}}},
    },
]
READ = f"""{OMP} team api mailbox-read --input '{{"team_name":"lt","worker":"leader"}}' --json"""


class Convo:
    """A conversation grown the way Copilot grows it: tool calls, their outputs, user lines."""

    def __init__(self, policy: LeaderPolicy, request: str) -> None:
        self.policy = policy
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": request}]
        self.n = 0

    def next(self) -> Reply:
        return self.policy.reply(Chat({"messages": self.messages, "tools": TOOLS}, 0.0))

    def ran(self, reply: Reply, output: str) -> None:
        assert reply.tool_call is not None, reply
        self.n += 1
        call = {
            "id": f"c{self.n}",
            "type": "function",
            "function": {
                "name": reply.tool_call.name,
                "arguments": json.dumps(reply.tool_call.arguments),
            },
        }
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        self.messages.append({"role": "tool", "tool_call_id": f"c{self.n}", "content": output})

    def said(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})


def command(reply: Reply) -> str:
    assert reply.tool_call is not None and reply.tool_call.name == "bash", reply
    return str(reply.tool_call.arguments["command"])


def mail(*ids: str) -> str:
    msgs = [{"id": i, "from": "worker-1", "body": "hi"} for i in ids]
    return json.dumps({"ok": True, "messages": msgs})


def test_the_skill_is_parsed_from_its_text() -> None:
    skill = Skill.parse(SKILL)
    assert skill.omp == OMP and skill.wait_timeout == 25
    assert skill.command("shutdown", "lt") == f"{OMP} team shutdown lt"
    with pytest.raises(PolicyError, match="--nudge-leader"):
        Skill.parse(SKILL.replace("--nudge-leader", "--nudge"))


def test_a_team_is_run_from_the_skill_to_the_answer() -> None:
    c = Convo(LeaderPolicy(team="lt"), "Use the team skill: run two demo workers.")
    first = c.next()
    assert first.tool_call is not None and first.tool_call.arguments == {"skill": "team"}
    c.ran(first, "Skill loaded.")
    c.said(f"<skill-context>\n{SKILL}\n</skill-context>")  # how Copilot hands over the text
    launch = command(c.next())
    assert launch == f"{OMP} team launch 2 'write a haiku' --name lt --agent demo --nudge-leader"
    c.ran(c.next(), "team lt launched: worker-1(%1), worker-2(%2)")
    assert command(c.next()) == f"{OMP} team wait lt --timeout 25"
    c.ran(
        c.next(),
        f"2 unread message(s) for the leader from worker-1 (2)\n  read them: {READ}\n"
        f"  wait again: {OMP} team wait lt --since 1=i,2=i",
    )
    assert command(c.next()) == READ
    c.ran(c.next(), mail("m1", "m2"))
    again = command(c.next())
    assert again == f"{OMP} team wait lt --since 1=i,2=i"
    # the CLI pushed this wait aside: the policy waits afresh, with the skill's own line
    c.ran(c.next(), "<command with shellId: 3 moved to background by the user. ...>")
    assert command(c.next()) == f"{OMP} team wait lt --timeout 25"
    c.ran(c.next(), f"all 2 task(s) done; results: {OMP} team collect lt")
    assert command(c.next()) == f"{OMP} team collect lt"
    c.ran(c.next(), "# team lt: 2/2 done — all finished")
    assert command(c.next()) == f"{OMP} team shutdown lt"
    c.ran(c.next(), "team lt shut down")
    final = c.next()
    assert (
        final.tool_call is None and final.text.startswith("Team lt: ") and "shut down" in final.text
    )
    # a nudge after the answer: read with the line's own command, then say so
    c.said(f"You have 1 new message(s). Read them: {READ}")
    assert command(c.next()) == READ
    c.ran(c.next(), mail())
    assert c.next().text == "Read 0 message(s)."


def test_a_replayed_conversation_that_went_elsewhere_is_an_error() -> None:
    c = Convo(LeaderPolicy(team="lt"), "Use the team skill.")
    c.ran(c.next(), "Skill loaded.")
    c.said(f"<skill-context>\n{SKILL}\n</skill-context>")
    c.ran(Reply(tool_call=ToolCall("bash", {"command": "ls"})), "x")
    with pytest.raises(PolicyError, match="expected"):
        c.next()
