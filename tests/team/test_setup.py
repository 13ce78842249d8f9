"""Launching a name again: the last run moves aside, nothing of it reads as new."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.team.setup import create_team
from omp.team.shutdown import shutdown
from omp.views import status as team_status
from tests.helpers import finish_task, isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def test_a_relaunch_starts_clean_and_keeps_the_old_run_aside(root: Path) -> None:
    team = make_team(root, "rl", 2, task="first job")
    finish_task(team, "worker-1", "1")
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
    from omp.mail.mailbox import Mailbox, new_message

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
