"""Fault: a reader killed between reading mail and recording that it read it.

Promise: nothing is lost. A message is at worst shown again, never dropped: `mailbox-read` writes
its receipts only after the messages were printed, and the generic cursor reader
(`omp.store.jsonl.consume`) moves its cursor only after its handler returned.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from omp.store import jsonl
from tests.faults.support import (
    api_reader,
    complete_lines,
    cursor_reader,
    kill_and_reap,
    log_writer,
    start,
)
from tests.helpers import call_api, isolate, mailbox_file, make_project, make_team, records


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 2, no_limits=True)
    return root


def _send(
    capsys: pytest.CaptureFixture[str], root: Path, n: int, to: str = "worker-2"
) -> list[str]:
    ids = []
    for i in range(n):
        r = call_api(
            capsys,
            "send-message",
            {"team_name": "demo", "cwd": str(root), "from": "leader", "to": to, "body": f"m{i}"},
        )
        assert r.rc == 0, r
        ids.append(r.json["messageId"])
    return ids


def _read_argv(root: Path, *, as_json: bool, limit: int = 50) -> list[str]:
    payload = {"team_name": "demo", "cwd": str(root), "worker": "worker-2", "limit": limit}
    return ["mailbox-read", "--input", json.dumps(payload), *(["--json"] if as_json else [])]


def _receipts(root: Path) -> list[str]:
    return [r["messageId"] for r in records(mailbox_file(root, "worker-2")) if "messageId" in r]


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_mailbox_read_killed_after_printing_shows_the_mail_again(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    ids = _send(capsys, root, 3)
    out = tmp_path / "out"
    proc = start(api_reader, _read_argv(root, as_json=as_json), str(out), True)
    proc.join(30)
    assert proc.exitcode == -9, "the reader died by SIGKILL"
    printed = out.read_text()
    if as_json:
        assert [m["id"] for m in json.loads(printed)["messages"]] == ids
    else:
        assert all(f"m{i}" in printed for i in range(3)), printed
    assert _receipts(root) == [], "no receipt was written before the kill"

    again = call_api(capsys, "mailbox-read", json.loads(_read_argv(root, as_json=True)[2]))
    assert [m["id"] for m in again.json["messages"]] == ids, "shown again, not dropped"
    assert _receipts(root) == ids
    empty = call_api(capsys, "mailbox-read", json.loads(_read_argv(root, as_json=True)[2]))
    assert empty.json["messages"] == []


def test_mailbox_read_killed_at_random_moments_never_drops_a_message(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _send(capsys, root, 60)
    rng = random.Random()
    shown: set[str] = set()
    killed = 0
    for attempt in range(400):
        out = tmp_path / f"out-{attempt}"
        proc = start(api_reader, _read_argv(root, as_json=True, limit=4), str(out), False)
        # A fault schedule, not synchronization: kill at a random point of the call, or not.
        if rng.random() < 0.7:
            time.sleep(rng.uniform(0, 0.012))
            killed += proc.is_alive()
        kill_and_reap(proc)
        try:
            result: dict[str, Any] = json.loads(out.read_bytes())
        except (OSError, ValueError):
            result = {}  # killed before (or while) printing: it showed nothing whole
        shown |= {m["id"] for m in result.get("messages", [])}
        # The invariant at every step: a receipt exists only for a message that was shown whole.
        receipted = set(_receipts(root))
        assert receipted <= shown, f"dropped without being shown: {receipted - shown}"
        if len(receipted) == len(ids):
            break
    else:
        pytest.fail("the mailbox was never drained")
    assert killed > 0, "no reader was killed mid-call; the schedule proved nothing"
    assert shown == set(ids)


def test_the_cursor_reader_killed_in_its_handler_reads_the_lines_again(tmp_path: Path) -> None:
    log, cursor, out = tmp_path / "log.jsonl", tmp_path / ".log.offset", tmp_path / "out"
    for n in range(5):
        jsonl.append(log, {"n": n})
    proc = start(cursor_reader, str(log), str(cursor), str(out), True, 1)
    proc.join(30)
    assert proc.exitcode == -9
    assert complete_lines(out) == ["0 1 2 3 4"], "the handler saw the lines"
    assert jsonl.read_cursor(cursor) == 0, "the cursor did not move"
    again = jsonl.consume(log, cursor, lambda chunk: None)
    assert [rec["n"] for _, _, rec in again.records] == [0, 1, 2, 3, 4]
    assert jsonl.read_cursor(cursor) == log.stat().st_size


def test_a_failing_handler_leaves_the_cursor_where_it_was(tmp_path: Path) -> None:
    log, cursor = tmp_path / "log.jsonl", tmp_path / ".log.offset"
    jsonl.append(log, {"n": 0})

    def boom(chunk: jsonl.Chunk) -> None:
        raise RuntimeError("handler failed")

    with pytest.raises(RuntimeError):
        jsonl.consume(log, cursor, boom)
    assert not cursor.exists()
    assert [rec["n"] for _, _, rec in jsonl.consume(log, cursor, lambda c: None).records] == [0]


def test_cursor_readers_killed_at_random_while_a_writer_appends_miss_nothing(
    tmp_path: Path,
) -> None:
    log, cursor = tmp_path / "log.jsonl", tmp_path / ".log.offset"
    total = 3000
    writer = start(log_writer, str(log), total)
    rng = random.Random()
    outs: list[Path] = []
    kills = 0
    while writer.is_alive() or kills < 10:
        out = tmp_path / f"out-{len(outs)}"
        outs.append(out)
        reader = start(cursor_reader, str(log), str(cursor), str(out), False, 1_000_000)
        time.sleep(rng.uniform(0.001, 0.03))  # the fault schedule
        kill_and_reap(reader)
        kills += 1
    writer.join(30)
    assert writer.exitcode == 0
    final = tmp_path / "out-final"
    outs.append(final)
    cursor_reader(str(log), str(cursor), str(final), False, 1)
    seen = [int(n) for out in outs for line in complete_lines(out) for n in line.split()]
    assert sorted(set(seen)) == list(range(total)), "a line was skipped"
    # At-least-once, and in order within each handler call.
    assert len(seen) >= total
    assert jsonl.read_cursor(cursor) == log.stat().st_size
