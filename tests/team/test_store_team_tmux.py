"""A whole team on real tmux with its mail and tasks in Redis (`OMP_STORE`): `omp demo` launches
three demo workers in worktrees, each claims, works, commits and completes through the store, the
monitor verifies, and every branch is merged. The team's directory holds no mailbox and no task
file: every omp process of the project (the leader, the monitor, each worker) used the store."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.store import select
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from tests.helpers import child_env, run_omp
from tests.store.redis_server import RedisServer, session_server

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None or shutil.which("git") is None:
        pytest.skip("tmux and git are needed")
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()


def test_omp_demo_runs_to_merged_work_with_the_team_in_redis(
    redis: RedisServer, server: Tmux, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = f"{redis.url}?ns=demo{secrets.token_hex(4)}"
    env = child_env(
        home,
        TMPDIR=str(tmp_path),
        OMP_DEMO_WORK_SECONDS="0.3",
        OMP_STORE=url,
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    for key in list(env):
        if key.startswith(("GIT_AUTHOR", "GIT_COMMITTER", "TMUX")):
            del env[key]
    assert server.socket_name is not None
    out = run_omp(
        "demo", "--socket", server.socket_name, "--json", cwd=tmp_path, env=env, timeout=240
    )
    assert out.rc == 0, out.stdout + out.stderr
    r = out.json
    assert r["allDone"] and sorted(r["merge"]["merged"]) == ["worker-1", "worker-2", "worker-3"]
    repo = Path(r["repo"])
    assert sorted(p.name for p in (repo / "work").glob("*.md")) == [
        f"worker-{i}-task-{i}.md" for i in (1, 2, 3)
    ]
    team = StatePaths(repo).team(r["team"])
    assert not team.mailbox_dir.exists() or not list(team.mailbox_dir.glob("*.jsonl"))
    assert not team.tasks_dir.exists() or not list(team.tasks_dir.glob("*.json"))
    os.environ["OMP_STORE"] = url
    try:
        store = select.current(StatePaths(repo))
        assert store is not None
        tasks = store.docs(r["team"], "tasks")
        assert [(t["id"], t["status"]) for t in tasks] == [
            ("1", "completed"),
            ("2", "completed"),
            ("3", "completed"),
        ]
        # the workers told the leader through the store
        leader_mail = store.newest(r["team"], "leader", 50)[0]
        assert leader_mail, "no mail reached the leader"
    finally:
        del os.environ["OMP_STORE"]
