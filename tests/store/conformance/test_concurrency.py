"""Conformance under load and under fire: many sender processes on one mailbox (0 lost, 0
duplicated, 0 torn), and the same with senders SIGKILLed (files) or the Redis server SIGKILLed
and started again mid-run: every message a sender saw acknowledged is there exactly once.

Senders are real processes (`tests.store.conformance.writer`): each writes a message id to its
ack file only after `send` returned, so the ack files say what the store must hold."""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, poll
from tests.store.conformance.conftest import TEAM, Backend, child_env

RECIPIENT = "worker-1"


class Senders:
    def __init__(self, backend: Backend, tmp: Path, writers: int, count: int) -> None:
        self.backend, self.count = backend, count
        self.acks = [tmp / f"acks-{w}.txt" for w in range(writers)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * writers
        self.env = child_env(backend)

    def start(self, w: int) -> None:
        argv = [sys.executable, "-m", "tests.store.conformance.writer", TEAM, RECIPIENT]
        self.procs[w] = subprocess.Popen(
            [*argv, str(w), str(self.count), str(self.acks[w])],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start_all(self) -> None:
        for w in range(len(self.procs)):
            self.start(w)

    def acked(self) -> list[str]:
        out: list[str] = []
        for path in self.acks:
            if path.exists():
                text = path.read_text()
                whole = text[: text.rfind("\n") + 1]  # a line cut by a kill was never acked
                out += whole.split()
        return out

    def kill(self, w: int) -> None:
        proc = self.procs[w]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)

    def finish(self, timeout: float = 240) -> None:
        for w, proc in enumerate(self.procs):
            assert proc is not None
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"sender {w} exited {proc.returncode}: {err.decode()}"


def check_mailbox(backend: Backend, acked: list[str], *, exact: int | None) -> None:
    store = backend.open()
    batch = store.read(TEAM, f"mailbox/{RECIPIENT}")
    assert batch.bad == 0, "torn or damaged lines"
    ids = [r["id"] for r in batch.records if r.get("type") == "message"]
    dup = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert dup == [], f"{len(dup)} duplicated"
    lost = set(acked) - set(ids)
    assert not lost, f"{len(lost)} acknowledged messages lost"
    for r in batch.records:  # every record whole
        assert r["body"].endswith("x" * 300) and r["to"] == RECIPIENT
    if exact is not None:
        assert len(ids) == exact
    assert len(store.undelivered(TEAM, RECIPIENT)) == len(ids)


def test_many_processes_append_to_one_mailbox(backend: Backend, tmp_path: Path) -> None:
    senders = Senders(backend, tmp_path, writers=4, count=40)
    senders.start_all()
    senders.finish()
    acked = senders.acked()
    assert len(acked) == 160
    check_mailbox(backend, acked, exact=160)


@pytest.mark.slow
def test_many_processes_append_many(backend: Backend, tmp_path: Path) -> None:
    senders = Senders(backend, tmp_path, writers=8, count=250)
    senders.start_all()
    senders.finish()
    check_mailbox(backend, senders.acked(), exact=2000)


@pytest.mark.slow
def test_chaos_nothing_acknowledged_is_lost(own_backend: Backend, tmp_path: Path) -> None:
    """Files: senders are SIGKILLed at random moments and started again. Redis: the server is
    SIGKILLed twice mid-run and started again on its append-only file (fsync always); the
    senders wait for it and retry under the same op ids."""
    b = own_backend
    senders = Senders(b, tmp_path, writers=6, count=200)
    senders.start_all()
    rng = random.Random(31)
    total = 6 * 200
    rounds = 5
    for round_ in range(1, rounds + 1):
        mark = total * round_ // (rounds + 1)
        poll(lambda: len(senders.acked()) >= mark, timeout=180, what=f"{mark} acks")  # noqa: B023
        assert len(senders.acked()) < total, "the senders finished before the fault"
        if b.server is not None:
            b.server.kill()
            before = len(senders.acked())
            b.server.start()
            assert len(senders.acked()) >= before
        else:
            victim = rng.randrange(6)
            senders.kill(victim)
            senders.start(victim)
    senders.finish()
    acked = senders.acked()
    if b.server is None:
        check_mailbox(b, acked, exact=None)  # a kill between send and ack leaves one unacked
        assert len(acked) == total
    else:
        check_mailbox(b, acked, exact=total)
