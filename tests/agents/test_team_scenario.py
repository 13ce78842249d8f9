"""Real agent CLI workers, launched by the real `omp team launch`, on the scripted model: one
scenario, run by each CLI (ids copilot, claude, pi, codex, gemini), then what only one CLI has.

The CLIs and their wires: GitHub Copilot CLI 1.0.102 (chat completions, `COPILOT_OFFLINE`),
Claude Code 2.1.328 (the Anthropic Messages API at `ANTHROPIC_BASE_URL`; launch answers the
trust screen of the new project and the bypass-permissions warning), pi 0.73.1 (chat completions,
a provider in its `models.json`), Codex 0.171 (the Responses API, a custom provider with
`wire_api = "responses"` in `$HOME/.codex/config.toml`), Gemini CLI 0.61 (the Gemini API at
`GOOGLE_GEMINI_BASE_URL`, API-key auth chosen in settings.json). What differs between them in the
scenario is data: `tests.agents.scenario.SCENARIOS`. Each test starts its own private tmux server
and CLI processes; Claude's and pi's end by checking that no process of their team is left. A
test skips, saying so under `-ra`, when its pinned CLI is not installed.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pytest

from omp.agents import BUILTIN_PROFILES, screen_state
from tests.agents.clis import FAST_MONITOR, SCREENS, AgentTeam, poll, user_texts
from tests.agents.scenario import (
    SCENARIOS,
    BusyHow,
    api_ops,
    busy_since,
    copilot_input_box,
    first_omp_latency,
    launch_done,
    mail_from,
    omp_results,
    read_and_answered,
)
from tests.agents.scripted_model import ScriptedModel
from tests.agents.worker_policy import NUDGE, TRIGGER, WorkerPolicy
from tests.helpers import nudge_went_out

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
AGENTS = list(SCENARIOS)  # copilot, claude, pi, codex, gemini
ONE_NUDGE = "You have 1 new message(s). Read them: "


def teams(request: pytest.FixtureRequest, agent: str) -> Factory:
    """The agent's team factory (tests/agents/conftest.py): it skips when the CLI is missing."""
    factory: Factory = request.getfixturevalue(f"{agent}_team")
    return factory


# ---- the scenario, once per CLI ---------------------------------------------------------------


@pytest.mark.parametrize("agent", AGENTS)
def test_two_workers_reach_all_done(
    request: pytest.FixtureRequest,
    agent: str,
    scripted_model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = SCENARIOS[agent]
    team = teams(request, agent)()
    t0 = time.monotonic()
    st = launch_done(team, 2)
    wall = time.monotonic() - t0
    assert [t["status"] for t in st["tasks"]] == ["completed", "completed"]
    col = team.omp("team", "collect", team.name, "--json")
    assert col["allDone"] is True and col["doneCount"] == 2
    assert all("The scripted worker's result." in w["resultMarkdown"] for w in col["workers"])
    for w in ("worker-1", "worker-2"):
        bodies = [m["body"] for m in mail_from(team, w)]
        assert f"{w}: started" in bodies, team.mailbox("leader")
    # every omp command a worker was given ran, through the CLI's own shell tool, and succeeded
    ran = omp_results(scripted_model)
    assert sorted(api_ops(scripted_model)) == sorted(
        ["claim-task", "send-message", "transition-task-status"] * 2
    ), ran
    assert all('"ok":true' in out for _, out in ran), ran
    for w in ("worker-1", "worker-2"):
        cli.box_clean(team, w)
    for check in cli.after_all_done:
        check(team)
    lat = [
        first_omp_latency(scripted_model, f"/workers/{w}/inbox.md")
        for w in ("worker-1", "worker-2")
    ]
    with capsys.disabled():
        print(
            f"\n[{agent} team] 2 workers launch->allDone {wall:.1f}s; trigger->first omp call "
            f"median {statistics.median(lat):.2f}s ({', '.join(f'{x:.2f}' for x in lat)})"
        )


@pytest.mark.parametrize("agent", AGENTS)
def test_leader_message_is_read_and_answered(
    request: pytest.FixtureRequest, agent: str, scripted_model: ScriptedModel
) -> None:
    team = teams(request, agent)()
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "status?"})
    # typed and submitted, verified (no monitor runs: the send's own nudge)
    assert sent["ok"] is True and sent["nudge"] == "typed" and sent["nudged"] is True, sent
    mid = sent["messageId"]
    answer = read_and_answered(team, mid)
    assert answer[0]["to"] == "leader"
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) == 1 and nudges[0].startswith(ONE_NUDGE), nudges
    SCENARIOS[agent].box_clean(team, "worker-1")


@pytest.mark.parametrize(
    ("agent", "busy_how"),
    [pytest.param(a, how, id=f"{a}-{how}") for a, s in SCENARIOS.items() for how in s.busy_modes],
)
def test_message_sent_mid_turn_is_read_when_the_turn_ends(
    request: pytest.FixtureRequest, agent: str, busy_how: BusyHow, scripted_model: ScriptedModel
) -> None:
    """Busy running a long shell command, or waiting on a slow model, when the mail comes.

    omp types nothing into a busy pane (a line typed into a running turn is queued, lost, or,
    in Copilot, moves the running command to the background): the send defers, and the
    monitor nudges once the turn has ended.
    """
    cli = SCENARIOS[agent]
    scripted_model.policy = WorkerPolicy(busy_seconds=cli.busy_seconds, busy_how=busy_how)
    team = teams(request, agent)(monitor=FAST_MONITOR)
    team.launch(1)
    # inside its turn: running a long shell command, or the model holding its next answer
    poll(lambda: busy_since(scripted_model, busy_how), f"busy ({busy_how})\n{team.debug()}")
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "mid-turn"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    mid = sent["messageId"]
    read_and_answered(team, mid, timeout=cli.mid_turn_receipt_timeout)
    poll(lambda: team.status()["allDone"], "allDone")
    # two typed user messages, each whole: the trigger, then one nudge after the task's turn
    # had ended; nothing was lost, doubled or merged into another input
    texts = user_texts(scripted_model)
    triggers = [t for t in texts if TRIGGER.search(t)]
    nudges = [t for t in texts if NUDGE.search(t)]
    typed = [t for t in texts if TRIGGER.search(t) or NUDGE.search(t)]
    assert len(triggers) == 1 and len(nudges) == 1, texts
    assert typed == [triggers[0], nudges[0]], texts
    assert nudges[0].startswith("You have 1 new message(s)."), texts
    if cli.only_typed_user_texts:  # and nothing else reached the model as a user message
        assert len(texts) == 2, texts
        assert TRIGGER.fullmatch(texts[0]) and NUDGE.fullmatch(texts[1]), texts
    order = api_ops(scripted_model)
    assert order.index("mailbox-read") > order.index("transition-task-status"), order
    for check in cli.after_mid_turn:
        check(scripted_model)
    cli.box_clean(team, "worker-1")


@pytest.mark.parametrize("agent", AGENTS)
def test_unread_mail_is_renudged_by_the_monitor(
    request: pytest.FixtureRequest, agent: str, scripted_model: ScriptedModel
) -> None:
    cli = SCENARIOS[agent]
    scripted_model.policy = WorkerPolicy(ignore_nudges=1)  # the first nudge is left unread
    team = teams(request, agent)(monitor=FAST_MONITOR)
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "ping"})
    # the send's nudge, or the monitor's if it won the pane (the send then types none)
    assert sent["ok"] is True and nudge_went_out(sent), sent
    mid = sent["messageId"]
    read_and_answered(team, mid, timeout=cli.renudge_receipt_timeout)
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    # one from the send (ignored), at least one more from the monitor (answered)
    assert len(nudges) >= 2, user_texts(scripted_model)
    mon = team.omp("team", "status", team.name, "--json")["monitor"]
    assert mon["nudgesSent"] >= 1, mon
    cli.box_clean(team, "worker-1")


# ---- Copilot: the reader of its input box -------------------------------------------------------


def test_copilot_input_box_reads_the_recorded_screens() -> None:
    """The reader the live Copilot runs use, checked on the captures of a real Copilot 1.0.102."""
    empty = (SCREENS / "copilot-05-trust-enter-ready.txt").read_text().splitlines()
    typed = (SCREENS / "copilot-06-typed.txt").read_text().splitlines()
    dialog = (SCREENS / "copilot-02-start-5s-trust-dialog.txt").read_text().splitlines()
    assert copilot_input_box(empty) == ("", "empty")
    assert copilot_input_box(typed) == ("hello from omp", "typed")
    assert copilot_input_box(dialog) == (None, "")


# ---- Claude Code: the screens omp leaves to a person --------------------------------------------


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
