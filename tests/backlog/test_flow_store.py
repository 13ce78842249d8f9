"""The backlog with its team in Redis (`OMP_STORE`): tasks from a file, the claim gate, the
hand-over on completion, a rollback of a bad file: the same moves, through the store."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.backlog import handover
from omp.record import config as team_config
from omp.store import select
from omp.store.backend import Store
from omp.store.paths import StatePaths
from tests.backlog.test_flow import TASKS, api, complete
from tests.helpers import child_env, isolate, make_project, run_cli
from tests.store.redis_server import RedisServer, session_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


@pytest.fixture
def root(server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    proj = make_project(tmp_path / "proj")
    monkeypatch.setenv("OMP_ROOT", str(proj))
    monkeypatch.setenv("OMP_STORE", f"{server.url}?ns=b{secrets.token_hex(5)}")
    (proj / "tasks.toml").write_text(TASKS)
    return proj


def store(root: Path) -> Store:
    got = select.current(StatePaths(root))
    assert got is not None
    return got


def create(root: Path, file: str = "tasks.toml") -> Any:
    import os

    env = child_env(OMP_ROOT=str(root), OMP_STORE=os.environ["OMP_STORE"])
    return run_cli("team", "create", "bl", "--workers", "2", "--tasks", str(root / file),
                   "--json", cwd=root, env=env)  # fmt: skip


def test_the_backlog_runs_through_the_store(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = create(root)
    assert out.rc == 0 and out.json["tasks"] == 5, out
    team = StatePaths(root).team("bl")
    assert not team.tasks_dir.exists() or not list(team.tasks_dir.glob("*.json"))
    assert [t["id"] for t in store(root).docs("bl", "tasks")] == ["1", "2", "3", "4", "5"]
    out = api(capsys, "claim-task", task_id="2", worker="worker-1")
    assert out.rc == 1 and out.json["error"] == "task_blocked"
    handed = handover.run(team_config.load(team))
    assert [(a["worker"], a["taskId"]) for a in handed] == [("worker-1", "1"), ("worker-2", "5")]
    mail = store(root).undelivered("bl", "worker-1")
    assert mail and mail[-1]["intent"] == "task_handover"
    out = complete(capsys, "1", "worker-1")
    assert out.rc == 0, out
    assert out.json["next"] == {"taskId": "2", "how": "omp mailed it to you"}
    t2 = store(root).doc("bl", "tasks", "2")
    assert t2 is not None and t2["owner"] == "worker-1" and t2["status"] == "in_progress"


def test_a_bad_tasks_file_writes_nothing_in_the_store(root: Path) -> None:
    (root / "bad.toml").write_text('[[task]]\ntitle="a"\nblocked_by=[9]\n')
    out = create(root, file="bad.toml")
    assert out.rc == 2 and out.json["error"] == "invalid_tasks"
    assert store(root).docs("bl", "tasks") == []
