"""A real GitHub Copilot CLI worker in its own git worktree, on the scripted model: it reads its
inbox (in the project, outside its worktree: `--add-dir` grants it), edits a file of its
worktree, commits it with the line its inbox gives, and completes; the leader merges it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import FAST_MONITOR, AgentTeam, poll
from tests.agents.scenario import launch_done, omp_results
from tests.agents.scripted_model import ScriptedModel
from tests.workspace.gitrepo import IDENTITY

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]


def _make_git_project(team: AgentTeam) -> None:
    """The team's project becomes a real repository with one commit; git isolated."""
    team.env.update(
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(team.home / ".local" / "state"),
        **IDENTITY,
    )
    shutil.rmtree(team.root / ".git")
    (team.root / "README.md").write_text("# a project\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=team.root, env=team.env, check=True)


def test_a_copilot_worker_commits_in_its_worktree_and_the_leader_merges_it(
    copilot_team: Callable[..., AgentTeam], scripted_model: ScriptedModel
) -> None:
    team = copilot_team()
    _make_git_project(team)
    st = launch_done(team, 1)
    [task] = st["tasks"]
    assert task["status"] == "completed", task
    assert task["work"]["commitsAhead"] == 1, task
    ws = st["workers"][0]["workspace"]
    assert ws["branch"] == "omp/t1/worker-1" and ws["files"] == ["scripted-work.txt"], ws
    assert not Path(ws["path"]).is_relative_to(team.root)
    ran = [c for c, _ in omp_results(scripted_model)]
    assert any("transition-task-status" in c for c in ran), ran
    merged = team.omp("team", "merge", team.name, "--json")
    assert merged["merged"] == ["worker-1"], merged
    assert (team.root / "scripted-work.txt").read_text() == "The scripted worker's result.\n"


@pytest.fixture(params=["copilot", "claude"])
def checked_team(request: pytest.FixtureRequest) -> Callable[..., AgentTeam]:
    factory: Callable[..., AgentTeam] = request.getfixturevalue(f"{request.param}_team")
    return factory


def test_a_workers_check_fails_then_passes_and_its_worktree_stays_its_own(
    checked_team: Callable[..., AgentTeam], tmp_path: Path
) -> None:
    """Issue 28 (findings 7 and 8) with real CLIs (Copilot CLI, Claude Code): the team's check
    leaves `__pycache__/` and a file behind (no .gitignore covers them) and fails the first
    time; the worker reads the mail and completes again; the second check waits for the test,
    then passes. After each, the worker's `git status` is what the worker made (nothing),
    `collect` never calls the task done before it is, and nothing of the checks reaches the
    leader's branch."""
    gate = tmp_path / "gate"
    gate.mkdir()
    check = (
        "mkdir -p __pycache__ && echo x > __pycache__/left.cpython-311.pyc && "
        f"echo junk > leftover.txt && if [ -e {gate}/failed ]; then "
        f"while [ ! -e {gate}/release ]; do sleep 0.2; done; exit 0; "
        f"else touch {gate}/failed; echo the check failed; exit 1; fi"
    )
    team = checked_team(monitor=FAST_MONITOR)  # it nudges the worker about the mail
    _make_git_project(team)
    team.launch(1, "write a haiku", "--verify", check)

    def task() -> dict[str, Any]:
        [t] = team.status()["tasks"]
        return dict(t)

    def worker_status() -> str:
        wt = team.status()["workers"][0]["workspace"]["path"]
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=wt,
                             env=team.env, capture_output=True, text=True, check=True)  # fmt: skip
        return out.stdout

    try:
        # failed once, mailed, completed again: the second check is running, held at the gate
        again = poll(
            lambda: (t := task())["status"] == "verifying" and t["verify"]["attempt"] == 2 and t,
            "the worker to complete again after the failed check",
            timeout=240,
        )
    except AssertionError:
        print(team.debug())
        t = task()
        print("TASK", t)
        print("MAIL", team.mailbox("worker-1"))
        print("LOG", Path(t["verify"]["log"]).read_text() if t.get("verify") else None)
        raise
    assert (gate / "failed").exists() and again["verify"]["status"] == "running"
    mail = [m for m in team.mailbox("worker-1") if m.get("intent") == "verify_failed"]
    assert len(mail) == 1 and "the check failed" in mail[0]["body"], mail
    assert worker_status() == ""  # after the failed check: nothing of the check's
    col = team.omp("team", "collect", team.name, "--json")
    assert col["doneCount"] == 0 and col["workers"][0]["outcome"] == "verifying", col
    (gate / "release").touch()
    poll(lambda: team.status()["allDone"], "the second check to pass", timeout=120)
    assert task()["verify"]["status"] == "passed"
    assert worker_status() == ""  # after the passing check too
    col = team.omp("team", "collect", team.name, "--json")
    assert col["doneCount"] == 1 and col["workers"][0]["outcome"] == "done", col
    merged = team.omp("team", "merge", team.name, "--json")
    assert merged["merged"] == ["worker-1"], merged
    tracked = subprocess.run(["git", "ls-files"], cwd=team.root, env=team.env,
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "scripted-work.txt" in tracked.split()
    assert "leftover.txt" not in tracked and "__pycache__" not in tracked
