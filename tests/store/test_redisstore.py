"""What only the Redis backend has to prove: a retried write is applied once, a server that is
gone is waited for and then reported (without its password), authentication, and warnings about
a server that does not fsync."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.store import select
from omp.store.redisstore import RedisStore
from tests.helpers import isolate, make_project
from tests.store.redis_server import RedisServer, binary, missing_reason

pytestmark = pytest.mark.skipif(binary() is None, reason=missing_reason())


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    isolate(monkeypatch, tmp_path)
    s = RedisServer(tmp_path / "redis", password="s3cret-pw").start()
    yield s
    s.stop()


def open_store(s: RedisServer, tmp_path: Path, url: str | None = None) -> RedisStore:
    store = select.open_store(make_project(tmp_path / "proj"), url=url or s.url + "?ns=t")
    assert isinstance(store, RedisStore)
    store.ensure_team("demo")
    return store


def msg(mid: str) -> dict[str, Any]:
    return {"type": "message", "id": mid, "from": "a", "to": "b", "body": "x", "timestamp": "t"}


def test_a_retried_write_is_applied_once(
    server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(server, tmp_path)
    # the same op id twice: what a retry after a lost answer sends
    monkeypatch.setattr(store, "_op", lambda: "omp:t:op:fixed")
    first = store.send("demo", "worker-1", [msg("m1")])
    again = store.send("demo", "worker-1", [msg("m1")])
    assert again == first
    assert [r["id"] for r in store.read("demo", "mailbox/worker-1").records] == ["m1"]


def test_an_update_whose_connection_died_is_applied_once(
    server: RedisServer, tmp_path: Path
) -> None:
    store = open_store(server, tmp_path)
    store.create("demo", "records", "counter", {"n": 0})
    killer = open_store(server, tmp_path)
    calls = []

    def bump(doc: dict[str, Any] | None) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:  # the first try loses its connection before EXEC
            killer.r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        assert doc is not None
        return {"n": doc["n"] + 1}

    store.update("demo", "records", "counter", bump)
    assert len(calls) == 2
    assert store.doc("demo", "records", "counter") == {"n": 1}


def test_a_server_that_is_gone_is_waited_for(server: RedisServer, tmp_path: Path) -> None:
    store = open_store(server, tmp_path)
    store.send("demo", "worker-1", [msg("m1")])
    server.kill()
    store.wait = 0.3
    with pytest.raises(OmpError) as err:
        store.send("demo", "worker-1", [msg("m2")])
    assert err.value.code == "store_unavailable"
    assert "s3cret-pw" not in err.value.message and "***" in err.value.message
    # back within the wait: the call goes through
    store.wait = 30
    started = threading.Thread(target=server.start)
    started.start()
    store.send("demo", "worker-1", [msg("m3")])
    started.join()
    assert [r["id"] for r in store.read("demo", "mailbox/worker-1").records] == ["m1", "m3"]


def test_a_wrong_password_is_refused_plainly(server: RedisServer, tmp_path: Path) -> None:
    url = f"redis://:wrong@127.0.0.1:{server.port}/0"
    store = select.open_store(make_project(tmp_path / "proj"), url=url)
    with pytest.raises(OmpError) as err:
        store.has_team("demo")
    assert err.value.code == "store_error" and "credentials" in err.value.message
    assert ":wrong@" not in err.value.message


def test_durability_warnings(server: RedisServer, tmp_path: Path) -> None:
    store = open_store(server, tmp_path)
    assert store.durability() == []
    store.r.config_set("appendfsync", "everysec")
    (warning,) = store.durability()
    assert "everysec" in warning and "s3cret-pw" not in warning
    store.r.config_set("appendonly", "no")
    (warning,) = store.durability()
    assert "appendonly" in warning
