"""A real Copilot CLI as the leader agent: it runs a team from its own tmux pane, as a user asks.

The leader's model is the scripted server playing `LeaderPolicy`: it loads the installed `team`
skill and follows it (launch with `--nudge-leader`, `wait --timeout 25` and the `read them` /
`wait again` lines, collect, shut down, answer). omp runs from inside the leader's pane, so the
workers split its window. What is checked comes from Copilot's own session transcript
(`copilot_session`): no command of the leader was moved to the background, no line was typed
into it while a turn ran, and from the scripted server's request log: every nudge typed into the
leader arrived between its turns. Each test starts its own private tmux server; they skip only
when the pinned Copilot CLI is not installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.agents.clis import FAST_MONITOR, AgentTeam, poll
from tests.agents.copilot_session import (
    CopilotLeader,
    Event,
    backgrounded,
    busy_periods,
    session_events,
    user_messages,
)
from tests.agents.leader_policy import LeaderPolicy, Router, is_worker, steps_of
from tests.agents.scripted_model import Exchange, ScriptedModel
from tests.agents.worker_policy import NUDGE, WorkerPolicy, first_json
from tests.helpers import nudge_went_out

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

Factory = Callable[..., AgentTeam]
TEAM = "lt"
REQUEST = (
    f"Use the team skill: run two demo workers as team {TEAM} on 'write a haiku', follow them "
    "to the end, collect the results, shut the team down and tell me what they did."
)


# ---- what the scripted server saw -------------------------------------------------------------


def leader_requests(model: ScriptedModel) -> list[Exchange]:
    """The leader's requests (one server may serve its Copilot workers too)."""
    return [ex for ex in list(model.requests) if not is_worker(ex.chat)]


def leader_commands(model: ScriptedModel) -> list[str]:
    return [
        str(x.reply.tool_call.arguments.get("command", ""))
        for x in leader_requests(model)
        if x.reply and x.reply.tool_call
    ]


def model_turns(model: ScriptedModel) -> list[tuple[float, float]]:
    """The leader's busy intervals by the server's log: from a turn's first request to the
    moment its text-only answer was sent (the request's arrival plus the model's delay)."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    for ex in leader_requests(model):
        if start is None:
            start = ex.chat.received
        if ex.reply is not None and ex.reply.tool_call is None:
            out.append((start, ex.chat.received + ex.reply.delay))
            start = None
    if start is not None:
        out.append((start, time.time()))
    return out


def mail_reads(model: ScriptedModel) -> list[tuple[str, list[dict[str, Any]]]]:
    """(command, messages) of every `mailbox-read` the leader ran, from its latest request."""
    last = leader_requests(model)[-1].chat
    out = []
    for step in steps_of(last):
        if " team api mailbox-read " in step.key:
            doc = first_json(step.output) or {}
            assert doc.get("ok") is True, step.output  # a read that failed is no read
            out.append((step.key, list(doc.get("messages") or [])))
    return out


def answers(model: ScriptedModel) -> list[str]:
    return [x.reply.text for x in leader_requests(model) if x.reply and x.reply.tool_call is None]


def nudges_typed(events: list[Event]) -> list[Event]:
    return [e for e in user_messages(events) if NUDGE.search(str(e.data.get("content", "")))]


def inside(t: float, spans: list[tuple[float, float]], margin: float = 0.05) -> bool:
    return any(a + margin < t < b - margin for a, b in spans)


def monitor_nudges(team: AgentTeam, who: str) -> list[dict[str, Any]]:
    path = team.root / ".omp" / "state" / "team-monitor" / "events.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return [r for r in rows if r.get("type") == "unread-nudge" and r.get("worker") == who]


def team_config(team: AgentTeam) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((team.root / ".omp/state/team/lt/config.json").read_text())
    return doc


# ---- the leader's pane --------------------------------------------------------------------


def start_leader(copilot_team: Factory, model: ScriptedModel, **policy: Any) -> CopilotLeader:
    model.policy = Router(LeaderPolicy(team=TEAM, **policy))
    team = copilot_team(monitor=FAST_MONITOR | {"OMP_DEMO_WORK_SECONDS": "5"})
    team.name = TEAM
    assert team.omp("skills", "install", "--json")["ok"] is True
    lead = CopilotLeader(team)
    lead.wait_ready()
    return lead


def debug(lead: CopilotLeader, model: ScriptedModel) -> str:
    return f"{model.dump()}\n--- leader ---\n{lead.capture()}"


def await_answer(
    lead: CopilotLeader, model: ScriptedModel, prefix: str, timeout: float, after: int = 0
) -> str:
    """The first answer starting with `prefix` among the leader's answers after the first
    `after`, once the leader is idle again."""

    def found() -> str:
        return next((a for a in answers(model)[after:] if a.startswith(prefix)), "")

    try:
        text = poll(found, f"the leader's answer {prefix!r}", timeout)
        poll(lead.idle, "the leader idle after answering", 30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{debug(lead, model)}") from None
    return text


def assert_undisturbed(lead: CopilotLeader, model: ScriptedModel) -> list[Event]:
    """Nothing omp typed disturbed the leader: from Copilot's own transcript, no command was
    moved to the background and every line arrived at an idle prompt; from the server's log,
    no nudge arrived inside a turn; at most one mail read found nothing."""
    events = lead.events()
    assert events, "no Copilot session transcript for the leader"
    assert backgrounded(events) == [], debug(lead, model)
    steering = [e.data.get("content") for e in user_messages(events)]
    assert all(e.data.get("delivery") == "idle" for e in user_messages(events)), steering
    turns = model_turns(model)
    for n in nudges_typed(events):
        assert not inside(n.at, turns), (n.at, turns)
    empty = [cmd for cmd, msgs in mail_reads(model) if not msgs]
    assert len(empty) <= 1, mail_reads(model)
    return events


def report(
    capsys: pytest.CaptureFixture[str],
    what: str,
    wall: float,
    lead: CopilotLeader,
    model: ScriptedModel,
) -> None:
    events = lead.events()
    busy = busy_periods(events)
    t0 = busy[0][0] if busy else 0.0
    typed = [
        f"+{n.at - t0:.1f}s ({'in a turn' if inside(n.at, model_turns(model)) else 'idle'})"
        for n in nudges_typed(events)
    ]
    spans = ", ".join(f"{a - t0:.1f}-{b - t0:.1f}s" for a, b in busy)
    reads = [len(m) for _, m in mail_reads(model)]
    with capsys.disabled():
        print(
            f"\n[copilot leader] {what}: wall {wall:.1f}s; "
            f"{len(leader_requests(model))} leader model requests; "
            f"busy {spans}; nudges typed {len(typed)} {typed}; mail reads {reads}"
        )


# ---- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["demo", "copilot"])
def test_copilot_leader_runs_a_team_to_the_end(
    copilot_team: Factory,
    scripted_model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
    workers: str,
) -> None:
    lead = start_leader(copilot_team, scripted_model, agent=workers)
    team = lead.team
    t0 = time.time()
    lead.type(REQUEST.replace("two demo workers", f"two {workers} workers"))
    # a worker writes while the leader's `wait` runs: stored, the nudge left to the monitor
    poll(lambda: any(" team wait lt " in c for c in leader_commands(scripted_model)), "a wait")
    team.launch_result = {"workers": team_config(team)["workers"]}
    sent = team.api("send-message", {"from": "worker-1", "to": "leader", "body": "mid-run note"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    text = await_answer(lead, scripted_model, f"Team {TEAM}:", 150)
    wall = time.time() - t0
    assert "2/2 done" in text and "shut down" in text, text

    cfg = team_config(team)
    # the leader's agent was detected from its pane, not given; the workers split its window
    launch = next(c for c in leader_commands(scripted_model) if " team launch " in c)
    assert f"--agent {workers}" in launch, launch
    assert "--nudge-leader" in launch and "--leader-agent" not in launch, launch
    assert cfg["leaderAgent"] == "copilot" and cfg["nudgeLeader"] is True, cfg
    assert cfg["leaderPaneId"] == lead.pane and cfg["createdSession"] is False, cfg
    window = lead._tmux("display-message", "-p", "-t", lead.pane, "#{window_id}").strip()
    assert cfg["tmuxIdentity"]["windowId"] == window, cfg
    assert f"● Team {TEAM}: " in lead.capture(), lead.capture()  # the user sees the answer
    # the whole skill was followed, every command through Copilot's shell tool, in order
    ran = [c.split()[1:3] for c in leader_commands(scripted_model) if " team " in c]
    subs = [s[1] for s in ran if s[0] == "team"]
    assert subs[0] == "launch" and subs[-2:] == ["collect", "shutdown"], subs
    assert "wait" in subs and "api" in subs, subs
    assert (team.root / ".omp/state/team/lt/shutdown.json").exists()
    # the note was read through the wait, once
    read_ids = [m["id"] for _, msgs in mail_reads(scripted_model) for m in msgs]
    assert read_ids.count(sent["messageId"]) == 1, mail_reads(scripted_model)
    assert len(read_ids) == len(set(read_ids)), read_ids

    events = assert_undisturbed(lead, scripted_model)
    # every nudge the monitor says it typed into the leader reached Copilot as an idle line
    sent_by_monitor = [r for r in monitor_nudges(team, "leader") if r.get("outcome") == "sent"]
    assert len(nudges_typed(events)) >= len(sent_by_monitor), sent_by_monitor
    report(capsys, f"{workers} workers, launch->answer", wall, lead, scripted_model)


def test_idle_copilot_leader_is_nudged_once_and_reads_it(
    copilot_team: Factory, scripted_model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    """Between its turns, with the team still up, the leader is nudged: `typed`, truthfully."""
    lead = start_leader(copilot_team, scripted_model, keep_team=True)
    team = lead.team
    t0 = time.time()
    lead.type(REQUEST.replace("shut the team down", "keep the team up"))
    await_answer(lead, scripted_model, f"Team {TEAM}:", 150)
    team.launch_result = {"workers": team_config(team)["workers"]}
    # a worker's last report may come after the leader's last read: it is nudged once the
    # leader is idle, and read. Settle first: idle, nothing unread, for 3 s on end.
    settled = {"since": time.monotonic()}

    def steady() -> bool:
        if not (team.status()["leaderUnread"] == 0 and lead.idle()):
            settled["since"] = time.monotonic()
        return time.monotonic() - settled["since"] >= 3.0

    poll(steady, f"the leader idle with no unread mail\n{debug(lead, scripted_model)}", 60)
    before, said = len(nudges_typed(lead.events())), len(answers(scripted_model))
    sent = team.api("send-message", {"from": "worker-2", "to": "leader", "body": "one more"})
    assert sent["ok"] is True and nudge_went_out(sent), sent  # the send's, or the monitor's
    await_answer(lead, scripted_model, "Read 1 message(s).", 60, after=said)
    events = lead.events()
    typed = nudges_typed(events)[before:]
    assert len(typed) == 1, [e.data.get("content") for e in typed]
    assert str(typed[0].data["content"]).startswith("You have 1 new message(s). Read them: ")
    assert mail_reads(scripted_model)[-1][1][0]["id"] == sent["messageId"]

    said = len(answers(scripted_model))
    lead.type("Thanks. Now shut the team down.")
    await_answer(lead, scripted_model, f"Team {TEAM} is shut down.", 60, after=said)
    assert (team.root / ".omp/state/team/lt/shutdown.json").exists()
    assert_undisturbed(lead, scripted_model)
    report(capsys, "three turns", time.time() - t0, lead, scripted_model)


def test_copilot_worker_running_a_command_gets_its_mail_after(
    copilot_team: Factory, scripted_model: ScriptedModel
) -> None:
    """A message arrives while a worker's shell command runs: deferred, the command is left to
    finish, and the mail is read once the turn is over; checked in the worker's own transcript."""
    scripted_model.policy = WorkerPolicy(busy_seconds=8, busy_how="tool")
    team = copilot_team(monitor=FAST_MONITOR)
    team.launch(1)
    inbox = "/workers/worker-1/inbox.md"

    def sleeping() -> bool:
        events = session_events(team.home, inbox)
        return any(
            e.type == "tool.execution_start"
            and str((e.data.get("arguments") or {}).get("command", "")).startswith("sleep ")
            for e in events
        )

    poll(sleeping, f"the worker's sleep running\n{team.debug()}")
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "mid-command"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    poll(lambda: team.status()["allDone"], f"allDone\n{team.debug()}")
    mid = sent["messageId"]

    def read() -> bool:
        return any(
            m.get("messageId") == mid
            for m in team.mailbox("worker-1")
            if m.get("type") == "delivery-receipt"
        )

    poll(read, f"the message read\n{team.debug()}")

    def done_at() -> dict[str, float]:
        """When each of the worker's shell commands completed, by its command line."""
        events = session_events(team.home, inbox)
        starts = {
            str(e.data.get("toolCallId")): str((e.data.get("arguments") or {}).get("command", ""))
            for e in events
            if e.type == "tool.execution_start"
        }
        return {
            starts.get(str(e.data.get("toolCallId")), ""): e.at
            for e in events
            if e.type == "tool.execution_complete"
        }

    def read_recorded() -> dict[str, float]:
        d = done_at()
        return d if any(" team api mailbox-read " in c for c in d) else {}

    ended = poll(read_recorded, "the read recorded in the worker's transcript")
    events = session_events(team.home, inbox)
    assert backgrounded(events) == [], team.debug()
    users = user_messages(events)
    assert [e.data.get("delivery") for e in users] == ["idle", "idle"], users
    (nudge,) = nudges_typed(events)
    sleep_end = next(t for c, t in ended.items() if c.startswith("sleep "))
    read_at = next(t for c, t in ended.items() if " team api mailbox-read " in c)
    # the nudge came after the command had finished, at an idle prompt (`delivery` above: no
    # turn ran), and the mail was read after it
    assert sleep_end < nudge.at < read_at, (sleep_end, nudge.at, read_at)
