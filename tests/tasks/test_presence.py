"""Presence: heartbeats written by a worker's own writing calls and by the monitor's look, never
touching a mailbox or the config; live/stalled/offline classified on read; status derived from
the files; the roster; read-only calls that stay byte-identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.conversations import availability
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import presence
from omp.tasks.presence import Heartbeat
from omp.views import status
from tests.helpers import call_api, isolate, make_project, make_team, snapshot_tree

T0 = 1_900_000_000.0


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 3, task="build the parser", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


@pytest.fixture
def team(root: Path) -> TeamPaths:
    return StatePaths(root).team("t")


def cfg_of(team: TeamPaths) -> team_config.TeamConfig:
    return team_config.load(team)


def api(capsys: pytest.CaptureFixture[str], sub: str, **fields: Any) -> dict[str, Any]:
    run = call_api(capsys, sub, {"team_name": "t", **fields})
    assert run.rc == 0 and run.json["ok"] is True, run
    return run.json  # type: ignore[no-any-return]


def hb_file(team: TeamPaths, w: str) -> Path:
    return team.worker_dir(w) / "heartbeat.json"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---- classification ---------------------------------------------------------------------------


def test_classification_on_read() -> None:
    assert presence.classify(None, T0) == "unknown"
    beat = Heartbeat(updated_at=T0)
    assert presence.classify(beat, T0 + 45) == "live"
    assert presence.classify(beat, T0 + 45.5) == "stalled"
    assert presence.classify(beat, T0, "alive") == "live"
    assert presence.classify(beat, T0, "dead") == "offline"
    assert presence.classify(beat, T0, "gone") == "offline"
    assert presence.classify(None, T0, "gone") == "offline"
    assert presence.classify(Heartbeat(state="offline", updated_at=T0), T0) == "offline"
    # a fresh look at a live pane outranks an old "offline" record
    assert presence.classify(Heartbeat(state="offline", updated_at=T0), T0, "alive") == "live"
    assert presence.classify(Heartbeat(pid=os.getpid(), updated_at=T0), T0) == "live"
    assert presence.classify(Heartbeat(pid=dead_pid(), updated_at=T0), T0) == "offline"


def test_a_heartbeat_round_trips(team: TeamPaths) -> None:
    cfg = cfg_of(team)
    assert presence.read(team, "worker-1") is None
    assert presence.touch(cfg, "worker-1", T0)
    obj = json.loads(hb_file(team, "worker-1").read_text())
    assert obj == {
        "pid": None,
        "pane_id": None,
        "state": "live",
        "updated_at": clock.iso(T0),
        "source": "api",
    }
    hb = presence.read(team, "worker-1")
    assert hb is not None and hb.updated_at == pytest.approx(T0, abs=0.001)
    hb_file(team, "worker-2").write_text("{not json")
    assert presence.read(team, "worker-2") is None


# ---- what a heartbeat write touches ---------------------------------------------------------


def test_a_heartbeat_touches_nothing_but_its_own_file(
    team: TeamPaths, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api(capsys, "send-message", **{"from": "leader", "to": "worker-1", "body": "hi"})
    cfg = cfg_of(team)
    before = snapshot_tree(root / ".omp")
    assert presence.touch(cfg, "worker-1", T0)
    assert presence.observe_pane(cfg, "worker-2", now=T0, alive=True, activity_at=T0, pid=1)
    assert presence.mark_inactive(cfg, "worker-3", "no cancel ack", T0)
    after = snapshot_tree(root / ".omp")
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {
        f"state/team/t/workers/worker-{i}{suffix}"
        for i in (1, 2, 3)
        for suffix in ("", "/heartbeat.json")
    }


def test_a_heartbeat_never_creates_a_missing_directory(team: TeamPaths) -> None:
    cfg = cfg_of(team)
    os.rmdir(team.worker_dir("worker-1"))
    assert presence.touch(cfg, "worker-1", T0) is False
    assert presence.observe_pane(cfg, "worker-1", now=T0, alive=False) is False
    assert presence.mark_inactive(cfg, "worker-1", "x", T0) is False
    assert not team.worker_dir("worker-1").exists()
    assert presence.touch(cfg, "leader", T0) is False
    assert not team.worker_dir("leader").exists()


def test_the_monitors_look_writes_only_when_something_changed(team: TeamPaths) -> None:
    cfg = cfg_of(team)
    path = hb_file(team, "worker-1")
    look = presence.observe_pane
    assert look(cfg, "worker-1", now=T0, alive=True, activity_at=T0, pane_id="%3", pid=4242)
    first = (path.read_bytes(), path.stat().st_mtime_ns)
    assert not look(cfg, "worker-1", now=T0 + 1, alive=True, activity_at=T0 + 1, pid=4242)
    assert not look(cfg, "worker-1", now=T0 + 30, alive=True, activity_at=None, pid=4242)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == first
    assert look(cfg, "worker-1", now=T0 + 12, alive=True, activity_at=T0 + 12, pid=4242)
    hb = presence.read(team, "worker-1")
    assert hb is not None and hb.updated_at == pytest.approx(T0 + 12, abs=0.001)
    assert (hb.pane_id, hb.pid, hb.source) == ("%3", 4242, "pane")
    assert look(cfg, "worker-1", now=T0 + 13, alive=False)
    assert presence.classify(presence.read(team, "worker-1"), T0 + 13) == "offline"
    assert not look(cfg, "worker-1", now=T0 + 14, alive=False)


def test_only_the_workers_own_call_lifts_an_inactive_mark(team: TeamPaths) -> None:
    cfg = cfg_of(team)
    presence.mark_inactive(cfg, "worker-1", "no cancel ack", T0)
    presence.observe_pane(cfg, "worker-1", now=T0 + 20, alive=True, activity_at=T0 + 20)
    states = availability.member_states(cfg, T0 + 20)
    assert (states["worker-1"].status, states["worker-1"].inactive_reason) == (
        "inactive",
        "no cancel ack",
    )
    presence.touch(cfg, "worker-1", T0 + 30)
    assert availability.member_states(cfg, T0 + 30)["worker-1"].status == "available"


# ---- which calls beat ---------------------------------------------------------------------------


def test_writing_calls_refresh_the_callers_heartbeat(
    team: TeamPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    api(capsys, "send-message", **{"from": "leader", "to": "worker-1", "body": "hi"})
    assert not team.worker_dir("leader").exists()
    assert presence.read(team, "worker-1") is None  # being written to is not a sign of life
    api(capsys, "mailbox-read", worker="worker-1")
    assert presence.read(team, "worker-1") is not None
    api(capsys, "send-message", **{"from": "worker-2", "to": "leader", "body": "hello"})
    assert presence.read(team, "worker-2") is not None
    api(capsys, "claim-task", task_id="3", worker="worker-3")
    hb = presence.read(team, "worker-3")
    assert hb is not None and hb.updated_at is not None
    assert abs(hb.updated_at - clock.now()) < 60


def test_the_pane_identity_names_the_caller(
    team: TeamPaths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_WORKER", "worker-2")
    # transition-task-status without a worker field: the pane's identity is the caller
    api(capsys, "claim-task", task_id="2", worker="worker-2")
    hb_file(team, "worker-2").unlink()
    task = json.loads(team.task("2").read_text())
    api(
        capsys,
        "transition-task-status",
        task_id="2",
        **{"from": "in_progress", "to": "completed"},
        claim_token=task["claimToken"],
    )
    assert presence.read(team, "worker-2") is not None


def test_read_only_calls_leave_the_tree_byte_identical(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    api(capsys, "send-message", **{"from": "leader", "to": "worker-1", "body": "hi"})
    api(
        capsys,
        "send-message",
        **{"from": "leader", "to": "worker-2", "body": "x", "event": "task_req"},
    )
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_WORKER", "worker-1")
    before = snapshot_tree(root / ".omp")
    api(capsys, "mailbox-list", worker="worker-1")
    api(capsys, "list-tasks")
    api(capsys, "roster")
    api(capsys, "roster", worker="worker-1")
    assert snapshot_tree(root / ".omp") == before


# ---- status and roster ---------------------------------------------------------------------


def test_status_is_derived_from_the_files(
    team: TeamPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    def status_of(w: str) -> str:
        return availability.member_states(cfg_of(team), clock.now())[w].status

    assert status_of("worker-1") == "available"
    claim = api(capsys, "claim-task", task_id="1", worker="worker-1")
    assert status_of("worker-1") == "busy"
    api(
        capsys,
        "transition-task-status",
        task_id="1",
        worker="worker-1",
        **{"from": "in_progress", "to": "completed"},
        claim_token=claim["claimToken"],
    )
    assert status_of("worker-1") == "available"
    req = api(
        capsys,
        "send-message",
        **{"from": "leader", "to": "worker-1", "body": "x", "event": "task_req"},
    )
    assert status_of("worker-1") == "busy"
    fail = {"from": "worker-1", "to": "leader", "body": "no", "event": "task_fail"}
    api(capsys, "send-message", **fail, task_id=req["taskId"])
    assert status_of("worker-1") == "available"
    presence.observe_pane(cfg_of(team), "worker-1", now=clock.now(), alive=False)
    assert status_of("worker-1") == "inactive"
    assert status_of("leader") == "available"


def test_the_roster_lists_everyone_but_the_caller(
    team: TeamPaths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    req = api(
        capsys,
        "send-message",
        **{"from": "leader", "to": "worker-1", "body": "x", "event": "task_req"},
    )
    api(capsys, "mailbox-read", worker="worker-1")
    presence.observe_pane(cfg_of(team), "worker-3", now=clock.now(), alive=False)
    out = api(capsys, "roster", worker="worker-2")
    assert out["you"] == "worker-2"
    by = {m["name"]: m for m in out["members"]}
    assert list(by) == ["worker-1", "worker-3", "leader"]
    assert by["worker-1"] == {
        "name": "worker-1",
        "role": "worker",
        "status": "busy",
        "presence": "live",
        "description": "worker; task 1: build the parser (part 1/3)",
        "busyWith": [req["taskId"]],
    }
    assert (by["worker-3"]["status"], by["worker-3"]["presence"]) == ("inactive", "offline")
    assert (by["leader"]["role"], by["leader"]["status"], by["leader"]["presence"]) == (
        "leader",
        "available",
        "unknown",
    )
    monkeypatch.setenv("OMP_TEAM", "t")
    monkeypatch.setenv("OMP_WORKER", "worker-3")
    out = api(capsys, "roster")
    assert out["you"] == "worker-3"
    assert [m["name"] for m in out["members"]] == ["worker-1", "worker-2", "leader"]
    monkeypatch.delenv("OMP_WORKER")  # OMP_TEAM alone is still a worker process: no leader
    assert call_api(capsys, "roster", {"team_name": "t"}).json["error"] == "stale_generation"
    monkeypatch.delenv("OMP_TEAM")
    assert api(capsys, "roster")["you"] is None
    assert len(api(capsys, "roster")["members"]) == 4


def test_the_roster_refuses_an_unknown_caller(capsys: pytest.CaptureFixture[str]) -> None:
    run = call_api(capsys, "roster", {"team_name": "t", "worker": "worker-9"})
    assert (run.rc, run.json["error"]) == (1, "unknown_recipient")
    run = call_api(capsys, "roster", {"team_name": "t", "worker": "../x"})
    assert (run.rc, run.json["error"]) == (2, "invalid_recipient_name")


def test_team_status_shows_presence_and_stays_read_only(
    root: Path, team: TeamPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    api(capsys, "mailbox-read", worker="worker-1")
    api(
        capsys,
        "send-message",
        **{"from": "leader", "to": "worker-2", "body": "x", "event": "task_req"},
    )
    before = snapshot_tree(root / ".omp")
    result = status.status(StatePaths(root), "t")
    assert snapshot_tree(root / ".omp") == before
    workers = {w["name"]: w for w in result["teams"][0]["workers"]}
    assert (workers["worker-1"]["presence"], workers["worker-1"]["status"]) == ("live", "available")
    assert (workers["worker-2"]["presence"], workers["worker-2"]["status"]) == ("unknown", "busy")
    assert workers["worker-3"]["busyWith"] == []
