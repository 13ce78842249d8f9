"""A check never changes the worktree it checks (issue 28, finding 8): a worktree worker's
completion is checked in a scratch checkout of its commit, so what the command leaves behind is
never the worker's "uncommitted" work, never refuses its next completion and never reaches the
leader's branch. A failed check is mailed and recorded once, notified (`verify_failed`), and the
task no longer carries the failed attempt's result."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from omp import notify
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.tasks import tasks
from omp.team import merging
from tests.helpers import poll
from tests.team.worktree_support import claim, commit, complete, worktree_team, wt
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = pytest.mark.slow  # real git and a check's supervisor process

# imports the package as a test run does: Python writes src/__pycache__/app.*.pyc, which the
# project's .gitignore (none here) does not cover; and a plain leftover file beside it
LEAVES_THINGS = (
    f"{sys.executable} -c 'import sys; sys.path.insert(0, \"src\"); import app' "
    "&& echo run > leftover.txt"
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def _task(cfg: TeamConfig, tid: str) -> dict[str, Any]:
    found = tasks.read(cfg.paths, tid)
    assert found is not None
    return found


def _settled(cfg: TeamConfig, tid: str) -> dict[str, Any]:
    return poll(
        lambda: (t := _task(cfg, tid)) and t["status"] != "verifying" and t,
        60,
        f"task {tid} to leave verifying",
    )


def _status(cfg: TeamConfig, worker: str) -> str:
    return g(Path(wt(cfg, worker).path), "status", "--porcelain", "--untracked-files=all")


def _set_check(cfg: TeamConfig, command: str) -> TeamConfig:
    cfg.raw["verify"]["command"] = command
    team_config.write(cfg.paths, cfg.raw)
    return team_config.load(cfg.paths)


def test_a_passing_check_leaves_the_workers_worktree_as_the_worker_left_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify=LEAVES_THINGS)
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "src/app.py", "x = 2\n")
    assert complete(capsys, cfg, "worker-1", "1", token)["task"]["status"] == "verifying"
    task = _settled(cfg, "1")
    assert task["status"] == "completed", Path(task["verify"]["log"]).read_text()
    assert _status(cfg, "worker-1") == ""  # no __pycache__, no leftover.txt
    assert task["verify"]["commit"] == task["work"]["commit"]
    log = Path(task["verify"]["log"]).read_text()
    assert "scratch checkout" in log
    scratch = Path(task["verify"]["cwd"])
    assert scratch != Path(wt(cfg, "worker-1").path) and not scratch.exists()  # removed
    assert str(scratch) not in g(repo, "worktree", "list")
    # and nothing of it reaches the leader's branch
    merging.merge_team(cfg)
    tracked = g(repo, "ls-files").splitlines()
    assert "src/app.py" in tracked
    assert not any("__pycache__" in p or p == "leftover.txt" for p in tracked)


def test_after_a_failed_check_the_next_completion_is_not_refused_for_the_checks_leftovers(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = worktree_team(repo, workers=1, verify=LEAVES_THINGS + " && exit 4")
    got = tmp_path / "notified.jsonl"
    cfg.raw["notify"] = f"cat >> {got}"
    team_config.write(cfg.paths, cfg.raw)
    cfg = team_config.load(cfg.paths)
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "src/app.py", "x = 3\n")
    complete(capsys, cfg, "worker-1", "1", token, result="the first try")
    task = _settled(cfg, "1")
    assert task["status"] == "in_progress" and task["verify"]["exit"] == 4
    assert "result" not in task  # the failed attempt's one-line result is gone
    assert _status(cfg, "worker-1") == ""

    # the mail is in events.jsonl once (written just after the task moved: waited for)
    def mails() -> list[dict[str, Any]]:
        return [
            e
            for evs, _ in history.iter_since(cfg.paths, 0)
            for e in evs
            if e.get("type") == "message" and e.get("to") == "worker-1"
        ]

    # a verify_failed notification, delivered (no monitor runs here: at once), after the mail
    poll(lambda: got.exists() and got.read_text(), 30, "the notification")
    assert len(mails()) == 1, mails()
    [event] = [json.loads(line) for line in got.read_text().splitlines()]
    assert event["kind"] == "verify_failed" and event["taskId"] == "1" and event["exit"] == 4
    assert notify.pending(cfg.paths.project) == []
    # completing again is not refused with uncommitted_changes for the check's leftovers
    fixed = _set_check(cfg, "true")
    again = complete(capsys, fixed, "worker-1", "1", token, result="the second try")
    assert again["ok"] and again["task"]["status"] == "verifying", again
    assert _settled(fixed, "1")["status"] == "completed"
    assert _task(fixed, "1")["result"] == "the second try"
