"""Each CLI's reader on its recorded session files: exact sums, equal to what the model
reported; and reading in pieces equals reading at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.usage.read import READERS, read_usage
from omp.usage.scan import has_marker
from omp.usage.totals import ReadState, Tokens, Unreadable, UsageTotals, epoch
from tests.usage import fixtures as fx

NAMES = sorted(fx.EXPECTED)


def totals(kind: str, path: Path, state: ReadState | None = None) -> UsageTotals:
    got, _ = read_usage(kind, path, state)
    assert isinstance(got, UsageTotals), got
    return got


@pytest.mark.parametrize("name", NAMES)
def test_a_recorded_session_sums_to_what_the_model_reported(name: str) -> None:
    kind = fx.kind(name)
    total = Tokens()
    for path in fx.records(name):
        got = totals(kind, path)
        assert set(got.models) == {fx.MODELS[kind]}
        assert got.models[fx.MODELS[kind]] == got.tokens
        assert got.skipped == 0
        total = total.plus(got.tokens)
    assert total == fx.EXPECTED[name]
    assert total == fx.served(name)


def _usage_times(kind: str, path: Path) -> list[float]:
    """The time of each line that reports tokens, found without the readers' code."""
    keys = {"copilot": "session.usage_record", "claude": '"usage"', "codex": "token_usage_record",
            "gemini": '"tokens"', "pi": '"usage"'}  # fmt: skip
    out = []
    for line in path.read_text().splitlines():
        if keys[kind] in line:
            doc = json.loads(line)
            if kind == "claude" and doc.get("type") != "assistant":
                continue
            if kind == "pi" and (doc.get("message") or {}).get("role") != "assistant":
                continue
            when = epoch(doc.get("timestamp"))
            assert when is not None
            out.append(when)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_the_last_call_is_the_time_of_the_last_usage_line(name: str) -> None:
    kind = fx.kind(name)
    for path in fx.records(name):
        assert totals(kind, path).last_call == max(_usage_times(kind, path))


def test_copilot_input_leaves_out_the_cache_it_includes() -> None:
    """Copilot's `inputTokens` holds cache reads and writes: 1011 fresh + 100 read + 20 written
    was recorded as 1131; the reader gives 1011."""
    path = fx.records("copilot-anthropic")[0]
    first = next(ln for ln in path.read_text().splitlines() if "session.usage_record" in ln)
    assert json.loads(first)["data"]["usage"]["inputTokens"] == 1131
    one = path.parent / "one.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    one.write_text(lines[0] + first + "\n")
    try:
        assert totals("copilot", one).tokens == Tokens(1, 1011, 13, 100, 20)
    finally:
        one.unlink()


@pytest.mark.parametrize("name", NAMES)
def test_reading_in_pieces_equals_reading_at_once(name: str, tmp_path: Path) -> None:
    """The file grows as the CLI writes it, cut anywhere (mid-line too): the running totals
    after the last piece are the totals of one read, and no call is counted twice."""
    kind = fx.kind(name)
    for src in fx.records(name):
        data = src.read_bytes()
        whole = totals(kind, src)
        path = tmp_path / src.name
        path.write_bytes(b"")
        state: ReadState | None = None
        cuts = sorted({*range(0, len(data), max(len(data) // 23, 1)), len(data)})
        for cut in cuts:
            with path.open("ab") as f:
                f.write(data[path.stat().st_size : cut])
            got, state = read_usage(kind, path, state)
            assert isinstance(got, UsageTotals), (cut, got)
            assert state.offset == data.rfind(b"\n", 0, cut) + 1
            # a state saved as JSON and loaded again reads on the same
            state = ReadState.from_json(json.loads(json.dumps(state.to_json())), kind)
        assert got == whole


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_a_torn_last_line_waits_for_its_newline(name: str, tmp_path: Path) -> None:
    """The CLI is writing its last call's line: the read stops before it, and the next read,
    once the line is whole, counts it once."""
    kind = fx.kind(name)
    lines = fx.records(name)[0].read_bytes().splitlines(keepends=True)
    probe = tmp_path / "probe"
    calls = [totals(kind, _write(probe, lines[:n])).tokens.calls for n in range(len(lines) + 1)]
    last = max(n for n in range(len(lines)) if calls[n + 1] > calls[n])  # the last call's line
    before = totals(kind, _write(probe, lines[:last]))
    path = _write(tmp_path / "record", [*lines[:last], lines[last][:-20]])
    got, state = read_usage(kind, path)
    assert got == before
    assert state.offset == sum(len(ln) for ln in lines[:last])
    with path.open("ab") as f:
        f.write(lines[last][-20:])
    got, state = read_usage(kind, path, state)
    assert isinstance(got, UsageTotals)
    assert got.tokens.calls == before.tokens.calls + 1
    assert got == totals(kind, path)


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_a_line_cut_by_a_crash_is_skipped_and_counted(name: str, tmp_path: Path) -> None:
    """A CLI killed mid-line, then started again on the same file: the fragment is one bad
    line, the next line is whole. The fragment's call is lost (the record lost it), the
    `skipped` count says so, and nothing else moves."""
    kind = fx.kind(name)
    src = fx.records(name)[0]
    lines = src.read_bytes().splitlines(keepends=True)
    reader = READERS[kind]
    at = next(i for i, ln in enumerate(lines) if i and has_marker(reader, ln))
    found = min(lines[at].find(m) + len(m) for m in reader.markers if m in lines[at])
    cut = lines[at][: found + 3] + b"\n"  # cut just past the words the scan looks for
    path = _write(tmp_path / src.name, [*lines[:at], cut, *lines[at:]])
    got = totals(kind, path)
    assert got.skipped == 1
    assert got.tokens == totals(kind, src).tokens


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_a_truncated_or_replaced_file_is_read_again_from_the_top(name: str, tmp_path: Path) -> None:
    kind = fx.kind(name)
    src = fx.records(name)[0]
    data = src.read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / src.name
    path.write_bytes(data)
    _, state = read_usage(kind, path)
    # truncated in place (same inode, shorter): from the top
    half = b"".join(lines[: len(lines) // 2])
    path.write_bytes(half)
    got, state = read_usage(kind, path, state)
    assert got == totals(kind, _write(tmp_path / "half", lines[: len(lines) // 2]))
    # rewritten in place, longer, another first line: the head check notices
    other = lines[0].replace(b"0", b"1", 1)
    assert other != lines[0]
    path.write_bytes(other + b"".join(lines[1:]))
    got, state = read_usage(kind, path, state)
    assert got == totals(kind, src)
    assert state.offset == len(data)
    # replaced by another file (a new inode), whatever its size: from the top
    new = tmp_path / "new"
    new.write_bytes(data)
    new.replace(path)
    got, state2 = read_usage(kind, path, state)
    assert got == totals(kind, src)
    assert state2.ino != state.ino


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_an_unchanged_file_costs_no_reading(name: str) -> None:
    kind = fx.kind(name)
    src = fx.records(name)[0]
    got, state = read_usage(kind, src)
    again, state2 = read_usage(kind, src, state)
    assert again == got
    assert state2 == state


def test_a_record_omp_cannot_read_says_why_never_zero(tmp_path: Path) -> None:
    missing, state = read_usage("copilot", tmp_path / "nope.jsonl")
    assert isinstance(missing, Unreadable) and missing.reason == "missing"
    assert state == ReadState(kind="copilot")
    folder, _ = read_usage("claude", tmp_path)
    assert isinstance(folder, Unreadable) and folder.reason == "not_a_file"
    unknown, _ = read_usage("aider", fx.records("copilot")[0])
    assert isinstance(unknown, Unreadable) and unknown.reason == "unknown_kind"
    assert "copilot, claude, codex, gemini, pi" in unknown.why
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xffnot json\n")
    bad, _ = read_usage("pi", garbage)
    assert isinstance(bad, Unreadable) and bad.reason == "format"
    assert bad.to_json() == {"unreadable": "format", "why": bad.why}


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root reads any file")  # fmt: skip
def test_a_record_without_read_permission_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(fx.records("copilot")[0].read_bytes())
    path.chmod(0)
    got, _ = read_usage("copilot", path)
    assert isinstance(got, Unreadable) and got.reason == "permission"


@pytest.mark.parametrize("name", ["copilot", "claude", "codex", "gemini", "pi"])
def test_a_record_read_as_another_cli_is_refused_not_counted(name: str) -> None:
    """A wrong kind (a worker's agent changed, a path mixed up) is a format error, never a row
    of zeros that looks like an idle worker."""
    for other in READERS:
        if other == fx.kind(name):
            continue
        got, _ = read_usage(other, fx.records(name)[0])
        assert isinstance(got, Unreadable) and got.reason == "format", (other, got)


def test_an_unreadable_read_keeps_what_was_counted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(fx.records("copilot")[0].read_bytes())
    first, state = read_usage("copilot", path)
    path.rename(tmp_path / "moved")
    gone, kept = read_usage("copilot", path, state)
    assert isinstance(gone, Unreadable) and kept == state
    (tmp_path / "moved").rename(path)
    back, _ = read_usage("copilot", path, kept)
    assert back == first


def test_an_empty_record_is_a_session_without_calls(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"")
    got, state = read_usage("copilot", path)
    assert isinstance(got, UsageTotals)
    assert got.tokens == Tokens() and got.last_call is None and state.offset == 0


def test_a_damaged_saved_state_costs_a_full_read_not_a_wrong_sum() -> None:
    src = fx.records("codex")[0]
    _, state = read_usage("codex", src)
    doc = state.to_json()
    damaged: list[Any] = [
        {**doc, "offset": "x"},
        {**doc, "kind": "pi"},
        {**doc, "head_len": 10**9},
        {**doc, "models": {"m": [1, 2]}},
        None,
        [],
    ]
    for broken in damaged:
        fresh = ReadState.from_json(broken, "codex")
        assert fresh == ReadState(kind="codex")
        got, _ = read_usage("codex", src, fresh)
        assert isinstance(got, UsageTotals) and got.tokens == fx.EXPECTED["codex"]


def test_totals_as_json() -> None:
    got = totals("claude", fx.records("claude")[0])
    tokens = {"calls": 3, "input": 6033, "output": 69, "cacheRead": 600, "cacheWrite": 120}
    doc = got.to_json()
    assert doc == {**tokens, "lastCall": doc["lastCall"], "models": {"claude-opus-5-5": tokens}}
    assert str(doc["lastCall"]).endswith("Z")
    assert epoch(doc["lastCall"]) == pytest.approx(got.last_call, abs=0.001)


def test_the_kinds_named_without_loading_a_reader_are_the_readers() -> None:
    """`omp.usage.totals.KINDS` (what a view checks before loading any reader) is READERS."""
    from omp.usage.read import READERS
    from omp.usage.totals import KINDS

    assert set(READERS) == KINDS
