"""Real OpenAI Codex CLI and Google Gemini CLI workers, launched by the real `omp team launch`,
on the scripted model, with the same worker policy as Copilot's.

Codex 0.171 speaks the Responses API to a custom model provider (`wire_api = "responses"` in
`$HOME/.codex/config.toml`), served on `/v1/responses`. Gemini 0.61 speaks the Gemini API to
`GOOGLE_GEMINI_BASE_URL` (any `GEMINI_API_KEY`, API-key auth chosen in settings.json), served on
`/v1beta/models/<m>:streamGenerateContent`. They skip, saying so under `-ra`, when the pinned CLI
is not installed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from omp.agents import BUILTIN_PROFILES, input_region, squash
from tests.agents.clis import FAST_MONITOR, AgentTeam, poll, user_texts
from tests.agents.scripted_model import ScriptedModel
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


def assert_nothing_typed_left(team: AgentTeam, worker: str) -> None:
    """The box shows a placeholder when empty; no trigger or nudge text may sit in it."""

    def clean() -> bool:
        box = input_region(BUILTIN_PROFILES[team.agent], team.capture(worker))
        text = squash(" ".join(box or []))
        return box is not None and "newmessage" not in text and "andfollowit" not in text

    poll(clean, f"{worker}'s input box free of typed text", timeout=30)


@pytest.fixture(params=["codex", "gemini"])
def agent_team(request: pytest.FixtureRequest) -> Factory:
    factory: Factory = request.getfixturevalue(f"{request.param}_team")
    return factory


def test_two_workers_reach_all_done(agent_team: Factory, scripted_model: ScriptedModel) -> None:
    team = agent_team()
    st = launch_done(team, 2)
    assert [t["status"] for t in st["tasks"]] == ["completed", "completed"]
    col = team.omp("team", "collect", team.name, "--json")
    assert col["allDone"] is True and col["doneCount"] == 2
    for w in ("worker-1", "worker-2"):
        assert f"{w}: started" in [m["body"] for m in mail_from(team, w)]
        assert_nothing_typed_left(team, w)
    ran = omp_results(scripted_model)
    ops = sorted(c.split(" team api ")[1].split()[0] for c, _ in ran)
    assert ops == sorted(["claim-task", "send-message", "transition-task-status"] * 2), ran
    assert all('"ok":true' in out for _, out in ran), ran


def test_leader_message_is_read_and_answered(
    agent_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = agent_team()
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "status?"})
    assert sent["ok"] is True and sent["nudge"] == "typed", sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}")
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) == 1 and nudges[0].startswith("You have 1 new message(s). Read them: ")
    assert_nothing_typed_left(team, "worker-1")


# ---- parity with Copilot: mail mid-turn, the monitor's re-nudge, nothing left in the box ------


@pytest.fixture(params=["codex", "gemini"])
def agent_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _factory(request: pytest.FixtureRequest, agent: str) -> Factory:
    factory: Factory = request.getfixturevalue(f"{agent}_team")
    return factory


def test_message_sent_mid_turn_is_read_when_the_turn_ends(
    request: pytest.FixtureRequest, agent_name: str, scripted_model: ScriptedModel
) -> None:
    """Busy running a long shell command when the mail comes: the send types nothing (a line
    typed into a running turn is queued or lost), the monitor nudges once the turn has ended."""
    scripted_model.policy = WorkerPolicy(busy_seconds=8, busy_how="tool")
    team = _factory(request, agent_name)(monitor=FAST_MONITOR)
    team.launch(1)
    poll(lambda: busy_since(scripted_model, "tool"), f"busy\n{team.debug()}")
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "mid-turn"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=180)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    poll(lambda: team.status()["allDone"], "allDone")
    texts = user_texts(scripted_model)
    # one trigger, then exactly one nudge, typed after the task's turn ended; nothing merged
    assert len([t for t in texts if TRIGGER.search(t)]) == 1, texts
    nudges = [t for t in texts if NUDGE.search(t)]
    assert len(nudges) == 1 and nudges[0].startswith("You have 1 new message(s)."), texts
    order = [c.split(" team api ")[1].split()[0] for c, _ in omp_results(scripted_model)]
    assert order.index("mailbox-read") > order.index("transition-task-status"), order
    assert_nothing_typed_left(team, "worker-1")


def test_unread_mail_is_renudged_by_the_monitor(
    request: pytest.FixtureRequest, agent_name: str, scripted_model: ScriptedModel
) -> None:
    scripted_model.policy = WorkerPolicy(ignore_nudges=1)  # the first nudge is left unread
    team = _factory(request, agent_name)(monitor=FAST_MONITOR)
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "ping"})
    # the send's nudge, or the monitor's if it won the pane (the send then types none)
    assert sent["ok"] is True and nudge_went_out(sent), sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=90)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) >= 2, user_texts(scripted_model)  # the send's (ignored), the monitor's
    mon = team.omp("team", "status", team.name, "--json")["monitor"]
    assert mon["nudgesSent"] >= 1, mon
    assert_nothing_typed_left(team, "worker-1")
