"""A real GitHub Copilot CLI worker in its own git worktree, on the scripted model: it reads its
inbox (in the project, outside its worktree: `--add-dir` grants it), edits a file of its
worktree, commits it with the line its inbox gives, and completes; the leader merges it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents.clis import AgentTeam
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
