"""pi-teammate's example flows, end to end through `python -m omp team api` in child processes.

Each agent is a process environment as launch makes it (OMP_TEAM, OMP_WORKER, OMP_LAUNCH_TOKEN);
the leader has none. The team is made by `create_team` with pane ids and a launch token written
into its config as a launch would, so no tmux is needed. Timeouts and dead panes are fed to the
monitor's sweep directly, with a fake `now` and fake pane states.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from omp.monitor import sweep
from omp.record import config as team_config
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks import presence
from tests.helpers import (
    MESSAGE_KEYS,
    OmpRun,
    child_env,
    isolate,
    make_project,
    make_team,
    records,
    run_api,
    snapshot_tree,
)

pytestmark = pytest.mark.slow  # whole conversations, many omp processes each

TOKEN = "lt-first-launch"
ALIVE = {"worker-1": "alive", "worker-2": "alive", "worker-3": "alive"}


class Team:
    """Three workers and a leader, each calling the real CLI from its own environment."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.home = home
        self.paths: TeamPaths = StatePaths(root).team("t")

    def env(self, who: str, token: str = TOKEN) -> dict[str, str]:
        extra = {"OMP_ROOT": str(self.root)}
        if who != "leader":
            extra.update(OMP_TEAM="t", OMP_WORKER=who, OMP_LAUNCH_TOKEN=token)
        return child_env(self.home, **extra)

    def call(self, who: str, sub: str, token: str = TOKEN, **fields: Any) -> OmpRun:
        return run_api(sub, {"team_name": "t", **fields}, cwd=self.root, env=self.env(who, token))

    def ok(self, who: str, sub: str, **fields: Any) -> dict[str, Any]:
        r = self.call(who, sub, **fields)
        assert r.rc == 0 and r.json is not None and r.json["ok"] is True, r
        return r.json  # type: ignore[no-any-return]

    def send(self, who: str, to: str, body: str, **fields: Any) -> dict[str, Any]:
        return self.ok(who, "send-message", **{"from": who, "to": to, "body": body, **fields})

    def read(self, who: str) -> list[dict[str, Any]]:
        return self.ok(who, "mailbox-read", worker=who)["messages"]  # type: ignore[no-any-return]

    def status(self, asker: str, of: str) -> str:
        members = self.ok(asker, "roster")["members"]
        return next(str(m["status"]) for m in members if m["name"] == of)

    def mailbox(self, who: str) -> list[dict[str, Any]]:
        path = self.paths.mailbox(who)
        return [r for r in records(path) if r.get("type") == "message"] if path.exists() else []

    def sweep(self, at: float, panes: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        cfg = team_config.load(self.paths)
        return sweep.sweep_team(cfg, at, ALIVE if panes is None else panes)


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Team:
    home = isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    paths = make_team(root, "t", 3, task="ship the auth feature", no_limits=True)
    raw = team_config.load(paths).raw
    raw["launchToken"] = TOKEN
    for i, w in enumerate(raw["workers"], start=1):
        w["paneId"] = f"%{i}"
    team_config.write(paths, raw)
    return Team(root, home)


def events_of(msgs: list[dict[str, Any]]) -> list[str | None]:
    return [m.get("event") for m in msgs]


def test_a_simple_task_req_ack_update_done(team: Team) -> None:
    report = team.root / "reviews" / "pr123.md"
    report.parent.mkdir()
    report.write_text("two issues\n")
    out = team.send("leader", "worker-2", "Review PR #123 for security issues", event="task_req")
    tid = out["taskId"]
    assert (out["status"], out["messageId"]) == ("acknowledged", tid)
    assert team.status("worker-1", "worker-2") == "busy"

    (incoming,) = team.read("worker-2")
    assert (incoming["event"], incoming["task_id"], incoming["from"]) == ("task_req", tid, "leader")
    team.send(
        "worker-2",
        "leader",
        "Found 2 issues so far",
        event="task_update",
        task_id=tid,
        ref_message_id=tid,
    )
    team.send(
        "worker-2",
        "leader",
        "Review done",
        event="task_done",
        task_id=tid,
        ref_message_id=tid,
        detail="reviews/pr123.md",
        cwd=str(team.root),
    )
    assert team.status("worker-1", "worker-2") == "available"

    leader = team.read("leader")
    assert events_of(leader) == ["task_ack", "task_update", "task_done"]
    assert all(m["task_id"] == tid and m["ref_message_id"] == tid for m in leader)
    assert leader[0]["auto"] is True and "auto" not in leader[1]
    assert leader[2]["detail"] == str(report.resolve())


def test_a_task_with_a_clarification_round(team: Team) -> None:
    tid = team.send("leader", "worker-1", "Refactor the auth module", event="task_req")["taskId"]
    clarify = team.send(
        "worker-1",
        "leader",
        "Which auth module? OAuth or SAML?",
        event="task_clarify",
        task_id=tid,
        ref_message_id=tid,
    )
    assert team.status("worker-2", "worker-1") == "busy"  # awaiting the answer, still busy
    team.send(
        "leader",
        "worker-1",
        "The OAuth module in src/auth/oauth",
        event="task_clarify_res",
        task_id=tid,
        ref_message_id=clarify["messageId"],
    )
    team.send("worker-1", "leader", "Refactored", event="task_done", task_id=tid)
    assert team.status("worker-2", "worker-1") == "available"
    assert events_of(team.mailbox("worker-1")) == ["task_req", "task_clarify_res"]
    assert team.mailbox("worker-1")[1]["ref_message_id"] == clarify["messageId"]
    assert events_of(team.mailbox("leader")) == ["task_ack", "task_clarify", "task_done"]


def test_a_task_req_to_a_busy_worker_is_rejected_at_once(team: Team) -> None:
    first = team.send("leader", "worker-1", "Build the auth feature", event="task_req")["taskId"]
    worker_box = team.paths.mailbox("worker-1").read_bytes()
    out = team.send("worker-2", "worker-1", "Write the database migration", event="task_req")
    assert (out["status"], out["reason"], out["delivered"]) == ("rejected", "busy", False)
    assert team.paths.mailbox("worker-1").read_bytes() == worker_box  # not disturbed
    (rej,) = team.read("worker-2")
    assert (rej["event"], rej["from"], rej["task_id"]) == ("task_reject", "worker-1", out["taskId"])
    assert "busy" in rej["body"] and first in rej["body"]
    assert team.status("worker-2", "worker-1") == "busy"


def test_sub_delegation_runs_an_independent_task(team: Team) -> None:
    outer = team.send("leader", "worker-1", "Build auth feature", event="task_req")["taskId"]
    team.read("worker-1")
    inner = team.send("worker-1", "worker-3", "Write tests for oauth", event="task_req")
    assert inner["status"] == "acknowledged" and inner["taskId"] != outer
    team.send("worker-3", "worker-1", "Tests written", event="task_done", task_id=inner["taskId"])
    assert team.status("leader", "worker-3") == "available"
    assert team.status("leader", "worker-1") == "busy"  # its own task is still open
    # the sub-task's worker is no party to the outer task
    r = team.call(
        "worker-3",
        "send-message",
        **{"from": "worker-3", "to": "leader", "body": "x", "event": "task_done", "task_id": outer},
    )
    assert (r.rc, r.json["error"]) == (1, "not_task_party")
    team.send("worker-1", "leader", "Auth feature built", event="task_done", task_id=outer)
    assert [(m["event"], m["task_id"]) for m in team.read("worker-1")] == [
        ("task_ack", inner["taskId"]),
        ("task_done", inner["taskId"]),
    ]
    assert [(m["event"], m["task_id"]) for m in team.read("leader")] == [
        ("task_ack", outer),
        ("task_done", outer),
    ]
    assert team.status("leader", "worker-1") == "available"


def test_a_cancel_and_its_acknowledgement(team: Team) -> None:
    tid = team.send("leader", "worker-2", "Long job", event="task_req")["taskId"]
    team.send("leader", "worker-2", "Never mind", event="task_cancel", task_id=tid)
    assert team.status("leader", "worker-2") == "busy"  # until the worker confirms
    assert events_of(team.read("worker-2")) == ["task_req", "task_cancel"]
    out = team.send("worker-2", "leader", "Stopped", event="task_cancel_ack", task_id=tid)
    assert out["taskState"] == "cancelled"
    assert team.status("leader", "worker-2") == "available"
    late = team.call(
        "worker-2",
        "send-message",
        **{
            "from": "worker-2",
            "to": "leader",
            "body": "done anyway",
            "event": "task_done",
            "task_id": tid,
        },
    )
    assert (late.rc, late.json["error"]) == (1, "task_closed")


def test_a_timeout_with_a_fake_clock(team: Team) -> None:
    tid = team.send("leader", "worker-1", "Slow job", event="task_req")["taskId"]
    sent = time.time()
    assert team.sweep(sent + 19 * 60) == []
    (cancel,) = team.sweep(sent + 20 * 60 + 5)
    assert cancel["action"] == "task_cancel"
    (req_msg, cancel_msg) = team.read("worker-1")
    assert req_msg["event"] == "task_req"
    assert (cancel_msg["event"], cancel_msg["intent"], cancel_msg["task_id"]) == (
        "task_cancel",
        "task_timeout",
        tid,
    )
    # the worker never acknowledges: 20 s later it is inactive and the requester is told
    assert team.sweep(sent + 20 * 60 + 5 + 19) == []
    (failed,) = team.sweep(sent + 20 * 60 + 5 + 21)
    assert failed["action"] == "timed_out"
    leader = team.read("leader")
    assert events_of(leader) == ["task_ack", "task_fail"]
    assert leader[1]["intent"] == "task_timeout" and "inactive" in leader[1]["body"]
    members = {m["name"]: m for m in team.ok("leader", "roster")["members"]}
    # worker-1 read its mail above (a sign of life) before it went silent on the cancel
    assert members["worker-1"]["status"] == "inactive"


def test_a_worker_killed_mid_task_is_interrupted_without_replay(team: Team) -> None:
    tid = team.send("leader", "worker-1", "Migrate the schema", event="task_req")["taskId"]
    claim = team.ok("worker-1", "claim-task", task_id="1", worker="worker-1")
    assert claim["task"]["status"] == "in_progress"
    worker_box = team.paths.mailbox("worker-1").read_bytes()
    actions = team.sweep(time.time(), {**ALIVE, "worker-1": "dead"})
    assert sorted(a["action"] for a in actions) == ["interrupted", "interrupted"]
    tasks = {t["id"]: t for t in team.ok("leader", "list-tasks")["tasks"]}
    assert tasks["1"]["status"] == "interrupted" and tasks["2"]["status"] == "pending"
    fails = [m for m in team.read("leader") if m["event"] == "task_fail"]
    assert sorted(str(m.get("task_id") or m.get("claimed_task_id")) for m in fails) == sorted(
        ["1", tid]
    )
    assert all("interrupted" in m["body"] and "not be replayed" in m["body"] for m in fails)
    # nothing is replayed: no new mail for anyone else, the same work is not handed out again
    assert team.paths.mailbox("worker-1").read_bytes() == worker_box
    assert team.mailbox("worker-2") == [] and team.mailbox("worker-3") == []
    before = snapshot_tree(team.root / ".omp")
    assert team.sweep(time.time() + 60, {**ALIVE, "worker-1": "dead"}) == []
    assert snapshot_tree(team.root / ".omp") == before
    # the monitor's look records the dead pane: the roster shows the worker inactive
    cfg = team_config.load(team.paths)
    presence.observe_pane(cfg, "worker-1", now=time.time(), alive=False)
    members = {m["name"]: m for m in team.ok("leader", "roster")["members"]}
    assert (members["worker-1"]["status"], members["worker-1"]["presence"]) == (
        "inactive",
        "offline",
    )
    assert "busyWith" not in members["worker-1"]  # no open work is left to it


def test_a_pane_of_an_earlier_launch_is_refused(team: Team) -> None:
    team.send("worker-1", "leader", "hello from the first launch")
    raw = team_config.load(team.paths).raw
    raw["launchToken"] = "lt-second-launch"  # the team was launched again under the same name
    team_config.write(team.paths, raw)
    before = snapshot_tree(team.root / ".omp")
    for sub, fields in [
        ("send-message", {"from": "worker-1", "to": "leader", "body": "still here"}),
        ("mailbox-read", {"worker": "worker-1"}),
        ("claim-task", {"task_id": "1", "worker": "worker-1"}),
        ("roster", {}),
    ]:
        r = team.call("worker-1", sub, **fields)
        assert (r.rc, r.json["error"]) == (1, "stale_generation"), r
        assert r.stdout.count("\n") == 1
    assert snapshot_tree(team.root / ".omp") == before
    fresh = team.call(
        "worker-1",
        "send-message",
        token="lt-second-launch",
        **{"from": "worker-1", "to": "leader", "body": "new pane"},
    )
    assert fresh.rc == 0, fresh
    assert [list(m) for m in team.mailbox("leader")] == [MESSAGE_KEYS, MESSAGE_KEYS]
