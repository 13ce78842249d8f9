"""`omp doctor`'s store check: the files; a Redis server that answers, fsyncs and is not open;
one that does not answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.doctor.store import check_store
from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project
from tests.store.redis_server import RedisServer, free_port, session_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StatePaths:
    isolate(monkeypatch, tmp_path)
    return StatePaths(make_project(tmp_path / "proj"))


def test_the_files(project: StatePaths) -> None:
    (check,) = check_store(project)
    assert check.status == "ok" and "files" in check.message


def test_a_server_that_answers_and_fsyncs(
    project: StatePaths, server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_STORE", server.url)
    assert [c.status for c in check_store(project)] == ["ok"]


def test_a_server_that_does_not_fsync_every_write_is_a_warning(
    project: StatePaths, server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del server  # (only its skip when redis-server is missing)
    s = RedisServer(tmp_path / "lazy").start()
    try:
        import redis

        redis.Redis(port=s.port).config_set("appendfsync", "everysec")
        monkeypatch.setenv("OMP_STORE", s.url)
        checks = check_store(project)
        assert [c.status for c in checks] == ["ok", "warn"] and "everysec" in checks[1].message
    finally:
        s.stop()


def test_a_server_that_does_not_answer_fails(
    project: StatePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_STORE", f"redis://:pw@127.0.0.1:{free_port()}/0")
    (check,) = check_store(project)
    assert check.status == "fail" and "did not answer" in check.message
    assert ":pw@" not in check.message
