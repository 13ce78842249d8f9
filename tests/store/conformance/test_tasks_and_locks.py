"""Conformance: docs with compare-and-set, the task rules over them, leased locks with fencing
tokens. Both backends, same answers."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from omp.errors import OmpError
from omp.store.backend import Lease, Store
from tests.helpers import poll
from tests.store.conformance.conftest import TEAM, Backend


def task_events(store: Store) -> list[tuple[Any, Any, Any]]:
    return [
        (e["taskId"], e["from"], e["to"])
        for e in store.read(TEAM, "events").records
        if e.get("type") == "task"
    ]


# ---- docs and tasks ---------------------------------------------------------------------------


def test_tasks_are_created_once_and_listed_in_id_order(backend: Backend) -> None:
    store = backend.open()
    for tid in ("10", "2", "b", "1", "a"):
        store.create_task(TEAM, tid, f"task {tid}")
    assert [t["id"] for t in store.docs(TEAM, "tasks")] == ["1", "2", "10", "a", "b"]
    task = store.doc(TEAM, "tasks", "2")
    assert task is not None and task["status"] == "pending" and task["description"] == "task 2"
    with pytest.raises(OmpError) as err:
        store.create_task(TEAM, "2", "again")
    assert err.value.code == "task_exists"
    assert store.doc(TEAM, "tasks", "2") == task
    assert store.doc(TEAM, "tasks", "99") is None
    with pytest.raises(OmpError) as err:
        store.create_task(TEAM, "../x", "bad")
    assert err.value.code == "invalid_task_id"


def test_claim_hands_out_a_token_once(backend: Backend) -> None:
    store = backend.open()
    store.create_task(TEAM, "1", "do it")
    task, token = store.claim_task(TEAM, "1", "worker-1")
    assert task["status"] == "in_progress" and task["owner"] == "worker-1"
    assert task["claimToken"] == token and token.startswith("worker-1-")
    assert store.doc(TEAM, "tasks", "1") == task
    with pytest.raises(OmpError) as err:
        store.claim_task(TEAM, "1", "worker-2")
    assert err.value.code == "task_not_pending" and "worker-1" in err.value.message
    with pytest.raises(OmpError) as err:
        store.claim_task(TEAM, "7", "worker-2")
    assert err.value.code == "task_not_found"
    assert task_events(store) == [("1", "pending", "in_progress")]


def test_only_the_claimant_with_its_token_moves_a_task(backend: Backend) -> None:
    store = backend.open()
    store.create_task(TEAM, "1", "do it")
    _, token = store.claim_task(TEAM, "1", "worker-1")
    before = store.doc(TEAM, "tasks", "1")
    ok = {"worker": "worker-1", "token": token, "expect": "in_progress", "to": "completed"}
    refusals = [
        ({**ok, "worker": "worker-2"}, "not_task_owner"),
        ({**ok, "token": "forged"}, "claim_token_mismatch"),
        ({**ok, "expect": "pending"}, "invalid_transition"),
        ({**ok, "to": "pending"}, "invalid_transition"),
        ({**ok, "to": "done"}, "invalid_input"),
    ]
    for kwargs, code in refusals:
        with pytest.raises(OmpError) as err:
            store.move_task(TEAM, "1", **kwargs)  # type: ignore[arg-type]
        assert err.value.code == code, kwargs
        assert store.doc(TEAM, "tasks", "1") == before  # nothing written
    done = store.move_task(
        TEAM, "1", worker="worker-1", token=token, expect="in_progress", to="completed", result="ok"
    )
    assert done["status"] == "completed" and done["result"] == "ok" and "finishedAt" in done
    with pytest.raises(OmpError) as err:  # moved already: compare-and-set fails
        store.move_task(
            TEAM, "1", worker="worker-1", token=token, expect="in_progress", to="failed"
        )
    assert err.value.code == "status_mismatch"
    assert task_events(store) == [
        ("1", "pending", "in_progress"),
        ("1", "in_progress", "completed"),
    ]


def test_update_is_compare_and_set(backend: Backend) -> None:
    store = backend.open()
    assert store.create(TEAM, "records", "config", {"name": TEAM, "workers": ["worker-1"]})
    assert not store.create(TEAM, "records", "config", {"name": "other"})

    def grow(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
        assert cfg is not None
        return {**cfg, "workers": [*cfg["workers"], f"worker-{len(cfg['workers']) + 1}"]}

    # many concurrent read-modify-writes: none is lost
    threads = [
        threading.Thread(target=lambda: backend.open().update(TEAM, "records", "config", grow))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cfg = store.doc(TEAM, "records", "config")
    assert cfg is not None
    assert cfg["workers"] == [f"worker-{n}" for n in range(1, 10)]
    assert store.update(TEAM, "records", "config", lambda cfg: None) is None  # leave it
    assert store.doc(TEAM, "records", "config") == cfg

    def refuse(cfg: dict[str, Any] | None) -> dict[str, Any]:
        raise OmpError("invalid_input", "no")

    with pytest.raises(OmpError):
        store.update(TEAM, "records", "config", refuse)
    assert store.doc(TEAM, "records", "config") == cfg
    assert [d.get("name") for d in store.docs(TEAM, "records")] == [TEAM]


def _claimer(backend: Backend, tid: str, worker: str, won: list[str], lost: list[str]) -> None:
    try:
        backend.open().claim_task(TEAM, tid, worker)
        won.append(worker)
    except OmpError as exc:
        assert exc.code == "task_not_pending"
        lost.append(worker)


def test_concurrent_claims_have_one_winner(backend: Backend) -> None:
    store = backend.open()
    for tid in ("1", "2", "3"):
        store.create_task(TEAM, tid, "race")
        won: list[str] = []
        lost: list[str] = []
        threads = [
            threading.Thread(target=_claimer, args=(backend, tid, f"w{n}", won, lost))
            for n in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1 and len(lost) == 7
        task = store.doc(TEAM, "tasks", tid)
        assert task is not None and task["owner"] == won[0]


# ---- locks and fencing ------------------------------------------------------------------------


def test_a_lock_is_held_once_and_its_token_grows(backend: Backend) -> None:
    store = backend.open()
    a = store.lock("merge", "leader", 60)
    assert isinstance(a, Lease) and a.token >= 1
    assert store.lock("merge", "monitor", 60) is None
    assert store.fence_ok(a)
    assert store.renew(a, 60)
    assert store.unlock(a)
    assert not store.fence_ok(a)
    assert not store.unlock(a) and not store.renew(a, 60)
    b = store.lock("merge", "monitor", 60)
    assert b is not None and b.token > a.token
    assert store.lock("other", "leader", 60) is not None  # locks are independent


def test_an_expired_lease_is_taken_over_and_fenced_off(backend: Backend) -> None:
    store = backend.open()
    store.create_task(TEAM, "1", "fenced")
    old = store.lock("settle", "monitor-1", 0.05)
    assert old is not None
    new = poll(lambda: store.lock("settle", "monitor-2", 60), what="the lease to run out")
    assert new.token > old.token
    assert not store.fence_ok(old) and store.fence_ok(new)
    assert not store.renew(old, 60)
    # a write fenced with the old token lands nowhere
    with pytest.raises(OmpError) as err:
        store.append(TEAM, "events", [{"type": "x"}], fence=old)
    assert err.value.code == "stale_fence"
    with pytest.raises(OmpError) as err:
        store.update(TEAM, "tasks", "1", lambda t: {**(t or {}), "x": 1}, fence=old)
    assert err.value.code == "stale_fence"
    assert all(e.get("type") != "x" for e in store.read(TEAM, "events").records)
    task = store.doc(TEAM, "tasks", "1")
    assert task is not None and "x" not in task
    # the holder's writes land
    store.append(TEAM, "events", [{"type": "x"}], fence=new)
    store.update(TEAM, "tasks", "1", lambda t: {**(t or {}), "x": 1}, fence=new)
    task = store.doc(TEAM, "tasks", "1")
    assert task is not None and task["x"] == 1
    assert not store.unlock(old)
    assert store.fence_ok(new)


def test_bad_lock_names_are_refused(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        store.lock("../etc", "me", 1)
    assert err.value.code == "invalid_input"


def test_a_doc_is_deleted_once(backend: Backend) -> None:
    store = backend.open()
    store.create_task(TEAM, "1", "gone soon")
    store.create_task(TEAM, "2", "stays")
    assert store.delete(TEAM, "tasks", "1")
    assert not store.delete(TEAM, "tasks", "1")
    assert store.doc(TEAM, "tasks", "1") is None
    assert [t["id"] for t in store.docs(TEAM, "tasks")] == ["2"]
