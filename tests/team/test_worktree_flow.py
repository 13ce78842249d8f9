"""Workers in worktrees, from a first edit to the leader's branch, with real git in temporary
repositories (no tmux: the team is made by the code launch runs, the workers' calls go through
`omp team api` in this process).

Issue 18: uncommitted work is refused; a completion records its commit; `--verify` passes,
fails, times out and is killed midway; three workers' files all reach the leader's branch; two
workers editing one line: the second merge is a conflict, the checkout is unchanged and the
worker is mailed; the leader's uncommitted changes, with and without `--carry-changes`; copy and
link; delete refuses unmerged work; a crash between the worktree and the config write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.errors import OmpError
from omp.mail.mailbox import Mailbox
from omp.monitor import verifying
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.store.paths import StatePaths
from omp.tasks import tasks
from omp.team import merging, removal, worktrees
from omp.team.membership import remove_worker
from omp.views import worktrees as views
from omp.views.status import collect, status
from omp.workspace import repo as gitrepo
from tests.helpers import REPO, assert_reply, child_env, poll, snapshot_tree
from tests.team.worktree_support import api, claim, commit, complete, worktree_team, wt
from tests.workspace.gitrepo import checkout_snapshot, g, isolate_git, make_repo, write

# Real git in temporary repositories: dozens of git processes a test (the quick loop skips them).
pytestmark = pytest.mark.slow


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


def _mail(cfg: TeamConfig, worker: str) -> list[dict[str, Any]]:
    msgs, _ = Mailbox(cfg.paths, worker).undelivered()
    return msgs


def _done(capsys: pytest.CaptureFixture[str], cfg: TeamConfig, worker: str, tid: str) -> str:
    token = claim(capsys, cfg, worker, tid)
    head = commit(cfg, worker, f"work/{worker}.txt", f"{worker} was here\n")
    out = complete(capsys, cfg, worker, tid, token, result=f"{worker} finished")
    assert out["ok"], out
    return head


# ---- the workspace of a launch ----------------------------------------------------------------


def test_each_worker_gets_a_worktree_outside_the_project_on_its_own_branch(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    cfg = worktree_team(repo)
    for w in cfg.worker_names:
        entry = cfg.worker(w)
        assert entry is not None
        assert set(entry["workspace"]) == {"kind", "path", "branch", "base"}
        rec = wt(cfg, w)
        assert rec.branch == f"omp/t/{w}" and rec.base == base
        path = Path(rec.path)
        assert not path.is_relative_to(repo)  # no tool run from the project root sees it
        assert path.is_relative_to(Path(os.environ["XDG_STATE_HOME"]) / "omp" / "worktrees")
        assert g(path, "symbolic-ref", "--short", "HEAD") == rec.branch
        assert gitrepo.worktrees(repo)[0].path == repo
    assert cfg.raw["workspace"] == {"kind": "worktree", "base": base, "repo": str(repo)}
    # nothing of omp's shows in the leader's checkout
    assert g(repo, "status", "--porcelain", "--untracked-files=all") == ""
    locked = [e for e in gitrepo.worktrees(repo) if e.locked is not None]
    assert locked == []  # recorded: no longer provisional


def test_the_default_is_worktree_in_a_repository_with_a_commit_else_shared(
    tmp_path: Path, repo: Path
) -> None:
    assert worktrees.plan(StatePaths(repo), repo, requested=None).kind == "worktree"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert worktrees.plan(StatePaths(plain), plain, requested=None).kind == "shared"
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    g(unborn, "init", "-q")
    assert worktrees.plan(StatePaths(unborn), unborn, requested=None).kind == "shared"
    with pytest.raises(OmpError) as err:
        worktrees.plan(StatePaths(unborn), unborn, requested="worktree")
    assert err.value.code == "not_a_git_repo"
    write(repo / ".omp" / "config.toml", '[team]\nworkspace = "shared"\n')
    assert worktrees.plan(StatePaths(repo), repo, requested=None).kind == "shared"
    assert worktrees.plan(StatePaths(repo), repo, requested="worktree").kind == "worktree"
    write(repo / ".omp" / "config.toml", '[team]\nworkspace = "elsewhere"\n')
    with pytest.raises(OmpError) as err:
        worktrees.plan(StatePaths(repo), repo, requested=None)
    assert err.value.code == "invalid_config"


def test_the_leaders_uncommitted_changes_stay_behind_unless_carried(repo: Path) -> None:
    write(repo / "README.md", "# demo, edited by the leader\n")
    write(repo / "scratch.txt", "untracked\n")
    plan = worktrees.plan(StatePaths(repo), repo, requested="worktree")
    assert plan.uncommitted == (1, 1)  # what launch's one line says
    cfg = worktree_team(repo, "plain", 1)
    assert (Path(wt(cfg, "worker-1").path) / "README.md").read_text() == "# demo\n"
    carried = worktree_team(repo, "carry", 1, carry=True)
    path = Path(wt(carried, "worker-1").path)
    assert (path / "README.md").read_text() == "# demo, edited by the leader\n"
    assert not (path / "scratch.txt").exists()  # only tracked files are carried
    assert (repo / "README.md").read_text() == "# demo, edited by the leader\n"  # untouched


def test_copy_and_link_bring_what_a_fresh_checkout_lacks_and_stay_out_of_commits(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / ".env", "SECRET=1\n")
    write(repo / "node_modules" / "dep" / "index.js", "module.exports = 1\n")
    write(repo / ".gitignore", ".env\n")
    g(repo, "add", ".gitignore")
    g(repo, "commit", "-qm", "ignore .env")
    write(repo / ".omp" / "config.toml", '[worktree]\ncopy = [".env"]\nlink = ["node_modules"]\n')
    cfg = worktree_team(repo, workers=1)
    path = Path(wt(cfg, "worker-1").path)
    assert (path / ".env").read_text() == "SECRET=1\n" and not (path / ".env").is_symlink()
    assert (path / "node_modules").is_symlink()
    assert (path / "node_modules").resolve() == (repo / "node_modules").resolve()
    # the copies and links are no uncommitted work: the worker can complete
    token = claim(capsys, cfg, "worker-1", "1")
    assert complete(capsys, cfg, "worker-1", "1", token, nothing_to_commit=True)["ok"]
    write(repo / ".omp" / "config.toml", '[worktree]\ncopy = ["../outside"]\n')
    with pytest.raises(OmpError) as err:
        worktrees.plan(StatePaths(repo), repo, requested="worktree")
    assert err.value.code == "unsafe_path"


# ---- completed means committed ----------------------------------------------------------------


def test_uncommitted_work_is_refused_with_the_commands_that_commit_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo)
    path = Path(wt(cfg, "worker-1").path)
    token = claim(capsys, cfg, "worker-1", "1")
    write(path / "src" / "app.py", "x = 2\n")
    write(path / "new_module.py", "y = 1\n")
    before = snapshot_tree(cfg.paths.tasks_dir)
    out = complete(capsys, cfg, "worker-1", "1", token)
    assert out["ok"] is False and out["error"] == "uncommitted_changes"
    assert sorted(out["files"]) == ["new_module.py", "src/app.py"] and out["count"] == 2
    assert snapshot_tree(cfg.paths.tasks_dir) == before  # the task did not move
    assert _task(cfg, "1")["status"] == "in_progress"
    # the commands it gives, run as given, make the completion go through
    for line in out["commands"]:
        subprocess.run(line, shell=True, check=True, cwd="/", env=dict(os.environ))
    done = complete(capsys, cfg, "worker-1", "1", token, result="made x 2")
    assert done["ok"], done
    task = _task(cfg, "1")
    assert task["status"] == "completed"
    work = task["work"]
    assert work["commit"] == g(path, "rev-parse", "HEAD")
    assert work["commitsAhead"] == 1 and work["branch"] == "omp/t/worker-1"
    assert sorted(work["filesChanged"]) == ["new_module.py", "src/app.py"]


def test_more_than_twenty_paths_are_listed_twenty_with_the_count(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1)
    path = Path(wt(cfg, "worker-1").path)
    token = claim(capsys, cfg, "worker-1", "1")
    for i in range(25):
        write(path / f"f{i:02}.txt", "x\n")
    out = complete(capsys, cfg, "worker-1", "1", token)
    assert out["error"] == "uncommitted_changes"
    assert len(out["files"]) == 20 and out["count"] == 25
    assert "and 5 more" in out["message"]


def test_an_ignored_file_is_not_uncommitted_work(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / ".gitignore", "*.log\n")
    g(repo, "add", ".gitignore")
    g(repo, "commit", "-qm", "ignore logs")
    cfg = worktree_team(repo, workers=1)
    write(Path(wt(cfg, "worker-1").path) / "run.log", "noise\n")
    token = claim(capsys, cfg, "worker-1", "1")
    assert complete(capsys, cfg, "worker-1", "1", token, nothing_to_commit=True)["ok"]


def test_a_worker_on_another_branch_is_told_to_put_its_commits_on_its_own(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1)
    path = Path(wt(cfg, "worker-1").path)
    g(path, "switch", "-q", "-c", "elsewhere")
    token = claim(capsys, cfg, "worker-1", "1")
    out = complete(capsys, cfg, "worker-1", "1", token)
    assert out["error"] == "wrong_branch" and out["checkedOut"] == "elsewhere"


# ---- verified ---------------------------------------------------------------------------------


def _settled(cfg: TeamConfig, tid: str, timeout: float = 60) -> dict[str, Any]:
    """The task once its check has a verdict (the check's supervisor settles it itself)."""
    return poll(
        lambda: (t := _task(cfg, tid)) and t["status"] != "verifying" and t,
        timeout,
        f"task {tid} to leave verifying",
    )


def test_a_passing_check_completes_the_task_and_the_leader_hears_of_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify="test -f work/worker-1.txt && echo checked")
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "work/worker-1.txt", "hi\n")
    out = complete(capsys, cfg, "worker-1", "1", token)
    assert out["task"]["status"] == "verifying"  # the answer does not wait for the check
    assert out["task"]["verify"]["status"] == "running"
    task = _settled(cfg, "1")
    assert task["status"] == "completed" and task["verify"]["status"] == "passed"
    log = Path(task["verify"]["log"])
    assert log.parent == cfg.paths.verify_dir("1") and "checked" in log.read_text()
    outbox = cfg.paths.outbox("worker-1").read_text()
    assert '"task_complete"' in outbox  # as any completion
    moves = [(e.get("from"), e.get("to")) for e in _events(cfg) if e.get("type") == "task"]
    assert ("in_progress", "verifying") in moves and ("verifying", "completed") in moves
    assert _task(cfg, "1")["claimToken"] == token
    assert not cfg.paths.task_lock("1").exists()


def _events(cfg: TeamConfig) -> list[dict[str, Any]]:
    from omp.record import history

    out: list[dict[str, Any]] = []
    for evs, _end in history.iter_since(cfg.paths, 0):
        out += evs
    return out


def test_a_failing_check_gives_the_task_back_with_mail_saying_why(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify="echo line-one; echo the-real-error; exit 3")
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    assert complete(capsys, cfg, "worker-1", "1", token)["task"]["status"] == "verifying"
    task = _settled(cfg, "1")
    assert task["status"] == "in_progress" and task["owner"] == "worker-1"
    assert task["claimToken"] == token and cfg.paths.task_lock("1").exists()
    assert task["verify"]["status"] == "failed" and task["verify"]["exit"] == 3
    [mail] = _mail(cfg, "worker-1")
    body = mail["body"]
    assert mail["from"] == "leader" and mail["intent"] == "verify_failed"
    for part in ("echo line-one; echo the-real-error; exit 3", "code 3", "the-real-error"):
        assert part in body
    assert "Fix it, commit, complete again" in body and "transition-task-status" in body
    # fixed and committed, it completes again (and is checked again)
    write(repo / ".omp" / "x", "")
    cfg.raw["verify"]["command"] = "true"
    team_config.write(cfg.paths, cfg.raw)
    fresh = team_config.load(cfg.paths)
    commit(fresh, "worker-1", "b.txt", "b\n")
    assert complete(capsys, fresh, "worker-1", "1", token)["task"]["status"] == "verifying"
    again = _settled(fresh, "1")
    assert again["status"] == "completed" and again["verify"]["attempt"] == 2


@pytest.mark.slow  # waits out a time limit (CONTRIBUTING.md)
def test_a_check_past_its_time_limit_is_stopped_and_counts_as_failed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify="sleep 60", verify_timeout=0.5)
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    complete(capsys, cfg, "worker-1", "1", token)
    task = _settled(cfg, "1")
    assert task["status"] == "in_progress" and task["verify"]["status"] == "timed_out"
    [mail] = _mail(cfg, "worker-1")
    assert "did not finish within 0.5 s" in mail["body"]


def test_a_check_killed_midway_is_run_again(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    marker = tmp_path / "first-run"
    # the first run marks itself and hangs; a run after it passes at once
    cmd = f"test -f {marker} || {{ touch {marker}; sleep 60; }}"
    cfg = worktree_team(repo, workers=1, verify=cmd)
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    complete(capsys, cfg, "worker-1", "1", token)
    poll(marker.exists, 30, "the first run to start")
    from omp.store import fs

    state = fs.read_json(cfg.paths.verify_dir("1") / "verify.json")
    assert isinstance(state, dict)
    os.kill(int(state["supervisorPid"]), signal.SIGKILL)  # a crash: no verdict written
    poll(lambda: verifying.settle_task(cfg, "1") or None, 30, "the monitor's restart")
    task = _settled(cfg, "1")
    assert task["status"] == "completed" and task["verify"]["attempt"] == 2
    events = [e for e in _events(cfg) if e.get("type") == "task"]
    assert any((e.get("verify") or {}).get("status") == "restarted" for e in events)


def test_a_check_that_keeps_crashing_ends_as_failed_not_verifying_forever(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify="true")
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    # the task was written verifying and its check never started (a process killed between)
    task = _task(cfg, "1")
    task.update(status="verifying", verify={"run": "gone", "attempt": verifying.MAX_ATTEMPTS})
    tasks._write(cfg.files, task)
    assert verifying.settle_task(cfg, "1", now=4e9)["action"] == "verify_failed"  # type: ignore[index]
    task = _task(cfg, "1")
    assert task["status"] == "in_progress" and task["verify"]["status"] == "crashed"
    assert task["claimToken"] == token


def test_a_worker_cannot_move_a_task_out_of_verifying_itself(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1, verify="sleep 5")
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    complete(capsys, cfg, "worker-1", "1", token)
    out = api(
        capsys,
        "transition-task-status",
        team_name="t",
        task_id="1",
        worker="worker-1",
        claim_token=token,
        **{"from": "verifying", "to": "completed"},
    )
    assert out["error"] == "invalid_transition" and "being verified" in out["message"]


# ---- review and merge -------------------------------------------------------------------------


def test_three_workers_files_all_reach_the_leaders_branch_in_completion_order(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo)
    for w, tid in (("worker-2", "2"), ("worker-3", "3"), ("worker-1", "1")):
        _done(capsys, cfg, w, tid)
    diff = views.diff(cfg)
    assert_reply(diff, replies.DiffReply)
    for row in diff["workers"]:
        assert_reply(row, replies.BranchRow)
    assert [r["commitsAhead"] for r in diff["workers"]] == [1, 1, 1]
    assert all(r["merged"] is False for r in diff["workers"])
    assert "+worker-2 was here" in diff["workers"][1]["diff"]
    before = checkout_snapshot(repo)
    dry = merging.merge_team(cfg, dry_run=True)
    assert [r["worker"] for r in dry["results"]] == ["worker-2", "worker-3", "worker-1"]
    assert checkout_snapshot(repo) == before  # a dry run changes nothing
    report = merging.merge_team(cfg)
    assert_reply(report, replies.MergeReply)
    for row in report["results"]:
        assert_reply(row, replies.MergeRow)
    assert [(r["worker"], r["status"]) for r in report["results"]] == [
        ("worker-2", "fast_forward"),
        ("worker-3", "merged"),
        ("worker-1", "merged"),
    ]
    for w in cfg.worker_names:
        assert (repo / "work" / f"{w}.txt").read_text() == f"{w} was here\n"
    assert g(repo, "status", "--porcelain") == ""
    for tid in ("1", "2", "3"):
        task = _task(cfg, tid)
        assert task["mergedAt"] and task["mergedInto"] == "main"
        assert gitrepo.is_ancestor(repo, task["mergedCommit"], "main")
    assert [r["merged"] for r in views.diff(cfg)["workers"]] == [True, True, True]
    again = merging.merge_team(cfg)  # running it again skips what is merged
    assert again["results"] == [] and len(again["skipped"]) == 3
    assert {s["why"] for s in again["skipped"]} == {"already merged into main"}
    merges = [e for e in _events(cfg) if e.get("type") == "merge"]
    assert [e["worker"] for e in merges] == ["worker-2", "worker-3", "worker-1"]


def test_squash_makes_one_commit_per_worker_with_the_tasks_subject_and_result(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1)
    token = claim(capsys, cfg, "worker-1", "1")
    commit(cfg, "worker-1", "a.txt", "a\n")
    commit(cfg, "worker-1", "b.txt", "b\n")
    complete(capsys, cfg, "worker-1", "1", token, result="two files written")
    report = merging.merge_team(cfg, squash=True)
    assert report["results"][0]["status"] == "squashed"
    assert g(repo, "log", "-1", "--format=%B").startswith("task 1: build it\n\ntwo files written\n")
    assert g(repo, "rev-list", "--count", "main") == "2"  # the first commit and the squash


def test_only_completed_and_verified_branches_are_taken_without_names(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo)
    _done(capsys, cfg, "worker-1", "1")
    claim(capsys, cfg, "worker-2", "2")
    commit(cfg, "worker-2", "half.txt", "half done\n")
    report = merging.merge_team(cfg)
    assert report["merged"] == ["worker-1"]
    why = {s["worker"]: s["why"] for s in report["skipped"]}
    assert why["worker-2"] == "task 2 is in_progress" and why["worker-3"] == "task 3 is pending"
    named = merging.merge_team(cfg, ["worker-2"])  # named: taken whatever its task's status
    assert named["merged"] == ["worker-2"] and (repo / "half.txt").exists()


def test_a_dirty_leader_checkout_is_refused_before_anything_happens(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=1)
    _done(capsys, cfg, "worker-1", "1")
    write(repo / "README.md", "# mine, not committed\n")
    before = checkout_snapshot(repo)
    tasks_before = snapshot_tree(cfg.paths.tasks_dir)
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg)
    assert err.value.code == "leader_dirty" and err.value.detail["files"] == ["README.md"]
    assert checkout_snapshot(repo) == before
    assert snapshot_tree(cfg.paths.tasks_dir) == tasks_before


def test_an_untracked_file_of_the_leaders_in_the_way_is_refused_as_dirty_not_as_moved(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """git refuses to write over an untracked file the branch adds: the leader's work is in the
    way. It was `target_moved` with "Run the merge again", which would be refused again."""
    cfg = worktree_team(repo, workers=1)
    _done(capsys, cfg, "worker-1", "1")
    write(repo / "work" / "worker-1.txt", "the leader's own notes\n")
    before = checkout_snapshot(repo)
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg)
    assert err.value.code == "leader_dirty", err.value
    assert "Run the merge again" not in err.value.message
    assert "work/worker-1.txt" in err.value.message and "out of the way" in err.value.message
    [row] = err.value.detail["results"]
    assert row["status"] == "checkout_refused"
    assert checkout_snapshot(repo) == before
    assert (repo / "work" / "worker-1.txt").read_text() == "the leader's own notes\n"
    (repo / "work" / "worker-1.txt").unlink()  # moved out of the way: the merge goes through
    assert merging.merge_team(cfg)["merged"] == ["worker-1"]


def test_same_line_edits_the_second_merge_conflicts_changes_nothing_and_mails_the_worker(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=3)
    tokens: dict[str, str] = {}
    for w, tid in (("worker-1", "1"), ("worker-2", "2")):
        tokens[w] = claim(capsys, cfg, w, tid)
        commit(cfg, w, "src/app.py", f"x = '{w}'\n")
        complete(capsys, cfg, w, tid, tokens[w])
    _done(capsys, cfg, "worker-3", "3")
    assert merging.merge_team(cfg, ["worker-1"])["merged"] == ["worker-1"]
    before = checkout_snapshot(repo)
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg, stop_on_conflict=True)
    assert err.value.code == "merge_conflict"
    [row] = err.value.detail["results"]  # stopped at the conflict: worker-3 not tried
    assert row["worker"] == "worker-2" and row["status"] == "conflict"
    assert row["conflicts"] == ["src/app.py"] and row["mailed"] is True
    assert len(err.value.detail["ways"]) == 2
    assert checkout_snapshot(repo) == before  # byte for byte
    task = _task(cfg, "2")
    assert task["status"] == "in_progress" and task["claimToken"] == tokens["worker-2"]
    assert task["mergeConflict"]["files"] == ["src/app.py"]
    [mail] = _mail(cfg, "worker-2")
    path = wt(cfg, "worker-2").path
    assert f"git -C {path} rebase main" in mail["body"] and "src/app.py" in mail["body"]
    # the other branches are still tried
    with pytest.raises(OmpError) as err2:
        merging.merge_team(cfg, ["worker-2", "worker-3"])
    statuses = {r["worker"]: r["status"] for r in err2.value.detail["results"]}
    assert statuses == {"worker-3": "merged", "worker-2": "conflict"}
    assert (repo / "work" / "worker-3.txt").exists()
    # the worker does what the mail says, line by line, in a shell as an agent's is: no
    # terminal, so no editor git could open (EDITOR fails, as vi does without a terminal)
    wtp = Path(path)
    shell_env = {k: v for k, v in os.environ.items() if k not in ("GIT_EDITOR", "VISUAL")}
    shell_env["EDITOR"] = "false"
    said = [ln.strip() for ln in mail["body"].splitlines()]
    rebase_line = next(ln for ln in said if ln.startswith("git -C") and ln.endswith("rebase main"))
    rebase = subprocess.run(
        rebase_line, shell=True, capture_output=True, env=shell_env, stdin=subprocess.DEVNULL
    )
    assert rebase.returncode != 0  # the conflict, now in the worker's own worktree
    write(wtp / "src" / "app.py", "x = 'worker-1 and worker-2'\n")
    go_on = next(ln for ln in said if ln.startswith("(fix each file, then) "))
    go_on = go_on.removeprefix("(fix each file, then) ").replace("<file>", "src/app.py")
    cont = subprocess.run(
        go_on, shell=True, capture_output=True, env=shell_env, stdin=subprocess.DEVNULL
    )
    assert cont.returncode == 0, cont.stderr
    assert complete(capsys, cfg, "worker-2", "2", tokens["worker-2"])["ok"]
    assert _task(cfg, "2")["work"]["commitsAhead"] == 1  # its own commit, not the others'
    assert merging.merge_team(cfg)["merged"] == ["worker-2"]
    assert (repo / "src" / "app.py").read_text() == "x = 'worker-1 and worker-2'\n"


def test_a_merge_verifies_the_merged_result_before_the_branch_moves(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # each branch alone passes; the check fails once both files are there
    check = "test -f work/worker-1.txt && test -f work/worker-2.txt && exit 1; exit 0"
    cfg = worktree_team(repo, workers=2, verify=check)
    for w, tid in (("worker-1", "1"), ("worker-2", "2")):
        _done(capsys, cfg, w, tid)
        assert _settled(cfg, tid)["status"] == "completed"
    with pytest.raises(OmpError) as err:
        merging.merge_team(cfg)
    assert err.value.code == "verify_failed"
    rows = {r["worker"]: r for r in err.value.detail["results"]}
    assert rows["worker-1"]["status"] == "fast_forward"
    assert rows["worker-2"]["status"] == "verify_failed"
    assert "omp/t/worker-2" in err.value.message  # which branch broke it
    assert not (repo / "work" / "worker-2.txt").exists()  # main did not move past it
    assert Path(rows["worker-2"]["verify"]["log"]).parent == cfg.paths.merges_dir


# ---- what status, collect and diff show, reading only ------------------------------------------


@pytest.mark.parametrize("git_state", ["no repository", "no commit yet", "a commit"])
def test_a_shared_team_has_nothing_to_merge_whatever_git_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_state: str
) -> None:
    """Shared is the default where there is no commit: merge says there is nothing to merge
    (it said `unknown_revision`: "no branch 'main'", or `not_a_git_repo`)."""
    from tests.helpers import make_team

    root = tmp_path / "p"
    root.mkdir()
    if git_state == "a commit":
        make_repo(root)
    elif git_state == "no commit yet":
        g(root, "init", "-q", "-b", "main")
    monkeypatch.setenv("OMP_ROOT", str(root))
    team = make_team(root, "t", 2)
    cfg = team_config.load(team)
    before = snapshot_tree(root)
    report = merging.merge_team(cfg)
    assert report["ok"] is True and report["results"] == [] and report["merged"] == []
    assert report["target"] == ("" if git_state == "no repository" else "main")
    assert snapshot_tree(root) == before
    text = run_cli_text(cfg)
    assert "nothing to merge: no worker has a worktree" in text and "None" not in text


def run_cli_text(cfg: TeamConfig) -> str:
    from omp.cli.worktree_cmds import merge_text

    return merge_text(merging.merge_team(cfg))


def test_status_collect_and_diff_show_branches_and_write_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=2)
    _done(capsys, cfg, "worker-1", "1")
    write(Path(wt(cfg, "worker-2").path) / "wip.txt", "not yet\n")
    state = snapshot_tree(repo / ".omp")
    checkout = checkout_snapshot(repo)
    trees = {w: snapshot_tree(Path(wt(cfg, w).path) / ".git") for w in cfg.worker_names}
    snap = status(StatePaths(repo), "t")["teams"][0]
    rows = {w["name"]: w["workspace"] for w in snap["workers"]}
    for w in snap["workers"]:
        assert_reply(w, replies.WorkerStatus)
        assert_reply(w["workspace"], replies.BranchRow)
    assert rows["worker-1"]["commitsAhead"] == 1 and rows["worker-1"]["merged"] is False
    assert rows["worker-1"]["stat"] == "1 file, +1 -0"
    assert rows["worker-2"]["uncommitted"] == ["wip.txt"]
    task1 = next(t for t in snap["tasks"] if t["id"] == "1")
    assert task1["work"]["commitsAhead"] == 1
    from omp.cli.team_text import status_text

    lines = status_text({"teams": [snap]}).splitlines()  # each worker's branch under its row
    row = next(i for i, x in enumerate(lines) if x.startswith("    worker-1 ") and " pane " in x)
    assert lines[row + 1].strip() == (
        "branch omp/t/worker-1: 1 commit ahead, 1 file, +1 -0, not merged into main"
    )
    # a branch without a commit is not "0 commits ahead, +0 -0, merged into main"
    row = next(i for i, x in enumerate(lines) if x.startswith("    worker-2 ") and " pane " in x)
    assert lines[row + 1].strip() == "branch omp/t/worker-2: nothing committed yet, 1 uncommitted"
    got = collect(cfg)
    assert got["workers"][0]["workspace"]["branch"] == "omp/t/worker-1"
    assert_reply(got, replies.CollectReply)
    for row in got["workers"]:
        assert_reply(row, replies.CollectRow)
    assert (
        views.diff(cfg, "worker-1", stat=True)["workers"][0]["diff"]
        .strip()
        .endswith("1 insertion(+)")
    )
    assert snapshot_tree(repo / ".omp") == state
    assert checkout_snapshot(repo) == checkout
    assert {w: snapshot_tree(Path(wt(cfg, w).path) / ".git") for w in cfg.worker_names} == trees
    merging.merge_team(cfg)
    after = status(StatePaths(repo), "t")["teams"][0]
    task1 = next(t for t in after["tasks"] if t["id"] == "1")
    assert task1["mergedInto"] == "main" and task1["mergedCommit"]
    assert {w["name"]: w["workspace"]["merged"] for w in after["workers"]}["worker-1"] is True


# ---- cleanup ----------------------------------------------------------------------------------


def test_delete_refuses_unmerged_work_and_force_lists_what_it_threw_away(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=2)
    head = _done(capsys, cfg, "worker-1", "1")
    write(Path(wt(cfg, "worker-2").path) / "wip.txt", "not yet\n")
    project = StatePaths(repo)
    with pytest.raises(OmpError) as err:
        removal.delete(project, "t")
    assert err.value.code == "unmerged_work"
    assert "worker-1" in err.value.message and "worker-2" in err.value.message
    assert cfg.paths.config.exists()  # nothing removed
    assert all(Path(wt(cfg, w).path).is_dir() for w in cfg.worker_names)
    assert g(repo, "branch", "--list", "omp/t/*") != ""
    done = removal.delete(project, "t", force=True)
    assert_reply(done, replies.DeleteReply)
    for row in done["worktrees"]:
        assert_reply(row, replies.WorktreeRemoval)
    lost = {w["worker"]: w["lost"] for w in done["worktrees"]}
    assert [c["sha"] for c in lost["worker-1"]["commits"]] == [head]
    assert lost["worker-2"]["files"] == ["wip.txt"]
    assert g(repo, "branch", "--list", "omp/t/*") == ""
    assert not any(Path(wt(cfg, w).path).exists() for w in cfg.worker_names)


def test_delete_removes_merged_worktrees_and_branches(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=2)
    _done(capsys, cfg, "worker-1", "1")
    merging.merge_team(cfg)
    done = removal.delete(StatePaths(repo), "t")
    assert {w["worker"]: w["removed"] for w in done["worktrees"]} == {
        "worker-1": True,
        "worker-2": True,  # no commits: nothing to lose
    }
    assert g(repo, "branch", "--list", "omp/t/*") == ""
    assert [e.path for e in gitrepo.worktrees(repo)] == [repo]
    assert (repo / "work" / "worker-1.txt").exists()


def test_prune_keeps_a_team_with_unmerged_work_and_forgets_vanished_worktrees(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from omp.team.shutdown import shutdown

    cfg = worktree_team(repo, workers=2)
    _done(capsys, cfg, "worker-1", "1")
    down = shutdown(cfg)
    assert_reply(down, replies.ShutdownReply)
    assert [w["worker"] for w in down["worktrees"]] == ["worker-1", "worker-2"]
    for row in down["worktrees"]:
        assert_reply(row, replies.KeptWorktree)
    # what is left to merge: worker-1's commit; worker-2 committed nothing
    assert [(w["merged"], w["target"]) for w in down["worktrees"]] == [
        (False, "main"),
        (True, "main"),
    ]
    assert Path(wt(cfg, "worker-1").path).is_dir()  # shutdown keeps them
    shutil.rmtree(wt(cfg, "worker-2").path)  # a worktree whose directory vanished
    out = removal.prune(StatePaths(repo), older_than=0)
    assert_reply(out, replies.PruneReply)
    assert out["worktreesForgotten"] == [wt(cfg, "worker-2").path]
    assert g(repo, "branch", "--list", "omp/t/worker-2") != ""  # a branch is kept
    [kept] = out["kept"]
    assert kept["team"] == "t" and "would lose" in kept["why"]
    assert cfg.paths.config.exists()
    merging.merge_team(team_config.load(cfg.paths))
    out = removal.prune(StatePaths(repo), older_than=0)
    assert [e["team"] for e in out["removed"]] == ["t"]
    assert g(repo, "branch", "--list", "omp/t/*") == ""


def test_remove_worker_keeps_the_branch_and_merge_still_finds_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=2)
    head = _done(capsys, cfg, "worker-2", "2")
    out = remove_worker(cfg, "worker-2")
    assert_reply(out, replies.RemoveWorkerReply)
    assert_reply(out["worktree"], replies.WorktreeRemoval)
    assert out["worktree"]["removed"] is True and not Path(wt(cfg, "worker-2").path).exists()
    assert g(repo, "rev-parse", "omp/t/worker-2") == head
    report = merging.merge_team(team_config.load(cfg.paths), ["worker-2"])
    assert report["merged"] == ["worker-2"] and (repo / "work" / "worker-2.txt").exists()


# ---- a crash between making a worktree and recording it ----------------------------------------

_CRASH = textwrap.dedent(
    """
    import contextlib, os, signal, sys
    from pathlib import Path
    from omp.store.paths import StatePaths
    from omp.team import worktrees
    repo = Path(sys.argv[1])
    plan = worktrees.plan(StatePaths(repo), repo, requested="worktree")
    with contextlib.ExitStack() as stack:
        worktrees.provision(stack, plan, "t", ["worker-1", "worker-2"])
        print("made", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # before the config is written
    """
)


def test_a_crash_between_the_worktree_and_the_config_write_leaves_nothing_behind(
    repo: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH, str(repo)],
        capture_output=True,
        text=True,
        env=child_env(
            Path(os.environ["HOME"]),
            **{k: v for k, v in os.environ.items() if k.startswith(("GIT_", "XDG_"))},
        ),
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL and "made" in proc.stdout, proc.stderr
    left = [e for e in gitrepo.worktrees(repo) if e.path != repo]
    assert len(left) == 2 and all(e.locked for e in left)  # provisional, its process dead
    cfg = worktree_team(repo, workers=2)  # the next launch: recovers, then makes them anew
    assert [e.locked for e in gitrepo.worktrees(repo)] == [None, None, None]
    assert {wt(cfg, w).branch for w in cfg.worker_names} == {"omp/t/worker-1", "omp/t/worker-2"}


def test_an_exception_before_the_config_write_rolls_the_worktrees_back(repo: Path) -> None:
    import contextlib

    plan = worktrees.plan(StatePaths(repo), repo, requested="worktree")
    with pytest.raises(RuntimeError), contextlib.ExitStack() as stack:
        made = worktrees.provision(stack, plan, "t", ["worker-1", "worker-2"])
        assert all(Path(m.path).is_dir() for m in made.values())
        raise RuntimeError("the config write failed")
    assert [e.path for e in gitrepo.worktrees(repo)] == [repo]
    assert g(repo, "branch", "--list", "omp/*") == ""


def test_an_earlier_runs_unmerged_worktree_refuses_a_relaunch_and_a_clean_one_is_reused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = worktree_team(repo, workers=2)
    _done(capsys, cfg, "worker-1", "1")
    plan = worktrees.plan(StatePaths(repo), repo, requested="worktree")
    with pytest.raises(OmpError) as err:
        worktrees.check_leftovers(plan, "t", ["worker-1", "worker-2"])
    assert err.value.code == "worktree_exists" and "omp/t/worker-1" in err.value.message
    assert "team merge t" in err.value.message
    clear = worktrees.check_leftovers(plan, "t", ["worker-2"])  # no commits, clean: reusable
    assert [b for _p, b in clear] == ["omp/t/worker-2"]


def test_omp_run_inside_a_workers_worktree_finds_the_project(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.store.paths import find_root

    cfg = worktree_team(repo, workers=1)
    monkeypatch.delenv("OMP_ROOT")  # a person who `cd`s there, a shell that dropped it
    path = Path(wt(cfg, "worker-1").path)
    assert find_root(path / "src") == repo.resolve()
    assert g(path, "status", "--porcelain", "--untracked-files=all") == ""  # nothing to commit
    mine = tmp_path / "mine"  # a worktree of the user's own stays a root of its own
    g(repo, "worktree", "add", "-q", "-b", "mine", str(mine))
    assert find_root(mine) == mine.resolve()
    # a project that commits its settings: every worktree has a `.omp/` (no state tree in it)
    (path / ".omp").mkdir()
    (path / ".omp" / "config.toml").write_text("[team]\n")
    assert find_root(path / "src") == repo.resolve()
    (path / ".omp" / "state").mkdir()  # a state tree of its own: a project of its own
    assert find_root(path / "src") == path.resolve()


def test_omp_demo_that_cannot_start_leaves_no_throwaway_repository(tmp_path: Path) -> None:
    from tests.helpers import run_omp

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = child_env(Path(os.environ["HOME"]), PATH=str(tmp_path / "empty"), TMPDIR=str(scratch))
    out = run_omp("demo", "--json", cwd=tmp_path, env=env)
    assert out.rc == 1 and out.json["error"] == "tmux_not_found", out
    assert list(scratch.iterdir()) == []
