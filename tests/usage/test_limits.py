"""The bounds of a read of an agent's record (`omp.usage.limits`, `omp.usage.scan`), with the
limits made small so each case is a few kilobytes: a long line is skipped and counted, a line
still growing is skipped on by the next read, an allowance that runs out leaves the place for the
next read, a whole document too large is not parsed, nesting never reaches the parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omp.usage import limits, scan
from omp.usage.limits import Allowance
from omp.usage.read import read_usage
from omp.usage.totals import ReadState, Unreadable, UsageTotals

FIRST = json.dumps({"type": "user", "sessionId": "s", "message": {}}).encode() + b"\n"


def usage(msg_id: str, n: float) -> bytes:
    rec = {"type": "assistant", "sessionId": "s",
           "message": {"id": msg_id, "model": "m", "usage": {"input_tokens": n}}}  # fmt: skip
    return json.dumps(rec).encode() + b"\n"


@pytest.fixture(autouse=True)
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "CHUNK", 256)
    monkeypatch.setattr(scan, "MAX_LINE", 1024)
    monkeypatch.setattr(scan, "MAX_WHOLE", 2048)


def _read(
    path: Path, state: ReadState | None = None, allow: Allowance | None = None
) -> tuple[UsageTotals, ReadState]:
    got, new = read_usage("claude", path, state, allow)
    assert isinstance(got, UsageTotals), got
    return got, new


def test_a_line_past_the_limit_is_skipped_counted_and_the_next_lines_are_read(
    tmp_path: Path,
) -> None:
    blob = b'{"type":"assistant","message":{"usage":{"input_tokens":5},"text":"' + b"x" * 5000
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(FIRST + usage("a", 1) + blob + b'"}}\n' + usage("b", 2))
    got, state = _read(rec)
    assert got.tokens.calls == 2 and got.tokens.input == 3
    assert got.long_lines == 1 and got.to_json()["longLines"] == 1
    assert state.offset == rec.stat().st_size and "longLine" not in state.memo


def test_a_long_line_still_growing_is_skipped_on_by_the_next_read(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(FIRST + usage("a", 1) + b'{"usage":' + b"[" * 3000)
    got, state = _read(rec)
    assert got.tokens.calls == 1 and got.long_lines == 1 and state.memo["longLine"] is True
    assert state.offset == rec.stat().st_size  # what it skipped is never read again
    with rec.open("ab") as f:
        f.write(b"]" * 3000 + b"}\n" + usage("b", 2))
    again, state = _read(rec, state)
    assert again.tokens.calls == 2 and again.long_lines == 1 and "longLine" not in state.memo


def test_a_first_line_past_the_limit_says_so_and_counts_nothing(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(b'{"type":"user","x":"' + b"y" * 5000 + b'"}\n' + usage("a", 1))
    got, state = read_usage("claude", rec)
    assert isinstance(got, Unreadable) and got.reason == "too_large"
    assert state.offset == 0


def test_an_allowance_that_runs_out_stops_at_a_line_and_the_next_read_goes_on(
    tmp_path: Path,
) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(FIRST + b"".join(usage(f"m{i}", 1) for i in range(40)))
    whole, _ = _read(rec)
    part, state = _read(rec, None, Allowance(600, 10.0))
    assert 0 < part.tokens.calls < 40 and part.unread == rec.stat().st_size - state.offset
    assert part.to_json()["unreadBytes"] == part.unread
    rest, state = _read(rec, state)
    assert rest.tokens == whole.tokens and rest.unread == 0


def test_a_stop_flag_ends_a_read_before_its_first_chunk(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(FIRST + usage("a", 1))
    got, state = _read(rec, None, Allowance(1 << 20, 10.0, stop=lambda: True))
    assert got.tokens.calls == 0 and got.unread == rec.stat().st_size and state.offset == 0


def test_a_share_is_charged_to_its_parent_and_never_exceeds_it() -> None:
    now = [0.0]
    scan_allow = Allowance(1000, 5.0, clock=lambda: now[0])
    one = scan_allow.share(800, 10.0)
    assert one.bytes_left == 800 and one.deadline == 5.0
    one.take(700)
    assert scan_allow.bytes_left == 300 and not one.spent()
    two = scan_allow.share(800, 1.0)
    assert two.bytes_left == 300
    now[0] = 1.5
    assert two.spent() and not scan_allow.spent()
    now[0] = 6.0
    assert scan_allow.spent() and one.spent()


def test_a_nested_line_never_reaches_the_parser(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    deep = b'{"usage":' + b"[" * 200 + b"]" * 200 + b"}\n"
    rec.write_bytes(FIRST + deep + usage("a", 4))
    got, _ = _read(rec)
    assert got.tokens.input == 4 and got.skipped == 1


def test_a_whole_document_past_its_limit_is_not_parsed(tmp_path: Path) -> None:
    rec = tmp_path / "session-1.json"
    msgs = [{"id": f"m{i}", "timestamp": "t", "type": "gemini", "tokens": {"input": 1}}
            for i in range(100)]  # fmt: skip
    rec.write_text(json.dumps({"sessionId": "s", "projectHash": "h", "messages": msgs}))
    got, _ = read_usage("gemini", rec)
    assert isinstance(got, Unreadable) and got.reason == "too_large"
    deep = tmp_path / "session-2.json"
    deep.write_bytes(b'{"sessionId":"s","projectHash":"h","x":' + b"[" * 300 + b"]" * 300 + b"}")
    got2, _ = read_usage("gemini", deep)
    assert isinstance(got2, Unreadable) and got2.reason == "format"


def test_the_documented_limits() -> None:
    """docs/usage.md quotes these numbers: change both together."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    for n, unit in (
        (limits.MAX_LINE >> 20, "MiB line"),
        (limits.MAX_WHOLE >> 20, "MiB document"),
        (limits.READ_BYTES >> 20, "MiB and"),
        (limits.SCAN_BYTES >> 20, "MiB"),
    ):
        assert f"{n} {unit}" in docs, (n, unit)


def test_a_count_past_what_json_readers_hold_is_held_there(tmp_path: Path) -> None:
    rec = tmp_path / "r.jsonl"
    rec.write_bytes(FIRST + usage("a", 10**30) + usage("b", 2**53 - 1) + usage("c", 1e300))
    got, _ = _read(rec)
    out = got.to_json()
    assert out["input"] == 2**53 - 1 and out["calls"] == 3
    assert got.tokens.total == 2**53 - 1
    assert json.loads(json.dumps(out))["input"] == float(2**53 - 1)  # exact as a double
