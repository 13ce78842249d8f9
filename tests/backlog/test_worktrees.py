"""A worktree and branch per task, with real git in temporary repositories (no tmux: the team is
headless, the workers' calls go through `omp team api` in this process): prepared ahead and
brought up to the target at hand-over, committed, merged by hand or by the lander, the workers
whose base moved told, a conflict sent back, a check that keeps failing, delete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.backlog import handover, landing, settings, tick
from omp.backlog import worktrees as task_worktrees
from omp.errors import OmpError
from omp.mail.mailbox import Mailbox
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.team import removal
from omp.team.setup import create_team
from omp.views.backlog import task_diff
from tests.helpers import call_api
from tests.workspace.gitrepo import g, isolate_git, make_repo, write

pytestmark = pytest.mark.slow  # dozens of git processes a test

TASKS = """
[[task]]
title = "one"

[[task]]
title = "two"

[[task]]
title = "three, after one"
blocked_by = [1]
"""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "proj")
    (root / ".git" / "info" / "exclude").write_text(".omp/\n*.toml\n")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def team(repo: Path, text: str = TASKS, workers: int = 2, merge: str = "manual") -> TeamConfig:
    """A headless backlog team with a worktree per task (what launch records)."""
    (repo / "tasks.toml").write_text(text)
    create_team(repo, "t", workers, tasks_file=repo / "tasks.toml")
    paths = StatePaths(repo).team("t")
    cfg = team_config.load(paths)
    where = settings.tasks_dir_for(repo, "t", None)
    cfg.raw["backlog"] = settings.Backlog(merge, "main", True, str(where), "tasks.toml").to_config()
    team_config.write(paths, cfg.raw)
    return team_config.load(paths)


def task(cfg: TeamConfig, tid: str) -> dict[str, Any]:
    found = tasks.read(cfg.paths, tid)
    assert found is not None
    return found


def work(cfg: TeamConfig, tid: str, name: str, text: str) -> None:
    wt = task_worktrees.of(task(cfg, tid))
    assert wt is not None
    write(Path(wt.path) / name, text)
    g(Path(wt.path), "add", "-A")
    g(Path(wt.path), "commit", "-qm", f"task {tid}")


def finish(
    capsys: pytest.CaptureFixture[str], cfg: TeamConfig, tid: str, to: str = "completed"
) -> Any:
    t = task(cfg, tid)
    payload = {"team_name": "t", "task_id": tid, "worker": t["owner"], "from": "in_progress",
               "to": to, "claim_token": t["claimToken"], "result": f"task {tid} {to}"}  # fmt: skip
    return call_api(capsys, "transition-task-status", payload)


def mail(cfg: TeamConfig, worker: str) -> list[dict[str, Any]]:
    msgs, _ = Mailbox(cfg.paths, worker).undelivered()
    return msgs


def test_a_task_starts_from_the_target_and_its_dependent_from_its_merge(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = team(repo)
    prepared = tick.prepare_next(cfg, settings.of(cfg), 5)  # type: ignore[arg-type]
    assert [a["taskId"] for a in prepared] == ["1", "2"]  # ready ones only, ahead of hand-over
    main0 = g(repo, "rev-parse", "main")
    write(repo / "README.md", "# moved on\n")
    g(repo, "commit", "-qam", "the leader moves main")
    given = handover.run(cfg)
    assert [(a["worker"], a["taskId"]) for a in given] == [("worker-1", "1"), ("worker-2", "2")]
    one = task(cfg, "1")
    wt = task_worktrees.of(one)
    assert wt is not None and wt.branch == "omp/t/task-1"
    # prepared from main as it was, brought up to main at hand-over (a fast-forward)
    assert one["workspace"]["base"] == g(repo, "rev-parse", "main") != main0
    assert (Path(wt.path) / "README.md").read_text() == "# moved on\n"
    body = mail(cfg, "worker-1")[-1]["body"]
    assert f"You work in {wt.path}, your own git worktree on branch omp/t/task-1" in body
    # uncommitted work is refused; committed work completes
    write(Path(wt.path) / "one.txt", "1\n")
    out = finish(capsys, cfg, "1")
    assert out.rc == 1 and out.json["error"] == "uncommitted_changes"
    g(Path(wt.path), "add", "-A")
    g(Path(wt.path), "commit", "-qm", "task 1")
    out = finish(capsys, cfg, "1")
    assert out.rc == 0 and task(cfg, "1")["work"]["commitsAhead"] == 1
    # task 3 waits for 1's merge, not its completion
    assert task(cfg, "3")["status"] == "pending" and "next" not in out.json
    diff = task_diff(cfg, "1")
    assert diff["workers"][0]["files"] == ["one.txt"] and diff["workers"][0]["taskId"] == "1"
    report = landing.land_report(cfg, "1")
    assert report["results"][0]["status"] == "fast_forward", report
    landed = task(cfg, "1")
    assert landed["mergedInto"] == "main" and landed["mergedCommit"] == g(repo, "rev-parse", "main")
    assert not Path(wt.path).exists() and g(repo, "branch", "--list", "omp/t/task-1")
    assert (repo / "one.txt").read_text() == "1\n"
    # the merge handed task 3 to worker-1 (free), from main with task 1 in it
    three = task(cfg, "3")
    assert three["owner"] == "worker-1" and three["workspace"]["base"] == landed["mergedCommit"]
    # worker-2's task 2 is in progress: its base moved, it is told how to rebase
    [note] = [m for m in mail(cfg, "worker-2") if m.get("intent") == "base_moved"]
    path2 = task(cfg, "2")["workspace"]["path"]
    assert (
        "Task 1 landed on main" in note["body"] and f"cd {path2} && git rebase main" in note["body"]
    )


def test_a_conflict_goes_back_to_its_worker_or_to_the_queue(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = '[[task]]\ntitle="a"\n[[task]]\ntitle="b"\n[[task]]\ntitle="c"\n'
    cfg = team(repo, text)
    handover.run(cfg)
    tick.prepare_next(cfg, settings.of(cfg), 5)  # type: ignore[arg-type]
    work(cfg, "1", "README.md", "# one\n")
    work(cfg, "2", "README.md", "# two\n")
    out = finish(capsys, cfg, "2")
    # its worktree prepared ahead: the completing call itself hands worker-2 task 3
    assert out.json["next"]["taskId"] == "3"
    finish(capsys, cfg, "1")
    landing.land_report(cfg, "1")
    with pytest.raises(OmpError) as err:
        landing.land_report(cfg, "2")
    assert err.value.code == "merge_conflict"
    two = task(cfg, "2")
    # worker-2 holds task 3: task 2 goes back to the queue, its worktree and commit kept
    assert two["status"] == "pending" and two["mergeConflict"]["files"] == ["README.md"]
    assert Path(two["workspace"]["path"]).is_dir()
    # worker-1 is free: the conflict's task is handed to it, told to rebase first
    [given] = handover.run(cfg)
    assert (given["worker"], given["taskId"]) == ("worker-1", "2")
    body = mail(cfg, "worker-1")[-1]["body"]
    assert "could not be merged (conflict): first rebase it onto main" in body


def test_a_conflict_with_a_free_worker_goes_back_to_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = team(repo, '[[task]]\ntitle="a"\n[[task]]\ntitle="b"\n')
    handover.run(cfg)
    work(cfg, "1", "README.md", "# one\n")
    work(cfg, "2", "README.md", "# two\n")
    finish(capsys, cfg, "1")
    finish(capsys, cfg, "2")
    landing.land_report(cfg, "1")
    rows = landing.land_all(cfg, wait=True)  # what the background lander does
    assert [r["status"] for r in rows] == ["conflict"]
    two = task(cfg, "2")
    assert (two["status"], two["owner"]) == ("in_progress", "worker-2")
    [back] = [m for m in mail(cfg, "worker-2") if m.get("intent") == "merge_conflict"]
    assert "Rebase it onto main" in back["body"] and two["claimToken"] in back["body"]


def test_a_check_that_keeps_failing_fails_the_task(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.monitor import verifying
    from tests.helpers import poll

    text = '[[task]]\ntitle="a"\nverify="false"\n[[task]]\ntitle="b"\nblocked_by=[1]\n'
    cfg = team(repo, text, workers=1)
    handover.run(cfg)
    for attempt in range(1, 4):
        work(cfg, "1", f"f{attempt}.txt", "x\n")
        out = finish(capsys, cfg, "1")
        assert out.json["task"]["status"] == "verifying", out
        poll(lambda: task(cfg, "1")["status"] != "verifying" or verifying.settle_task(cfg, "1"),
             30, "the check's verdict")  # fmt: skip
        t = task(cfg, "1")
        assert t["verifyFailures"] == attempt
    assert t["status"] == "failed" and "its check failed 3 times" in t["result"]
    rows = json.loads(json.dumps(task_worktrees.task_items(cfg), default=str))
    assert rows  # its worktree stays for whoever retries it
    from omp.views.backlog import rows as task_rows

    two = next(r for r in task_rows(cfg)["tasks"] if r["id"] == "2")
    assert two["blockedByFailed"] == ["1"]


def test_delete_removes_task_worktrees_only_when_nothing_is_lost(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = team(repo)
    handover.run(cfg)
    work(cfg, "1", "one.txt", "1\n")
    paths = [task(cfg, t)["workspace"]["path"] for t in ("1", "2")]
    from omp.team.shutdown import shutdown

    shutdown(cfg)
    for w in cfg.worker_names:  # the workers read their hand-over mail
        box = Mailbox(cfg.paths, w)
        box.mark([str(m["id"]) for m in box.undelivered()[0]])
    with pytest.raises(OmpError) as err:
        removal.delete(cfg.paths.project, "t")
    assert err.value.code == "unmerged_work" and "task 1" in err.value.message
    removal.delete(cfg.paths.project, "t", force=True)
    assert not any(Path(p).exists() for p in paths)
