"""The monitor's sweep: task timeouts (cancel, then a cancel-ack wait, then inactive and a
task_fail), orphaned work of offline workers (interrupted, never replayed), and nothing touched
when nothing is due. Time is a fake clock; no test sleeps."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omp import clock
from omp.conversations import availability
from omp.conversations import record as conversations
from omp.errors import OmpError
from omp.mail.panes import PaneView
from omp.monitor import sweep
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import presence
from tests.helpers import call_api, isolate, make_project, make_team, records, snapshot_tree

T0 = 1_900_000_000.0
TIMEOUT = 20 * 60
ALIVE = {"worker-1": "alive", "worker-2": "alive", "worker-3": "alive"}


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(clock, "now", c)
    return c


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    team = make_team(root, "t", 3, task="build the parser", no_limits=True)
    raw = team_config.load(team).raw  # panes, as a launch records them
    for i, w in enumerate(raw["workers"], start=1):
        w["paneId"] = f"%{i}"
    team_config.write(team, raw)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


@pytest.fixture
def team(root: Path) -> TeamPaths:
    return StatePaths(root).team("t")


def cfg(team: TeamPaths) -> team_config.TeamConfig:
    return team_config.load(team)


def api(capsys: pytest.CaptureFixture[str], sub: str, **fields: Any) -> dict[str, Any]:
    run = call_api(capsys, sub, {"team_name": "t", **fields})
    assert run.json is not None and run.json.get("ok") is True, run
    return run.json  # type: ignore[no-any-return]


def refused(capsys: pytest.CaptureFixture[str], code: str, **fields: Any) -> None:
    run = call_api(capsys, "send-message", {"team_name": "t", **fields})
    assert run.json is not None and run.json.get("error") == code, run


def msg(frm: str, to: str, body: str, **fields: Any) -> dict[str, Any]:
    return {"from": frm, "to": to, "body": body, **fields}


def req(capsys: pytest.CaptureFixture[str], frm: str = "leader", to: str = "worker-1") -> str:
    out = api(capsys, "send-message", **msg(frm, to, "do it", event="task_req"))
    assert out["status"] == "acknowledged"
    return str(out["taskId"])


def mail(team: TeamPaths, who: str) -> list[dict[str, Any]]:
    path = team.mailbox(who)
    return [r for r in records(path) if r.get("type") == "message"] if path.exists() else []


def run(team: TeamPaths, at: float, panes: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return sweep.sweep_team(cfg(team), at, ALIVE if panes is None else panes)


def unchanged(root: Path, action: Callable[[], Any]) -> Any:
    before = snapshot_tree(root / ".omp")
    out = action()
    assert snapshot_tree(root / ".omp") == before
    return out


def conv_state(team: TeamPaths, tid: str) -> str:
    conv = conversations.load(team, tid)
    assert conv is not None
    return conv.state


# ---- nothing due: nothing touched -----------------------------------------------------------


def test_a_quiet_team_is_swept_without_a_write(root: Path, team: TeamPaths) -> None:
    assert unchanged(root, lambda: run(team, T0)) == []
    assert not (team.dir / "conversations").exists()


def test_work_not_yet_due_is_left_alone(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    req(capsys)
    api(capsys, "claim-task", task_id="2", worker="worker-2")
    assert unchanged(root, lambda: run(team, T0 + TIMEOUT)) == []


def test_a_scan_with_nothing_due_reads_only_the_summary(
    team: TeamPaths,
    fake: Clock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    req(capsys)
    req(capsys, "leader", "worker-2")
    assert run(team, T0 + 1) == []  # parses the summary once

    def forbidden(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("read or locked although nothing was due")

    monkeypatch.setattr(conversations, "load", forbidden)
    monkeypatch.setattr(conversations, "locked", forbidden)
    monkeypatch.setattr(conversations, "_read_summary", forbidden)  # unchanged file: cached
    monkeypatch.setattr(sweep, "_claimed_by", forbidden)
    for i in range(5):
        assert run(team, T0 + 2 + i) == []


# ---- timeouts -------------------------------------------------------------------------------


def test_a_silent_worker_gets_a_timeout_cancel(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    (action,) = run(team, T0 + TIMEOUT + 1)
    assert action["action"] == "task_cancel" and action["taskId"] == tid
    assert (action["worker"], action["notify"]) == ("worker-1", "worker-1")
    cancel = mail(team, "worker-1")[-1]
    assert (cancel["from"], cancel["event"], cancel["intent"], cancel["auto"]) == (
        "leader",
        "task_cancel",
        "task_timeout",
        True,
    )
    assert (cancel["task_id"], cancel["ref_message_id"], cancel["id"]) == (
        tid,
        tid,
        action["messageId"],
    )
    assert conv_state(team, tid) == "cancelling"
    assert unchanged(root, lambda: run(team, T0 + TIMEOUT + 2)) == []  # once, not every scan


def test_any_task_event_from_the_worker_resets_the_timer(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    fake.t = T0 + 600
    api(
        capsys,
        "send-message",
        **msg("worker-1", "leader", "half", event="task_update", task_id=tid),
    )
    assert unchanged(root, lambda: run(team, T0 + 600 + TIMEOUT)) == []
    # the requester's own messages do not count as the worker's
    fake.t = T0 + 700
    api(capsys, "send-message", **msg("leader", "worker-1", "x", ref_message_id=tid))
    assert [a["action"] for a in run(team, T0 + 600 + TIMEOUT + 1)] == ["task_cancel"]


def test_the_clock_stops_while_a_clarification_waits_for_the_requester(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    fake.t = T0 + 10
    api(
        capsys,
        "send-message",
        **msg("worker-1", "leader", "which?", event="task_clarify", task_id=tid),
    )
    assert unchanged(root, lambda: run(team, T0 + 10 * TIMEOUT)) == []
    fake.t = T0 + 5000
    api(
        capsys,
        "send-message",
        **msg("leader", "worker-1", "oauth", event="task_clarify_res", task_id=tid),
    )
    assert run(team, T0 + 5000 + TIMEOUT) == []
    assert [a["action"] for a in run(team, T0 + 5000 + TIMEOUT + 1)] == ["task_cancel"]


def test_a_cancel_acknowledged_in_time_ends_quietly(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    run(team, T0 + TIMEOUT + 1)
    fake.t = T0 + TIMEOUT + 15
    api(
        capsys,
        "send-message",
        **msg("worker-1", "leader", "stopped", event="task_cancel_ack", task_id=tid),
    )
    assert conv_state(team, tid) == "cancelled"
    assert unchanged(root, lambda: run(team, T0 + TIMEOUT + 100)) == []
    assert availability.member_states(cfg(team), fake.t)["worker-1"].status == "available"


def test_no_cancel_ack_marks_the_worker_inactive_and_fails_the_task(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    cancel_at = T0 + TIMEOUT + 1
    run(team, cancel_at)
    assert unchanged(root, lambda: run(team, cancel_at + 20)) == []
    (action,) = run(team, cancel_at + 21)
    assert (action["action"], action["inactive"], action["notify"]) == (
        "timed_out",
        "worker-1",
        "leader",
    )
    fail = mail(team, "leader")[-1]
    assert (fail["from"], fail["event"], fail["intent"], fail["task_id"], fail["auto"]) == (
        "worker-1",
        "task_fail",
        "task_timeout",
        tid,
        True,
    )
    assert "20 min" in fail["body"] and "20 s" in fail["body"] and "inactive" in fail["body"]
    assert conv_state(team, tid) == "timed_out"
    fake.t = cancel_at + 30
    state = availability.member_states(cfg(team), fake.t)["worker-1"]
    assert state.status == "inactive" and "20 s" in str(state.inactive_reason)
    # a new request to it is turned away; a late answer finds the task closed
    assert (
        api(capsys, "send-message", **msg("worker-2", "worker-1", "x", event="task_req"))["reason"]
        == "inactive"
    )
    refused(
        capsys,
        "task_closed",
        **msg("worker-1", "leader", "ok", event="task_cancel_ack", task_id=tid),
    )
    # its own next call shows it is back
    api(capsys, "mailbox-read", worker="worker-1")
    assert availability.member_states(cfg(team), fake.t)["worker-1"].status == "available"
    assert unchanged(root, lambda: run(team, cancel_at + 1000)) == []


def test_a_requesters_cancel_left_unacknowledged_is_reported_too(
    team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    api(
        capsys,
        "send-message",
        **msg("leader", "worker-1", "stop", event="task_cancel", task_id=tid),
    )
    assert run(team, T0 + 20) == []
    (action,) = run(team, T0 + 21)
    assert action["action"] == "timed_out"
    assert mail(team, "leader")[-1]["intent"] == "cancel_unacknowledged"


def test_timeouts_are_configurable(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = root / ".omp" / "config.toml"
    toml.write_text(toml.read_text() + "\n[timeouts]\ntask_seconds = 60\ncancel_ack_seconds = 5\n")
    assert sweep.load_settings(StatePaths(root)) == sweep.Settings(60.0, 5.0)
    req(capsys)
    assert run(team, T0 + 60) == []
    assert [a["action"] for a in run(team, T0 + 61)] == ["task_cancel"]
    assert [a["action"] for a in run(team, T0 + 67)] == ["timed_out"]
    toml.write_text("[timeouts]\ntask_minutes = 3\n")
    with pytest.raises(OmpError) as exc:
        sweep.load_settings(StatePaths(root))
    assert exc.value.code == "invalid_config"


# ---- orphans --------------------------------------------------------------------------------


def test_an_offline_worker_leaves_its_work_interrupted_and_never_replayed(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)  # (a claimed task would make it busy: the request comes first)
    api(capsys, "claim-task", task_id="1", worker="worker-1")
    worker_box = team.mailbox("worker-1").read_bytes()
    actions = run(team, T0 + 5, {**ALIVE, "worker-1": "dead"})
    assert sorted(a["action"] for a in actions) == ["interrupted", "interrupted"]
    task = json.loads(team.task("1").read_text())
    assert task["status"] == "interrupted" and "not replayed" in task["result"]
    assert not team.task_lock("1").exists()
    assert conv_state(team, tid) == "interrupted"
    fails = [m for m in mail(team, "leader") if m.get("event") == "task_fail"]
    assert {m.get("claimed_task_id") or m.get("task_id") for m in fails} == {"1", tid}
    assert all(m["intent"] == "worker_offline" and m["auto"] for m in fails)
    assert all("pane is dead" in m["body"] and "not be replayed" in m["body"] for m in fails)
    # no replay: the worker got nothing, no task went back to pending, nobody else got the work
    assert team.mailbox("worker-1").read_bytes() == worker_box
    assert mail(team, "worker-2") == [] and mail(team, "worker-3") == []
    assert [t["status"] for t in api(capsys, "list-tasks")["tasks"]] == [
        "interrupted",
        "pending",
        "pending",
    ]
    assert unchanged(root, lambda: run(team, T0 + 10, {**ALIVE, "worker-1": "dead"})) == []


def test_the_requester_of_an_interrupted_task_is_told(
    team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys, "worker-2", "worker-3")
    (action,) = run(team, T0 + 1, {**ALIVE, "worker-3": None})  # the pane is gone
    assert (action["action"], action["requester"], action["taskId"]) == (
        "interrupted",
        "worker-2",
        tid,
    )
    fail = mail(team, "worker-2")[-1]
    assert (fail["from"], fail["event"], fail["task_id"]) == ("worker-3", "task_fail", tid)
    assert "pane is gone" in fail["body"]


def test_presence_that_is_only_stale_is_not_offline(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    req(capsys)
    presence.touch(cfg(team), "worker-1", T0)
    assert unchanged(root, lambda: run(team, T0 + 600, {})) == []  # stalled: mail waits
    presence.observe_pane(cfg(team), "worker-1", now=T0 + 700, alive=False)
    assert [a["action"] for a in run(team, T0 + 700, {})] == ["interrupted"]


def test_a_worker_without_a_pane_is_judged_by_its_heartbeat_alone(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = cfg(team).raw
    for w in raw["workers"]:
        w.pop("paneId")
    team_config.write(team, raw)
    req(capsys)
    # a headless team: "gone" only means it never had a pane
    assert unchanged(root, lambda: run(team, T0 + 1, {"worker-1": "gone"})) == []
    presence.observe_pane(cfg(team), "worker-1", now=T0 + 2, alive=False)
    assert [a["action"] for a in run(team, T0 + 3, {"worker-1": "gone"})] == ["interrupted"]


def test_a_team_that_was_shut_down_is_not_swept(
    root: Path, team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    req(capsys)
    team.shutdown.write_text('{"shutdownAt":"x"}\n')
    assert unchanged(root, lambda: run(team, T0 + 10 * TIMEOUT, {"worker-1": "dead"})) == []


def test_pane_states_come_in_any_shape_the_monitor_has() -> None:
    class Pane:
        dead = True

    assert sweep.pane_state(PaneView("alive")) == "alive"
    assert sweep.pane_state(Pane()) == "dead"
    assert sweep.pane_state(None) == "gone"
    assert sweep.pane_state("unknown") == "unknown"
    assert sweep.pane_state(object()) == "unknown"


# ---- the summary is only an index ---------------------------------------------------------------


def test_a_stale_summary_entry_is_dropped_without_a_message(
    team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    api(capsys, "send-message", **msg("worker-1", "leader", "done", event="task_done", task_id=tid))
    summary = conversations.summary_path(team)
    entry = conversations.load(team, tid)
    assert entry is not None
    entry.state = "active"  # as if a crash came between the record and the summary
    summary.write_text(json.dumps({"v": 1, "open": {tid: entry.summary()}}))
    leader = team.mailbox("leader").read_bytes()
    assert run(team, T0 + 2 * TIMEOUT) == []
    assert conversations.open_summary(team) == {}
    assert team.mailbox("leader").read_bytes() == leader


def test_a_damaged_record_is_skipped_and_kept(
    team: TeamPaths, fake: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = req(capsys)
    path = conversations.record_path(team, tid)
    path.write_bytes(path.read_bytes().replace(b'"active"', b'"activ"'))
    damaged = path.read_bytes()
    assert run(team, T0 + 2 * TIMEOUT) == []
    assert path.read_bytes() == damaged
