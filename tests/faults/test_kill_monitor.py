"""Fault: the monitor killed with SIGKILL in the middle of a scan, again and again.

The monitor processes are real (`run_monitor` in a child started through `ensure_monitor`, owner
lock and all); only tmux is a fake that records every line typed (`monitor_child.py`), so the
test needs no tmux server and can kill at exact points: in the middle of typing a line (after its
reservation was saved) and at random moments of the scan loop.

Promise: the next start reclaims ownership from the dead monitor (a new token, an
`owner-reclaimed` event, exactly one live monitor), and the 3-nudge caps hold across every kill:
at most 3 unread-count lines per unread batch and at most 3 idle prompts per pane, ever.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp import clock, modes
from omp.mail.mailbox import Mailbox, new_message
from omp.monitor import ctl as ctl
from omp.monitor.policy import IDLE_MAX, UNREAD_MAX, Tracker
from omp.record import config as team_config
from omp.store.paths import StatePaths
from tests.faults.monitor_child import FAKE_SERVER
from tests.faults.support import complete_lines
from tests.helpers import isolate, make_project, make_team, poll

CHILD = Path(__file__).with_name("monitor_child.py")
PANES = {"worker-1": "%1", "worker-2": "%2"}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


class Monitors:
    """Starts monitor children through `ensure_monitor`; kills and reaps them."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root = root
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []
        self.block_at = 0

    def spawn(self, root: Path, token: str) -> int:
        argv = [
            sys.executable,
            str(CHILD),
            "--root",
            str(root),
            "--token",
            token,
            "--log",
            str(self.log),
            "--block-at",
            str(self.block_at),
        ]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc.pid

    def start(self, block_at: int = 0) -> dict[str, Any]:
        self.block_at = block_at
        res = ctl.ensure_monitor(self.root, spawn=self.spawn)
        assert res["started"] is True, res
        owner = poll(lambda: _running(self.root, res["token"]), 20, "the child to adopt the lock")
        assert owner is not None and owner["pid"] == res["pid"]
        return owner

    def kill(self, owner: dict[str, Any]) -> None:
        os.kill(owner["pid"], 9)
        proc = next(p for p in self.procs if p.pid == owner["pid"])
        assert proc.wait(10) == -9

    def live(self) -> list[int]:
        return [p.pid for p in self.procs if p.poll() is None]

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def _running(root: Path, token: str) -> dict[str, Any] | None:
    owner, _ = ctl.read_owner(StatePaths(root))
    if owner is None or owner.token != token or owner.phase != "running":
        return None
    return owner.raw


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Monitors]]:
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 2, task="keep going")  # pending tasks: idle prompts have a reason
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    for w in raw["workers"]:
        w["paneId"] = PANES[w["name"]]
    raw.update(
        agent="demo",
        launchToken="lt-fault",
        tmuxIdentity={
            "socketPath": FAKE_SERVER["socket_path"],
            "serverPid": FAKE_SERVER["server_pid"],
            "serverStartedAt": FAKE_SERVER["server_started_at"],
            "sessionId": "$1",
            "windowId": "@1",
        },
    )
    team_config.write(tp, raw)
    # worker-1 has mail whose own nudge was missed two minutes ago; a loop is active.
    msg = new_message("worker-2", "worker-1", "please look at the parser")
    msg["timestamp"] = clock.iso(time.time() - 120)
    Mailbox(tp, "worker-1").append_messages([msg])
    modes.start_ralph(StatePaths(root), "keep going")
    mons = Monitors(root, tmp_path / "typed.jsonl")
    yield root, mons
    mons.stop_all()


def _typed(log: Path) -> Counter[tuple[str, str]]:
    return Counter((r["pane"], r["kind"]) for r in map(json.loads, complete_lines(log)))


def _trackers(root: Path) -> dict[str, Tracker]:
    out = {}
    targets = StatePaths(root).monitor_targets
    for f in targets.glob("*.json"):
        doc = json.loads(f.read_text())
        out[doc["paneId"]] = Tracker.from_json(doc["tracker"])
    return out


def _caps_reached(root: Path) -> bool:
    tr = _trackers(root)
    return (
        len(tr) == 2
        and tr["%1"].batch_count == UNREAD_MAX
        and all(t.idle_count == IDLE_MAX for t in tr.values())
    )


def _assert_caps(typed: Counter[tuple[str, str]]) -> None:
    assert typed[("%1", "unread")] <= UNREAD_MAX, typed
    assert typed[("%2", "unread")] == 0, typed
    for pane in PANES.values():
        assert typed[(pane, "idle")] <= IDLE_MAX, typed


def _reclaims(root: Path) -> int:
    events = StatePaths(root).monitor_events.read_text().splitlines()
    return sum(json.loads(e)["type"] == "owner-reclaimed" for e in events)


def test_a_monitor_killed_mid_send_is_replaced_and_the_caps_hold(
    setup: tuple[Path, Monitors],
) -> None:
    root, mons = setup
    kills = 0
    # Twice: killed while typing a line (its reservation already on disk).
    for block_at in (1, 2):
        owner = mons.start(block_at)
        marker = mons.log.with_name(f"{mons.log.name}.blocked.{owner['pid']}")
        poll(marker.exists, 20, "the child to block in a send")
        mons.kill(owner)
        kills += 1
        _assert_caps(_typed(mons.log))
    # Then at random moments of the scan loop.
    rng = random.Random()
    for _ in range(4):
        owner = mons.start()
        time.sleep(rng.uniform(0.0, 0.15))  # the fault schedule, not synchronization
        mons.kill(owner)
        kills += 1
        _assert_caps(_typed(mons.log))
    # The last monitor runs to the caps and then types nothing more, however long it scans.
    owner = mons.start()
    assert _reclaims(root) == kills, "every start after a kill reclaimed the dead owner"
    poll(lambda: _caps_reached(root), 20, "every cap to be reached")
    status = StatePaths(root).monitor_status

    def scans() -> int:
        return int(json.loads(status.read_text())["scans"])

    # The caps count reservations, saved before their line is typed in the same scan: two more
    # scans end after the last reservation's line went out (seen under load: read before it).
    done = scans()
    poll(lambda: scans() >= done + 2, 20, "the scan that reached the caps to end")
    typed = _typed(mons.log)
    done = scans()
    poll(lambda: scans() >= done + 20, 20, "20 more scans")
    assert _typed(mons.log) == typed, "nothing typed once the caps were reached"
    _assert_caps(typed)
    # A send whose process died before typing cost a slot rather than adding one: every
    # reservation is counted, typed or not.
    assert sum(typed.values()) <= UNREAD_MAX + IDLE_MAX * len(PANES)
    assert mons.live() == [owner["pid"]], "exactly one monitor alive"
    os.kill(owner["pid"], 15)
    poll(lambda: ctl.read_owner(StatePaths(root))[1] is None, 10, "the lock to be released")
