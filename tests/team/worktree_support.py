"""A team whose workers have worktrees, made without tmux by the code launch runs
(`omp.team.worktrees`), and the few things a worker does: claim, commit, complete."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.record.workspace import Worktree, worktree_of
from omp.store.paths import StatePaths
from omp.team import worktrees
from omp.team.setup import create_team
from tests.helpers import call_api
from tests.workspace.gitrepo import g, write


def worktree_team(
    repo: Path,
    name: str = "t",
    workers: int = 3,
    *,
    task: str = "build it",
    verify: str | None = None,
    verify_timeout: float | None = None,
    carry: bool = False,
) -> TeamConfig:
    """A headless team in `repo` whose workers got worktrees the way launch makes them."""
    create_team(repo, name, workers, task=task)
    project = StatePaths(repo)
    team = project.team(name)
    cfg = team_config.load(team)
    p = worktrees.plan(
        project,
        repo,
        requested="worktree",
        carry=carry,
        verify=verify if verify is not None else "",
        verify_timeout=verify_timeout,
    )
    raw = cfg.raw
    with contextlib.ExitStack() as stack:
        made = worktrees.provision(stack, p, name, cfg.worker_names)
        raw["workspace"] = p.team_json()
        if p.verify_json() is not None:
            raw["verify"] = p.verify_json()
        for w in raw["workers"]:
            w["workspace"] = worktrees.entry_json(made, w["name"])
        team_config.write(team, raw)
    return team_config.load(team)


def wt(cfg: TeamConfig, worker: str) -> Worktree:
    found = worktree_of(cfg.worker(worker))
    assert found is not None
    return found


def api(capsys: pytest.CaptureFixture[str], sub: str, **payload: Any) -> dict[str, Any]:
    out = call_api(capsys, sub, payload).json
    assert isinstance(out, dict), out
    return out


def claim(capsys: pytest.CaptureFixture[str], cfg: TeamConfig, worker: str, tid: str) -> str:
    out = api(capsys, "claim-task", team_name=cfg.name, task_id=tid, worker=worker)
    assert out["ok"], out
    return str(out["claimToken"])


def complete(
    capsys: pytest.CaptureFixture[str],
    cfg: TeamConfig,
    worker: str,
    tid: str,
    token: str,
    result: str = "done",
    **extra: Any,
) -> dict[str, Any]:
    return api(
        capsys,
        "transition-task-status",
        team_name=cfg.name,
        task_id=tid,
        worker=worker,
        claim_token=token,
        result=result,
        **{"from": "in_progress", "to": "completed"},
        **extra,
    )


def commit(cfg: TeamConfig, worker: str, name: str, text: str) -> str:
    """The worker writes `name` in its worktree and commits it; the new commit."""
    path = Path(wt(cfg, worker).path)
    write(path / name, text)
    g(path, "add", "--", name)
    g(path, "commit", "-q", "-m", f"{worker}: {name}")
    return g(path, "rev-parse", "HEAD")
