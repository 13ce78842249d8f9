"""Fixtures for tests that run real agent CLIs against the scripted model.

def test_x(scripted_model):            # a server playing a worker (WorkerPolicy)
    scripted_model.base_url            # http://127.0.0.1:<port>/v1
    scripted_model.policy = OtherPolicy()   # any object with reply(chat) -> Reply
    scripted_model.requests            # every request and the reply it got

def test_y(copilot_team):              # a factory: CopilotTeam on a private tmux server
    team = copilot_team()              # uses scripted_model; torn down after the test
    team.launch(2)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents.copilot import CopilotTeam, find_copilot
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


@pytest.fixture
def copilot_team(
    tmp_path: Path, copilot_bin: Path, scripted_model: ScriptedModel
) -> Iterator[Callable[..., CopilotTeam]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    made: list[CopilotTeam] = []

    def make(**kw: Any) -> CopilotTeam:
        team = CopilotTeam(tmp_path / f"team{len(made)}", copilot_bin, scripted_model, **kw)
        made.append(team)
        return team

    yield make
    for team in made:
        team.close()
