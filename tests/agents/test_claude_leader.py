"""Claude Code 2.1.328 as the leader agent: it runs a team from its own tmux pane, following the
installed `team` skill (`.claude/skills/team/SKILL.md`), as a user asks.

The leader's model is the scripted server playing `LeaderPolicy` (Claude Code offers a `Skill`
tool of its own shape, so the policy reads the skill with `cat`): launch two workers with
`--nudge-leader`, `wait --timeout 25` and its `read them` / `wait again` lines, collect, shut
down, answer. omp runs from Claude Code's Bash tool inside the leader's pane, so it detects the
leader's agent and splits the leader's window for the workers. From the server's request log:
every nudge typed into the leader arrived between its turns. The test ends by checking that no
process of the team is left.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable

import pytest

from omp.agents import BUILTIN_PROFILES, classify_screen
from tests.agents.clis import FAST_MONITOR, AgentTeam, poll
from tests.agents.leader_policy import LeaderPolicy, Router
from tests.agents.scripted_model import ScriptedModel, message_text
from tests.agents.test_copilot_leader import (
    REQUEST,
    TEAM,
    answers,
    inside,
    leader_commands,
    leader_requests,
    mail_reads,
    model_turns,
    team_config,
)
from tests.agents.worker_policy import NUDGE
from tests.helpers import nudge_went_out

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
CLAUDE = BUILTIN_PROFILES["claude"]


class ClaudeLeader:
    """Claude Code in the leader's pane (`%0` of the team's private server), in its project,
    trusted there as a person who ran it before would have it."""

    def __init__(self, team: AgentTeam) -> None:
        self.team = team
        config = team.home / ".claude-config"
        doc = json.loads((config / ".claude.json").read_text())
        doc["projects"] = {str(team.root): {"hasTrustDialogAccepted": True}}
        (config / ".claude.json").write_text(json.dumps(doc))
        (config / "settings.json").write_text('{"skipDangerousModePermissionPrompt": true}')
        self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "lead", "-x", "200", "-y", "50",
            "-c", str(team.root), *CLAUDE.command,
        )  # fmt: skip
        self.pane = self._tmux("display-message", "-p", "-t", "lead", "#{pane_id}").strip()

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

    def capture(self) -> list[str]:
        return self._tmux("capture-pane", "-p", "-J", "-t", self.pane).splitlines()

    def idle(self) -> bool:
        return classify_screen(CLAUDE, self.capture()) == "ready"

    def type(self, text: str) -> None:
        poll(self.idle, "the leader ready", 90)
        self._tmux("send-keys", "-t", self.pane, "-l", text)
        poll(lambda: text[-20:] in "".join(self.capture()), "the request typed", 30)
        time.sleep(0.2)  # text and Enter never in one burst
        self._tmux("send-keys", "-t", self.pane, "Enter")


def nudge_arrivals(model: ScriptedModel) -> list[float]:
    """When each nudge typed into the leader first reached the model (its turn's start)."""
    seen: set[str] = set()
    out = []
    for ex in leader_requests(model):
        users = [m for m in ex.chat.messages if m.get("role") == "user"]
        last = message_text(users[-1]) if users else ""
        m = NUDGE.search(last)
        if m and last not in seen and ex.chat.messages[-1] is users[-1]:
            seen.add(last)
            out.append(ex.chat.received)
    return out


def test_claude_leader_runs_a_team_to_the_end(
    claude_team: Factory, scripted_model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = ".claude/skills/team/SKILL.md"
    scripted_model.policy = Router(LeaderPolicy(team=TEAM, skill_path=skill))
    team = claude_team(monitor=FAST_MONITOR | {"OMP_DEMO_WORK_SECONDS": "5"})
    team.name = TEAM
    installed = team.omp("skills", "install", "--target", ".claude/skills", "--json")
    assert installed["ok"] is True, installed
    lead = ClaudeLeader(team)
    t0 = time.time()
    lead.type(REQUEST)
    # a worker writes while the leader's `wait` runs: stored, the nudge left to the monitor
    poll(lambda: any(" team wait lt " in c for c in leader_commands(scripted_model)), "a wait")
    team.launch_result = {"workers": team_config(team)["workers"]}
    sent = team.api("send-message", {"from": "worker-1", "to": "leader", "body": "mid-run note"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent

    def answered() -> str:
        return next((a for a in answers(scripted_model) if a.startswith(f"Team {TEAM}:")), "")

    try:
        text = poll(answered, "the leader's answer", 180)
        poll(lead.idle, "the leader idle after answering", 60)
    except AssertionError as exc:
        screen = "\n".join(lead.capture())
        raise AssertionError(f"{exc}\n{scripted_model.dump()}\n{screen}") from None
    wall = time.time() - t0
    assert "2/2 done" in text and "shut down" in text, text
    cfg = team_config(team)
    launch = next(c for c in leader_commands(scripted_model) if " team launch " in c)
    assert "--nudge-leader" in launch and "--leader-agent" not in launch, launch
    # the leader's agent was found from its pane; the workers split the leader's window
    assert cfg["leaderAgent"] == "claude" and cfg["leaderPaneId"] == lead.pane, cfg
    assert (team.root / ".omp/state/team/lt/shutdown.json").exists()
    subs = [c.split()[2] for c in leader_commands(scripted_model) if c.split()[1:2] == ["team"]]
    assert subs[0] == "launch" and subs[-2:] == ["collect", "shutdown"] and "wait" in subs, subs
    read_ids = [m["id"] for _, msgs in mail_reads(scripted_model) for m in msgs]
    assert read_ids.count(sent["messageId"]) == 1, mail_reads(scripted_model)
    # nothing typed into a running turn: every nudge started a turn of its own
    turns = model_turns(scripted_model)
    arrivals = nudge_arrivals(scripted_model)
    assert all(not inside(t, turns) for t in arrivals), (arrivals, turns)
    with capsys.disabled():
        print(
            f"\n[claude leader] 2 demo workers, request->answer {wall:.1f}s; "
            f"{len(leader_requests(scripted_model))} leader requests; "
            f"{len(arrivals)} nudge(s) typed into the leader"
        )


def test_idle_claude_leader_is_nudged_once_and_reads_it(
    claude_team: Factory, scripted_model: ScriptedModel
) -> None:
    """Between its turns, with the team still up, the leader is nudged: `typed`, truthfully; a
    later request to shut down is followed."""
    skill = ".claude/skills/team/SKILL.md"
    policy = LeaderPolicy(team=TEAM, skill_path=skill, keep_team=True)
    scripted_model.policy = Router(policy)
    team = claude_team(monitor=FAST_MONITOR | {"OMP_DEMO_WORK_SECONDS": "5"})
    team.name = TEAM
    team.omp("skills", "install", "--target", ".claude/skills", "--json")
    lead = ClaudeLeader(team)
    lead.type(REQUEST.replace("shut the team down", "keep the team up"))

    def answer(prefix: str, after: int = 0) -> str:
        def found() -> str:
            return next((a for a in answers(scripted_model)[after:] if a.startswith(prefix)), "")

        try:
            text = poll(found, f"the answer {prefix!r}", 180)
            poll(lead.idle, "the leader idle", 60)
        except AssertionError as exc:
            screen = "\n".join(lead.capture())
            raise AssertionError(f"{exc}\n{scripted_model.dump()}\n{screen}") from None
        return text

    answer(f"Team {TEAM}:")
    team.launch_result = {"workers": team_config(team)["workers"]}
    settled = {"since": time.monotonic()}

    def steady() -> bool:  # idle with nothing unread for 3 s on end
        if not (team.status()["leaderUnread"] == 0 and lead.idle()):
            settled["since"] = time.monotonic()
        return time.monotonic() - settled["since"] >= 3.0

    poll(steady, "the leader idle with no unread mail", 60)
    before, said = len(nudge_arrivals(scripted_model)), len(answers(scripted_model))
    sent = team.api("send-message", {"from": "worker-2", "to": "leader", "body": "one more"})
    assert sent["ok"] is True and nudge_went_out(sent), sent  # the send's, or the monitor's
    answer("Read 1 message(s).", after=said)
    assert len(nudge_arrivals(scripted_model)) == before + 1
    assert mail_reads(scripted_model)[-1][1][0]["id"] == sent["messageId"]
    said = len(answers(scripted_model))
    lead.type("Thanks. Now shut the team down.")
    answer(f"Team {TEAM} is shut down.", after=said)
    assert (team.root / ".omp/state/team/lt/shutdown.json").exists()
    turns = model_turns(scripted_model)
    assert all(not inside(t, turns) for t in nudge_arrivals(scripted_model)), turns
