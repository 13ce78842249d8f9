"""Fault: the disk fills up in the middle of a write (ENOSPC, simulated).

`os.write` is replaced for descriptors of chosen files: it writes the first half of what it was
given, then raises `OSError(ENOSPC)`, as a filesystem does when it runs out of blocks mid-write.

Promise: the call fails with `storage_error` (exit 1, one JSON object, no traceback), and the
mailbox never keeps a partial line that hides a later message: the failed line is cut back, and
if even that fails, the next writer's line still starts on a line of its own.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omp.store import jsonl
from tests.helpers import (
    call_api,
    isolate,
    mailbox_file,
    make_project,
    make_team,
    snapshot_tree,
)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 2, task="write a haiku", no_limits=True)
    return root


class DiskFull:
    """`os.write` that fills the disk for files whose path `hits` accepts; counts the hits."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hits: Callable[[str], bool]) -> None:
        self.real = os.write
        self.hits = hits
        self.count = 0
        monkeypatch.setattr(os, "write", self.write)

    def write(self, fd: int, data: Any) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if not self.hits(target):
            return self.real(fd, data)
        self.count += 1
        part = bytes(data[: len(data) // 2])
        if part:
            self.real(fd, part)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _inp(root: Path, **fields: Any) -> dict[str, Any]:
    return {"team_name": "demo", "cwd": str(root), **fields}


def _send(capsys: pytest.CaptureFixture[str], root: Path, body: str) -> Any:
    return call_api(
        capsys, "send-message", _inp(root, **{"from": "leader", "to": "worker-2", "body": body})
    )


def _assert_storage_error(r: Any) -> None:
    assert r.rc == 1, r
    assert r.json is not None and r.json["ok"] is False, r.stdout
    assert r.json["error"] == "storage_error", r.json
    assert r.stdout.count("\n") == 1, "exactly one JSON object"
    assert "Traceback" not in r.stderr


def test_a_send_that_hits_a_full_disk_fails_and_leaves_the_mailbox_as_it_was(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _send(capsys, root, "before").rc == 0
    box = mailbox_file(root, "worker-2")
    before = box.read_bytes()
    with monkeypatch.context() as m:
        disk = DiskFull(m, lambda p: p == str(box))
        r = _send(capsys, root, "lost to ENOSPC " + "z" * 500)
    assert disk.count == 1
    _assert_storage_error(r)
    assert "No space left on device" in r.json["message"]
    assert box.read_bytes() == before, "the half-written line was cut back"
    after = _send(capsys, root, "after")
    assert after.rc == 0
    read = call_api(capsys, "mailbox-read", _inp(root, worker="worker-2"))
    assert [m["body"] for m in read.json["messages"]] == ["before", "after"]
    assert read.json["badLines"] == 0


def test_when_even_the_cut_back_fails_the_next_line_still_parses(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _send(capsys, root, "before").rc == 0
    box = mailbox_file(root, "worker-2")
    with monkeypatch.context() as m:
        DiskFull(m, lambda p: p == str(box))

        def no_truncate(fd: int, length: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        m.setattr(os, "ftruncate", no_truncate)
        _assert_storage_error(_send(capsys, root, "torn " + "z" * 500))
    torn = box.read_bytes()
    assert not torn.endswith(b"\n"), "the fragment stayed (the scenario under test)"
    assert _send(capsys, root, "after").rc == 0
    lines = box.read_bytes().split(b"\n")
    assert lines[-1] == b"" and lines[-2].startswith(b'{"type":"message"')
    read = call_api(capsys, "mailbox-read", _inp(root, worker="worker-2"))
    assert [m["body"] for m in read.json["messages"]] == ["before", "after"]
    assert read.json["badLines"] == 1, "the fragment is reported, not hidden"


def test_the_library_append_reports_storage_error_and_cuts_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    jsonl.append(log, {"n": 0})
    before = log.read_bytes()
    with monkeypatch.context() as m:
        DiskFull(m, lambda p: p == str(log))
        with pytest.raises(Exception) as exc:
            jsonl.append(log, {"n": 1, "pad": "p" * 300})
    assert getattr(exc.value, "code", None) == "storage_error"
    assert log.read_bytes() == before


# Every writing subcommand, with every file of the state tree on a full disk.
WRITERS = [
    ("send-message", {"from": "leader", "to": "worker-2", "body": "hello"}),
    ("broadcast", {"from": "leader", "body": "to all"}),
    ("mailbox-mark-delivered", {"worker": "worker-2", "message_id": "<mid>"}),
    ("mailbox-read", {"worker": "worker-2"}),
    ("claim-task", {"task_id": "1", "worker": "worker-1"}),
    (
        "transition-task-status",
        {
            "task_id": "1",
            "worker": "worker-1",
            "from": "in_progress",
            "to": "completed",
            "claim_token": "<token>",
        },
    ),
]


@pytest.mark.parametrize(
    ("sub", "fields"),
    [pytest.param(s, f, id=s) for s, f in WRITERS],
)
def test_a_full_disk_never_ends_in_a_traceback_or_a_torn_file(
    root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sub: str,
    fields: dict[str, Any],
) -> None:
    mid = _send(capsys, root, "waiting").json["messageId"]
    token = None
    if sub == "transition-task-status":
        token = call_api(capsys, "claim-task", _inp(root, task_id="1", worker="worker-1"))
        token = token.json["claimToken"]
    fields = {
        k: (mid if v == "<mid>" else token if v == "<token>" else v) for k, v in fields.items()
    }
    state = root / ".omp" / "state"
    before = snapshot_tree(state)
    with monkeypatch.context() as m:
        disk = DiskFull(m, lambda p: p.startswith(str(state) + os.sep))
        r = call_api(capsys, sub, _inp(root, **fields))
    assert disk.count >= 1, "the call wrote nothing: the test proves nothing"
    assert r.rc in (0, 1), r
    assert r.json is not None and "Traceback" not in r.stderr, r
    if sub == "broadcast":  # nothing went out: a refusal listing each recipient's error
        assert r.rc == 1 and r.json["error"] == "broadcast_failed", r.json
        assert r.json["recipients"] == [] and r.json["errors"], r.json
        assert all("storage_error" in e for e in r.json["errors"])
    elif r.rc == 1:
        assert r.json["error"] == "storage_error", r.json
    else:
        # Only best-effort writes may fail quietly (receipts of mailbox-read: shown again).
        assert sub == "mailbox-read", r.json
    after = snapshot_tree(state)
    for rel, (_, data, _) in after.items():
        if rel.endswith(".jsonl"):
            assert data == b"" or data.endswith(b"\n"), f"{rel} was left torn"
            assert data == before.get(rel, (0, b"", 0))[1], f"{rel} changed"
        assert ".tmp" not in rel, f"temp file {rel} left behind"
    if sub == "mailbox-read":
        again = call_api(capsys, "mailbox-read", _inp(root, worker="worker-2"))
        assert [m["id"] for m in again.json["messages"]] == [mid], "shown again, not lost"
