"""Record shapes the recorded runs did not show but the CLIs write (older versions, streamed
replies, errors), each made from a recorded file by the rule its CLI follows (named in each
test), never invented: the readers must give the same sums."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omp.usage.read import read_usage
from omp.usage.totals import Tokens, UsageTotals, epoch
from tests.usage import fixtures as fx


def totals(kind: str, path: Path) -> UsageTotals:
    got, _ = read_usage(kind, path)
    assert isinstance(got, UsageTotals), got
    return got


def lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in fx.records(name)[0].read_text().splitlines()]


def write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def test_claude_counts_a_reply_once_at_its_final_usage(tmp_path: Path) -> None:
    """A streamed reply's first block can be written before the final usage arrives (the API
    sends `output_tokens` 1 at the start): an early line with less usage, then the reply's
    lines: one call, the final numbers."""
    docs = lines("claude")
    first = next(i for i, d in enumerate(docs) if d.get("type") == "assistant")
    early = json.loads(json.dumps(docs[first]))
    early["message"]["usage"]["output_tokens"] = 1
    path = write(tmp_path / "t.jsonl", [*docs[:first], early, *docs[first:]])
    assert totals("claude", path).tokens == fx.EXPECTED["claude"]
    # ... and in the other order (a later line never lowers what was counted)
    path = write(tmp_path / "t.jsonl", [*docs[: first + 1], early, *docs[first + 1 :]])
    assert totals("claude", path).tokens == fx.EXPECTED["claude"]


def test_claude_does_not_count_its_own_synthetic_replies(tmp_path: Path) -> None:
    """Claude Code writes an API error as an assistant line of model `<synthetic>`."""
    docs = lines("claude")
    reply = next(d for d in docs if d.get("type") == "assistant")
    synthetic = json.loads(json.dumps(reply))
    synthetic["message"].update(id="synthetic-1", model="<synthetic>")
    path = write(tmp_path / "t.jsonl", [*docs, synthetic])
    assert totals("claude", path).tokens == fx.EXPECTED["claude"]


def test_gemini_reads_the_older_one_document_chat_file(tmp_path: Path) -> None:
    """Before JSONL, Gemini CLI kept a chat as one JSON document: the first line's metadata
    with `messages` (the rule its 0.61 code uses to convert one: `loadConversationRecord`)."""
    docs = lines("gemini")
    meta = docs[0]
    messages: dict[str, Any] = {}
    for d in docs[1:]:
        if "id" in d and "type" in d:
            messages[d["id"]] = d  # a message written again replaces the earlier one
    path = tmp_path / "session-2026-12-01T14-07-b347ddeb.json"
    path.write_text(json.dumps({**meta, "messages": list(messages.values())}, indent=2))
    got, state = read_usage("gemini", path)
    assert isinstance(got, UsageTotals) and got.tokens == fx.EXPECTED["gemini"]
    # unchanged: the saved counts, no new read; half written by the CLI: still the saved counts
    assert read_usage("gemini", path, state) == (got, state)
    path.write_text(path.read_text()[:100])
    half, kept = read_usage("gemini", path, state)
    assert half == got and kept == state
    # never read whole before: a half-written file is unreadable, not zero
    fresh, _ = read_usage("gemini", path)
    assert not isinstance(fresh, UsageTotals) and fresh.reason == "format"


def test_gemini_reads_a_chat_file_whose_metadata_line_was_lost(tmp_path: Path) -> None:
    """Seen in CI with two Gemini 0.61 workers in one project: a chat file beginning with a
    user message (its metadata line deleted under it, the next append recreating the file) is
    still that session's record, summed in full. A file of another CLI stays unreadable."""
    docs = lines("gemini")
    assert "projectHash" in docs[0]
    first = next(i for i, d in enumerate(docs) if d.get("type") == "user")
    path = write(tmp_path / "session-2026-12-01T16-34-0f76ed93.jsonl", docs[first:])
    assert totals("gemini", path).tokens == fx.EXPECTED["gemini"]
    for other in ("codex", "claude", "pi", "copilot"):
        wrong = write(tmp_path / f"{other}.jsonl", lines(other))
        got, _ = read_usage("gemini", wrong)
        assert not isinstance(got, UsageTotals) and got.reason == "format", other


def test_codex_without_per_call_records_counts_the_running_sum(tmp_path: Path) -> None:
    """Codex before `token_usage_record` wrote only `token_count` events with the session's
    running sum, sometimes twice for one call: the growth is counted, once per call."""
    docs = [d for d in lines("codex") if d.get("type") != "token_usage_record"]
    counts = [
        i for i, d in enumerate(docs) if (d.get("payload") or {}).get("type") == "token_count"
    ]
    assert len(counts) == 3
    again = docs[counts[1]]
    path = write(tmp_path / "r.jsonl", [*docs[: counts[1] + 1], again, *docs[counts[1] + 1 :]])
    got = totals("codex", path)
    assert got.tokens == fx.EXPECTED["codex"]
    assert set(got.models) == {"fixture-model"}
    assert got.last_call == epoch(docs[counts[-1]]["timestamp"])


def test_codex_takes_the_model_of_the_turn(tmp_path: Path) -> None:
    docs = lines("codex")
    ctx = next(i for i, d in enumerate(docs) if d.get("type") == "turn_context")
    second = [i for i, d in enumerate(docs) if d.get("type") == "token_usage_record"][1]
    switch = json.loads(json.dumps(docs[ctx]))
    switch["payload"]["model"] = "other-model"
    path = write(tmp_path / "r.jsonl", [*docs[:second], switch, *docs[second:]])
    got = totals("codex", path)
    assert got.models["fixture-model"] == Tokens(1, 1011, 13, 100, 0)
    assert got.models["other-model"] == Tokens(2, 5022, 56, 500, 0)


def test_pi_does_not_count_a_reply_that_failed_before_any_token(tmp_path: Path) -> None:
    docs = lines("pi")
    reply = next(d for d in docs if (d.get("message") or {}).get("role") == "assistant")
    failed = json.loads(json.dumps(reply))
    failed["id"] = "failed01"
    failed["message"]["stopReason"] = "error"
    failed["message"]["usage"].update(input=0, output=0, cacheRead=0, cacheWrite=0, totalTokens=0)
    path = write(tmp_path / "s.jsonl", [*docs, failed])
    assert totals("pi", path).tokens == fx.EXPECTED["pi"]


def test_replies_without_ids_are_each_counted(tmp_path: Path) -> None:
    """A line without the id a reader counts once by is counted as it comes, not merged with
    every other id-less line."""
    docs = lines("gemini")
    replies = [d for d in docs if d.get("type") == "gemini" and "toolCalls" not in d]
    for d in replies:
        d.pop("id")
    path = write(tmp_path / "c.jsonl", [docs[0], *replies])
    assert totals("gemini", path).tokens == fx.EXPECTED["gemini"]
