"""Creating a team's state: config, tasks, worker directories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.store import names
from omp.store.paths import StatePaths, TeamPaths, find_root
from omp.team import config as team_config
from omp.team import tasks


def task_description(task: str, i: int, n: int) -> str:
    return task if n == 1 else f"{task} (part {i}/{n})"


def create_team(
    cwd: Path, name: str, workers: int, *, task: str = "", role: str = ""
) -> dict[str, Any]:
    names.team_name(name)
    project = StatePaths(find_root(cwd))
    team = project.team(name)
    raw = team_config.new_config(name, workers, cwd=cwd, task=task, role=role)
    refuse_existing(team)
    write_state(team, raw, task)
    return {"ok": True, "team": name, "config": str(team.config), "workers": workers}


def refuse_existing(team: TeamPaths) -> None:
    if os.path.lexists(team.config) and not team.shutdown.exists():
        raise OmpError(
            "team_exists",
            f"team {team.name} already exists; shut it down first: omp team shutdown {team.name}",
            team=team.name,
        )


def write_state(team: TeamPaths, raw: dict[str, Any], task: str) -> None:
    """Worker directories and tasks first, the config last: a team is visible once complete."""
    n = len(raw["workers"])
    for i, w in enumerate(raw["workers"], start=1):
        team.project.ensure(team.worker_dir(w["name"]))
        if task:
            tasks.create(team, w["taskId"], task_description(task, i, n))
    team.project.ensure(team.mailbox_dir)
    if team.shutdown.exists():
        os.unlink(team.shutdown)  # a relaunch under the same name is live again
    team_config.write(team, raw)
