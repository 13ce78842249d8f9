"""The store conformance suite's fixtures: every test that takes `backend` runs once on the
files and once on a real Redis server (skipped, saying why, only when redis-server is missing)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.store import select
from omp.store.backend import Store
from tests.helpers import isolate, make_project
from tests.store.redis_server import RedisServer, binary, missing_reason

TEAM = "demo"


class Backend:
    """One backend under test: a project root, the URL any process opens it with, and the
    stores this test opened (closed after it)."""

    def __init__(self, name: str, root: Path, url: str, server: RedisServer | None) -> None:
        self.name, self.root, self.url, self.server = name, root, url, server
        self.opened: list[Store] = []

    def open(self, *, wait: float | None = None) -> Store:
        store = select.open_store(self.root, url=self.url)
        if wait is not None:
            store.wait = wait  # type: ignore[attr-defined]  # the Redis store's patience
        self.opened.append(store)
        return store

    def env(self) -> dict[str, str]:
        """What a child process needs to open the same store."""
        return {"OMP_ROOT": str(self.root), "OMP_STORE": self.url}


@pytest.fixture(scope="session")
def redis_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if binary() is None:
        pytest.skip(missing_reason())
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def _backend(request: pytest.FixtureRequest, tmp_path: Path, server: RedisServer | None) -> Backend:
    root = make_project(tmp_path / "proj")
    # a namespace per test: tests sharing one server never see each other's keys
    url = "file" if server is None else f"{server.url}?ns=t{secrets.token_hex(6)}"
    return Backend("redis" if server else "file", root, url, server)


@pytest.fixture(params=["file", "redis"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    isolate(monkeypatch, tmp_path)
    server = request.getfixturevalue("redis_session") if request.param == "redis" else None
    b = _backend(request, tmp_path, server)
    b.open().ensure_team(TEAM)
    yield b
    for store in b.opened:
        store.close()


@pytest.fixture(params=["file", "redis"])
def own_backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """A backend with a Redis server of its own (the chaos tests kill it)."""
    isolate(monkeypatch, tmp_path)
    server = None
    if request.param == "redis":
        if binary() is None:
            pytest.skip(missing_reason())
        server = RedisServer(tmp_path / "redis").start()
    b = _backend(request, tmp_path, server)
    b.open().ensure_team(TEAM)
    try:
        yield b
    finally:
        for store in b.opened:
            store.close()
        if server is not None:
            server.stop()


def child_env(b: Backend) -> dict[str, str]:
    from tests.helpers import child_env as base

    env = base(Path(os.environ["HOME"]), **b.env())
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3])
    return env
