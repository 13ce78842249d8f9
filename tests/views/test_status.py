"""`omp team status` and `collect` over headless teams: what they say, and what they never hide."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.cli.team_text import status_text
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.views import status as team_status
from tests.helpers import finish_task, isolate, make_project, make_team


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def test_collect_is_all_done_only_when_every_task_is(root: Path) -> None:
    team = make_team(root, "hc", 2, task="review docs")
    col = team_status.collect(team_config.load(team))
    assert col["allDone"] is False and col["doneCount"] == 0
    for w, tid in (("worker-1", "1"), ("worker-2", "2")):
        finish_task(team, w, tid)
    assert team_status.collect(team_config.load(team))["allDone"] is True


def test_collect_never_calls_in_progress_work_done_whatever_result_md_says(root: Path) -> None:
    """The inbox tells every worker to write result.md before completing; a failed check or a
    merge conflict then puts its task back in progress with the file still there."""
    from omp.tasks import tasks

    team = make_team(root, "rm", 2, task="write a note")
    tasks.claim(team, "1", "worker-1")
    (team.worker_dir("worker-1") / "result.md").write_text("# my note\n")
    (team.worker_dir("worker-2") / "result.md").write_text("# a note, no task claimed\n")
    col = team_status.collect(team_config.load(team))
    rows = {w["name"]: w for w in col["workers"]}
    assert rows["worker-1"]["outcome"] == "working" and rows["worker-1"]["resultMarkdown"]
    assert rows["worker-2"]["outcome"] == "working"
    assert col["doneCount"] == 0 and col["allDone"] is False
    st = team_status.status(StatePaths(root), "rm")["teams"][0]
    assert {t["id"]: t["status"] for t in st["tasks"]} == {"1": "in_progress", "2": "pending"}


def test_one_broken_team_does_not_hide_the_others(root: Path) -> None:
    make_team(root, "good", 1)
    bad = make_team(root, "bad", 1)
    bad.config.write_text("{broken")
    out = team_status.status(StatePaths(root), None)
    rows = {t["team"]: t for t in out["teams"]}
    assert rows["bad"]["error"] == "invalid_config" and "workers" in rows["good"]
    assert "unreadable" in status_text(out)


def test_a_headless_worker_has_no_pane_rather_than_a_gone_one(root: Path) -> None:
    team = make_team(root, "hl", 2, task="job")
    st = team_status.status(StatePaths(root), "hl")["teams"][0]
    assert [w["pane"] for w in st["workers"]] == ["none", "none"]
    assert all(w["presence"] != "offline" for w in st["workers"])
    col = team_status.collect(team_config.load(team))
    assert [w["outcome"] for w in col["workers"]] == ["working", "working"]
