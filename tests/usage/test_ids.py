"""The session id read from a record's own name (or Gemini's first line), for resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.usage.locate import session_id
from tests.usage import fixtures as fx

# What each recorded session's own files say its id is (the stop hook's payloads: stops.jsonl).
IDS = {
    "copilot": "7f21593c-b092-4dcf-8927-626faf43b091",
    "claude": "202f9a76-aa81-4247-abdc-63ac9081f4cd",
    "codex": "01a231eb-af5f-7072-8638-f478dc8de9a5",
    "gemini": "b347ddeb-2fe8-4747-813d-ef03c255e18c",
    "pi": "01a231eb-f122-75df-a33c-dc283989e957",
}


@pytest.mark.parametrize("name", sorted(IDS))
def test_each_clis_record_names_its_session(name: str) -> None:
    (main, *_) = fx.records(name)
    assert session_id(name, main) == IDS[name]
    stops = fx.ROOT / name / "stops.jsonl"  # pi has no stop hook: no payloads recorded
    assert name == "pi" or IDS[name] in stops.read_text()


def test_a_record_that_does_not_say_gives_no_id(tmp_path: Path) -> None:
    weird = tmp_path / "not-a-session.jsonl"
    weird.write_text('{"sessionId": "../../etc"}\n')
    assert session_id("claude", weird) is None
    assert session_id("copilot", weird) is None
    assert session_id("codex", weird) is None
    # Gemini: the first line's id must be the one the name ends with
    other = tmp_path / "session-2026-12-01T14-07-aaaaaaaa.jsonl"
    other.write_text('{"sessionId": "b347ddeb-2fe8-4747-813d-ef03c255e18c"}\n')
    assert session_id("gemini", other) is None
    lost = tmp_path / "session-2026-12-01T14-07-b347ddeb.jsonl"
    lost.write_text('{"id": "x", "timestamp": "t", "type": "user", "content": []}\n')
    assert session_id("gemini", lost) is None  # its metadata line was lost: a fresh session
    assert session_id("gemini", tmp_path / "missing.jsonl") is None
    assert session_id("unknown-cli", weird) is None
