"""Behaviours a review run found wrong, pinned: relaunch, no-task launch, collect, overview,
mailbox-read's text, and starting a task without a claim."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omp.cli.team_text import status_text
from omp.store.paths import StatePaths
from omp.team import config as team_config
from omp.team import status as team_status
from omp.team import tasks
from omp.team.bootstrap import inbox_markdown
from omp.team.setup import create_team
from omp.team.shutdown import shutdown
from tests.helpers import call_api, isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def _finish(team_dir: Path, root: Path, worker: str, tid: str) -> None:
    team = StatePaths(root).team(team_dir.name)
    _, token = tasks.claim(team, tid, worker)
    (team.worker_dir(worker) / "result.md").write_text("# old result\n")
    os.chmod(team.worker_dir(worker) / "result.md", 0o600)
    tasks.transition(
        team, tid, worker=worker, from_status="in_progress", to_status="completed",
        token=token, result="old",
    )  # fmt: skip


def test_a_relaunch_starts_clean_and_keeps_the_old_run_aside(root: Path) -> None:
    team = make_team(root, "rl", 2, task="first job")
    _finish(team.dir, root, "worker-1", "1")
    tasks.claim(team, "2", "worker-2")  # left in progress when the team is shut down
    shutdown(team_config.load(team))
    create_team(root, "rl", 1, task="second job")
    cfg = team_config.load(team)
    col = team_status.collect(cfg)
    assert col["doneCount"] == 0 and col["allDone"] is False  # the old result is not new work
    listed = tasks.list_all(team)
    assert [(t["id"], t["status"], t["description"]) for t in listed] == [
        ("1", "pending", "second job")
    ]
    runs = list((team.dir / "runs").iterdir())
    assert len(runs) == 1
    old = runs[0]
    assert (old / "workers" / "worker-1" / "result.md").read_text() == "# old result\n"
    assert {p.name for p in (old / "tasks").glob("*.json")} == {"1.json", "2.json"}
    assert (old / "shutdown.json").exists() and not team.shutdown.exists()


def test_a_relaunch_starts_with_no_unread_leader_mail_from_the_last_run(root: Path) -> None:
    from omp.team.mailbox import Mailbox, new_message

    team = make_team(root, "rm", 2, task="first job")
    Mailbox(team, "leader").append_messages([new_message("worker-1", "leader", "old news")])
    Mailbox(team, "worker-2").append_messages([new_message("leader", "worker-2", "kept")])
    assert team_status.status(StatePaths(root), "rm")["teams"][0]["leaderUnread"] == 1
    shutdown(team_config.load(team))
    create_team(root, "rm", 2, task="second job")
    assert team_status.status(StatePaths(root), "rm")["teams"][0]["leaderUnread"] == 0
    (old,) = list((team.dir / "runs").iterdir())
    assert b"old news" in (old / "mailbox" / "leader.jsonl").read_bytes()  # still readable
    assert Mailbox(team, "worker-2").unread_count() == 1  # workers' mail stays


def test_collect_is_all_done_only_when_every_task_is(root: Path) -> None:
    team = make_team(root, "hc", 2, task="review docs")
    col = team_status.collect(team_config.load(team))
    assert col["allDone"] is False and col["doneCount"] == 0
    for w, tid in (("worker-1", "1"), ("worker-2", "2")):
        _finish(team.dir, root, w, tid)
    assert team_status.collect(team_config.load(team))["allDone"] is True


def test_one_broken_team_does_not_hide_the_others(root: Path) -> None:
    make_team(root, "good", 1)
    bad = make_team(root, "bad", 1)
    bad.config.write_text("{broken")
    out = team_status.status(StatePaths(root), None)
    rows = {t["team"]: t for t in out["teams"]}
    assert rows["bad"]["error"] == "invalid_config" and "workers" in rows["good"]
    assert "unreadable" in status_text(out)


def test_a_task_starts_only_through_a_claim(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_team(root, "hx", 2, task="job")
    r = call_api(
        capsys,
        "transition-task-status",
        {"team_name": "hx", "task_id": "2", "from": "pending", "to": "in_progress"},
    )
    assert r.rc == 1 and r.json["error"] == "invalid_transition"
    assert "claim-task" in r.json["message"]
    assert (tasks.read(StatePaths(root).team("hx"), "2") or {}).get("status") == "pending"


def test_mailbox_read_text_says_the_rest_is_newer_and_unread(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_team(root, "mr", 2)
    for body in ("one", "two", "three"):
        payload = {"team_name": "mr", "from": "leader", "to": "worker-1", "body": body}
        assert call_api(capsys, "send-message", payload).rc == 0
    read = {"team_name": "mr", "worker": "worker-1", "limit": 1}
    out = call_api(capsys, "mailbox-read", read, as_json=False).stdout
    assert ": one" in out and "2 more unread, newer" in out and "older" not in out
    again = call_api(capsys, "mailbox-read", {**read, "limit": 5}).json
    assert [m["body"] for m in again["messages"]] == ["two", "three"]


def test_an_inbox_without_a_task_has_nothing_to_claim() -> None:
    text = inbox_markdown(
        team="t", worker="worker-1", task_id=None, description="", teammates=[],
        result_path=Path("/p/result.md"), omp="/p/bin/omp",
    )  # fmt: skip
    assert "Task ID" not in text and "claim-task" not in text
    assert "None yet: wait" in text and '"to":"worker-1"' not in text  # never told to self-send


def test_a_headless_worker_has_no_pane_rather_than_a_gone_one(root: Path) -> None:
    team = make_team(root, "hl", 2, task="job")
    st = team_status.status(StatePaths(root), "hl")["teams"][0]
    assert [w["pane"] for w in st["workers"]] == ["none", "none"]
    assert all(w["presence"] != "offline" for w in st["workers"])
    col = team_status.collect(team_config.load(team))
    assert [w["outcome"] for w in col["workers"]] == ["working", "working"]
