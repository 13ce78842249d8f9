"""Real Claude Code 2.1.328 and pi 0.73.1 workers, launched by the real `omp team launch`, on the
scripted model, with the same worker policy as Copilot's.

Claude Code speaks the Anthropic Messages API to `ANTHROPIC_BASE_URL` (served on `/v1/messages`)
with a token (no API-key question); its config dir marks onboarding done and nothing else, so
launch answers the trust screen of the new project directory and the bypass-permissions warning
(Down, then Enter once "Yes" is selected). pi speaks chat completions to a provider in its
`models.json`. Each test ends by checking that no process of its team is left. They skip, saying
so under `-ra`, when the pinned CLI is not installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from omp.agents import BUILTIN_PROFILES, screen_state
from tests.agents.clis import FAST_MONITOR, AgentTeam, poll, user_texts
from tests.agents.scripted_model import ScriptedModel
from tests.agents.test_codex_gemini_teams import assert_nothing_typed_left
from tests.agents.test_copilot_team import (
    busy_since,
    launch_done,
    mail_from,
    omp_results,
    receipts,
)
from tests.agents.worker_policy import NUDGE, TRIGGER, WorkerPolicy
from tests.helpers import nudge_went_out

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]


@pytest.fixture(params=["claude", "pi"])
def agent_team(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_team")
    return factory


def test_two_workers_reach_all_done(
    agent_team: Factory, scripted_model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    team = agent_team()
    t0 = time.monotonic()
    st = launch_done(team, 2)
    with capsys.disabled():
        print(f"\n[{team.agent} team] 2 workers launch->allDone {time.monotonic() - t0:.1f}s")
    assert [t["status"] for t in st["tasks"]] == ["completed", "completed"]
    col = team.omp("team", "collect", team.name, "--json")
    assert col["allDone"] is True and col["doneCount"] == 2
    assert all("The scripted worker's result." in w["resultMarkdown"] for w in col["workers"])
    for w in ("worker-1", "worker-2"):
        assert f"{w}: started" in [m["body"] for m in mail_from(team, w)]
        assert_nothing_typed_left(team, w)
    ran = omp_results(scripted_model)
    ops = sorted(c.split(" team api ")[1].split()[0] for c, _ in ran)
    assert ops == sorted(["claim-task", "send-message", "transition-task-status"] * 2), ran
    assert all('"ok":true' in out for _, out in ran), ran
    if team.agent == "claude":
        # The project was new to Claude Code and nothing was seeded: launch answered the trust
        # screen and the bypass warning with "Yes" (Claude Code wrote down both answers).
        config = team.home / ".claude-config"
        doc = json.loads((config / ".claude.json").read_text())
        assert doc["projects"][str(team.root)]["hasTrustDialogAccepted"] is True
        settings = json.loads((config / "settings.json").read_text())
        assert settings["skipDangerousModePermissionPrompt"] is True


def test_leader_message_is_read_and_answered(
    agent_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = agent_team()
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "status?"})
    assert sent["ok"] is True and sent["nudge"] == "typed", sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}")
    answer = poll(
        lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "the answer"
    )
    assert answer[0]["to"] == "leader"
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) == 1 and nudges[0].startswith("You have 1 new message(s). Read them: ")
    assert_nothing_typed_left(team, "worker-1")


@pytest.mark.parametrize("busy_how", ["tool", "model"])
def test_message_sent_mid_turn_is_read_when_the_turn_ends(
    agent_team: Factory, scripted_model: ScriptedModel, busy_how: str
) -> None:
    """Busy running a long shell command, or waiting on a slow model, when the mail comes:
    nothing is typed into the busy pane; the monitor nudges once the turn has ended."""
    scripted_model.policy = WorkerPolicy(busy_seconds=6, busy_how=busy_how)
    team = agent_team(monitor=FAST_MONITOR)
    team.launch(1)
    poll(lambda: busy_since(scripted_model, busy_how), f"busy ({busy_how})")
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "mid-turn"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=120)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    poll(lambda: team.status()["allDone"], "allDone")
    # two typed user messages, each whole: the trigger, then one nudge after the task's turn
    texts = [t for t in user_texts(scripted_model) if TRIGGER.search(t) or NUDGE.search(t)]
    assert len(texts) == 2, user_texts(scripted_model)
    assert TRIGGER.search(texts[0]) and NUDGE.search(texts[1]), texts
    order = [c.split(" team api ")[1].split()[0] for c, _ in omp_results(scripted_model)]
    assert order.index("mailbox-read") > order.index("transition-task-status"), order
    assert_nothing_typed_left(team, "worker-1")


def test_unread_mail_is_renudged_by_the_monitor(
    agent_team: Factory, scripted_model: ScriptedModel
) -> None:
    scripted_model.policy = WorkerPolicy(ignore_nudges=1)  # the first nudge is left unread
    team = agent_team(monitor=FAST_MONITOR)
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "ping"})
    # the send's nudge, or the monitor's if it won the pane (the send then types none)
    assert sent["ok"] is True and nudge_went_out(sent), sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=60)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) >= 2, user_texts(scripted_model)  # the send's (ignored), the monitor's
    mon = team.omp("team", "status", team.name, "--json")["monitor"]
    assert mon["nudgesSent"] >= 1, mon
    assert_nothing_typed_left(team, "worker-1")


@pytest.mark.parametrize("screen", ["onboarding", "api-key-question"])
def test_a_claude_screen_only_a_person_answers_blocks_the_launch_with_the_fix(
    claude_team: Factory, screen: str
) -> None:
    """Offline, Claude Code's first-run setup exits (the pane dies); `ANTHROPIC_API_KEY` makes
    it ask whether to use the key. Neither is answered by omp: `launch_blocked`, with the fix."""
    team = claude_team()
    config = team.home / ".claude-config" / ".claude.json"
    if screen == "onboarding":
        config.write_text("{}")
        want = "hasCompletedOnboarding"
    else:
        team.env["ANTHROPIC_API_KEY"] = team.env.pop("ANTHROPIC_AUTH_TOKEN")
        want = "ANTHROPIC_AUTH_TOKEN"
    out = team.omp(
        "team", "launch", "1", "write a haiku", "--agent", "claude", "--name", team.name,
        "--json", check=False,
    )  # fmt: skip
    assert out.get("error") == "launch_blocked", out
    assert want in out["message"] and want in out["fix"], out
    assert not (team.root / ".omp" / "state" / "team" / team.name / "config.json").exists()


def test_nothing_is_typed_into_claudes_permission_prompt(
    claude_team: Factory, scripted_model: ScriptedModel
) -> None:
    """A Claude Code worker without `--dangerously-skip-permissions` stops at `Do you want to
    proceed? ❯ 1. Yes`, where Enter approves the command. A message for it is not typed: the
    send says why (`deferred`, its screen needs a person: permission prompt), the screen reads
    `needs_person`, and the command stays unapproved and unrun."""
    team = claude_team()
    (team.root / ".omp").mkdir()
    (team.root / ".omp" / "agents.toml").write_text(
        '[agents.claude]\ncommand = ["claude", "--permission-mode", "default"]\n'
    )
    team.launch(1)
    claude = BUILTIN_PROFILES["claude"]

    def asking() -> bool:
        return screen_state(claude, team.capture("worker-1")) == (
            "needs_person",
            "permission prompt",
        )

    poll(asking, f"the permission prompt\n{team.debug()}")
    before = len(scripted_model.requests)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "status?"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    assert "permission prompt" in sent["nudgeReason"], sent
    time.sleep(2)  # a keystroke, had one been sent, would have approved it by now
    assert asking(), "\n".join(team.capture("worker-1"))
    assert len(scripted_model.requests) == before  # no tool result, no typed line reached it
    assert team.status()["tasks"][0]["status"] != "completed"
    assert not [t for t in user_texts(scripted_model) if NUDGE.search(t)]
