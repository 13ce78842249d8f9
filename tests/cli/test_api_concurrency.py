"""Many writers at once: every line whole and parseable, every id unique, nothing lost."""

from __future__ import annotations

import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from omp.mail.mailbox import Mailbox
from omp.store.paths import StatePaths
from tests.helpers import (
    append_worker,
    child_env,
    cli_send_worker,
    isolate,
    mailbox_file,
    mailbox_worker,
    make_project,
    make_team,
    run_api,
    run_processes,
)

pytestmark = pytest.mark.slow  # many processes at once

PROCS = 8
PER_PROC = 500


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def parse_strict(path: Path) -> list[dict[str, Any]]:
    """Every line of the file; fails on a torn line, a blank line or a missing final newline."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    out = []
    for i, raw in enumerate(data.split(b"\n")[:-1]):
        try:
            rec = json.loads(raw)
        except ValueError:
            pytest.fail(f"line {i} is torn: {raw[:120]!r}")
        assert isinstance(rec, dict)
        out.append(rec)
    return out


def test_8_processes_x_500_jsonl_appends(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    run_processes(append_worker, [(str(path), w, PER_PROC) for w in range(PROCS)])
    recs = parse_strict(path)
    assert len(recs) == PROCS * PER_PROC
    assert len({r["id"] for r in recs}) == len(recs)
    seqs: dict[int, list[int]] = defaultdict(list)
    for r in recs:
        seqs[r["writer"]].append(r["seq"])
        assert r["pad"] == "x" * 200
    # each writer's lines are all there, in the order that writer appended them
    assert seqs == {w: list(range(PER_PROC)) for w in range(PROCS)}


def test_8_processes_append_through_the_full_mailbox_path(tmp_path: Path) -> None:
    # Mailbox.append_messages rewrites its index on every call (O(unread) each), so this runs
    # fewer appends than the raw store test above; the index must still agree with the file.
    per = 100
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 2)
    run_processes(mailbox_worker, [(str(root), "demo", "worker-2", w, per) for w in range(PROCS)])
    path = mailbox_file(root, "worker-2")
    recs = parse_strict(path)
    assert len(recs) == PROCS * per
    ids = [r["id"] for r in recs]
    assert len(set(ids)) == len(ids)
    for mid in ids[::50]:
        ULID.from_str(mid)
    by_writer: dict[str, list[str]] = defaultdict(list)
    for r in recs:
        w, seq = r["body"].split(":")
        by_writer[w].append(seq)
    assert by_writer == {str(w): [str(i) for i in range(per)] for w in range(PROCS)}
    box = Mailbox(StatePaths(root).team("demo"), "worker-2")
    und, bad = box.undelivered()
    assert [m["id"] for m in und] == ids and bad == 0
    assert box.unread_count() == PROCS * per


def _check_mailbox(root: Path, recipient: str, sent: dict[str, list[str]]) -> None:
    recs = parse_strict(mailbox_file(root, recipient))
    total = sum(len(v) for v in sent.values())
    assert len(recs) == total
    ids = [r["id"] for r in recs]
    assert len(set(ids)) == len(ids)
    assert sorted(ids) == sorted(i for batch in sent.values() for i in batch)
    for sender, batch in sent.items():
        # every sender's messages are in the file in the order it sent them
        assert [r["id"] for r in recs if r["from"] == sender] == batch
    box = Mailbox(StatePaths(root).team("demo"), recipient)
    assert box.unread_count() == total
    assert [m["id"] for m in box.undelivered()[0]] == ids


def test_4_processes_x_50_sends_through_the_cli_entry_point(tmp_path: Path) -> None:
    procs, per = 4, 50
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 5, no_limits=True)
    outs = [tmp_path / f"ids-{w}.json" for w in range(procs)]
    run_processes(
        cli_send_worker,
        [(str(root), f"worker-{w + 1}", "worker-5", per, str(outs[w])) for w in range(procs)],
    )
    sent = {f"worker-{w + 1}": json.loads(outs[w].read_text()) for w in range(procs)}
    assert all(len(v) == per for v in sent.values())
    _check_mailbox(root, "worker-5", sent)


def test_4_concurrent_omp_processes_sending(tmp_path: Path) -> None:
    # Real `python -m omp` processes, 4 running at any moment. Fewer sends than the test above:
    # each process start costs ~50-100 ms and this suite must stay fast.
    procs, per = 4, 10
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 5, no_limits=True)
    env = child_env(tmp_path / "home")

    def sender(w: int) -> list[str]:
        ids = []
        for i in range(per):
            r = run_api(
                "send-message",
                {
                    "team_name": "demo",
                    "from": f"worker-{w + 1}",
                    "to": "worker-5",
                    "body": f"{w}:{i} " + "y" * 100,
                },
                cwd=root,
                env=env,
            )
            assert r.rc == 0, r
            assert r.stderr == ""
            ids.append(r.json["messageId"])
        return ids

    with ThreadPoolExecutor(procs) as pool:
        batches = list(pool.map(sender, range(procs)))
    _check_mailbox(root, "worker-5", {f"worker-{w + 1}": b for w, b in enumerate(batches)})
