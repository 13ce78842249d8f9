"""A project whose mail and tasks live in Redis (`OMP_STORE`): the same `omp team api` calls,
the same answers, nothing in the files; and another omp process sees the same mail."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.store import select
from omp.store.backend import Store
from omp.store.paths import StatePaths
from tests.helpers import call_api, child_env, isolate, make_project, make_team, run_api, run_cli
from tests.store.redis_server import RedisServer, session_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


@pytest.fixture
def root(server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_STORE", f"{server.url}?ns=t{secrets.token_hex(6)}")
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 3, task="build it")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def store(root: Path) -> Store:
    got = select.current(StatePaths(root))
    assert got is not None
    return got


def api(capsys: pytest.CaptureFixture[str], sub: str, **fields: Any) -> dict[str, Any]:
    r = call_api(capsys, sub, {"team_name": "demo", **fields})
    assert r.rc == 0, r
    out: dict[str, Any] = r.json
    return out


def test_mail_goes_through_the_store(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = StatePaths(root).team("demo")
    sent = api(capsys, "send-message", **{"from": "worker-1", "to": "worker-2", "body": "hi"})
    mid = sent["messageId"]
    assert not team.mailbox("worker-2").exists()  # nothing in the files
    assert [m["id"] for m in store(root).undelivered("demo", "worker-2")] == [mid]
    listed = api(capsys, "mailbox-list", worker="worker-2", undelivered_only=True)
    assert [m["body"] for m in listed["messages"]] == ["hi"]
    marked = api(capsys, "mailbox-mark-delivered", worker="worker-2", message_id=mid)
    assert marked["alreadyDelivered"] is False
    again = api(capsys, "mailbox-mark-delivered", worker="worker-2", message_id=mid)
    assert again["alreadyDelivered"] is True
    assert api(capsys, "mailbox-list", worker="worker-2", undelivered_only=True)["messages"] == []
    everything = api(capsys, "mailbox-list", worker="worker-2")["messages"]
    assert [m["id"] for m in everything] == [mid] and everything[0]["deliveredAt"]


def test_the_limits_hold_in_the_store(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fields = {"from": "worker-1", "to": "worker-3", "body": "same"}
    api(capsys, "send-message", **fields)
    r = call_api(capsys, "send-message", {"team_name": "demo", **fields})
    assert r.rc == 1 and r.json["error"] == "duplicate"
    assert store(root).unread("demo", "worker-3") == 1


def test_tasks_go_through_the_store(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = StatePaths(root).team("demo")
    assert not list(team.tasks_dir.glob("*.json")) if team.tasks_dir.exists() else True
    assert [t["id"] for t in store(root).docs("demo", "tasks")] == ["1", "2", "3"]
    claimed = api(capsys, "claim-task", worker="worker-1", task_id="1")
    token = claimed["claimToken"]
    r = call_api(capsys, "claim-task", {"team_name": "demo", "worker": "worker-2", "task_id": "1"})
    assert r.rc == 1 and r.json["error"] == "task_not_pending"
    r = call_api(
        capsys,
        "transition-task-status",
        {"team_name": "demo", "task_id": "1", "worker": "worker-1", "from": "in_progress",
         "to": "completed", "claim_token": "forged"},
    )  # fmt: skip
    assert r.rc == 1 and r.json["error"] == "claim_token_mismatch"
    done = api(
        capsys, "transition-task-status", task_id="1", worker="worker-1",
        **{"from": "in_progress", "to": "completed"}, claim_token=token, result="built",
    )  # fmt: skip
    assert done["task"]["status"] == "completed"
    listed = api(capsys, "list-tasks")["tasks"]
    assert [(t["id"], t["status"]) for t in listed] == [
        ("1", "completed"),
        ("2", "pending"),
        ("3", "pending"),
    ]
    assert not (team.tasks_dir / "1.lock").exists()
    outbox = store(root).read("demo", "outbox/worker-1").records
    assert [(o["type"], o["taskId"]) for o in outbox] == [("task_complete", "1")]


def test_status_counts_the_store_s_mail(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "done?"})
    r = run_cli("team", "status", "demo", "--json", cwd=root, env=dict(os.environ))
    assert r.rc == 0, r
    assert r.json["teams"][0]["leaderUnread"] == 1


def test_another_process_reads_the_same_mail(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api(capsys, "send-message", **{"from": "worker-1", "to": "worker-2", "body": "across"})
    env = child_env(Path(os.environ["HOME"]), OMP_STORE=os.environ["OMP_STORE"], OMP_ROOT=str(root))
    r = run_api("mailbox-list", {"team_name": "demo", "worker": "worker-2"}, cwd=root, env=env)
    assert r.rc == 0, r
    assert [m["body"] for m in r.json["messages"]] == ["across"]
    files = dict(env, OMP_STORE="file")  # the same project on the files sees none of it
    r = run_api("mailbox-list", {"team_name": "demo", "worker": "worker-2"}, cwd=root, env=files)
    assert r.rc == 0 and r.json["messages"] == []


def test_delete_counts_the_store_s_unread_mail_and_forgets_the_team(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.errors import OmpError
    from omp.team import removal

    api(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "unread"})
    project = StatePaths(root)
    with pytest.raises(OmpError) as err:
        removal.delete(project, "demo")
    assert err.value.code == "unread_mail"
    assert store(root).has_team("demo") and store(root).unread("demo", "leader") == 1
    out = removal.delete(project, "demo", force=True)
    assert [e["recipient"] for e in out["lost"]] == ["leader"]
    assert not store(root).has_team("demo")
    assert store(root).docs("demo", "tasks") == [] and store(root).unread("demo", "leader") == 0
    # a writer that still holds the old team is refused, nothing comes back
    with pytest.raises(OmpError) as err:
        store(root).send("demo", "leader", [{"type": "message", "id": "late", "body": "x"}])
    assert err.value.code == "unknown_team"


def test_a_relaunch_archives_the_last_run_in_the_store(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.team import setup

    api(capsys, "send-message", **{"from": "worker-1", "to": "leader", "body": "old run"})
    api(capsys, "claim-task", worker="worker-1", task_id="1")
    team = StatePaths(root).team("demo")
    team.shutdown.write_text('{"shutdownAt": "2026-01-01T00:00:00.000Z"}')
    setup.archive_previous_run(team)
    assert store(root).docs("demo", "tasks") == []
    assert store(root).unread("demo", "leader") == 0


def test_heartbeats_go_through_the_store(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from omp.record import config as team_config
    from omp.tasks import presence

    team = StatePaths(root).team("demo")
    cfg = team_config.load(team)
    assert presence.touch(cfg, "worker-1")
    assert not team.heartbeat("worker-1").exists()
    beat = store(root).heartbeats("demo")["worker-1"]
    assert beat["source"] == "api" and beat["host"]
    hb = presence.read(team, "worker-1")
    assert hb is not None and hb.state == "live"
    # a heartbeat another host wrote: its pid is no evidence here
    store(root).beat("demo", "worker-2", {**beat, "pid": 999999, "host": "elsewhere"})
    other = presence.read(team, "worker-2")
    assert other is not None and other.pid is None
    assert presence.classify(other, other.updated_at or 0.0) == "live"


def test_a_worker_gone_offline_has_its_store_tasks_interrupted(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.monitor import sweep
    from omp.record import config as team_config

    api(capsys, "claim-task", worker="worker-2", task_id="2")
    cfg = team_config.load(StatePaths(root).team("demo"))
    sweep.interrupt_worker(cfg, "worker-2", "pane gone", 0.0)
    task = store(root).doc("demo", "tasks", "2")
    assert task is not None and task["status"] == "interrupted"
    assert str(task["result"]).startswith("interrupted: worker-2 went offline")
