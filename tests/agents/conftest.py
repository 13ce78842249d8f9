"""Fixtures for tests that run real agent CLIs against the scripted model.

def test_x(scripted_model):            # a server playing a worker (WorkerPolicy)
    scripted_model.base_url            # http://127.0.0.1:<port>/v1
    scripted_model.policy = OtherPolicy()   # any object with reply(chat) -> Reply
    scripted_model.requests            # every request and the reply it got

def test_y(copilot_team):              # a factory: AgentTeam on a private tmux server
    team = copilot_team()              # uses scripted_model; torn down after the test
    team.launch(2)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import AgentTeam, find_cli, find_copilot
from tests.agents.scripted_model import ScriptedModel
from tests.agents.worker_policy import WorkerPolicy


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    with ScriptedModel(WorkerPolicy()) as model:
        yield model


@pytest.fixture(scope="session")
def copilot_bin() -> Path:
    path, why = find_copilot()
    if path is None:
        pytest.skip(why)
    return path


def _teams(
    base: Path, binary: Path, model: ScriptedModel, agent: str, *, check_left: bool = False
) -> Iterator[Callable[..., AgentTeam]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    made: list[AgentTeam] = []

    def make(**kw: Any) -> AgentTeam:
        team = AgentTeam(base / f"team{len(made)}", binary, model, agent=agent, **kw)
        made.append(team)
        return team

    yield make
    left: list[str] = []
    for team in made:
        left += team.close()
    # Issue 20: nothing of a team outlives its shutdown (Gemini's relaunched node once did): no
    # process carrying the project's OMP_ROOT is left once `omp team shutdown` returned.
    assert not left, f"processes of the team left after shutdown: {left}"
    if check_left:  # nor anything else of it: the tmux server, the monitor, helpers by cwd
        for team in made:
            team.assert_none_left()


@pytest.fixture
def copilot_team(
    tmp_path: Path, copilot_bin: Path, scripted_model: ScriptedModel
) -> Iterator[Callable[..., AgentTeam]]:
    yield from _teams(tmp_path, copilot_bin, scripted_model, "copilot")


@pytest.fixture
def codex_team(tmp_path: Path, scripted_model: ScriptedModel) -> Iterator[Callable[..., AgentTeam]]:
    yield from _teams(tmp_path, _cli("codex"), scripted_model, "codex")


@pytest.fixture
def gemini_team(
    tmp_path: Path, scripted_model: ScriptedModel
) -> Iterator[Callable[..., AgentTeam]]:
    yield from _teams(tmp_path, _cli("gemini"), scripted_model, "gemini")


def _cli(agent: str) -> Path:
    path, why = find_cli(agent)
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture
def claude_team(
    tmp_path: Path, scripted_model: ScriptedModel
) -> Iterator[Callable[..., AgentTeam]]:
    yield from _teams(tmp_path, _cli("claude"), scripted_model, "claude", check_left=True)


@pytest.fixture
def pi_team(tmp_path: Path, scripted_model: ScriptedModel) -> Iterator[Callable[..., AgentTeam]]:
    yield from _teams(tmp_path, _cli("pi"), scripted_model, "pi", check_left=True)
