"""The monitor watching workers on other hosts, with fake adapters: grouping by (host, server),
one listing and at most one capture per group per scan, nudges into remote panes, and a host that
stops answering (reported, backed off, its workers gone only after the grace, reported back)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.mail import mailbox
from omp.mail.nudge import nudge_text
from omp.monitor import ctl
from omp.monitor import remote as rmt
from omp.monitor.loop import Monitor
from omp.monitor.policy import Intervals
from omp.record import config as team_config
from omp.record.placement import Placed, session_of
from omp.store.paths import StatePaths
from omp.tasks import presence, tasks
from omp.tmux.ssh import Host
from tests.helpers import isolate, make_project
from tests.monitor.test_monitor_policy import (
    READY,
    TOKEN,
    FakeClock,
    FakeTmux,
    live_config,
    own_lock,
)

IV = Intervals(host_grace=60.0, host_backoff=30.0)
REMOTE_OMP = "/home/w/bin/omp"


@dataclass
class FakeHost:
    """One host's tmux server as `RemoteTyping` shows it; `down` makes it not answer."""

    name: str
    panes: dict[str, rmt.RemotePane] = field(default_factory=dict)
    screens: dict[str, list[str]] = field(default_factory=dict)
    down: bool = False
    listings: int = 0
    capture_calls: list[list[str]] = field(default_factory=list)
    sent: list[tuple[str, str, Any]] = field(default_factory=list)

    def remote_panes(self) -> Mapping[str, rmt.RemotePane] | None:
        self.listings += 1
        if self.down:
            raise OmpError("host_unreachable", f"host {self.name} cannot be reached over ssh")
        return dict(self.panes) if self.panes else None

    def capture(self, pane_id: str, lines: int = 40) -> list[str]:
        if self.down:
            raise OmpError("host_unreachable", "down")
        return list(self.screens.get(pane_id, []))

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]:
        if self.down:
            raise OmpError("host_unreachable", "down")
        self.capture_calls.append(list(pane_ids))
        return {p: list(self.screens.get(p, [])) for p in pane_ids if p in self.panes}

    # the rest of the monitor's Adapter: never used for a remote group's listing
    def server_identity(self) -> Mapping[str, Any] | None:
        raise AssertionError("a remote group is listed with remote_panes alone")

    def pane_states(self, pane_ids: Sequence[str]) -> Mapping[str, Any]:
        raise AssertionError("a remote group is listed with remote_panes alone")

    def deliver(
        self,
        pane_id: str,
        text: str,
        profile: Any,
        *,
        expected: Any = None,
        guard: Callable[[], str | None] | None = None,
        on_submitted: Callable[[], None] | None = None,
        **_: Any,
    ) -> bool:
        if guard is not None and guard() is not None:
            return False
        self.sent.append((pane_id, text, expected))
        if on_submitted is not None:
            on_submitted()
        return True

    def pane(self, pane: str, session: str, **kw: Any) -> None:
        self.panes[pane] = rmt.RemotePane(
            pane_id=pane, dead=kw.get("dead", False), in_mode=False, session_id="$9",
            window_id="@9", activity=1.0, session_name=session, socket_path="/tmp/tmux-1/x",
            server_pid=999, server_started_at=1234,
        )  # fmt: skip
        self.screens[pane] = list(READY)


@dataclass
class RWorld:
    root: Path
    paths: StatePaths
    local: FakeTmux
    hosts: dict[str, FakeHost]
    clock: FakeClock
    made: list[tuple[str, str]] = field(default_factory=list)  # (host, socket) adapters made

    def monitor(self, iv: Intervals = IV) -> Monitor:
        def remote(host: Host, socket: str) -> FakeHost:
            self.made.append((host.name, socket))
            return self.hosts[host.name]

        return Monitor(
            self.root, TOKEN, clock=self.clock, wall=self.clock, intervals=iv,
            adapter_factory=lambda s: self.local, remote_factory=remote,
        )  # fmt: skip

    def events(self, kind: str) -> list[dict[str, Any]]:
        path = self.paths.monitor_events
        rows = [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []
        return [r for r in rows if r["type"] == kind]


def place(raw: dict[str, Any], worker: str, host: str, pane: str, team: str = "t") -> None:
    for w in raw["workers"]:
        if w["name"] == worker:
            w["paneId"] = None
            w["remote"] = Placed(
                host, f"/home/w/{host}/root", f"/home/w/{host}/wt/{worker}", f"omp/{team}/{worker}",
                "omp-p1", pane,
            ).to_config()  # fmt: skip
    raw["hosts"] = {
        "build1": {"address": "w@build1", "omp": REMOTE_OMP},
        "build2": {"address": "w@build2", "omp": REMOTE_OMP},
    }


@pytest.fixture
def rworld(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RWorld:
    """Team t: worker-1 here (%1); worker-2 and worker-3 on build1 (%5, %6); worker-4 on build2."""
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    paths = StatePaths(root)
    panes, leader = live_config(root, workers=4)
    tp = paths.team("t")
    raw = team_config.load(tp).raw
    place(raw, "worker-2", "build1", "%5")
    place(raw, "worker-3", "build1", "%6")
    place(raw, "worker-4", "build2", "%5")  # the same id as on build1: another server
    team_config.write(tp, raw)
    local = FakeTmux()
    from tests.monitor.test_monitor_policy import FakePane

    local.panes = {panes["worker-1"]: FakePane(), leader: FakePane()}
    local.screens = {panes["worker-1"]: list(READY), leader: list(READY)}
    b1, b2 = FakeHost("build1"), FakeHost("build2")
    b1.pane("%5", session_of("t", "worker-2"))
    b1.pane("%6", session_of("t", "worker-3"))
    b2.pane("%5", session_of("t", "worker-4"))
    own_lock(paths)
    return RWorld(root, paths, local, {"build1": b1, "build2": b2}, FakeClock())


def mail(w: RWorld, worker: str, body: str = "hi") -> None:
    team = w.paths.team("t")
    mailbox.Mailbox(team, worker).append_messages([mailbox.new_message("leader", worker, body)])


# ---- grouping and cost ----------------------------------------------------------------------


def test_one_listing_and_at_most_one_capture_per_host_server_per_scan(rworld: RWorld) -> None:
    mon = rworld.monitor()
    report = mon.scan()
    b1, b2 = rworld.hosts["build1"], rworld.hosts["build2"]
    assert (b1.listings, b2.listings) == (1, 1)
    assert b1.capture_calls == [["%5", "%6"]] and b2.capture_calls == [["%5"]]
    assert sorted(rworld.made) == [("build1", "omp-p1"), ("build2", "omp-p1")]
    assert report.remote_calls == 4
    [entry] = report.teams
    assert entry["live"] is True and entry["panes"] == 4 and entry["remotePanes"] == 3
    mon.scan()  # adapters are kept; unchanged screens are not captured again
    assert (b1.listings, b2.listings) == (2, 2) and len(b1.capture_calls) == 1
    assert len(rworld.made) == 2


def test_a_team_whose_workers_all_run_elsewhere_is_live(rworld: RWorld) -> None:
    tp = rworld.paths.team("t")
    raw = team_config.load(tp).raw
    place(raw, "worker-1", "build2", "%7")
    for key in ("tmuxIdentity", "leaderPaneId"):
        raw.pop(key)
    team_config.write(tp, raw)
    rworld.hosts["build2"].pane("%7", session_of("t", "worker-1"))
    assert ctl.has_targets(raw) and ctl.watchable_teams(rworld.paths) == ["t"]
    report = rworld.monitor().scan()
    assert report.live_teams == 1 and report.teams[0]["panes"] == 4


def test_has_targets_counts_remote_workers_only_as_remote() -> None:
    assert not ctl.has_targets({"workers": [{"name": "w", "paneId": None}]})
    assert ctl.has_targets({"workers": [{"name": "w", "paneId": None, "remote": {"pane": "%1"}}]})


def test_a_pane_id_in_another_session_reads_as_gone(rworld: RWorld) -> None:
    team = rworld.paths.team("t")
    tasks.claim(team, "2", "worker-2")
    b1 = rworld.hosts["build1"]
    b1.pane("%5", "omp-other-worker-1")  # the host's server handed %5 to another team's pane
    mon = rworld.monitor()
    report = mon.scan()
    assert (tasks.read(team, "2") or {})["status"] == "interrupted"
    assert report.teams[0]["remotePanes"] == 2
    hb = presence.read(team, "worker-2")
    assert hb is not None and hb.state == "offline" and hb.pid is None


# ---- nudges ---------------------------------------------------------------------------------


def test_unread_mail_is_nudged_into_the_remote_pane_with_its_hosts_omp(rworld: RWorld) -> None:
    mail(rworld, "worker-3")  # its send typed nothing (no local pane): the monitor nudges
    mon = rworld.monitor()
    mon.scan()
    b1 = rworld.hosts["build1"]
    assert [(p, t) for p, t, _ in b1.sent] == [("%6", nudge_text("t", "worker-3", 1, REMOTE_OMP))]
    expected = b1.sent[0][2]
    assert (expected.pane_id, expected.server_pid, expected.session_id) == ("%6", 999, "$9")
    assert rworld.local.sent == [] and rworld.hosts["build2"].sent == []
    # the same pane id on another host is another target: build2's %5 is not nudged for b1's
    mail(rworld, "worker-4")
    rworld.clock.sleep(5)
    mon.scan()
    assert [p for p, _, _ in rworld.hosts["build2"].sent] == ["%5"]


def test_needs_you_is_read_from_a_remote_screen(rworld: RWorld) -> None:
    from omp.monitor import attention

    rworld.hosts["build1"].screens["%6"] = [
        "Do you want to proceed?",
        "❯ 1. Yes",
        "  2. No",
    ]
    tp = rworld.paths.team("t")
    raw = team_config.load(tp).raw
    raw["agent"] = "claude"
    team_config.write(tp, raw)
    mon = rworld.monitor()
    mon.scan()
    doc = json.loads(tp.attention.read_text()) if tp.attention.exists() else {}
    assert "worker-3" in doc.get("workers", {}), doc
    assert attention  # the module the monitor publishes through


# ---- a host that stops answering ------------------------------------------------------------


def test_an_unreachable_host_is_reported_backed_off_then_gone_after_the_grace(
    rworld: RWorld,
) -> None:
    team = rworld.paths.team("t")
    tasks.claim(team, "2", "worker-2")
    mon = rworld.monitor()
    mon.scan()
    mail(rworld, "worker-2", "kept")
    b1 = rworld.hosts["build1"]
    b1.down = True
    start = rworld.clock.t
    rworld.clock.sleep(5)
    report = mon.scan()
    # one failure: reported, never read as "panes gone"
    assert (tasks.read(team, "2") or {})["status"] == "in_progress"
    hb = presence.read(team, "worker-2")
    assert hb is None or hb.state != "offline"
    assert report.live_teams == 1 and report.teams[0]["waitingFor"] == ["build1"]
    [ev] = rworld.events("host-unreachable")
    assert ev["host"] == "build1"
    mon.status("running", terminal=False, started_at=start)
    status = json.loads(rworld.paths.monitor_status.read_text())
    row = {h["host"]: h for h in status["hosts"]}["build1"]
    assert row["state"] == "unreachable" and row["since"] and row["workersGone"] is False
    assert {h["host"]: h for h in status["hosts"]}["build2"]["state"] == "reachable"
    # backed off: not tried every scan (5 s scans: tries at +5, +10, +20, +40, +70, ...)
    tries = []
    while rworld.clock.t - start < 58:
        rworld.clock.sleep(5)
        before = b1.listings
        mon.scan()
        tries.append(b1.listings - before)
        assert (tasks.read(team, "2") or {})["status"] == "in_progress"  # within the grace
    assert sum(tries) < len(tries) and sum(tries) >= 2
    rworld.clock.sleep(5)  # past the grace, failed more than once: its workers count as gone
    mon.scan()
    task = tasks.read(team, "2")
    assert task is not None and task["status"] == "interrupted"
    assert "build1" in task["result"]
    assert presence.read(team, "worker-3").state == "offline"  # type: ignore[union-attr]
    [gone] = rworld.events("host-gone")
    assert "t/worker-2" in gone["message"] and "t/worker-3" in gone["message"]
    fails = [
        m for m in mailbox.Mailbox(team, "leader").undelivered()[0] if m.get("event") == "task_fail"
    ]
    assert len(fails) == 1 and "does not answer" in fails[0]["body"]
    # nothing lost: the worker's mail is still there, unread
    assert [m["body"] for m in mailbox.Mailbox(team, "worker-2").undelivered()[0]] == ["kept"]
    assert b1.sent == []  # never typed into a host that does not answer
    # back: reported, its panes watched again
    b1.down = False
    for _ in range(8):
        rworld.clock.sleep(5)
        mon.scan()
        if rworld.events("host-restored"):
            break
    [back] = rworld.events("host-restored")
    assert back["host"] == "build1" and "marked gone" in back["message"]
    assert presence.read(team, "worker-2").state == "live"  # type: ignore[union-attr]
    assert mon.reach.status()[0] == {"host": "build1", "state": "reachable"}
    assert len(rworld.events("host-unreachable")) == 1


def test_a_hosts_missing_server_is_gone_only_on_the_second_scan(rworld: RWorld) -> None:
    team = rworld.paths.team("t")
    tasks.claim(team, "4", "worker-4")
    rworld.hosts["build2"].panes.clear()  # the host answers; its tmux server is not running
    mon = rworld.monitor()
    mon.scan()
    assert (tasks.read(team, "4") or {})["status"] == "in_progress"
    mon.scan()
    assert (tasks.read(team, "4") or {})["status"] == "interrupted"


def test_another_failure_of_a_host_is_a_diagnostic_not_an_outage(rworld: RWorld) -> None:
    b2 = rworld.hosts["build2"]

    def broken() -> None:
        raise OmpError("tmux_error", "list-panes: boom")

    b2.remote_panes = broken  # type: ignore[method-assign]
    report = rworld.monitor().scan()
    assert any("host build2: list-panes: boom" in d for d in report.diagnostics)
    assert rworld.events("host-unreachable") == []


def test_reach_backs_off_doubling_up_to_the_cap() -> None:
    reach = rmt.Reach(grace=60, backoff=30)
    assert reach.due("h", 0)
    assert reach.failed("h", 0, "x", 5) is True
    waits = []
    t = 0.0
    for _ in range(5):
        waits.append(reach.down["h"].retry_at - t)
        t = reach.down["h"].retry_at
        assert not reach.due("h", t - 0.1) and reach.due("h", t)
        assert reach.failed("h", t, "x", 5) is False
    assert waits == [5, 10, 20, 30, 30]
    assert reach.expired("h", 60) and not rmt.Reach(grace=60).expired("h", 60)
    assert reach.answered("h") is not None and reach.due("h", 0)


def test_keys_never_collide_with_a_local_socket() -> None:
    h = Host("build1")
    assert rmt.group_key(h, "omp-p") == "ssh://build1:0/omp-p"
    assert not rmt.group_key(h, "omp-p").startswith("/")


def test_the_remote_adapter_types_over_ssh() -> None:
    mro = rmt.RemoteTyping.__mro__
    from omp.mail.typein import TypingTmux
    from omp.tmux.remote import RemoteTmux

    assert mro.index(TypingTmux) < mro.index(RemoteTmux)
    ad = rmt.RemoteTyping(Host("build1"), "omp-p")
    assert ad._run.__func__ is RemoteTmux._run  # type: ignore[attr-defined]
    assert "deliver" in TypingTmux.__dict__ and ad.timeout == rmt.SCAN_TIMEOUT


def test_remote_panes_parse_with_their_session_and_server() -> None:
    from omp.tmux.args import SEP

    line = SEP.join(
        ["%3", "77", "0", "1", "$2", "@4", "1700000000", "999", "1234", "omp-t-w", "", "/s"]
    )
    [pane] = rmt.parse_panes(line + "\nbroken\n").values()
    assert (pane.pane_id, pane.in_mode, pane.session_name, pane.server_pid) == (
        "%3", True, "omp-t-w", 999,
    )  # fmt: skip
    assert pane.identity().socket_path == "/s" and pane.activity == 1700000000.0


def test_hosts_are_looked_at_side_by_side(rworld: RWorld) -> None:
    """A host that hangs until its timeout does not add to the others' time: each listing here
    waits until the other host's has started (a scan in turn would break the barrier)."""
    import threading

    both = threading.Barrier(2, timeout=10)
    for h in rworld.hosts.values():

        def listing(own: Callable[[], Any] = h.remote_panes) -> Any:
            both.wait()
            return own()

        h.remote_panes = listing  # type: ignore[method-assign]
    report = rworld.monitor().scan()
    assert report.diagnostics == [] and report.teams[0]["remotePanes"] == 3
