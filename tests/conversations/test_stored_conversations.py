"""Task conversations with and without a store (`OMP_STORE`): the same sends give the same
records, answers and refusals whether the records are files or the store's docs; with a store no
`conversations/` directory is written, and a relaunch's archive and `omp team delete` take them
out of the live team as they do the files."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.conversations import record
from omp.store import select
from omp.store.paths import StatePaths, TeamPaths
from tests.helpers import call_api, isolate, make_project, make_team
from tests.store.redis_server import RedisServer, session_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    yield from session_server(tmp_path_factory)


def _team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str) -> TeamPaths:
    tmp_path.mkdir(parents=True, exist_ok=True)
    isolate(monkeypatch, tmp_path)
    if url:
        monkeypatch.setenv("OMP_STORE", url)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 3, task="build the parser", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return StatePaths(root).team("t")


@pytest.fixture(params=["files", "redis"])
def team(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> TeamPaths:
    url = ""
    if request.param == "redis":
        url = f"{request.getfixturevalue('server').url}?ns=t{secrets.token_hex(6)}"
    return _team(tmp_path, monkeypatch, url)


def send(capsys: pytest.CaptureFixture[str], frm: str, to: str, body: str, **f: Any) -> Any:
    payload = {"team_name": "t", "from": frm, "to": to, "body": body, **f}
    return call_api(capsys, "send-message", payload).json


def _flow(capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """A request answered, clarified and done; one to a busy worker; one cancelled."""
    out = []
    req = send(capsys, "leader", "worker-1", "review it", event="task_req", intent="review")
    tid = req["taskId"]
    out.append(req["status"])
    out.append(send(capsys, "worker-1", "leader", "which?", event="task_clarify", task_id=tid))
    out.append(send(capsys, "leader", "worker-1", "oauth", event="task_clarify_res", task_id=tid))
    busy = send(capsys, "leader", "worker-1", "another", event="task_req")  # worker-1 is busy
    out.append((busy["status"], busy.get("reason")))
    out.append(send(capsys, "worker-1", "leader", "done", event="task_done", task_id=tid))
    out.append(send(capsys, "worker-1", "leader", "more", event="task_update", task_id=tid))
    req2 = send(capsys, "worker-2", "worker-3", "write docs", event="task_req")
    out.append(req2["status"])
    out.append(
        send(capsys, "worker-2", "worker-3", "stop", event="task_cancel", task_id=req2["taskId"])
    )
    out.append(
        send(capsys, "worker-3", "worker-2", "ok", event="task_cancel_ack", task_id=req2["taskId"])
    )
    return out


_VARYING = ("messageId", "taskId", "task_id", "id", "ref", "at", "createdAt", "ackedAt", "closedAt",
            "lastWorkerEventAt", "clarifyAnsweredAt", "clarifyOpen", "sentAt", "autoReplies",
            "contentHash", "timerBase")  # fmt: skip


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if k not in _VARYING}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, str):
        return re.sub(r"\b01[0-9A-Z]{24}\b", "ID", x)  # message ids in messages
    return x


def _records(team: TeamPaths) -> list[Any]:
    convs = []
    for env in _docs(team):
        conv = record.from_envelope("test", env)
        convs.append((conv.revision, _plain(conv.payload())))
    return sorted(convs, key=lambda c: (c[1]["requester"], c[1]["worker"], c[1]["excerpt"]))


def _docs(team: TeamPaths) -> list[Any]:
    store = select.current(team.project)
    if store is not None:
        return store.docs(team.name, "conversations")
    import json

    return [
        json.loads(p.read_text())
        for p in sorted(team.conversations_dir.glob("*.json"))
        if not p.name.startswith(".")
    ]


def test_the_same_conversations_in_the_files_and_in_the_store(
    server: RedisServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = _team(tmp_path / "f", monkeypatch, "")
    want = _flow(capsys)
    want_records = _records(files)
    url = f"{server.url}?ns=t{secrets.token_hex(6)}"
    stored = _team(tmp_path / "r", monkeypatch, url)
    got = _flow(capsys)
    assert _plain(got) == _plain(want)
    assert want[3] == ("rejected", "busy") or want[3][0] == "rejected"
    assert want[5]["error"] == "task_closed"
    assert _records(stored) == want_records and len(want_records) == 3
    assert files.conversations_dir.is_dir()
    assert not stored.conversations_dir.exists()  # nothing of them in the files


def test_who_is_busy_and_what_is_open_come_from_the_records(
    team: TeamPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = send(capsys, "leader", "worker-1", "review it", event="task_req")["taskId"]
    assert set(record.open_summary(team)) == {tid}
    assert record.open_refs(team) == {tid: "worker-1"}
    assert [c.task_id for c in record.open_conversations(team, "worker-1")] == [tid]
    conv = record.load(team, tid)
    assert conv is not None and conv.revision == 2 and conv.state == "active"
    ping = send(capsys, "worker-2", "worker-1", "there?", event="ping")
    assert ping["pong"]["status"] == "busy"
    send(capsys, "worker-1", "leader", "done", event="task_done", task_id=tid)
    assert record.open_summary(team) == {}
    assert send(capsys, "worker-2", "worker-1", "there?", event="ping")["pong"]["status"] == (
        "available"
    )


def test_a_stale_publication_is_refused(
    team: TeamPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    from omp.errors import OmpError

    tid = send(capsys, "leader", "worker-1", "review it", event="task_req")["taskId"]
    conv = record.load(team, tid)
    assert conv is not None
    with record.locked(team):
        conv.state = "done"
        with pytest.raises(OmpError) as err:
            record.publish(team, conv, expected=1)  # it is at 2
        assert err.value.code == "stale_revision" and conv.revision == 2
        record.publish(team, conv, expected=2)
    again = record.load(team, tid)
    assert again is not None and again.revision == 3 and again.state == "done"


def test_a_relaunch_archives_them_and_a_delete_forgets_them(
    server: RedisServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    team = _team(tmp_path, monkeypatch, f"{server.url}?ns=t{secrets.token_hex(6)}")
    store = select.current(team.project)
    assert store is not None
    tid = send(capsys, "leader", "worker-1", "review it", event="task_req")["taskId"]
    store.archive_run("t", "2026-01-01T00-00-00.000Z", ["leader"])
    assert record.load(team, tid) is None and record.open_summary(team) == {}
    tid2 = send(capsys, "leader", "worker-1", "again", event="task_req")["taskId"]
    assert record.load(team, tid2) is not None
    store.drop_team("t")
    assert store.docs("t", "conversations") == []
