"""The team scenario every real agent CLI runs, and what differs between the CLIs, as data.

One team of real CLI workers on the scripted model (tests/agents/test_team_scenario.py): launch
to `allDone`, collect, a leader message nudged, read and answered, mail sent mid-turn, the
monitor's re-nudge. The helpers here read what happened (mailboxes, receipts, the commands the
model handed out and their output, the worker's input box); `SCENARIOS` says, per CLI, what its
run may and must show beyond the shared flow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from omp.agents import BUILTIN_PROFILES, classify_screen, input_region, squash
from tests.agents.clis import POLL_TIMEOUT, SCREENS, AgentTeam, poll, tool_commands
from tests.agents.scripted_model import ScriptedModel, message_text
from tests.agents.worker_policy import CLAIMED

BusyHow = Literal["tool", "model"]

# ---- what the model saw -------------------------------------------------------------------


def shell_results(model: ScriptedModel) -> list[tuple[str, str]]:
    """(command, output) of every shell call the CLI ran and reported back, in order (every
    wire is read as chat-completions messages)."""
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
    """(command, output) of every `team api` call the CLI ran and reported back."""
    return [(c, out) for c, out in shell_results(model) if " team api " in c]


def api_ops(model: ScriptedModel) -> list[str]:
    """The `team api` operations the CLI ran, in order (`claim-task`, `mailbox-read`, ...)."""
    return [c.split(" team api ")[1].split()[0] for c, _ in omp_results(model)]


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


def busy_since(model: ScriptedModel, how: BusyHow) -> bool:
    """The worker's turn is past its claim and busy: `sleep` handed out, or the model asked."""
    if how == "tool":
        return any(c.startswith("sleep ") for _, c in tool_commands(model))
    return any(
        x.chat.messages and CLAIMED in message_text(x.chat.messages[-1])
        for x in list(model.requests)
    )


# ---- what the team's files say ------------------------------------------------------------


def mail_from(team: AgentTeam, sender: str, to: str = "leader") -> list[dict[str, Any]]:
    return [m for m in team.mailbox(to) if m.get("type") == "message" and m["from"] == sender]


def receipts(team: AgentTeam, who: str) -> set[str]:
    return {m["messageId"] for m in team.mailbox(who) if m.get("type") == "delivery-receipt"}


def read_and_answered(
    team: AgentTeam, mid: str, *, timeout: float = POLL_TIMEOUT
) -> list[dict[str, Any]]:
    """worker-1's receipt for message `mid` (within `timeout`), then its answer quoting the id
    (its mail to the leader)."""
    poll(lambda: mid in receipts(team, "worker-1"), f"receipt\n{team.debug()}", timeout=timeout)
    return poll(
        lambda: [m for m in mail_from(team, "worker-1") if mid in m["body"]], "the worker's answer"
    )


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


# ---- what the screen says about the input box ---------------------------------------------


def copilot_input_box(lines: list[str]) -> tuple[str | None, str]:
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


def assert_copilot_box_empty(team: AgentTeam, worker: str) -> None:
    """Nothing stuck in the input box: the screen reads like copilot-05 (empty box, its empty
    box's footer), settled. Stricter than omp's own reader: Copilot's footer says so."""
    screen = (SCREENS / "copilot-05-trust-enter-ready.txt").read_text().splitlines()
    want = copilot_input_box(screen)
    poll(
        lambda: copilot_input_box(team.capture(worker)) == want,
        f"{worker}'s box empty",
        timeout=30,
    )


def assert_nothing_typed_left(team: AgentTeam, worker: str) -> None:
    """The box (omp's profile reads it) shows a placeholder when empty; no trigger or nudge
    text may sit in it."""

    def clean() -> bool:
        box = input_region(BUILTIN_PROFILES[team.agent], team.capture(worker))
        text = squash(" ".join(box or []))
        return box is not None and "newmessage" not in text and "andfollowit" not in text

    poll(clean, f"{worker}'s input box free of typed text", timeout=30)


# ---- checks only one CLI has --------------------------------------------------------------


def claude_answered_trust_and_bypass(team: AgentTeam) -> None:
    """The project was new to Claude Code and nothing was seeded: launch answered the trust
    screen and the bypass-permissions warning with "Yes" (Claude Code wrote down both)."""
    config = team.home / ".claude-config"
    doc = json.loads((config / ".claude.json").read_text())
    assert doc["projects"][str(team.root)]["hasTrustDialogAccepted"] is True, doc
    settings = json.loads((config / "settings.json").read_text())
    assert settings["skipDangerousModePermissionPrompt"] is True, settings


def nothing_moved_to_background(model: ScriptedModel) -> None:
    """Copilot 1.0.102 moves a running shell command to the background when a line is
    submitted under it: omp typed nothing into the busy pane, so no command was moved."""
    moved = [c for c, out in shell_results(model) if "moved to background" in out]
    assert not moved, moved


# ---- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """What one CLI's run of the shared scenario may and must show beyond the shared flow."""

    agent: str
    # nothing left typed in a worker's input box, read the way that CLI's box is best read
    box_clean: Callable[[AgentTeam, str], None]
    # what keeps a turn busy in the mid-turn test: a long shell command, a slow model
    busy_modes: tuple[BusyHow, ...] = ("tool", "model")
    busy_seconds: float = 6
    mid_turn_receipt_timeout: float = 120
    renudge_receipt_timeout: float = 60
    # every user message of the conversation is a line omp typed (Copilot's datetime header
    # aside): the mid-turn test then sees exactly [trigger, nudge], each whole. For the others
    # only the typed lines (trigger, nudge) are counted: their wires may carry user messages
    # of the CLI's own, and they have only ever been held to the typed lines.
    only_typed_user_texts: bool = False
    # checks on the two-worker team once it is all done
    after_all_done: tuple[Callable[[AgentTeam], None], ...] = ()
    # checks on the model's log after the mid-turn test
    after_mid_turn: tuple[Callable[[ScriptedModel], None], ...] = ()


# Codex and Gemini, as their tests always had it: the mid-turn test keeps their turn busy with a
# long shell command only (a slow model was never checked for them), for longer, and their
# receipts get more time.
SCENARIOS: dict[str, Scenario] = {
    "copilot": Scenario(
        "copilot",
        assert_copilot_box_empty,
        only_typed_user_texts=True,
        after_mid_turn=(nothing_moved_to_background,),
    ),
    "claude": Scenario(
        "claude", assert_nothing_typed_left, after_all_done=(claude_answered_trust_and_bypass,)
    ),
    "pi": Scenario("pi", assert_nothing_typed_left),
    "codex": Scenario(
        "codex",
        assert_nothing_typed_left,
        busy_modes=("tool",),
        busy_seconds=8,
        mid_turn_receipt_timeout=180,
        renudge_receipt_timeout=90,
    ),
    "gemini": Scenario(
        "gemini",
        assert_nothing_typed_left,
        busy_modes=("tool",),
        busy_seconds=8,
        mid_turn_receipt_timeout=180,
        renudge_receipt_timeout=90,
    ),
}
