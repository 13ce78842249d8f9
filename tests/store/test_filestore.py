"""The file backend keeps today's tree byte for byte: what it writes, omp's own mailbox, task
and history code reads (and the other way round), with the same locks taken."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from omp.mail.mailbox import Mailbox, new_message
from omp.record import history
from omp.store import jsonl
from omp.store.filestore import FileStore
from omp.tasks import tasks
from tests.helpers import MESSAGE_KEYS, RECEIPT_KEYS, isolate, make_project, make_team, raw_lines


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 2, no_limits=True)
    return root


def test_a_send_is_one_line_in_the_shared_format(root: Path) -> None:
    store = FileStore(root)
    m = new_message("leader", "worker-1", "hello \u2713")
    store.send("demo", "worker-1", [m])
    path = root / ".omp/state/team/demo/mailbox/worker-1.jsonl"
    assert raw_lines(path) == [jsonl.encode(m)]
    assert list(json.loads(raw_lines(path)[0])) == MESSAGE_KEYS
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_file_store_mail_is_read_by_the_mailbox_and_back(root: Path) -> None:
    store = FileStore(root)
    team = store.paths.team("demo")
    box = Mailbox(team, "worker-1")
    a, b = new_message("leader", "worker-1", "a"), new_message("worker-2", "worker-1", "b")
    store.send("demo", "worker-1", [a])
    box.append_messages([b])
    assert box.unread_count() == 2
    assert [m["id"] for m in store.undelivered("demo", "worker-1")] == [a["id"], b["id"]]
    # receipts written by either are honoured by the other
    store.mark_delivered("demo", "worker-1", [a["id"]])
    assert box.unread_count() == 1
    out = box.mark([a["id"], b["id"]])
    assert out[a["id"]] is None and out[b["id"]] is not None
    assert store.undelivered("demo", "worker-1") == []
    receipts = [json.loads(x) for x in raw_lines(box.path) if b"receipt" in x]
    assert [list(r) for r in receipts] == [RECEIPT_KEYS, RECEIPT_KEYS]


def test_a_claim_through_the_file_store_is_todays_claim(root: Path) -> None:
    store = FileStore(root)
    team = store.paths.team("demo")
    tasks.create(team, "1", "one")
    task, token = store.claim_task("demo", "1", "worker-1")
    lock = json.loads((team.tasks_dir / "1.lock").read_text())
    assert lock["owner"] == "worker-1" and lock["pid"] == os.getpid()
    assert tasks.read(team, "1") == task
    # today's transition accepts the store's token, and drops the lock
    done = tasks.transition(
        team, "1", worker="worker-1", from_status="in_progress", to_status="completed",
        token=token, result="ok",
    )  # fmt: skip
    assert done["status"] == "completed"
    assert not (team.tasks_dir / "1.lock").exists()
    # and the other way round
    tasks.create(team, "2", "two")
    _, token2 = tasks.claim(team, "2", "worker-2")
    moved = store.move_task(
        "demo", "2", worker="worker-2", token=token2, expect="in_progress", to="failed"
    )
    assert moved["status"] == "failed" and not (team.tasks_dir / "2.lock").exists()
    assert tasks.read(team, "2") == moved


def test_task_events_land_in_the_history_the_events_command_reads(root: Path) -> None:
    store = FileStore(root)
    team = store.paths.team("demo")
    store.create_task("demo", "1", "one")
    store.claim_task("demo", "1", "worker-1")
    events, _ = history.read_since(team, 0)
    moves = [(e["taskId"], e["from"], e["to"]) for e in events if e["type"] == "task"]
    assert moves == [("1", "pending", "in_progress")]
    first = json.loads(raw_lines(team.events)[0])
    assert first["type"] == "log"  # the header that names the log, as history writes it


def test_a_dead_claimer_s_lock_on_a_pending_task_is_replaced(root: Path) -> None:
    store = FileStore(root)
    team = store.paths.team("demo")
    store.create_task("demo", "1", "one")
    (team.tasks_dir / "1.lock").write_text('{"owner":"ghost"}')
    os.chmod(team.tasks_dir / "1.lock", 0o600)
    store.claim_task("demo", "1", "worker-1")
    assert json.loads((team.tasks_dir / "1.lock").read_text())["owner"] == "worker-1"


def test_heartbeats_and_records_are_todays_files(root: Path) -> None:
    store = FileStore(root)
    team = store.paths.team("demo")
    beat: dict[str, Any] = {"pid": 1, "pane_id": "%1", "state": "idle", "updated_at": "x"}
    store.beat("demo", "worker-1", beat)
    assert json.loads(team.heartbeat("worker-1").read_text()) == beat
    cfg = store.doc("demo", "records", "config")
    assert cfg is not None and cfg["name"] == "demo"
    assert json.loads(team.config.read_text()) == cfg


def test_locks_live_in_the_state_tree(root: Path) -> None:
    store = FileStore(root)
    lease = store.lock("merge", "leader", 30)
    assert lease is not None
    held = json.loads((store.paths.store_locks / "merge.json").read_text())
    assert held["owner"] == "leader" and held["token"] == lease.token


def test_a_task_cancelled_through_the_store_drops_its_claim_lock(root: Path) -> None:
    """The store knows the backlog's `cancelled` as an end, as the tasks module does (the two
    once kept their own lists of statuses, and the store's lacked it)."""
    store = FileStore(root)
    team = store.paths.team("demo")
    tasks.create(team, "1", "one")
    store.claim_task("demo", "1", "worker-1")
    assert (team.tasks_dir / "1.lock").exists()

    def cancel(task: dict[str, object] | None) -> dict[str, object]:
        assert task is not None
        return {**task, "status": "cancelled"}

    store.update("demo", "tasks", "1", cancel)
    assert not (team.tasks_dir / "1.lock").exists()
