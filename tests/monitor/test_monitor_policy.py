"""The monitor's decisions with a fake clock and a fake tmux adapter: no sleeping, no tmux."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from omp import clock as omp_clock
from omp import modes
from omp.errors import OmpError
from omp.invocation import omp_command
from omp.mail import delivery
from omp.mail.mailbox import Mailbox, new_message
from omp.mail.nudge import nudge_text
from omp.monitor import ctl as ctl
from omp.monitor import policy as policy
from omp.monitor.loop import Monitor, run_monitor
from omp.monitor.policy import IDLE_PROMPT, Intervals, Observation, Tracker, Unread
from omp.record import config as team_config
from omp.store import fs
from omp.store.paths import StatePaths
from omp.tasks import tasks
from tests.helpers import isolate, make_project, make_team

SOCK = "/tmp/omp-fake-socket"
READY = ["● omp demo agent", "❯ "]
BUSY = ["⠋ working 3s (esc to interrupt)", "❯ "]
TOKEN = "tok-" + "a" * 28
IV = Intervals()  # the production defaults: 5 s scans, 30 s idle, 60 s unread repeats

OMP = omp_command()  # what a team made in this process names (config `ompCommand`)


class Crash(BaseException):
    """A process dying mid-send: not an Exception, so nothing in the monitor catches it."""


@dataclass
class FakePane:
    dead: bool = False
    in_mode: bool = False
    session_id: str = "$1"
    window_id: str = "@1"
    activity: float | None = None


@dataclass
class FakeTmux:
    panes: dict[str, FakePane] = field(default_factory=dict)
    screens: dict[str, list[str]] = field(default_factory=dict)
    server: dict[str, Any] = field(
        default_factory=lambda: {"socket_path": SOCK, "server_pid": 4242, "server_started_at": 77}
    )
    misses: int = 0  # server_identity calls that fail (a transient tmux error)
    sent: list[tuple[str, str]] = field(default_factory=list)
    captures: list[str] = field(default_factory=list)
    deliver_ok: bool = True
    on_deliver: Callable[[str, str], None] | None = None
    on_lock: Callable[[str, str], None] | None = None

    def server_identity(self) -> dict[str, Any] | None:
        if self.misses:
            self.misses -= 1
            raise OmpError("tmux_error", "display-message: no answer from tmux within 5s")
        return self.server

    def pane_states(self, pane_ids: Sequence[str]) -> dict[str, FakePane | None]:
        return {p: self.panes.get(p) for p in pane_ids}

    def capture(self, pane_id: str, lines: int = 40) -> list[str]:
        self.captures.append(pane_id)
        return list(self.screens.get(pane_id, []))

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]:
        return {p: self.capture(p, lines) for p in pane_ids if p in self.panes}

    def deliver(
        self,
        pane_id: str,
        text: str,
        profile: Any,
        *,
        guard: Callable[[], str | None] | None = None,
        on_submitted: Callable[[], None] | None = None,
        **_: Any,
    ) -> bool:
        """As `type_line`: `guard` asked once the pane's lock is held (`on_lock` runs just
        before: what another typer did while we waited for it), `on_submitted` after a send."""
        if self.on_lock:
            self.on_lock(pane_id, text)
        if guard is not None and guard() is not None:
            return False
        if self.on_deliver:
            self.on_deliver(pane_id, text)
        self.sent.append((pane_id, text))
        if self.deliver_ok and on_submitted is not None:
            on_submitted()
        return self.deliver_ok

    def to(self, pane: str) -> list[str]:
        return [text for p, text in self.sent if p == pane]


class Scans(Protocol):
    clock: FakeClock

    def scan_for(self, mon: Monitor, seconds: float, step: float = 5.0) -> None: ...


# A long simulated run scans at the production's 5 s for its first 5 minutes, where every send
# these tests provoke falls (idle prompts at +30, +65, +100 s; unread lines 60 s apart, 3 of
# each), then once a minute. What is due stays due until it is sent (every rule compares the
# clock with a threshold or a count; no rule depends on the gap between scans), so the coarse
# tail still catches a send past the caps, in a fifth of the scans (each costs ~8 ms of files).
FINE_SECONDS = 300.0
TAIL_STEP = 60.0


def scan_long(world: Scans, mon: Monitor, seconds: float) -> None:
    """Scan from now until `seconds` have passed: every 5 s, then every minute."""
    world.scan_for(mon, min(seconds, FINE_SECONDS))
    rest = seconds - FINE_SECONDS
    if rest >= TAIL_STEP:
        world.clock.sleep(TAIL_STEP)
        world.scan_for(mon, rest - TAIL_STEP, step=TAIL_STEP)


class FakeClock:
    def __init__(self) -> None:
        self.t = time.time()  # real epoch: mailbox timestamps are real

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class World:
    root: Path
    paths: StatePaths
    fake: FakeTmux
    clock: FakeClock
    workers: dict[str, str]  # worker -> pane
    leader: str

    def monitor(self, iv: Intervals = IV) -> Monitor:
        return Monitor(
            self.root, TOKEN, clock=self.clock, adapter_factory=lambda s: self.fake, intervals=iv
        )

    def scan_for(self, mon: Monitor, seconds: float, step: float = 5.0) -> None:
        """Scan now, then every `step` seconds until `seconds` have passed."""
        end = self.clock.t + seconds
        while True:
            mon.scan()
            if self.clock.t + step > end + 1e-9:
                return
            self.clock.sleep(step)

    def scan_long(self, mon: Monitor, seconds: float) -> None:
        """`scan_for(seconds)` of a long run (`scan_long` below)."""
        scan_long(self, mon, seconds)

    def mail(
        self, worker: str, body: str = "hi", sender: str = "worker-2", *, nudged: bool = True
    ) -> None:
        """A message stored as `send-message` stores it; `nudged`: its send found the pane idle
        and typed the nudge (recorded for the monitor), else it deferred to the monitor."""
        team = self.paths.team("t")
        msg = new_message(sender, worker, body)
        Mailbox(team, worker).append_messages([msg])
        if nudged:
            unread, _ = Mailbox(team, worker).undelivered()
            at = omp_clock.parse_iso(msg["timestamp"])
            assert at is not None
            cfg = team_config.load(team)
            delivery.write_record(cfg, worker, tuple(m["id"] for m in unread), at)

    def loop(self, on: bool = True) -> None:
        if on:
            modes.start_ralph(self.paths, "keep going")
        else:
            modes.cancel(self.paths, "ralph")

    def all_ready(self) -> None:
        for pane in [*self.workers.values(), self.leader]:
            self.fake.screens[pane] = READY


def own_lock(paths: StatePaths, token: str = TOKEN) -> None:
    paths.ensure(paths.monitor)
    fs.write_json_atomic(
        paths.monitor / "owner.lock",
        (
            {
                "schemaVersion": 1,
                "token": token,
                "phase": "pending",
                "parentPid": 1,
                "createdAt": "2020-01-01T00:00:00.000Z",
            }
        ),
    )


def live_config(root: Path, name: str = "t", workers: int = 3) -> tuple[dict[str, str], str]:
    """A headless team turned into one that looks launched on the fake server."""
    make_team(root, name, workers, task="build it")
    tp = StatePaths(root).team(name)
    raw = team_config.load(tp).raw
    panes = {}
    for i, w in enumerate(raw["workers"], start=1):
        w["paneId"] = f"%{i}"
        panes[w["name"]] = f"%{i}"
    raw.update(
        agent="demo",
        leaderPaneId="%0",
        launchToken="lt-1",
        tmuxIdentity={
            "socketPath": SOCK,
            "serverPid": 4242,
            "serverStartedAt": 77,
            "sessionId": "$1",
            "windowId": "@1",
        },
    )
    team_config.write(tp, raw)
    return panes, "%0"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    paths = StatePaths(root)
    workers, leader = live_config(root)
    fake = FakeTmux(panes={p: FakePane() for p in [*workers.values(), leader]})
    own_lock(paths)
    w = World(root, paths, fake, FakeClock(), workers, leader)
    w.all_ready()
    return w


# ---- idle prompts ---------------------------------------------------------------------------


def test_no_idle_prompt_before_30_seconds_then_one_each(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 25)
    assert world.fake.sent == []
    world.clock.sleep(5)  # 30 s after idle was first seen
    mon.scan()
    assert sorted(world.fake.sent) == [(p, IDLE_PROMPT) for p in sorted(world.workers.values())]
    assert IDLE_PROMPT == (
        "Continue working on your assigned task and report concrete progress (not ACK-only)."
    )


def test_at_most_three_idle_prompts_per_pane(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_long(mon, 30 * 60)
    for pane in world.workers.values():
        assert world.fake.to(pane) == [IDLE_PROMPT] * 3
    assert mon.idle_prompts_sent == 9


def test_idle_cadence_restarts_after_each_prompt(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 30)
    assert len(world.fake.to("%1")) == 1
    world.clock.sleep(5)
    world.scan_for(mon, 25)  # 30 s after the prompt: the idle timer started again at +35
    assert len(world.fake.to("%1")) == 1
    world.clock.sleep(5)
    mon.scan()
    assert len(world.fake.to("%1")) == 2


@pytest.mark.slow  # a long simulated run
def test_a_restart_from_persisted_state_cannot_send_a_fourth(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 70)  # two idle prompts each
    assert all(len(world.fake.to(p)) == 2 for p in world.workers.values())

    def crash(pane: str, text: str) -> None:
        raise Crash

    # The third reservation is written, then the process dies before the send.
    world.clock.sleep(35)
    world.fake.on_deliver = crash
    with pytest.raises(Crash):
        world.monitor().scan()
    world.fake.on_deliver = None
    # A fresh process (no memory) scans for an hour: the burnt slot is never given back.
    world.scan_long(world.monitor(), 3600)
    counts = sorted(len(world.fake.to(p)) for p in world.workers.values())
    assert counts[0] == 2  # the pane whose third slot died with the process
    assert all(c <= 3 for c in counts)
    # A second restart after everything is spent sends nothing at all.
    before = len(world.fake.sent)
    world.scan_long(world.monitor(), 3600)
    assert len(world.fake.sent) == before


def test_the_reservation_is_on_disk_before_the_send(world: World) -> None:
    world.loop()
    seen: list[dict[str, Any]] = []

    def check(pane: str, text: str) -> None:
        for f in (world.paths.monitor / "targets").glob("*.json"):
            doc = json.loads(f.read_text())
            if doc["paneId"] == pane:
                seen.append(doc["tracker"])

    world.fake.on_deliver = check
    world.scan_for(world.monitor(), 30)
    assert len(seen) == 3
    for tr in seen:
        assert tr["nudgeCount"] == 1
        assert tr["lastAttempt"]["outcome"] == "reserved"
    docs = [json.loads(f.read_text()) for f in (world.paths.monitor / "targets").glob("*.json")]
    assert {d["tracker"]["lastAttempt"]["outcome"] for d in docs} == {"sent"}


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_a_failed_send_is_not_given_back(world: World) -> None:
    world.loop()
    world.fake.deliver_ok = False
    mon = world.monitor()
    world.scan_long(mon, 30 * 60)
    assert len(world.fake.to("%1")) == 3  # three attempts, all failed: no fourth
    assert mon.idle_prompts_sent == 0


def test_the_leader_pane_never_gets_anything(world: World) -> None:
    world.loop()
    world.mail("leader", sender="worker-1")
    # A worker whose recorded pane is the leader's is skipped as well.
    tp = world.paths.team("t")
    raw = team_config.load(tp).raw
    raw["workers"][2]["paneId"] = world.leader
    team_config.write(tp, raw)
    world.mail("worker-3")
    world.scan_long(world.monitor(), 30 * 60)
    assert world.fake.to(world.leader) == []
    assert world.leader not in world.fake.captures


@pytest.mark.slow  # a long simulated run
def test_a_busy_pane_is_never_prompted_nor_nudged(world: World) -> None:
    world.loop()
    world.fake.screens["%1"] = BUSY
    world.mail("worker-1")
    world.scan_long(world.monitor(), 30 * 60)
    assert world.fake.to("%1") == []
    assert world.fake.to("%2") == [IDLE_PROMPT] * 3


def test_busy_resets_the_idle_timer(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 25)
    world.fake.screens["%1"] = BUSY
    world.clock.sleep(5)
    mon.scan()
    world.fake.screens["%1"] = READY
    world.clock.sleep(5)
    world.scan_for(mon, 25)
    assert world.fake.to("%1") == []
    world.clock.sleep(5)
    mon.scan()
    assert world.fake.to("%1") == [IDLE_PROMPT]


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_copy_mode_dialogs_and_starting_screens_are_not_idle(world: World) -> None:
    world.loop()
    world.fake.panes["%1"].in_mode = True
    world.fake.screens["%2"] = ["Do you trust the files in this folder?"]
    world.fake.screens["%3"] = []
    world.scan_long(world.monitor(), 30 * 60)
    assert world.fake.sent == []


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_no_loop_no_idle_prompts_but_unread_renudges_still_go(world: World) -> None:
    world.mail("worker-1", "first")
    mon = world.monitor()
    world.scan_for(mon, 55)
    assert world.fake.sent == []  # the send itself nudged; the first repeat waits 60 s
    world.clock.sleep(5)
    mon.scan()
    line = nudge_text("t", "worker-1", 1, OMP)
    assert world.fake.sent == [("%1", line)]
    world.scan_long(mon, 30 * 60)
    assert world.fake.to("%1") == [line] * 3  # at most 3 for one batch
    assert world.fake.to("%2") == [] and world.fake.to("%3") == []
    assert mon.nudges_sent == 3 and mon.idle_prompts_sent == 0
    # Every worker's screen is judged each scan (does it need a person?), but a pane whose
    # window showed no output since its last capture is not captured again.
    for p in world.fake.panes.values():
        p.activity = float(int(time.time()) - 10)
    n = len(world.fake.captures)
    world.scan_for(mon, 60)
    assert len(world.fake.captures) == n


def test_unread_repeats_are_60_seconds_apart(world: World) -> None:
    world.mail("worker-1")
    mon = world.monitor()
    world.scan_for(mon, 60)
    world.scan_for(mon, 55)
    assert len(world.fake.to("%1")) == 1
    world.clock.sleep(5)
    mon.scan()
    assert len(world.fake.to("%1")) == 2


@pytest.mark.slow  # a long simulated run
def test_a_new_message_starts_a_new_batch_and_delivery_ends_it(world: World) -> None:
    world.mail("worker-1", "one")
    mon = world.monitor()
    world.scan_long(mon, 30 * 60)
    assert len(world.fake.to("%1")) == 3
    world.mail("worker-1", "two")
    world.scan_long(mon, 30 * 60)
    assert world.fake.to("%1")[3:] == [nudge_text("t", "worker-1", 2, OMP)] * 3
    # Delivered: nothing more, even after a long time.
    box = Mailbox(world.paths.team("t"), "worker-1")
    box.mark([m["id"] for m in box.undelivered()[0]])
    world.scan_long(mon, 30 * 60)
    assert len(world.fake.to("%1")) == 6


def test_at_most_one_line_per_pane_per_scan(world: World) -> None:
    world.loop()
    world.mail("worker-1")
    mon = world.monitor()
    world.scan_for(mon, 60)  # at +60 both an idle prompt (+30 cadence) and a re-nudge could go
    # 5 minutes at the production's cadence (all six lines go out by +200 s), then a scan a
    # minute to +1080 s (`scan_long`)
    for step in [5.0] * 60 + [TAIL_STEP] * 12:
        before = len(world.fake.to("%1"))
        world.clock.sleep(step)
        mon.scan()
        assert len(world.fake.to("%1")) - before <= 1
    assert world.fake.to("%1").count(IDLE_PROMPT) == 3
    assert world.fake.to("%1").count(nudge_text("t", "worker-1", 1, OMP)) == 3


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_cancelling_the_loop_stops_idle_prompts_within_one_scan(world: World) -> None:
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 30)
    assert len(world.fake.sent) == 3
    world.clock.sleep(5)
    world.scan_for(mon, 25)
    world.loop(False)
    world.clock.sleep(5)  # the second prompts would be due now
    mon.scan()
    assert len(world.fake.sent) == 3
    world.scan_long(mon, 30 * 60)
    assert len(world.fake.sent) == 3


def test_a_loop_cancelled_between_decision_and_send_skips_the_send(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.loop()
    monkeypatch.setattr(modes, "is_loop_active", lambda paths: False)  # the re-check sees it
    mon = world.monitor()
    world.scan_for(mon, 30)
    assert world.fake.sent == []
    docs = [json.loads(f.read_text()) for f in (world.paths.monitor / "targets").glob("*.json")]
    assert [d["tracker"]["lastAttempt"]["outcome"] for d in docs] == ["skipped"] * 3
    assert all(d["tracker"]["nudgeCount"] == 1 for d in docs)  # the slot is still spent


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_no_idle_prompts_when_every_task_is_done(world: World) -> None:
    world.loop()
    tp = world.paths.team("t")
    for t in tasks.list_all(tp):
        _, tok = tasks.claim(tp, t["id"], "worker-1")
        tasks.transition(
            tp, t["id"], worker="worker-1", from_status="in_progress", to_status="completed",
            token=tok,
        )  # fmt: skip
    world.mail("worker-2")
    mon = world.monitor()
    world.scan_long(mon, 30 * 60)
    assert IDLE_PROMPT not in [t for _, t in world.fake.sent]
    assert len(world.fake.to("%2")) == 3  # mail still matters


def test_dead_gone_and_foreign_panes_get_nothing(world: World) -> None:
    world.loop()
    world.fake.panes["%1"].dead = True
    del world.fake.panes["%2"]
    world.fake.panes["%3"].window_id = "@9"  # the id now names a pane elsewhere
    mon = world.monitor()
    world.scan_long(mon, 30 * 60)
    assert world.fake.sent == []
    assert mon.last_report.live_teams == 0


def test_a_recycled_tmux_server_means_no_live_team(world: World) -> None:
    world.loop()
    world.fake.server = dict(world.fake.server, server_started_at=78)
    mon = world.monitor()
    world.scan_for(mon, 120)
    assert world.fake.sent == [] and world.fake.captures == []
    assert mon.last_report.live_teams == 0


def test_a_shut_down_team_is_not_watched(world: World) -> None:
    world.loop()
    world.paths.team("t").shutdown.write_text("{}")
    mon = world.monitor()
    world.scan_for(mon, 120)
    assert world.fake.sent == [] and mon.last_report.teams == []


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_an_unreadable_tracker_fails_closed(world: World) -> None:
    world.loop()
    mon = world.monitor()
    mon.scan()
    files = sorted((world.paths.monitor / "targets").glob("*.json"))
    assert len(files) == 3
    for f in files:
        f.write_text("{not json")
    world.scan_long(world.monitor(), 30 * 60)
    assert world.fake.sent == []


def test_idle_panes_are_not_recaptured_while_the_window_shows_no_output(world: World) -> None:
    world.loop()
    past = float(int(time.time()) - 10)
    for p in world.fake.panes.values():
        p.activity = past
    mon = world.monitor()
    world.scan_for(mon, 20)
    assert sorted(world.fake.captures) == ["%1", "%2", "%3"]  # once each, then cached
    for p in world.fake.panes.values():
        p.activity = float(int(time.time()) + 5)  # output after the capture: judge again
    world.clock.sleep(5)
    mon.scan()
    assert len(world.fake.captures) == 6


def test_a_broken_agents_file_means_no_judging_but_the_monitor_lives_on(world: World) -> None:
    world.loop()
    fs.write_atomic(world.paths.omp_dir / "agents.toml", b"[agents.demo\nthis is not toml")
    mon = world.monitor()
    world.scan_for(mon, 120)
    assert world.fake.sent == []
    assert mon.last_report.live_teams == 1
    assert any("agent profiles" in d for d in mon.last_report.diagnostics)


def test_a_corrupt_team_does_not_hide_a_healthy_one(world: World) -> None:
    world.loop()
    bad = world.paths.team("bad")
    world.paths.ensure(bad.dir)
    fs.write_atomic(bad.config, b"{not json")
    other = world.paths.team("other")
    world.paths.ensure(other.tasks_dir)
    live_config(world.root, "other", 1)
    os.chmod(other.tasks_dir / "1.json", 0o666)  # refused by the store: tasks unreadable
    mon = world.monitor()
    world.scan_for(mon, 30)
    # Team t is prompted as usual; "other" (same fake panes) gets no idle prompt.
    assert sorted(p for p, _ in world.fake.sent) == ["%1", "%2", "%3"]
    assert mon.last_report.live_teams == 2
    assert any(d.startswith("team other: tasks:") for d in mon.last_report.diagnostics)


def test_an_adapter_that_captures_many_panes_at_once_is_used(world: World) -> None:
    batches: list[list[str]] = []

    def capture_many(pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]:
        batches.append(list(pane_ids))
        return {p: list(world.fake.screens.get(p, [])) for p in pane_ids}

    world.fake.capture_many = capture_many  # type: ignore[method-assign]
    world.loop()
    mon = world.monitor()
    world.scan_for(mon, 30)
    assert world.fake.captures == []  # never one by one
    assert len(batches) == 7 and all(sorted(b) == ["%1", "%2", "%3"] for b in batches)
    assert sorted(world.fake.sent) == [(p, IDLE_PROMPT) for p in ("%1", "%2", "%3")]


# ---- the monitor's life (run_monitor with the fake clock) -----------------------------------


def run(world: World, **kw: Any) -> dict[str, Any]:
    return run_monitor(
        world.root,
        TOKEN,
        clock=world.clock,
        sleep=world.clock.sleep,
        adapter_factory=lambda s: world.fake,
        intervals=kw.pop("intervals", IV),
        **kw,
    )


def test_one_transient_tmux_miss_does_not_end_the_monitor(world: World) -> None:
    calls = {"n": 0}
    real = world.fake.server_identity

    def flaky() -> dict[str, Any] | None:
        calls["n"] += 1
        if calls["n"] in (2, 4):  # two separate misses, never two in a row
            raise OmpError("tmux_error", "display-message: no answer from tmux within 5s")
        return real()

    world.fake.server_identity = flaky  # type: ignore[method-assign]
    result = run(world, max_scans=6)
    assert result["reason"] == "max-scans" and result["scans"] == 6


def test_two_empty_scans_in_a_row_end_the_monitor(world: World) -> None:
    world.fake.misses = 2
    result = run(world, max_scans=10)
    assert result["reason"] == "no-live-teams" and result["scans"] == 2
    status = json.loads((world.paths.monitor / "status.json").read_text())
    assert status["reason"] == "no-live-teams" and status["terminal"] is True
    assert not (world.paths.monitor / "owner.lock").exists()  # released


def test_the_monitor_stops_after_the_last_team_shuts_down(world: World) -> None:
    scans = {"n": 0}
    real = world.fake.pane_states

    def states(ids: Sequence[str]) -> dict[str, FakePane | None]:
        scans["n"] += 1
        if scans["n"] == 3:
            world.paths.team("t").shutdown.write_text("{}")
        return real(ids)

    world.fake.pane_states = states  # type: ignore[method-assign,assignment]
    result = run(world, max_scans=50)
    assert result["reason"] == "no-live-teams" and result["scans"] == 5


def test_a_signal_writes_a_final_status_and_releases_the_lock(world: World) -> None:
    checks = {"n": 0}

    def stop() -> str | None:
        checks["n"] += 1
        return "SIGTERM" if checks["n"] > 3 else None

    result = run(world, stop=stop, max_scans=100)
    assert result["reason"] == "signal" and result["signal"] == "SIGTERM"
    status = json.loads((world.paths.monitor / "status.json").read_text())
    assert status["reason"] == "signal" and status["terminal"] is True
    assert status["signal"] == "SIGTERM"
    assert not (world.paths.monitor / "owner.lock").exists()
    kinds = [json.loads(x)["type"] for x in (world.paths.monitor / "events.jsonl").open()]
    assert kinds[0] == "owner-adopted" and kinds[-1] == "monitor-terminal"


def test_only_the_matching_token_adopts_and_a_lost_lock_stops_it(world: World) -> None:
    result = run_monitor(world.root, "someone-else", adapter_factory=lambda s: world.fake)
    assert result["reason"] == "owner-mismatch"
    assert not (world.paths.monitor / "status.json").exists()

    def steal() -> str | None:
        lock = world.paths.monitor / "owner.lock"
        doc = json.loads(lock.read_text())
        if doc["phase"] == "running" and world.clock.t > start + 12:
            own_lock(world.paths, "the-new-owner")
        return None

    start = world.clock.t
    result = run(world, stop=steal, max_scans=100)
    assert result["reason"] == "owner-lost"
    assert json.loads((world.paths.monitor / "owner.lock").read_text())["token"] == "the-new-owner"


def test_status_counts_and_heartbeat(world: World) -> None:
    world.mail("worker-1")
    world.clock.sleep(61)
    result = run(world, max_scans=3)
    assert result["nudgesSent"] == 1
    status = json.loads((world.paths.monitor / "status.json").read_text())
    assert status["nudgesSent"] == 1 and status["idlePromptsSent"] == 0
    assert status["scans"] == 3 and status["token"] == TOKEN
    assert status["teams"] == [{"team": "t", "live": True, "panes": 3}]
    assert set(status) >= {"pid", "token", "scans", "reason", "updatedAt", "teams"}


def test_the_heartbeat_keeps_the_lock_fresh_with_long_scan_intervals(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    beats: list[float] = []
    real = ctl.heartbeat

    def spy(paths: StatePaths, token: str, *, now: float) -> bool:
        beats.append(now)
        return real(paths, token, now=now)

    monkeypatch.setattr(ctl, "heartbeat", spy)
    run(world, intervals=Intervals(scan=60.0), max_scans=3)
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    assert len(beats) > 3 and max(gaps) <= IV.running_stale / 4 + 1e-6


def test_events_are_capped(world: World) -> None:
    for i in range(ctl.MAX_EVENTS + 50):
        ctl.log_event(world.paths, "scan-diagnostic", message=str(i))
    lines = (world.paths.monitor / "events.jsonl").read_text().splitlines()
    assert len(lines) == ctl.MAX_EVENTS
    assert json.loads(lines[-1])["message"] == str(ctl.MAX_EVENTS + 49)


def test_files_are_private(world: World) -> None:
    world.loop()
    run(world, max_scans=8)
    for p in [world.paths.monitor, *world.paths.monitor.rglob("*")]:
        mode = p.stat().st_mode & 0o777
        assert mode == (0o700 if p.is_dir() else 0o600), p


def test_intervals_from_the_environment() -> None:
    env = {"OMP_MONITOR_SCAN_SECONDS": "0.01", "OMP_MONITOR_IDLE_SECONDS": "0.05"}
    iv = Intervals.from_env(env, unread_repeat=0.02)
    assert (iv.scan, iv.idle_delay, iv.unread_repeat) == (0.01, 0.05, 0.02)
    assert Intervals.from_env({}) == Intervals()
    with pytest.raises(OmpError) as exc:
        Intervals.from_env({"OMP_MONITOR_SCAN_SECONDS": "-1"})
    assert exc.value.code == "invalid_input"


# ---- the pure policy ------------------------------------------------------------------------


def obs(
    screen: str | None = "ready",
    unread: Unread | None = None,
    gate: bool = True,
    *,
    deferred: bool = False,
) -> Observation:
    """By default the newest message's own send typed its nudge when it was written."""
    u = unread or Unread()
    covered = None if deferred else u.newest_at
    return Observation("t", "worker-1", u, screen, gate, OMP, covered)


def test_policy_batches() -> None:
    tr = Tracker()
    u1 = Unread(2, ("a", "b"), newest_at=100.0)
    # Never nudged (its send found the agent busy): due at once.
    assert policy.with_batch(tr, u1, 130.0).batch_since == 0.0
    tr = policy.with_batch(tr, u1, 130.0, covered=100.0)
    assert tr.batch == ("a", "b") and tr.batch_since == 100.0
    tr = dataclasses_replace(tr, batch_count=3)
    # one delivered: same batch, still spent
    tr2 = policy.with_batch(tr, Unread(1, ("b",), 100.0), 200.0)
    assert tr2.batch == ("b",) and tr2.batch_count == 3
    # a new one: a new batch
    tr3 = policy.with_batch(tr2, Unread(2, ("b", "c"), 190.0), 200.0, covered=190.0)
    assert tr3.batch_count == 0 and tr3.batch_since == 190.0
    # everything delivered: no batch
    assert policy.with_batch(tr3, Unread(), 210.0).batch == ()


def dataclasses_replace(tr: Tracker, **kw: Any) -> Tracker:
    import dataclasses

    return dataclasses.replace(tr, **kw)


def test_policy_tracker_round_trips_and_rejects_garbage() -> None:
    tr = Tracker()
    tr, send = policy.decide(tr, obs(), 1000.0, IV)
    tr, send = policy.decide(tr, obs(), 1030.0, IV)
    assert send is not None and send.kind == "idle" and send.text == IDLE_PROMPT
    tr = policy.record_outcome(tr, send.attempt_id, "sent", 1031.0)
    again = Tracker.from_json(json.loads(json.dumps(tr.to_json())))
    assert again == tr
    for bad in ({}, {"schemaVersion": 2}, {"schemaVersion": 1, "nudgeCount": -1, "unread": {}}):
        with pytest.raises(ValueError):
            Tracker.from_json(bad)


def test_policy_wants_the_screen_only_when_something_could_be_sent() -> None:
    tr = Tracker()
    assert not policy.wants_screen(tr, obs(None, gate=False), 0.0, IV)
    assert policy.wants_screen(tr, obs(None, gate=True), 0.0, IV)
    spent = Tracker(idle_count=3)
    assert not policy.wants_screen(spent, obs(None, gate=True), 0.0, IV)
    u = Unread(1, ("a",), newest_at=0.0)
    assert not policy.wants_screen(spent, obs(None, u, gate=True), 59.0, IV)
    assert policy.wants_screen(spent, obs(None, u, gate=True), 60.0, IV)


def test_policy_a_deferred_nudge_goes_as_soon_as_the_pane_is_idle() -> None:
    """The send found the agent busy and left the nudge to us: no 60 s wait, but never into a
    busy screen; once typed, the next waits the re-nudge interval."""
    u = Unread(2, ("a", "b"), newest_at=100.0)
    tr, send = policy.decide(Tracker(), obs("busy", u, gate=False, deferred=True), 101.0, IV)
    assert send is None
    tr, send = policy.decide(tr, obs("ready", u, gate=False, deferred=True), 102.0, IV)
    assert send is not None and send.kind == "unread"
    assert send.text == nudge_text("t", "worker-1", 2, OMP)
    tr = policy.record_outcome(tr, send.attempt_id, "sent", 102.0)
    _, again = policy.decide(tr, obs("ready", u, gate=False, deferred=True), 150.0, IV)
    assert again is None


def test_policy_unread_line_names_the_count() -> None:
    u = Unread(4, ("a", "b", "c", "d"), newest_at=0.0)
    _, send = policy.decide(Tracker(), obs("ready", u, gate=False), 61.0, IV)
    assert send is not None and send.text == nudge_text("t", "worker-1", 4, OMP)


def test_policy_stop_rule() -> None:
    s = policy.empty_streak(0, 0)
    assert s == 1 and not policy.should_stop(s, IV)
    assert policy.empty_streak(s, 1) == 0
    assert policy.should_stop(policy.empty_streak(s, 0), IV)


def test_target_ids_differ_per_generation_and_server() -> None:
    ident = {"socketPath": SOCK, "serverPid": 1, "serverStartedAt": 2}
    a = policy.target_id("t", "g1", "%1", ident)
    assert len(a) == 32
    assert a != policy.target_id("t", "g2", "%1", ident)
    assert a != policy.target_id("t", "g1", "%2", ident)
    assert a != policy.target_id("t", "g1", "%1", dict(ident, serverStartedAt=3))


# ---- presence and orphan sweeps, run by each scan --------------------------------------------


def test_a_scan_turns_a_dead_workers_claimed_task_into_interrupted(world: World) -> None:
    from omp.mail import mailbox
    from omp.tasks import tasks

    team = world.paths.team("t")
    tasks.claim(team, "2", "worker-2")
    mon = world.monitor()
    mon.scan()
    assert (tasks.read(team, "2") or {}).get("status") == "in_progress"  # alive: nothing to rescue
    del world.fake.panes[world.workers["worker-2"]]  # the worker's pane is gone
    mon.scan()
    task = tasks.read(team, "2")
    assert task is not None and task["status"] == "interrupted"
    # the leader hears why, and nothing is replayed: the task is not pending again
    fails = [
        m for m in mailbox.Mailbox(team, "leader").undelivered()[0] if m.get("event") == "task_fail"
    ]
    assert len(fails) == 1 and "worker-2" in fails[0]["body"]
    mon.scan()
    assert (tasks.read(team, "2") or {}).get("status") == "interrupted"
    assert len([m for m in mailbox.Mailbox(team, "leader").undelivered()[0]
                if m.get("event") == "task_fail"]) == 1  # fmt: skip


def test_a_vanished_server_is_swept_only_after_two_scans(world: World) -> None:
    from omp.tasks import tasks

    team = world.paths.team("t")
    tasks.claim(team, "1", "worker-1")
    mon = world.monitor()
    world.fake.server = None  # type: ignore[assignment]
    mon.scan()
    assert (tasks.read(team, "1") or {}).get("status") == "in_progress"  # one miss is not proof
    mon.scan()
    assert (tasks.read(team, "1") or {}).get("status") == "interrupted"


def test_a_scan_records_presence_in_heartbeats(world: World) -> None:
    from omp.tasks import presence

    mon = world.monitor()
    mon.scan()
    hb = presence.read(world.paths.team("t"), "worker-3")
    assert hb is not None and hb.pane_id == world.workers["worker-3"]
    world.fake.panes[world.workers["worker-3"]].dead = True
    mon.scan()
    hb = presence.read(world.paths.team("t"), "worker-3")
    assert hb is not None and hb.state == "offline"


# ---- nudges that never disturb a busy agent (workers and leader alike) -----------------------

# Copilot CLI 1.0.102 at rest (tests/fixtures/screens/copilot-21-...): the idle prompt box.
COPILOT_IDLE = [" ~/proj", "─" * 40, "❯", "─" * 40, " Interactive · Manual Approval · ? help"]


def _nudge_leader(world: World, agent: str | None) -> None:
    tp = world.paths.team("t")
    raw = team_config.load(tp).raw
    raw["nudgeLeader"] = True
    if agent:
        raw["leaderAgent"] = agent
    team_config.write(tp, raw)


def test_a_deferred_nudge_waits_for_an_idle_screen_then_goes_once(world: World) -> None:
    world.fake.screens["%1"] = BUSY
    world.mail("worker-1", "first", nudged=False)  # its send found worker-1 busy
    mon = world.monitor()
    world.scan_for(mon, 20)
    assert world.fake.to("%1") == []  # never typed into a busy agent
    world.fake.screens["%1"] = READY
    world.clock.sleep(5)
    mon.scan()
    line = nudge_text("t", "worker-1", 1, OMP)
    assert world.fake.to("%1") == [line]
    # One outstanding nudge: the record tells a later send not to type another.
    rec = delivery.read_record(team_config.load(world.paths.team("t")), "worker-1")
    assert rec is not None and len(rec.ids) == 1
    world.scan_for(mon, 55)
    assert world.fake.to("%1") == [line]


def test_a_send_that_nudged_while_the_monitor_waited_for_the_pane_is_not_nudged_again(
    world: World,
) -> None:
    """New mail no nudge covers is due at once (its send may have deferred): the monitor and
    the send race for the pane. Whoever gets the pane's lock second finds the other's record
    and types nothing; the first real repeat still comes `unread_repeat` later."""
    world.all_ready()
    world.mail("worker-1", "first", nudged=False)  # the send has not typed yet
    cfg = team_config.load(world.paths.team("t"))

    def send_typed(pane: str, text: str) -> None:  # the send path, holding the lock first
        if pane == "%1" and delivery.read_record(cfg, "worker-1") is None:
            unread = tuple(m["id"] for m in Mailbox(cfg.paths, "worker-1").undelivered()[0])
            delivery.write_record(cfg, "worker-1", unread, time.time())

    world.fake.on_lock = send_typed
    mon = world.monitor()
    mon.scan()
    assert world.fake.to("%1") == []
    assert mon.nudges_sent == 0 and mon.last_report.sent[0]["outcome"] == "skipped"
    world.scan_for(mon, 55)
    assert world.fake.to("%1") == []
    world.clock.sleep(10)
    mon.scan()
    assert world.fake.to("%1") == [nudge_text("t", "worker-1", 1, OMP)]


def test_mail_read_before_the_pane_went_idle_gets_no_nudge(world: World) -> None:
    world.fake.screens["%1"] = BUSY
    world.mail("worker-1", "first", nudged=False)
    mon = world.monitor()
    world.scan_for(mon, 10)
    team = world.paths.team("t")
    msgs, _ = Mailbox(team, "worker-1").undelivered()
    Mailbox(team, "worker-1").mark([m["id"] for m in msgs])
    world.fake.screens["%1"] = READY
    world.scan_for(mon, 120)
    assert world.fake.to("%1") == []


@pytest.mark.slow  # a long simulated run (30 minutes of scans)
def test_the_leader_gets_its_mail_nudged_by_its_own_agents_screen(world: World) -> None:
    """With --nudge-leader the leader's pane is watched for its mail (never idle prompts),
    judged by the leader's agent profile, not the workers'."""
    _nudge_leader(world, "copilot")
    world.loop()  # a loop is active: still no idle prompt for the leader
    world.fake.screens["%0"] = READY  # a demo screen is not an idle Copilot screen
    world.mail("leader", "report", sender="worker-1", nudged=False)
    mon = world.monitor()
    world.scan_for(mon, 20)
    assert world.fake.to("%0") == []
    world.fake.screens["%0"] = COPILOT_IDLE
    world.clock.sleep(5)
    mon.scan()
    assert world.fake.to("%0") == [nudge_text("t", "leader", 1, OMP)]
    world.scan_long(mon, 30 * 60)
    assert IDLE_PROMPT not in world.fake.to("%0")


def test_without_nudge_leader_the_leader_pane_is_left_alone(world: World) -> None:
    world.mail("leader", "report", sender="worker-1", nudged=False)
    world.scan_long(world.monitor(), 10 * 60)
    assert world.fake.to("%0") == []


def test_mail_sent_while_the_monitor_was_dead_is_nudged_when_it_is_back(world: World) -> None:
    world.scan_for(world.monitor(), 30)  # a monitor ran, then died (no memory kept)
    world.mail("worker-1", "sent while nobody watched")
    world.clock.sleep(600)  # dead for ten minutes
    assert world.fake.to("%1") == []
    world.monitor().scan()  # the restarted monitor's first scan
    assert world.fake.to("%1") == [nudge_text("t", "worker-1", 1, OMP)]


def test_the_scan_keeps_an_index_for_history_no_omp_writer_indexed(world: World) -> None:
    from omp.mail import mailbox
    from tests.helpers import receipt, ts_message, write_raw

    team = world.paths.team("t")
    box = Mailbox(team, "leader")
    items: list[dict[str, Any] | bytes] = []
    for i in range(500):  # ~100 KiB the TypeScript tool wrote: more than KEEP_AFTER, no index
        items += [ts_message(f"m-{i}", "worker-1", "leader", "x" * 150), receipt(f"m-{i}")]
    items.append(ts_message("m-new", "worker-1", "leader", "unread"))
    team.project.ensure(team.mailbox_dir)
    write_raw(box.path, *items)
    assert Path(box.path).stat().st_size > mailbox.KEEP_AFTER
    old = time.time() - 60  # settled: no writer is mid-append
    os.utime(box.path, (old, old))
    data = Path(box.path).read_bytes()
    mon = world.monitor()
    mon.scan()
    kept = json.loads(Path(box.index_path).read_text())
    assert kept["offset"] == len(data) and [u[0] for u in kept["undelivered"]] == ["m-new"]
    assert Path(box.path).read_bytes() == data  # the mailbox itself untouched
    assert box.unread_count() == 1
    stamp = Path(box.index_path).stat().st_mtime_ns
    mon.scan()  # unchanged since: not read again
    assert Path(box.index_path).stat().st_mtime_ns == stamp
