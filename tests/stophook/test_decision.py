"""The stop decision as a pure function, over the recorded stdin of all four CLIs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.stophook import decision, payloads, replies, transcript
from omp.stophook.decision import decide

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
NOW = 1796075700.0
WORDS = {
    "ralph": "RALPH_COMPLETE",
    "ultraqa": "ULTRAQA_COMPLETE",
    "ultrawork": "ULTRAWORK_COMPLETE",
}


def fixture(name: str) -> dict[str, Any]:
    data = json.loads((FIX / name).read_text())
    assert isinstance(data, dict)
    return data


def ralph(**kw: Any) -> dict[str, Any]:
    return {"active": True, "iteration": 0, "maxIterations": 3, "prompt": "write the haiku", **kw}


def reply_of(name: str, text: str) -> str | None:
    """The reply as `run` would see it: the payload's text, with `text` put where it belongs."""
    p = fixture(name)
    if "last_assistant_message" in p:
        p["last_assistant_message"] = text
    if "prompt_response" in p:
        p["prompt_response"] = text
    return payloads.read(p, {}).reply


REPLY_FIXTURES = ["claude-Stop.json", "codex-Stop.json", "gemini-AfterAgent-1.json"]


@pytest.mark.parametrize("name", REPLY_FIXTURES)
def test_the_word_alone_on_a_line_ends_the_loop_and_keeps_its_history(name: str) -> None:
    state = ralph(iteration=2, extra="kept")
    d = decide({"ralph": state}, reply_of(name, "All checked.\n  RALPH_COMPLETE  \n"), now=NOW)
    assert (d.action, d.mode, d.why, d.step) == ("allow", "ralph", "complete", 2)
    assert d.state is not None
    assert d.state["active"] is False and d.state["endReason"] == "complete"
    assert d.state["iteration"] == 2 and d.state["extra"] == "kept"
    assert state["active"] is True  # the input is not changed


@pytest.mark.parametrize("name", REPLY_FIXTURES)
@pytest.mark.parametrize(
    "text",
    [
        "I will print RALPH_COMPLETE when done.",
        "RALPH_COMPLETED",
        "not yet: RALPH_COMPLETE",
        "XRALPH_COMPLETE",
        "",
    ],
)
def test_the_word_inside_a_sentence_does_not_count(name: str, text: str) -> None:
    d = decide({"ralph": ralph()}, reply_of(name, text), now=NOW)
    assert (d.action, d.why, d.step) == ("block", "continue", 1)
    assert d.state is not None and d.state["iteration"] == 1 and d.state["active"] is True


def test_backticks_or_bold_around_the_lone_word_count() -> None:
    for text in ("`RALPH_COMPLETE`", "**RALPH_COMPLETE**", "done\r\nRALPH_COMPLETE\r\n"):
        assert decision.completed(text, "RALPH_COMPLETE"), text
    assert not decision.completed("`RALPH_COMPLETE", "RALPH_COMPLETE")


def test_omps_own_prompt_never_counts_even_quoted_back_whole() -> None:
    first = decide({"ralph": ralph()}, "working", now=NOW)
    assert first.action == "block" and first.reason and first.state
    assert "RALPH_COMPLETE" in first.reason
    # The agent echoes the injected prompt (or a transcript repeats it): still not done.
    second = decide({"ralph": first.state}, f"Got it:\n{first.reason}\n", now=NOW + 5)
    assert (second.action, second.step) == ("block", 2)
    # A goal written over several lines cannot put the word on a line of its own in the prompt.
    sneaky = ralph(prompt="fix it\nRALPH_COMPLETE\n")
    d = decide({"ralph": sneaky}, "", now=NOW)
    assert d.reason and not decision.completed(d.reason, "RALPH_COMPLETE")


def test_prompt_names_mode_step_goal_and_word() -> None:
    for mode, field in (("ralph", "prompt"), ("ultraqa", "goal"), ("ultrawork", "objective")):
        state = {"active": True, field: "the goal text"}
        d = decide({mode: state}, "", now=NOW)
        cap = decision.BY_MODE[mode].default_cap
        assert d.reason is not None
        assert f"omp {mode} step 1/{cap}" in d.reason
        assert '"the goal text"' in d.reason and WORDS[mode] in d.reason


def test_each_mode_ends_only_on_its_own_word() -> None:
    state = {"active": True, "goal": "pytest passes", "cycleCount": 0, "maxCycles": 5}
    assert decide({"ultraqa": state}, "RALPH_COMPLETE", now=NOW).action == "block"
    assert decide({"ultraqa": state}, "ULTRAQA_COMPLETE", now=NOW).why == "complete"


def test_max_n_grants_exactly_n_continuations() -> None:
    state: dict[str, Any] = ralph(maxIterations=3)
    actions = []
    for i in range(5):
        d = decide({"ralph": state}, "still going", now=NOW + i)
        actions.append((d.action, d.step))
        if d.state is None or d.state["active"] is False:
            assert d.why == "cap" and d.state is not None and d.state["endReason"] == "cap"
            break
        state = d.state
    assert actions == [("block", 1), ("block", 2), ("block", 3), ("allow", 3)]
    assert decision.end_note(d) == "omp ralph loop stopped: its cap of 3 continuations is reached"


@pytest.mark.parametrize(
    ("mode", "bad"),
    [
        ("ralph", "abc"),
        ("ralph", None),
        ("ralph", -4),
        ("ralph", 0),
        ("ralph", 2.5),
        ("ralph", float("nan")),
        ("ralph", True),
        ("ralph", {"n": 3}),
        ("ultraqa", "NaN"),
        ("ultrawork", []),
    ],
)
def test_a_corrupt_cap_falls_back_to_the_default_never_to_no_cap(mode: str, bad: Any) -> None:
    spec = decision.BY_MODE[mode]
    state = {"active": True, spec.counter: spec.default_cap - 1, spec.cap: bad}
    d = decide({mode: state}, "", now=NOW)
    assert (d.action, d.step, d.cap) == ("block", spec.default_cap, spec.default_cap)
    assert d.state is not None
    d2 = decide({mode: d.state}, "", now=NOW)
    assert (d2.action, d2.why) == ("allow", "cap")


@pytest.mark.parametrize("bad", ["x", -1, None, 1.5, True])
def test_a_corrupt_counter_counts_as_zero(bad: Any) -> None:
    d = decide({"ralph": ralph(iteration=bad)}, "", now=NOW)
    assert (d.action, d.step) == ("block", 1)


def test_digit_strings_are_numbers() -> None:
    d = decide({"ralph": ralph(iteration="2", maxIterations="3")}, "", now=NOW)
    assert (d.action, d.step, d.cap) == ("block", 3, 3)


def test_no_active_loop_allows_and_writes_nothing() -> None:
    for states in (
        {},
        {"ralph": None},
        {"ralph": {"active": "true"}},
        {"ralph": {"active": 1}},
        {"ralph": ["active", True]},
        {"ralph": ralph(active=False)},
    ):
        d = decide(states, "", now=NOW)
        assert (d.action, d.mode, d.state) == ("allow", None, None)


def test_ralph_goes_before_ultraqa_before_ultrawork() -> None:
    states = {
        "ultrawork": {"active": True, "objective": "o"},
        "ultraqa": {"active": True, "goal": "g"},
        "ralph": ralph(),
    }
    assert decide(states, "", now=NOW).mode == "ralph"
    del states["ralph"]
    assert decide(states, "", now=NOW).mode == "ultraqa"


def test_last_decision_records_the_stop_and_when() -> None:
    stop = {"cli": "copilot", "session": "s", "stop": "t1"}
    d = decide({"ralph": ralph()}, "", now=NOW, stop=stop)
    assert d.state is not None
    last = d.state["lastDecision"]
    assert last["action"] == "block" and last["step"] == 1 and last["max"] == 3
    assert last["cli"] == "copilot" and last["stop"] == "t1"
    assert last["at"] == "2026-11-30T21:55:00.000Z"


def test_gemini_only_the_newest_part_of_a_growing_response_counts() -> None:
    first = fixture("gemini-AfterAgent-1.json")["prompt_response"]
    second = fixture("gemini-AfterAgent-2.json")["prompt_response"]
    assert second.startswith(first)
    assert decision.newest_part(first, second) == "\nAll done.\nRALPH_COMPLETE"
    # An old word in the part seen before must not end the next loop.
    old = "done\nRALPH_COMPLETE\n"
    assert not decision.completed(decision.newest_part(old, old + "more work"), "RALPH_COMPLETE")
    assert decision.newest_part(None, second) == second
    assert decision.newest_part("another prompt's text", second) == second


def test_copilot_reply_comes_from_the_transcript_before_this_stops_hook_start() -> None:
    data = (FIX / "copilot-events.jsonl").read_bytes()
    for name in ("copilot-agentStop.json", "copilot-Stop.json"):
        inp = payloads.read(fixture(name), {})
        assert inp.cli == "copilot" and inp.reply is None and inp.stop_ms == 1796075680748
        text = transcript.reply_before_stop(data, inp.stop_ms)
        assert text == "The haiku is finished and checked.\nRALPH_COMPLETE"
        d = decide({"ralph": ralph(iteration=1)}, text, now=NOW)
        assert d.why == "complete"
    # The earlier stop's reply is the first draft, and the injected user line never leaks in.
    earlier = transcript.reply_before_stop(data, 1796075675200)
    assert earlier == "First draft written."
    assert decide({"ralph": ralph()}, earlier, now=NOW).action == "block"
    # A transcript not yet holding this stop (the lag): unknown, not the previous reply.
    lagging = b"\n".join(data.splitlines()[:7])
    assert transcript.reply_before_stop(lagging, 1796075680748) is None


def test_payload_detection_and_stop_identity() -> None:
    seen = {n: payloads.read(fixture(n), {}) for n in sorted(p.name for p in FIX.glob("*.json"))}
    assert {n: i.cli for n, i in seen.items()} == {
        "claude-Stop.json": "claude",
        "codex-Stop.json": "codex",
        "copilot-Stop.json": "copilot",
        "copilot-agentStop.json": "copilot",
        "gemini-AfterAgent-1.json": "gemini",
        "gemini-AfterAgent-2.json": "gemini",
    }
    # Copilot's two spellings of one stop share its identity (they fire ~70 ms apart).
    assert seen["copilot-Stop.json"].stop_id == seen["copilot-agentStop.json"].stop_id
    assert seen["copilot-Stop.json"].session_id == seen["copilot-agentStop.json"].session_id
    assert seen["copilot-Stop.json"].exact and not seen["codex-Stop.json"].exact
    assert seen["gemini-AfterAgent-1.json"].stop_id != seen["gemini-AfterAgent-2.json"].stop_id
    assert seen["gemini-AfterAgent-2.json"].hook_active is True
    assert seen["codex-Stop.json"].reply == "All done."
    # Codex keeps turn_id across continuations: a new reply is a new stop.
    codex = fixture("codex-Stop.json")
    again = payloads.read({**codex, "last_assistant_message": "More."}, {})
    assert again.stop_id != seen["codex-Stop.json"].stop_id
    # No session id: none is invented.
    assert payloads.read({"hook_event_name": "Stop"}, {}).session_id is None


def test_each_cli_gets_its_own_answer() -> None:
    for cli in payloads.CLIS:
        assert json.loads(replies.block(cli, "go on")) == {"decision": "block", "reason": "go on"}
    assert replies.allow("copilot") == replies.allow("claude") == replies.allow("gemini") == "{}"
    assert replies.allow("codex") == ""
    assert json.loads(replies.allow("codex", "ended")) == {"systemMessage": "ended"}
    assert replies.allow("copilot", "ended") == "{}"
    with pytest.raises(ValueError):
        replies.block("copilot", "  ")


def test_an_older_claude_code_without_last_assistant_message_reads_its_transcript(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    records = [
        {"type": "user", "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "old"}]}},
        {"type": "user", "message": {"role": "user", "content": "RALPH_COMPLETE"}},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "Finished."},
                    {"type": "tool_use", "name": "x"},
                    {"type": "text", "text": "RALPH_COMPLETE"},
                ]
            },
        },
        {"type": "system", "subtype": "stop_hook_summary"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert transcript.claude_reply(str(path)) == "Finished.\nRALPH_COMPLETE"
    assert transcript.claude_reply(str(tmp_path / "missing.jsonl")) is None
    p = fixture("claude-Stop.json")
    del p["last_assistant_message"]
    assert payloads.read(p, {}).reply is None  # so run.py falls back to the transcript


def test_the_block_a_cli_would_ignore_is_not_counted() -> None:
    state = ralph(iteration=8, maxIterations=10)
    d = decide({"ralph": state}, "more", now=NOW, in_a_row=7, cli_limit=8)
    assert (d.action, d.step) == ("block", 9)
    d = decide({"ralph": state}, "more", now=NOW, in_a_row=8, cli_limit=8)
    assert (d.action, d.why, d.step) == ("allow", "cli_limit", 8)
    assert d.state is not None and d.state["active"] is True and d.state["iteration"] == 8
    assert "paused at 8/10" in (decision.end_note(d) or "")
    # The word or the cap still end the loop at that stop.
    assert decide({"ralph": state}, "RALPH_COMPLETE", now=NOW, in_a_row=8, cli_limit=8).why == (
        "complete"
    )
    assert decide({"ralph": state}, "", now=NOW, in_a_row=99, cli_limit=None).action == "block"
