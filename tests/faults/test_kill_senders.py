"""Fault: senders killed with SIGKILL at random while 8 of them append to the same mailboxes.

Promise: every send that returned ok is in the mailbox exactly once; every line parses except at
most one fragment per killed writer, and such a fragment is kept (its bytes stay in the file),
skipped by readers, reported as a bad line, and never glued onto the line after it.
"""

from __future__ import annotations

import os
import random
import time
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from tests.faults.support import (
    RECIPIENTS,
    complete_lines,
    kill_and_reap,
    sender,
    split_jsonl,
    start,
)
from tests.helpers import call_api, isolate, mailbox_file, make_project, make_team

SENDERS = 8
SENDS = 500
RANDOM_KILLS = 12
# The kill schedule's seed (read before the test drops OMP_* variables); failures print theirs.
# The schedule is in wall-clock time, so a seed repeats the choices, not the exact interleaving.
SEED = int(os.environ.get("OMP_FAULT_SEED", "0"))
# Slots whose first incarnation dies mid-line at this send (deterministic torn writes).
TEARS = {2: 37, 5: 211}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def test_senders_killed_at_random_lose_no_acknowledged_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 11, no_limits=True)  # worker-1..8 send
    acks_dir = tmp_path / "acks"
    acks_dir.mkdir()
    seed = SEED or random.randrange(1 << 30)
    rng = random.Random(seed)

    incarnations = [0] * SENDERS
    kills = 0

    def acked(slot: int) -> list[str]:
        return [i for f in sorted(acks_dir.glob(f"{slot}-*")) for i in complete_lines(f)]

    def launch(slot: int) -> BaseProcess:
        n = incarnations[slot]
        incarnations[slot] += 1
        tear = TEARS.get(slot, -1) if n == 0 else -1
        side = acks_dir / f"{slot}-{n}"
        return start(sender, str(root), slot, len(acked(slot)), SENDS, str(side), tear)

    procs = {slot: launch(slot) for slot in range(SENDERS)}
    deadline = time.monotonic() + 120
    random_kills = 0
    while any(p.is_alive() or p.exitcode not in (0, None) for p in procs.values()):
        assert time.monotonic() < deadline, f"senders did not finish (seed {seed})"
        # A fault schedule, not synchronization: the next kill lands at a random moment.
        time.sleep(rng.uniform(0.02, 0.25))
        for slot, p in list(procs.items()):
            if not p.is_alive() and p.exitcode not in (0, None):
                p.join()
                assert p.exitcode == -9, f"slot {slot} failed with {p.exitcode} (seed {seed})"
                kills += 1  # a torn write killed itself
                procs[slot] = launch(slot)
        # A slot due to tear its own line is left alone until it has done so.
        alive = [
            s
            for s, p in procs.items()
            if p.is_alive() and not (s in TEARS and incarnations[s] == 1)
        ]
        if random_kills < RANDOM_KILLS and alive:
            slot = rng.choice(alive)
            kill_and_reap(procs[slot])
            if procs[slot].exitcode == -9:
                kills += 1
                random_kills += 1
            procs[slot] = launch(slot)
    for p in procs.values():
        p.join()

    all_acked = {slot: acked(slot) for slot in range(SENDERS)}
    assert all(len(v) == SENDS for v in all_acked.values()), (
        seed,
        {k: len(v) for k, v in all_acked.items()},
    )
    wanted = {i for v in all_acked.values() for i in v}
    assert len(wanted) == SENDERS * SENDS

    where: dict[str, str] = {}
    fragments: dict[str, list[bytes]] = {}
    for rcpt in RECIPIENTS:
        data = mailbox_file(root, rcpt).read_bytes()
        assert data.endswith(b"\n"), "the last line is whole"
        good, fragments[rcpt] = split_jsonl(data)
        for rec in good:
            assert rec["type"] == "message" and rec["to"] == rcpt, rec
            assert rec["id"] not in where, f"message {rec['id']} stored twice"
            where[rec["id"]] = rcpt
        # A fragment is the front of a message line cut short, standing alone on its line: a
        # glued line would hold a second `{"type":` (and its message would be missing below).
        for frag in fragments[rcpt]:
            assert frag.startswith(b'{"type":"message"') and frag.count(b'{"type":') == 1, frag
    missing = wanted - where.keys()
    assert not missing, f"{len(missing)} acknowledged message(s) lost (seed {seed})"
    n_frag = sum(len(v) for v in fragments.values())
    assert len(TEARS) <= n_frag <= kills, (n_frag, kills, seed)
    kept = b"".join(f for v in fragments.values() for f in v)
    for slot in TEARS:  # the lines torn on purpose are still there, cut short
        assert f'"from":"worker-{slot + 1}"'.encode() in kept, (slot, seed)

    # Through the API: a full drain returns every stored message once, fragments only counted.
    for rcpt in RECIPIENTS:
        drained: list[str] = []
        while True:
            r = call_api(
                capsys,
                "mailbox-read",
                {"team_name": "demo", "cwd": str(root), "worker": rcpt, "limit": 1000},
            )
            assert r.rc == 0, r
            if not r.json["messages"]:
                break
            drained += [m["id"] for m in r.json["messages"]]
        assert sorted(drained) == sorted(i for i, w in where.items() if w == rcpt)
        listing = call_api(
            capsys, "mailbox-list", {"team_name": "demo", "cwd": str(root), "worker": rcpt}
        )
        assert listing.json["badLines"] == len(fragments[rcpt]), (rcpt, seed)
