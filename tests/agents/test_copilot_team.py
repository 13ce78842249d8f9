"""Real GitHub Copilot CLI workers, launched by the real `omp team launch`, on a scripted model.

Each test starts its own private tmux server and Copilot CLI processes (about 10 s per launch).
They skip, saying so under `-ra`, only when the pinned CLI is not installed.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from omp.agents import BUILTIN_PROFILES, classify_screen
from tests.agents.clis import FAST_MONITOR, SCREENS, AgentTeam, poll, tool_commands, user_texts
from tests.agents.scripted_model import ScriptedModel, message_text
from tests.agents.worker_policy import CLAIMED, NUDGE, TRIGGER, WorkerPolicy
from tests.helpers import nudge_went_out

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]


Factory = Callable[..., AgentTeam]


# ---- what the screen says about Copilot's input box -------------------------------------------


def input_box(lines: list[str]) -> tuple[str | None, str]:
    """(text in the input box, which footer) from a Copilot screen; (None, "") if no box.

    The box is the last `❯` line with a full-width rule directly above and below; the footer
    under it reads `/ commands · ? help` only while the box is empty.
    """
    rows = [ln.rstrip() for ln in lines]
    for i in range(len(rows) - 2, 0, -1):
        if rows[i].startswith("❯") and _rule(rows[i - 1]) and _rule(rows[i + 1]):
            footer = next((r for r in rows[i + 2 :] if r.strip()), "")
            kind = "empty" if "/ commands · ? help" in footer else "typed"
            return rows[i][1:].strip(), kind
    return None, ""


def _rule(line: str) -> bool:
    return len(line) >= 8 and set(line.strip()) <= {"─", "━"} and bool(line.strip())


def test_input_box_reads_the_recorded_screens() -> None:
    """The reader the live tests use, checked on the captures of a real Copilot 1.0.102."""
    empty = (SCREENS / "copilot-05-trust-enter-ready.txt").read_text().splitlines()
    typed = (SCREENS / "copilot-06-typed.txt").read_text().splitlines()
    dialog = (SCREENS / "copilot-02-start-5s-trust-dialog.txt").read_text().splitlines()
    assert input_box(empty) == ("", "empty")
    assert input_box(typed) == ("hello from omp", "typed")
    assert input_box(dialog) == (None, "")


def assert_box_empty(team: AgentTeam, worker: str) -> None:
    """Nothing stuck in the input box: the screen reads like copilot-05 (empty box), settled."""
    want = input_box((SCREENS / "copilot-05-trust-enter-ready.txt").read_text().splitlines())
    poll(lambda: input_box(team.capture(worker)) == want, f"{worker}'s box empty", timeout=30)


# ---- what the model saw -------------------------------------------------------------------


def shell_results(model: ScriptedModel) -> list[tuple[str, str]]:
    """(command, output) of every shell call Copilot ran and reported back, in order."""
    out: dict[str, tuple[str, str]] = {}
    for ex in list(model.requests):
        calls: dict[str, str] = {}
        for msg in ex.chat.messages:
            for call in msg.get("tool_calls") or []:
                args = json.loads(call["function"]["arguments"] or "{}")
                calls[call["id"]] = str(args.get("command", args.get("cmd", "")))
            if msg.get("role") == "tool" and msg.get("tool_call_id") in calls:
                cmd = calls[msg["tool_call_id"]]
                out[f"{msg['tool_call_id']} {cmd}"] = (cmd, message_text(msg))
    return list(out.values())


def omp_results(model: ScriptedModel) -> list[tuple[str, str]]:
    """(command, output) of every `team api` call Copilot ran and reported back."""
    return [(c, out) for c, out in shell_results(model) if " team api " in c]


def first_omp_latency(model: ScriptedModel, inbox_part: str) -> float:
    """Seconds from the CLI sending the trigger to the model to the first omp call's output."""
    t_trigger = t_omp = None
    for ex in list(model.requests):  # one server serves every worker: keep to this one's chat
        msgs = ex.chat.messages
        if not any(m.get("role") == "user" and inbox_part in message_text(m) for m in msgs):
            continue
        if t_trigger is None:
            t_trigger = ex.chat.received
        if any(m.get("role") == "tool" and CLAIMED in message_text(m) for m in msgs):
            t_omp = ex.chat.received
            break
    assert t_trigger is not None and t_omp is not None, model.dump()
    return t_omp - t_trigger


def busy_since(model: ScriptedModel, how: str) -> bool:
    """The worker's turn is past its claim and busy: `sleep` handed out, or the model asked."""
    if how == "tool":
        return any(c.startswith("sleep ") for _, c in tool_commands(model))
    return any(
        x.chat.messages and CLAIMED in message_text(x.chat.messages[-1])
        for x in list(model.requests)
    )


def mail_from(team: AgentTeam, sender: str, to: str = "leader") -> list[dict[str, Any]]:
    return [m for m in team.mailbox(to) if m.get("type") == "message" and m["from"] == sender]


def receipts(team: AgentTeam, who: str) -> set[str]:
    return {m["messageId"] for m in team.mailbox(who) if m.get("type") == "delivery-receipt"}


def launch_done(team: AgentTeam, workers: int) -> dict[str, Any]:
    """Launch, wait for allDone, then for every worker's turn to end (its screen idle as omp's
    profile reads it: a nudge typed into a busy pane is deferred to the monitor)."""
    team.launch(workers)
    profile = BUILTIN_PROFILES[team.agent]

    def idle() -> bool:
        return all(
            classify_screen(profile, team.capture(w["name"])) == "ready"
            for w in team.launch_result["workers"]
        )

    try:
        # generous: a node CLI starts in seconds on an idle machine, much later on a busy one
        poll(lambda: team.status()["allDone"], "allDone", timeout=240)
        poll(idle, "every worker idle", timeout=90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{team.debug()}") from None
    return team.status()


# ---- the tests ------------------------------------------------------------------------------


def test_two_copilot_workers_reach_all_done(
    copilot_team: Factory, scripted_model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    team = copilot_team()
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
    # every omp command a worker was given ran, through Copilot's own shell tool, and succeeded
    ran = omp_results(scripted_model)
    ops = sorted(c.split(" team api ")[1].split()[0] for c, _ in ran)
    assert ops == sorted(["claim-task", "send-message", "transition-task-status"] * 2), ran
    assert all('"ok":true' in out for _, out in ran), ran
    for w in ("worker-1", "worker-2"):
        assert_box_empty(team, w)
    lat = [
        first_omp_latency(scripted_model, f"/workers/{w}/inbox.md")
        for w in ("worker-1", "worker-2")
    ]
    with capsys.disabled():
        print(
            f"\n[copilot team] 2 workers launch->allDone {wall:.1f}s; trigger->first omp call "
            f"median {statistics.median(lat):.2f}s ({', '.join(f'{x:.2f}' for x in lat)})"
        )


def test_leader_message_is_nudged_read_and_answered(
    copilot_team: Factory, scripted_model: ScriptedModel
) -> None:
    team = copilot_team()
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "status?"})
    assert sent["ok"] is True and sent["nudged"] is True, sent  # typed and submitted, verified
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), "delivery receipt")
    answer = poll(
        lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "the worker's answer"
    )
    assert answer[0]["to"] == "leader"
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    assert len(nudges) == 1 and nudges[0].startswith("You have 1 new message(s). Read them: ")
    assert_box_empty(team, "worker-1")


@pytest.mark.parametrize("busy_how", ["tool", "model"])
def test_message_sent_mid_turn_is_read_when_the_turn_ends(
    copilot_team: Factory, scripted_model: ScriptedModel, busy_how: str
) -> None:
    """Busy running a long shell command, or waiting on a slow model, when the mail comes.

    omp types nothing into a busy pane (Copilot 1.0.102 moves a running shell command to the
    background when a line is submitted under it): the send defers, and the monitor nudges
    once the turn has ended.
    """
    scripted_model.policy = WorkerPolicy(busy_seconds=6, busy_how=busy_how)
    team = copilot_team(monitor=FAST_MONITOR)
    team.launch(1)
    # inside its turn: running a long shell command, or the model holding its next answer
    poll(lambda: busy_since(scripted_model, busy_how), f"busy ({busy_how})")
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "mid-turn"})
    assert sent["ok"] is True and sent["nudge"] == "deferred", sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=120)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    poll(lambda: team.status()["allDone"], "allDone")
    # Copilot got exactly two typed user messages, each whole: the trigger, then one nudge
    # after the task's turn had ended; nothing was lost, doubled or merged into another input
    texts = user_texts(scripted_model)
    assert len(texts) == 2, texts
    assert TRIGGER.fullmatch(texts[0]), texts
    assert NUDGE.fullmatch(texts[1]) and texts[1].startswith("You have 1 new message(s)."), texts
    order = [c.split(" team api ")[1].split()[0] for c, _ in omp_results(scripted_model)]
    assert order.index("mailbox-read") > order.index("transition-task-status"), order
    assert not any("moved to background" in out for _, out in shell_results(scripted_model))
    assert_box_empty(team, "worker-1")


def test_unread_mail_is_renudged_by_the_monitor(
    copilot_team: Factory, scripted_model: ScriptedModel
) -> None:
    scripted_model.policy = WorkerPolicy(ignore_nudges=1)  # the first nudge is left unread
    team = copilot_team(monitor=FAST_MONITOR)
    launch_done(team, 1)
    sent = team.api("send-message", {"from": "leader", "to": "worker-1", "body": "ping"})
    # the send's nudge, or the monitor's if it won the pane (the send then types none)
    assert sent["ok"] is True and nudge_went_out(sent), sent
    mid = sent["messageId"]
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=60)
    poll(lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "answer")
    nudges = [t for t in user_texts(scripted_model) if NUDGE.search(t)]
    # one from the send (ignored), at least one more from the monitor (answered)
    assert len(nudges) >= 2, user_texts(scripted_model)
    mon = team.omp("team", "status", team.name, "--json")["monitor"]
    assert mon["nudgesSent"] >= 1, mon
    assert_box_empty(team, "worker-1")
