"""Conformance: a team's history (`omp.record.stored_history`) through the store's `events` log.
Both backends, same answers: events in order with a cursor each, resumed from any of them, a
cursor of a log the store forgot refused; the file store's log is today's `events.jsonl`."""

from __future__ import annotations

from typing import Any

import pytest

from omp.errors import OmpError
from omp.record import history, stored_history
from omp.store.paths import StatePaths
from tests.store.conformance.conftest import TEAM, Backend


def notes(*seqs: int) -> tuple[dict[str, Any], ...]:
    return tuple({"type": "note", "seq": s} for s in seqs)


def read(backend: Backend, position: str = "", log: str | None = None) -> list[dict[str, Any]]:
    store = backend.open()
    out: list[dict[str, Any]] = []
    for evs, _, _ in stored_history.iter_since(store, TEAM, position, log=log, page=3):
        out += evs
    return out


def test_events_in_order_each_with_its_cursor(backend: Backend) -> None:
    store = backend.open()
    assert read(backend) == []
    assert stored_history.fingerprint(store, TEAM) == stored_history.NO_LOG
    stored_history.write(store, TEAM, notes(0, 1))
    stored_history.write(store, TEAM, notes(2))
    stored_history.write(store, TEAM, ({"type": "note", "seq": 3, "at": "then"},))
    evs = read(backend)
    assert [e["seq"] for e in evs] == [0, 1, 2, 3]
    assert evs[0]["at"] and evs[3]["at"] == "then"  # stamped unless they say when
    lid = stored_history.fingerprint(store, TEAM)
    assert lid != stored_history.NO_LOG
    for i, e in enumerate(evs):  # each cursor names the log and resumes right after its event
        log, position = stored_history.parse_cursor(e["cursor"], TEAM)
        assert log == lid
        assert read(backend, position, log) == evs[i + 1 :]
    # pages: the same events however many a read takes
    pages = list(stored_history.iter_since(store, TEAM, "", page=1))
    assert [e for evs_, _, _ in pages for e in evs_] == evs


def test_a_log_the_store_forgot_refuses_its_cursors(backend: Backend) -> None:
    store = backend.open()
    stored_history.write(store, TEAM, notes(0, 1))
    cursor = read(backend)[0]["cursor"]
    log, position = stored_history.parse_cursor(cursor, TEAM)
    store.drop_team(TEAM)  # `omp team delete`: the history goes with the team
    store.ensure_team(TEAM)  # ...and a team of that name is made again
    assert read(backend) == []
    with pytest.raises(OmpError) as err:
        read(backend, position, log)
    assert err.value.code == "invalid_cursor"
    stored_history.write(store, TEAM, notes(5))
    assert [e["seq"] for e in read(backend)] == [5]
    with pytest.raises(OmpError) as err:  # the new log is another log
        read(backend, position, log)
    assert err.value.code == "invalid_cursor"


def test_a_relaunch_keeps_the_history(backend: Backend) -> None:
    """As in the files, a relaunch's archive of the last run leaves the history where it is
    (`omp team events` goes on across runs); only deleting the team forgets it."""
    store = backend.open()
    stored_history.write(store, TEAM, notes(0))
    store.archive_run(TEAM, "2026-01-01T00-00-00.000Z", ["leader"])
    stored_history.write(store, TEAM, notes(1))
    assert [e["seq"] for e in read(backend)] == [0, 1]


def test_a_team_the_store_does_not_know_gets_nothing(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(OmpError) as err:
        stored_history.write(store, "ghost", notes(0))
    assert err.value.code == "unknown_team"
    assert list(stored_history.iter_since(store, "ghost", "")) in ([], [([], "0", "-")])


def test_the_file_store_writes_todays_events_file(backend: Backend) -> None:
    if backend.name != "file":
        pytest.skip("the files' format")
    store = backend.open()
    stored_history.write(store, TEAM, notes(0, 1))
    team = StatePaths(backend.root).team(TEAM)
    lines = team.events.read_bytes().splitlines()
    assert len(lines) == 3 and b'"type":"log"' in lines[0]  # the header that names the log
    by_files, _ = history.read_since(team, 0)  # the reader of the files sees them alike
    assert [e["seq"] for e in by_files] == [0, 1]


@pytest.mark.parametrize(
    "text",
    [
        "5",
        "t",
        "t:1a2b3c4d",
        "t:1a2b3c4d:x",
        "t:1a2b3c4d:1-x",
        "t:zz:1",
        "t:-:1-0",
        "t:1a2b3c4d:-1",
    ],
)
def test_bad_cursors_are_refused(text: str) -> None:
    with pytest.raises(OmpError) as err:
        stored_history.parse_cursor(text.replace("t", TEAM, 1) if text != "t" else TEAM, TEAM)
    assert err.value.code == "invalid_cursor"
    with pytest.raises(OmpError):
        stored_history.parse_cursor("other:1a2b3c4d:1-0", TEAM)
    assert stored_history.parse_cursor("0", TEAM) == (None, "")
    assert stored_history.parse_cursor(f"{TEAM}:-:0", TEAM) == (None, "")
    assert stored_history.parse_cursor(f"{TEAM}:1a2b3c4d:17-3", TEAM) == ("1a2b3c4d", "17-3")
