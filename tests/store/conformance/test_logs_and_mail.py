"""Conformance: logs read from cursors, mailboxes with receipts. Both backends, same answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from omp.errors import OmpError
from tests.store.conformance.conftest import TEAM, Backend

if TYPE_CHECKING:
    from omp.store.backend import View as MailView


def msg(i: int, to: str = "worker-1", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"m{i:04d}",
        "from": "leader",
        "to": to,
        "body": f"body {i}",
        "timestamp": "2026-01-01T00:00:00.000Z",
        **extra,
    }


# ---- logs -------------------------------------------------------------------------------------


def test_append_then_read_from_cursors(backend: Backend) -> None:
    store = backend.open()
    first = store.append(TEAM, "outbox/worker-1", [{"n": 1}, {"n": 2}])
    assert len(first) == 2
    batch = store.read(TEAM, "outbox/worker-1")
    assert [r["n"] for r in batch.records] == [1, 2]
    assert batch.cursor == first[-1] and batch.bad == 0
    assert store.read(TEAM, "outbox/worker-1", batch.cursor).records == []  # nothing new
    store.append(TEAM, "outbox/worker-1", [{"n": 3}])
    again = store.read(TEAM, "outbox/worker-1", batch.cursor)
    assert [r["n"] for r in again.records] == [3]
    # the cursor after one record reads what follows it
    assert [r["n"] for r in store.read(TEAM, "outbox/worker-1", first[0]).records] == [2, 3]


def test_read_with_a_limit_resumes_where_it_stopped(backend: Backend) -> None:
    store = backend.open()
    store.append(TEAM, "events", [{"type": "x", "n": n} for n in range(5)])
    seen: list[int] = []
    cursor = ""
    for _ in range(4):
        batch = store.read(TEAM, "events", cursor, limit=2)
        seen += [r["n"] for r in batch.records]
        cursor = batch.cursor
    assert seen == [0, 1, 2, 3, 4]


def test_logs_are_separate_and_missing_ones_are_empty(backend: Backend) -> None:
    store = backend.open()
    store.append(TEAM, "mailbox/worker-1", [msg(1)])
    store.append(TEAM, "mailbox/worker-2", [msg(2, "worker-2")])
    store.append(TEAM, "events", [{"type": "member", "worker": "worker-1", "change": "joined"}])
    assert [r["id"] for r in store.read(TEAM, "mailbox/worker-1").records] == ["m0001"]
    assert [r["id"] for r in store.read(TEAM, "mailbox/worker-2").records] == ["m0002"]
    assert [r["type"] for r in store.read(TEAM, "events").records] == ["member"]
    empty = store.read(TEAM, "outbox/worker-9")
    assert empty.records == [] and empty.bad == 0


def test_records_round_trip_exactly(backend: Backend) -> None:
    store = backend.open()
    odd = {"body": 'two\nlines, "quotes", \\ and \u2713 \U0001f600', "n": [1, 2.5, None, True]}
    store.append(TEAM, "outbox/w", [odd])
    assert store.read(TEAM, "outbox/w").records == [odd]


@pytest.mark.parametrize(
    ("log", "code"),
    [
        ("mailbox/../x", "invalid_recipient_name"),
        ("inbox/worker-1", "invalid_input"),
        ("events/extra", "invalid_input"),
        ("outbox/", "invalid_worker_name"),
    ],
)
def test_bad_log_names_are_refused(backend: Backend, log: str, code: str) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        store.append(TEAM, log, [{"n": 1}])
    assert err.value.code == code


def test_a_bad_cursor_is_refused(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        store.read(TEAM, "events", "not-a-cursor")
    assert err.value.code == "invalid_cursor"


def test_writes_to_a_team_that_is_not_there_are_refused(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        store.append("ghost", "events", [{"n": 1}])
    assert err.value.code == "unknown_team"
    with pytest.raises(OmpError) as err:
        store.send("ghost", "worker-1", [msg(1)])
    assert err.value.code == "unknown_team"
    assert not store.has_team("ghost")
    assert store.read("ghost", "events").records == []
    with pytest.raises(OmpError) as err:
        store.append("../x", "events", [{"n": 1}])
    assert err.value.code == "invalid_team_name"


# ---- mailboxes --------------------------------------------------------------------------------


def test_send_then_undelivered_then_receipts(backend: Backend) -> None:
    store = backend.open()
    store.send(TEAM, "worker-1", [msg(1), msg(2)])
    store.send(TEAM, "worker-1", [msg(3)])
    assert [m["id"] for m in store.undelivered(TEAM, "worker-1")] == ["m0001", "m0002", "m0003"]
    assert store.undelivered(TEAM, "worker-1")[0] == msg(1)
    marked = store.mark_delivered(TEAM, "worker-1", ["m0002", "m0001"])
    assert set(marked) == {"m0001", "m0002"}
    at = marked["m0001"]
    assert isinstance(at, str) and at.endswith("Z") and marked["m0002"] == at
    assert [m["id"] for m in store.undelivered(TEAM, "worker-1")] == ["m0003"]
    # delivered before: None, and no second receipt
    assert store.mark_delivered(TEAM, "worker-1", ["m0001", "m0003"]) == {
        "m0001": None,
        "m0003": store.read(TEAM, "mailbox/worker-1").records[-1]["deliveredAt"],
    }
    lines = store.read(TEAM, "mailbox/worker-1").records
    receipts = [r for r in lines if r["type"] == "delivery-receipt"]
    assert sorted(r["messageId"] for r in receipts) == ["m0001", "m0002", "m0003"]
    assert list(receipts[0]) == ["type", "messageId", "deliveredAt"]  # the shared format
    assert store.undelivered(TEAM, "worker-1") == []


def test_mark_of_an_unknown_id_writes_nothing(backend: Backend) -> None:
    store = backend.open()
    store.send(TEAM, "worker-1", [msg(1)])
    before = store.read(TEAM, "mailbox/worker-1").records
    with pytest.raises(OmpError) as err:
        store.mark_delivered(TEAM, "worker-1", ["m0001", "nope"])
    assert err.value.code == "message_not_found" and "nope" in err.value.message
    assert store.read(TEAM, "mailbox/worker-1").records == before
    assert [m["id"] for m in store.undelivered(TEAM, "worker-1")] == ["m0001"]
    with pytest.raises(OmpError) as err:
        store.mark_delivered(TEAM, "worker-2", ["m0001"])  # an empty mailbox
    assert err.value.code == "message_not_found"


def test_the_same_id_twice_in_one_mark(backend: Backend) -> None:
    store = backend.open()
    store.send(TEAM, "worker-1", [msg(1)])
    out = store.mark_delivered(TEAM, "worker-1", ["m0001", "m0001"])
    assert out["m0001"] is not None
    receipts = [r for r in store.read(TEAM, "mailbox/worker-1").records if r["type"] != "message"]
    assert len(receipts) == 1


def test_a_message_needs_an_id(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        store.send(TEAM, "worker-1", [{"type": "message", "body": "x"}])
    assert err.value.code == "invalid_input"
    assert store.read(TEAM, "mailbox/worker-1").records == []


# ---- heartbeats -------------------------------------------------------------------------------


def test_heartbeats_are_overwritten_per_worker(backend: Backend) -> None:
    store = backend.open()
    assert store.heartbeats(TEAM) == {}
    store.beat(TEAM, "worker-1", {"pid": 1, "state": "idle"})
    store.beat(TEAM, "worker-2", {"pid": 2, "state": "busy"})
    store.beat(TEAM, "worker-1", {"pid": 1, "state": "busy"})
    assert store.heartbeats(TEAM) == {
        "worker-1": {"pid": 1, "state": "busy"},
        "worker-2": {"pid": 2, "state": "busy"},
    }


# ---- a send's check: limits that hold against concurrent senders ------------------------------


def test_a_check_sees_the_mailbox_and_may_refuse(backend: Backend) -> None:
    import time

    from omp import clock

    store = backend.open()
    now = clock.iso()
    store.send(TEAM, "worker-1", [msg(1, timestamp=now), msg(2, timestamp=now)])
    store.send(TEAM, "worker-1", [msg(3, timestamp="2020-01-01T00:00:00.000Z")])
    store.mark_delivered(TEAM, "worker-1", ["m0002"])
    seen: list[tuple[int, list[str]]] = []

    def look(view: MailView) -> None:
        seen.append((view.unread, [m["id"] for m in view.recent(time.time() - 60)]))

    store.send(TEAM, "worker-1", [msg(4)], check=look)
    assert seen == [(2, ["m0002", "m0001"])]  # newest first; the old one is not recent
    assert store.unread(TEAM, "worker-1") == 3

    def refuse(view: MailView) -> None:
        raise OmpError("mailbox_full", "no")

    before = store.read(TEAM, "mailbox/worker-1").records
    with pytest.raises(OmpError) as err:
        store.send(TEAM, "worker-1", [msg(5)], check=refuse)
    assert err.value.code == "mailbox_full"
    assert store.read(TEAM, "mailbox/worker-1").records == before


def test_a_limit_holds_against_concurrent_senders(backend: Backend) -> None:
    import threading

    limit = 5

    def at_most(view: MailView) -> None:
        if view.unread >= limit:
            raise OmpError("mailbox_full", "full")

    refused: list[int] = []

    def sender(n: int) -> None:
        store = backend.open()
        for k in range(3):
            try:
                store.send(TEAM, "worker-1", [msg(n * 10 + k)], check=at_most)
            except OmpError as exc:
                assert exc.code == "mailbox_full"
                refused.append(n)

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = backend.open()
    assert store.unread(TEAM, "worker-1") == limit
    assert len(refused) == 24 - limit


def test_the_newest_messages_with_their_receipts(backend: Backend) -> None:
    store = backend.open()
    assert store.newest(TEAM, "worker-1", 5) == ([], 0)
    store.send(TEAM, "worker-1", [msg(i) for i in range(1, 8)])
    store.mark_delivered(TEAM, "worker-1", ["m0002", "m0006"])
    shown, total = store.newest(TEAM, "worker-1", 3)
    assert total == 7
    assert [m["id"] for m in shown] == ["m0005", "m0006", "m0007"]
    assert "deliveredAt" in shown[1] and "deliveredAt" not in shown[0]
    assert store.newest(TEAM, "worker-1", 0) == ([], 7)


def test_a_check_knows_the_ids_the_mailbox_holds(backend: Backend) -> None:
    store = backend.open()
    store.send(TEAM, "worker-1", [msg(1)])
    seen: list[bool] = []

    def look(view: MailView) -> None:
        seen.extend([view.holds("m0001"), view.holds("m0002")])

    store.send(TEAM, "worker-1", [msg(2)], check=look)
    assert seen == [True, False]
