"""The monitor as it really is (issue 12, class 3): `running` only when its pid is alive and it
scanned recently; a dead monitor reads as dead since its last sign of life, and the next writing
API call restarts it, fail-open, bounded, one per project."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.cli.team_text import status_text
from omp.monitor import alive as monitor_alive
from omp.monitor import ctl as ctl
from omp.store import fs
from omp.store.paths import StatePaths
from omp.views.status import status
from tests.helpers import call_api, isolate, make_project, poll, snapshot_tree
from tests.monitor.test_monitor_policy import live_config

TOKEN = "f" * 32


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    live_config(r)
    monkeypatch.setenv("OMP_ROOT", str(r))
    return r


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose command line holds TOKEN, as a monitor's does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", TOKEN])
    # Until the kernel has set up the new program's arguments, /proc shows none: wait for ours.
    poll(lambda: TOKEN.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes())
    yield proc
    proc.kill()
    proc.wait()


def plant(root: Path, *, pid: int, beat_ago: float, scan_ago: float) -> None:
    paths = StatePaths(root)
    paths.ensure(paths.monitor)
    now = clock.now()
    fs.write_json_atomic(
        paths.monitor / "owner.lock",
        {"schemaVersion": 1, "token": TOKEN, "phase": "running", "pid": pid,
         "createdAt": clock.iso(now - 100), "updatedAt": clock.iso(now - beat_ago)},
    )  # fmt: skip
    fs.write_json_atomic(
        paths.monitor / "status.json",
        {"schemaVersion": 1, "pid": pid, "reason": "running", "terminal": False,
         "startedAt": clock.iso(now - 100), "updatedAt": clock.iso(now - scan_ago)},
    )  # fmt: skip


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_running_only_when_alive_and_scanning(root: Path, holder: subprocess.Popen[bytes]) -> None:
    plant(root, pid=holder.pid, beat_ago=1, scan_ago=1)
    mon = status(StatePaths(root), None)["monitor"]
    assert mon["state"] == "running"
    assert f"monitor: running, pid {holder.pid}" in status_text(status(StatePaths(root), None))
    plant(root, pid=holder.pid, beat_ago=1, scan_ago=600)  # alive, but no scan: hung
    mon = status(StatePaths(root), None)["monitor"]
    assert mon["state"] == "dead" and "hung" in mon["stateWhy"]


def test_a_dead_pid_reads_dead_since_its_last_scan(root: Path) -> None:
    plant(root, pid=dead_pid(), beat_ago=1, scan_ago=3)
    before = snapshot_tree(root / ".omp")
    r = status(StatePaths(root), None)
    assert snapshot_tree(root / ".omp") == before  # status stays read-only
    mon = r["monitor"]
    assert mon["state"] == "dead" and mon["stateSince"] == mon["updatedAt"]
    text = status_text(r)
    assert f"monitor: dead since {mon['updatedAt']}" in text and "monitor: running" not in text


def test_a_monitor_that_stopped_on_its_own_says_so(root: Path) -> None:
    paths = StatePaths(root)
    paths.ensure(paths.monitor)
    at = clock.iso()
    fs.write_json_atomic(
        paths.monitor / "status.json",
        {"pid": 1, "reason": "no-live-teams", "terminal": True, "updatedAt": at},
    )
    mon = status(paths, None)["monitor"]
    assert (mon["state"], mon["stateSince"], mon["stateWhy"]) == ("stopped", at, "no-live-teams")
    assert monitor_alive.judge(StatePaths(root / "nowhere"))["state"] == "none"


class Starts:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real = ctl.ensure_monitor

        def fake(paths: Any, **kw: Any) -> dict[str, Any]:
            def spawn(root: Path, token: str) -> int:
                self.calls.append(token)
                return dead_pid_cached

            return real(paths, spawn=spawn, **kw)

        dead_pid_cached = dead_pid()
        monkeypatch.setattr(ctl, "ensure_monitor", fake)


def send(capsys: pytest.CaptureFixture[str], body: str) -> None:
    run = call_api(
        capsys, "send-message", {"team_name": "t", "from": "leader", "to": "worker-1", "body": body}
    )
    assert run.rc == 0, run


def test_the_next_writing_call_restarts_a_dead_monitor_once(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    starts = Starts(monkeypatch)
    plant(root, pid=dead_pid(), beat_ago=1, scan_ago=1)
    send(capsys, "a")
    assert len(starts.calls) == 1
    owner, _ = ctl.read_owner(StatePaths(root))
    assert owner is not None and owner.phase == "pending" and owner.token == starts.calls[0]
    send(capsys, "b")  # starting: nobody starts a second one
    assert len(starts.calls) == 1
    # read-only calls never start anything
    plant(root, pid=dead_pid(), beat_ago=1, scan_ago=1)
    for sub, payload in [("mailbox-list", {"worker": "worker-1"}), ("list-tasks", {})]:
        assert call_api(capsys, sub, {"team_name": "t", **payload}).rc == 0
    assert len(starts.calls) == 1


def test_restarts_are_bounded(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    starts = Starts(monkeypatch)
    for i in range(monitor_alive.MAX_RESTARTS + 2):
        plant(root, pid=dead_pid(), beat_ago=1, scan_ago=1)  # it died again at once
        send(capsys, f"m{i}")
    assert len(starts.calls) == monitor_alive.MAX_RESTARTS


def test_no_restart_when_disabled_or_for_a_headless_team(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    starts = Starts(monkeypatch)
    plant(root, pid=dead_pid(), beat_ago=1, scan_ago=1)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    send(capsys, "a")
    monkeypatch.delenv("OMP_NO_MONITOR")
    from tests.helpers import make_team

    make_team(root, "headless", 2)
    run = call_api(
        capsys,
        "send-message",
        {"team_name": "headless", "from": "leader", "to": "worker-1", "body": "x"},
    )
    assert run.rc == 0
    assert starts.calls == []
