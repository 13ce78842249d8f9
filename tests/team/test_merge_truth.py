"""`omp team merge` tells what happened (issue 28): a target held by a rebase is refused with
nothing moved; a hook after the move never turns the report around and `mergedAt` is recorded;
a conflict's mail is recorded once and notified; commit subjects name the task; a task back in
progress no longer carries the completed attempt's result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp import notify
from omp.errors import OmpError
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.tasks import tasks
from omp.team import merging
from omp.workspace import merge
from tests.helpers import run_omp
from tests.team.worktree_support import claim, commit, complete, worktree_team
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, isolate_git, make_repo, write

pytestmark = pytest.mark.slow  # real git in temporary repositories


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


def _task(cfg: TeamConfig, tid: str) -> dict[str, Any]:
    found = tasks.read(cfg.paths, tid)
    assert found is not None
    return found


def _events(cfg: TeamConfig) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for evs, _end in history.iter_since(cfg.paths, 0):
        out += evs
    return out


def _finish(
    capsys: pytest.CaptureFixture[str], cfg: TeamConfig, worker: str, tid: str, name: str, text: str
) -> None:
    token = claim(capsys, cfg, worker, tid)
    commit(cfg, worker, name, text)
    assert complete(capsys, cfg, worker, tid, token, result=f"{worker} finished")["ok"]


def test_a_target_being_rebased_is_refused_and_nothing_is_recorded(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1)
    _finish(capsys, cfg, "worker-1", "1", "w1.txt", "1\n")
    g(repo, "branch", "side")
    commit_file(repo, "README.md", "main's\n")
    g(repo, "switch", "-q", "side")
    commit_file(repo, "README.md", "side's\n")
    g(repo, "switch", "-q", "main")
    g(repo, "rebase", "side", check=False)  # the leader's own rebase, stopped on a conflict
    main = g(repo, "rev-parse", "main")
    before = checkout_snapshot(repo)
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg, into="main")
    assert err.value.code == "target_busy" and err.value.detail["operation"] == "rebase"
    assert g(repo, "rev-parse", "main") == main and checkout_snapshot(repo) == before
    assert "mergedAt" not in _task(cfg, "1")
    g(repo, "rebase", "--abort")
    assert merging.merge_team(cfg)["merged"] == ["worker-1"]


def test_a_slow_post_merge_hook_leaves_a_true_report_and_merged_at(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = worktree_team(repo, workers=1)
    _finish(capsys, cfg, "worker-1", "1", "w1.txt", "1\n")
    hook = repo / ".git" / "hooks" / "post-merge"
    write(hook, "#!/bin/sh\nsleep 30\n")  # a dependency install outlasting the limit
    hook.chmod(0o755)
    monkeypatch.setattr(merge, "HOOK_TIMEOUT", 0.5, raising=False)
    report = merging.merge_team(cfg)  # no error: the branch moved
    [row] = report["results"]
    assert row["status"] == "fast_forward" and report["merged"] == ["worker-1"]
    assert row["hook"]["name"] == "post-merge" and row["hook"]["status"] == "timed_out"
    task = _task(cfg, "1")
    assert task["mergedAt"] and task["mergedCommit"] == g(repo, "rev-parse", "main")


def test_a_conflict_is_recorded_once_notified_and_the_old_result_dropped(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = worktree_team(repo, workers=2)
    got = tmp_path / "notified.jsonl"
    cfg.raw["notify"] = f"cat >> {got}"
    team_config.write(cfg.paths, cfg.raw)
    cfg = team_config.load(cfg.paths)
    _finish(capsys, cfg, "worker-1", "1", "src/app.py", "x = 'one'\n")
    _finish(capsys, cfg, "worker-2", "2", "src/app.py", "x = 'two'\n")
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg)
    assert err.value.code == "merge_conflict"
    task = _task(cfg, "2")
    assert task["status"] == "in_progress" and "result" not in task
    mails = [e for e in _events(cfg) if e.get("type") == "message" and e.get("to") == "worker-2"]
    assert len(mails) == 1, mails  # one record per message
    # queued and, with no monitor running, delivered by the merge itself
    [event] = [json.loads(line) for line in got.read_text().splitlines()]
    assert event["kind"] == "merge_conflict" and event["worker"] == "worker-2"
    assert event["files"] == ["src/app.py"] and "conflicts with main" in event["text"]
    assert notify.pending(cfg.paths.project) == []
    # the same conflict again is not notified twice
    with pytest.raises(OmpError):
        merging.merge_team(cfg, ["worker-2"])
    assert len(got.read_text().splitlines()) == 1


def test_merge_commit_subjects_name_the_task_so_parts_read_apart(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "implement the parser for the configuration language " * 3  # same for every part
    cfg = worktree_team(repo, workers=3, task=long)
    for i in (1, 2, 3):
        _finish(capsys, cfg, f"worker-{i}", str(i), f"part{i}.txt", f"{i}\n")
    merging.merge_team(cfg)
    subjects = g(repo, "log", "--format=%s", "--merges").splitlines()
    assert len(subjects) == 2 and len(set(subjects)) == 2
    for s in subjects:
        assert len(s) <= merging.SUBJECT_MAX and s.endswith("…")
    assert any(s.startswith("Merge task 2 (worker-2): implement") for s in subjects)
    assert any(s.startswith("Merge task 3 (worker-3): implement") for s in subjects)


def test_a_completion_with_nothing_committed_is_refused_unless_the_worker_says_so(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.cli.team import kept_text
    from omp.cli.team_text import collect_markdown, status_text
    from omp.team.shutdown import shutdown
    from omp.views.status import collect, status

    cfg = worktree_team(repo, workers=2, verify="exit 1")  # a check that would fail anything
    token = claim(capsys, cfg, "worker-1", "1")
    out = complete(capsys, cfg, "worker-1", "1", token)
    assert out["ok"] is False and out["error"] == "nothing_committed", out
    assert "nothing_to_commit" in out["message"] and out["commands"]
    assert _task(cfg, "1")["status"] == "in_progress"  # did not move
    # the human form: the commands as lines a person can copy, no literal "\n"
    payload = {"team_name": cfg.name, "task_id": "1", "worker": "worker-1", "from": "in_progress",
               "to": "completed", "claim_token": token}  # fmt: skip
    human = run_omp("team", "api", "transition-task-status", "--input", json.dumps(payload),
                    cwd=repo)  # fmt: skip
    assert human.rc == 1 and "\\n" not in human.stderr, human.stderr
    said = human.stderr.splitlines()
    assert said[0].endswith("[nothing_committed]") and said[1].startswith("  git -C ")
    # a review: nothing to commit, said so; completed at once (no check of the base)
    done = complete(capsys, cfg, "worker-1", "1", token, result="reviewed", nothing_to_commit=True)
    assert done["ok"] and done["task"]["status"] == "completed", done
    assert done["task"]["work"]["nothingCommitted"] is True and "verify" not in done["task"]
    # every view says so, none says merged
    st = status(cfg.paths.project, cfg.name)
    [row] = [t for t in st["teams"][0]["tasks"] if t["id"] == "1"]
    assert row["work"]["nothingCommitted"] is True
    assert "nothing committed" in status_text(st)
    coll = collect(cfg)
    text = collect_markdown(coll)
    assert "nothing committed" in text and "merged" not in text
    report = merging.merge_team(cfg, ["worker-1"])
    assert report["merged"] == [] and report["skipped"][0]["why"] == "nothing committed"
    assert "mergedAt" not in _task(cfg, "1")
    down = shutdown(cfg)
    [kept1] = [k for k in down["worktrees"] if k["worker"] == "worker-1"]
    assert kept1["nothingCommitted"] is True
    kept_said = kept_text(cfg.name, down["worktrees"])
    assert "nothing committed" in kept_said and "all merged" not in kept_said
