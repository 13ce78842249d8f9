"""Starting the monitor: one per project, fail-open, stale owners reclaimed, status read-only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.monitor import ctl as ctl
from omp.monitor.loop import run_monitor
from omp.monitor.policy import Intervals
from omp.record import config as team_config
from omp.store import fs
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from omp.views.status import status
from tests.helpers import child_env, isolate, make_project, make_team, poll, snapshot_tree
from tests.monitor.test_monitor_policy import FakeClock, FakePane, FakeTmux, live_config
from tests.monitor.test_monitor_tmux import (
    IDLE,
    kill_monitors,
    make_live_team,
    monitor_pids,
    owner,
    running_owner,
    status_of,
)

IV = Intervals()


class Spawns:
    """A fake spawner that records calls and starts nothing."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[Path, str]] = []
        self.fail = fail

    def __call__(self, root: Path, token: str) -> int:
        self.calls.append((root, token))
        if self.fail:
            raise OSError("no fork for you")
        return 999_999


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    live_config(r)  # a team with panes and a tmux identity (on a server that does not exist)
    return r


def write_lock(root: Path, **fields: Any) -> dict[str, Any]:
    paths = StatePaths(root)
    paths.ensure(paths.monitor)
    doc = {
        "schemaVersion": 1,
        "token": "old-token",
        "phase": "pending",
        "parentPid": 1,
        "createdAt": clock.iso(),
    }
    doc.update(fields)
    fs.write_atomic(paths.monitor / "owner.lock", json.dumps(doc).encode())
    return doc


def events(root: Path) -> list[dict[str, Any]]:
    path = StatePaths(root).monitor / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


# ---- what is started, and when --------------------------------------------------------------


def test_one_discovery_for_starts_and_scans(root: Path) -> None:
    """`watched_teams` is what both a start and a monitor's scan find; what it skips for a
    reason it names, when asked."""
    live_config(root, "second")
    make_team(root, "headless", 1)
    live_config(root, "broken")
    tp = StatePaths(root).team("broken")
    os.unlink(tp.config)
    os.symlink(tmp := tp.dir / "elsewhere.json", tp.config)
    tmp.write_text("{}")
    problems: list[str] = []
    watched = ctl.watched_teams(StatePaths(root), problems=problems)
    found = [(team.name, raw["launchToken"]) for team, raw in watched]
    assert found == [("second", "lt-1"), ("t", "lt-1")]
    assert ctl.watchable_teams(StatePaths(root)) == ["second", "t"]
    assert len(problems) == 1 and problems[0].startswith("team broken: ")
    assert "symlink" in problems[0]


def test_nothing_is_created_when_there_is_nothing_to_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "p")
    spawn = Spawns()
    assert ctl.ensure_monitor(root, spawn=spawn)["reason"] == "no-live-teams"
    make_team(root, "headless", 2)  # no panes, no tmux identity
    assert ctl.ensure_monitor(root, spawn=spawn)["reason"] == "no-live-teams"
    live_config(root, "gone")
    StatePaths(root).team("gone").shutdown.write_text("{}")
    assert ctl.ensure_monitor(root, spawn=spawn)["reason"] == "no-live-teams"
    assert spawn.calls == []
    assert not StatePaths(root).monitor.exists()


def test_omp_no_monitor_disables_it(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    spawn = Spawns()
    assert ctl.ensure_monitor(root, spawn=spawn) == {"started": False, "reason": "disabled"}
    assert spawn.calls == [] and not StatePaths(root).monitor.exists()


def test_one_start_spawns_one_detached_child_with_the_exact_argv(root: Path) -> None:
    spawn = Spawns()
    r = ctl.ensure_monitor(root, spawn=spawn)
    assert r["started"] is True and r["reason"] == "started"
    assert spawn.calls == [(StatePaths(root).root, r["token"])]
    lock = owner(root)
    assert lock is not None and lock["phase"] == "pending" and lock["token"] == r["token"]
    assert lock["parentPid"] == os.getpid()
    assert ctl.monitor_argv(root, "T") == [
        sys.executable, "-m", "omp", "team", "monitor-run", "--root", str(root), "--token", "T",
    ]  # fmt: skip
    again = ctl.ensure_monitor(root, spawn=spawn)
    assert again == {
        "started": False,
        "reason": "already-pending",
        "token": r["token"],
        "pid": None,
    }
    assert len(spawn.calls) == 1


def test_ensure_accepts_state_paths_too(root: Path) -> None:
    spawn = Spawns()
    assert ctl.ensure_monitor(StatePaths(root), spawn=spawn)["started"] is True


@pytest.mark.slow
def test_ten_concurrent_starts_spawn_once(root: Path) -> None:
    """Ten processes race `ensure_monitor` (fake spawner writing a marker): one spawn."""
    marks = root / "spawned"
    marks.mkdir()
    go = time.time() + 1.0
    code = (
        "import json, sys, time, pathlib\n"
        "from omp.monitor import ctl\n"
        f"while time.time() < {go}: pass\n"
        "def spawn(root, token):\n"
        f"    (pathlib.Path({str(marks)!r}) / token).write_text('x')\n"
        "    return 1\n"
        f"print(json.dumps(ctl.ensure_monitor({str(root)!r}, spawn=spawn)))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=child_env())
        for _ in range(10)
    ]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert [r["started"] for r in results].count(True) == 1
    assert len(os.listdir(marks)) == 1
    assert {r["reason"] for r in results} <= {"started", "already-pending"}


# ---- stale owners ---------------------------------------------------------------------------


def test_a_pending_owner_is_reclaimed_after_15_seconds(root: Path) -> None:
    t0 = time.time()
    write_lock(root, createdAt=clock.iso(t0))
    spawn = Spawns()
    assert ctl.ensure_monitor(root, spawn=spawn, now=lambda: t0 + 14)["reason"] == "already-pending"
    r = ctl.ensure_monitor(root, spawn=spawn, now=lambda: t0 + 15.5)
    assert r["started"] is True and len(spawn.calls) == 1
    assert owner(root)["token"] == r["token"]  # type: ignore[index]
    assert [e["type"] for e in events(root)] == ["owner-reclaimed"]


@pytest.fixture
def holder() -> Any:
    """A live process whose command line carries a token, like a running monitor."""
    token = "live-token-123"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", token])
    # Until exec, /proc shows the parent's command line: wait for ours.
    poll(lambda: ctl.pid_alive(proc.pid, token), 10, "the holder to start")
    yield proc.pid, token
    proc.kill()
    proc.wait()


def test_a_running_owner_is_kept_while_its_heartbeat_is_fresh(root: Path, holder: Any) -> None:
    pid, token = holder
    t0 = time.time()
    write_lock(root, token=token, phase="running", pid=pid, updatedAt=clock.iso(t0))
    spawn = Spawns()
    r = ctl.ensure_monitor(root, spawn=spawn, now=lambda: t0 + 19)
    assert r == {"started": False, "reason": "already-running", "token": token, "pid": pid}
    r = ctl.ensure_monitor(root, spawn=spawn, now=lambda: t0 + 21)
    assert r["started"] is True and len(spawn.calls) == 1


def test_a_running_owner_whose_process_died_is_reclaimed_at_once(root: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass", "tok-dead"])
    proc.wait()
    write_lock(root, token="tok-dead", phase="running", pid=proc.pid, updatedAt=clock.iso())
    spawn = Spawns()
    assert ctl.ensure_monitor(root, spawn=spawn)["started"] is True


def test_a_recycled_pid_is_not_taken_for_the_monitor(root: Path, holder: Any) -> None:
    pid, _ = holder
    write_lock(root, token="another-token", phase="running", pid=pid, updatedAt=clock.iso())
    assert ctl.ensure_monitor(root, spawn=Spawns())["started"] is True


@pytest.mark.parametrize(
    "content", [b"", b"{not json", b'{"schemaVersion": 1}', b'{"schemaVersion":1,"token":"x"}']
)
def test_an_invalid_owner_is_reclaimed(root: Path, content: bytes) -> None:
    paths = StatePaths(root)
    paths.ensure(paths.monitor)
    fs.write_atomic(paths.monitor / "owner.lock", content)
    assert ctl.ensure_monitor(root, spawn=Spawns())["started"] is True


def test_reclaim_is_a_compare_and_swap(root: Path) -> None:
    write_lock(root, token="B")
    paths = StatePaths(root)
    assert ctl.release(paths, "A") is False  # judged stale as A, but B holds it now
    assert owner(root)["token"] == "B"  # type: ignore[index]
    assert ctl.release(paths, "B") is True and owner(root) is None
    assert [p.name for p in paths.monitor.iterdir() if "owner" in p.name] == []


def test_a_spawn_failure_releases_the_lock_and_is_logged(root: Path) -> None:
    r = ctl.ensure_monitor(root, spawn=Spawns(fail=True))
    assert r["started"] is False and r["reason"] == "spawn-failed"
    assert owner(root) is None
    assert [e["type"] for e in events(root)] == ["spawn-failed"]
    assert ctl.ensure_monitor(root, spawn=Spawns())["started"] is True


def test_only_the_matching_token_adopts(root: Path) -> None:
    write_lock(root, token="mine")
    paths = StatePaths(root)
    assert ctl.adopt(paths, "not-mine", pid=os.getpid(), now=time.time()) is False
    assert owner(root)["phase"] == "pending"  # type: ignore[index]
    assert ctl.adopt(paths, "mine", pid=os.getpid(), now=time.time()) is True
    lock = owner(root)
    assert lock is not None and lock["phase"] == "running" and lock["pid"] == os.getpid()


# ---- status is read-only --------------------------------------------------------------------


def test_status_leaves_the_monitor_files_byte_identical(root: Path) -> None:
    paths = StatePaths(root)
    fake = FakeTmux(panes={p: FakePane() for p in ("%0", "%1", "%2", "%3")})
    for p in ("%1", "%2", "%3"):
        fake.screens[p] = ["❯ "]
    write_lock(root, token="tok")
    fc = FakeClock()
    run_monitor(root, "tok", adapter_factory=lambda s: fake, max_scans=2, intervals=IV,
                clock=fc, sleep=fc.sleep)  # fmt: skip
    write_lock(root, token="tok2", phase="running", pid=os.getpid(), updatedAt=clock.iso())
    assert {p.name for p in paths.monitor.iterdir()} >= {"status.json", "events.jsonl", "targets"}
    before = snapshot_tree(paths.state)
    result = status(paths, None)
    assert result["monitor"]["scans"] == 2
    status(paths, "t")
    assert snapshot_tree(paths.state) == before


def test_the_status_command_neither_starts_nor_touches_the_monitor(root: Path) -> None:
    paths = StatePaths(root)
    before = snapshot_tree(paths.state)
    r = subprocess.run(
        [sys.executable, "-m", "omp", "team", "status", "--json"],
        cwd=root,
        env=child_env(HOME=str(root.parent / "home")),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert snapshot_tree(paths.state) == before
    assert not paths.monitor.exists()


# ---- real processes on a private tmux server ------------------------------------------------


@pytest.fixture
def live_root(
    tmp_path: Path, tmux_env: Path, omp_tmux: Tmux, monkeypatch: pytest.MonkeyPatch
) -> Any:
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OMP_MONITOR_SCAN_SECONDS", "0.2")
    r = make_project(tmp_path / "live")
    make_live_team(r, omp_tmux, "t", 2, IDLE)
    yield r
    kill_monitors(r)


@pytest.mark.tmux
@pytest.mark.slow
def test_ten_concurrent_starts_leave_exactly_one_monitor(live_root: Path) -> None:
    root = live_root
    go = time.time() + 1.0
    code = (
        "import json, time\n"
        "from omp.monitor.ctl import ensure_monitor\n"
        f"while time.time() < {go}: pass\n"
        f"print(json.dumps(ensure_monitor({str(root)!r})))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(10)
    ]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert [r["started"] for r in results].count(True) == 1, results
    lock = poll(lambda: running_owner(root), what="the monitor to adopt the lock")
    assert monitor_pids(root) == [lock["pid"]]
    # Later starts find it running and add nothing.
    for _ in range(3):
        assert ctl.ensure_monitor(root)["reason"] == "already-running"
    poll(lambda: status_of(root).get("scans", 0) >= 3, what="three scans")
    assert monitor_pids(root) == [lock["pid"]]


@pytest.mark.tmux
@pytest.mark.slow
def test_a_monitor_killed_with_sigkill_is_replaced_by_the_next_start(live_root: Path) -> None:
    root = live_root
    first = ctl.ensure_monitor(root)
    assert first["started"] is True
    lock = poll(lambda: running_owner(root), what="adoption")
    os.kill(lock["pid"], signal.SIGKILL)
    poll(lambda: not ctl.pid_alive(lock["pid"], lock["token"]), 10, "the kill")
    second = ctl.ensure_monitor(root)
    assert second["started"] is True and second["token"] != first["token"]
    new = poll(lambda: (o := running_owner(root)) and o["token"] == second["token"] and o)
    assert monitor_pids(root) == [new["pid"]]
    assert "owner-reclaimed" in [e["type"] for e in events(root)]


@pytest.mark.tmux
@pytest.mark.slow
def test_the_monitor_exits_when_its_last_team_goes(live_root: Path) -> None:
    root = live_root
    ctl.ensure_monitor(root)
    lock = poll(lambda: running_owner(root), what="adoption")
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    raw["tmuxIdentity"]["serverStartedAt"] = 1  # as if the server had been restarted
    team_config.write(tp, raw)
    poll(lambda: owner(root) is None, 10, "the monitor to stop")
    final = json.loads((StatePaths(root).monitor / "status.json").read_text())
    assert final["reason"] == "no-live-teams" and final["pid"] == lock["pid"]
    ctl._reap()
    poll(lambda: not monitor_pids(root), 10, "the process to exit")
