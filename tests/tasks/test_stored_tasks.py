"""Tasks in Redis under fire: worker processes create, claim and complete tasks through
`omp.tasks.tasks` (the guard a fenced store lease) while the server is SIGKILLed and started
again; every completion a worker saw acknowledged is there, once, and nothing else moved."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.store import select
from omp.store.paths import StatePaths
from tests.helpers import REPO, child_env, isolate, make_project, make_team, poll
from tests.store.redis_server import RedisServer, binary, missing_reason

pytestmark = pytest.mark.skipif(binary() is None, reason=missing_reason())

WORKERS = 4
EACH = 25


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    s = RedisServer(tmp_path / "redis").start()
    yield s
    s.stop()


def acked(paths: list[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.exists():
            text = p.read_text()
            out += text[: text.rfind("\n") + 1].split()
    return out


@pytest.mark.slow
def test_claims_and_moves_survive_the_server_dying(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, tmp_path)
    url = f"{server.url}?ns=t{secrets.token_hex(4)}"
    monkeypatch.setenv("OMP_STORE", url)
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", WORKERS)
    env = child_env(Path(os.environ["HOME"]), OMP_STORE=url, OMP_ROOT=str(root))
    env["PYTHONPATH"] = str(REPO)
    acks = [tmp_path / f"acks-{w}" for w in range(1, WORKERS + 1)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.tasks.stored_worker",
                "demo",
                f"worker-{w}",
                str(EACH),
                str(acks[w - 1]),
            ],
            cwd=REPO,
            env=env,
            stderr=subprocess.PIPE,
        )
        for w in range(1, WORKERS + 1)
    ]
    total = WORKERS * EACH
    for mark in (total // 4, total // 2, 3 * total // 4):
        poll(lambda m=mark: len(acked(acks)) >= m, timeout=240, what=f"{mark} completions")  # type: ignore[misc]
        assert len(acked(acks)) < total, "the workers finished before the fault"
        server.kill()
        server.start()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    store = select.current(StatePaths(root))
    assert store is not None
    tasks = {t["id"]: t for t in store.docs("demo", "tasks")}
    done = acked(acks)
    assert len(done) == len(set(done)) == total
    for tid in done:
        task = tasks[tid]
        assert task["status"] == "completed" and task["owner"] == tid.rsplit("-", 1)[0]
    assert all(t["status"] == "pending" for tid, t in tasks.items() if tid not in done)
    events = store.read("demo", "outbox/worker-1").records
    assert sorted(e["taskId"] for e in events) == sorted(
        t for t in done if t.startswith("worker-1-")
    )
