"""Files written by the TypeScript oh-my-copilot (tests/fixtures/ts-omp) read and written both ways.

The fixtures are a copy kept in the repository; these tests never read anything outside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from omp.store import jsonl
from tests.helpers import (
    ISO_MS,
    MESSAGE_KEYS,
    RECEIPT_KEYS,
    TS_FIXTURES,
    call_api,
    isolate,
    make_project,
    raw_lines,
    records,
    snapshot_tree,
)

RECIPIENTS = ["leader", "worker-2", "worker-3", "worker-4"]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project whose team `demo` was written by the TypeScript tool."""
    root = make_project(tmp_path / "proj")
    team = root / ".omp" / "state" / "team" / "demo"
    (team / "mailbox").mkdir(parents=True)
    for d in (root / ".omp", root / ".omp" / "state", team.parent, team, team / "mailbox"):
        d.chmod(0o700)
    shutil.copyfile(TS_FIXTURES / "config.json", team / "config.json")
    for f in (TS_FIXTURES / "mailbox").glob("*.jsonl"):
        shutil.copyfile(f, team / "mailbox" / f.name)
    for f in [team / "config.json", *(team / "mailbox").iterdir()]:
        f.chmod(0o600)
    return root


def fixture_lines(recipient: str) -> list[dict[str, Any]]:
    return records(TS_FIXTURES / "mailbox" / f"{recipient}.jsonl")


def box(root: Path, recipient: str) -> Path:
    return root / ".omp" / "state" / "team" / "demo" / "mailbox" / f"{recipient}.jsonl"


def api(capsys: pytest.CaptureFixture[str], root: Path, sub: str, **fields: Any) -> Any:
    r = call_api(capsys, sub, {"team_name": "demo", "cwd": str(root), **fields})
    assert r.rc == 0, r
    return r.json


def test_the_fixtures_are_present_and_self_consistent() -> None:
    assert (TS_FIXTURES / "README.md").is_file()
    cfg = json.loads((TS_FIXTURES / "config.json").read_text())
    assert [w["name"] for w in cfg["workers"]] == ["worker-1", "worker-2", "worker-3", "worker-4"]
    kinds = [r["type"] for r in fixture_lines("worker-2")]
    assert kinds == ["message"] * 5 + ["delivery-receipt"]
    for name in RECIPIENTS:
        for rec in fixture_lines(name):
            assert list(rec) == (MESSAGE_KEYS if rec["type"] == "message" else RECEIPT_KEYS)


@pytest.mark.parametrize("recipient", RECIPIENTS)
def test_a_ts_mailbox_lists_the_same_messages_in_the_same_order(
    root: Path, capsys: pytest.CaptureFixture[str], recipient: str
) -> None:
    lines = fixture_lines(recipient)
    delivered = {r["messageId"]: r["deliveredAt"] for r in lines if r["type"] == "delivery-receipt"}
    expect = [
        {**r, "deliveredAt": delivered[r["id"]]} if r["id"] in delivered else r
        for r in lines
        if r["type"] == "message"
    ]
    before = snapshot_tree(root)
    out = api(capsys, root, "mailbox-list", worker=recipient)
    assert out["messages"] == expect
    assert out["omitted"] == 0
    und = api(capsys, root, "mailbox-list", worker=recipient, undelivered_only=True)
    assert und["messages"] == [m for m in expect if "deliveredAt" not in m]
    assert snapshot_tree(root) == before  # reading a TS mailbox writes nothing, not even an index


def test_the_ts_receipt_is_merged(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    msgs = api(capsys, root, "mailbox-list", worker="worker-2")["messages"]
    assert [m["from"] for m in msgs] == ["worker-1", "worker-3", "worker-4", "leader", "worker-1"]
    by_id = {m["id"]: m for m in msgs}
    assert by_id["b6bdf87c-fe5b-44a8-8910-a8c0f7e3d15f"]["deliveredAt"] == (
        "2026-11-29T23:53:53.834Z"
    )
    assert sum("deliveredAt" in m for m in msgs) == 1
    assert by_id["7b98e74d-33e8-4dcd-a023-76aa7c85ac84"]["body"] == (
        'unicode \u2713 and "quotes"\nand a newline'
    )


def test_mailbox_read_of_a_ts_mailbox_marks_with_ts_receipts(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = (TS_FIXTURES / "mailbox" / "worker-2.jsonl").read_bytes()
    out = api(capsys, root, "mailbox-read", worker="worker-2")
    ids = [m["id"] for m in out["messages"]]
    assert ids == [
        "fc03dce6-2089-4fb2-847e-84009e8627d7",
        "7b98e74d-33e8-4dcd-a023-76aa7c85ac84",
        "86aa7015-2c20-40ee-9701-8e77aa1f6e72",
        "f1a7015c-1cf1-4d45-987b-c56ee572636e",
    ]
    data = box(root, "worker-2").read_bytes()
    assert data.startswith(original)  # every TS line kept byte for byte
    added = [json.loads(x) for x in data[len(original) :].splitlines()]
    assert [list(r) for r in added] == [RECEIPT_KEYS] * 4
    assert [r["messageId"] for r in added] == ids
    assert all(ISO_MS.match(r["deliveredAt"]) for r in added)
    assert api(capsys, root, "mailbox-read", worker="worker-2")["messages"] == []


def test_mark_delivered_accepts_a_ts_uuid_and_is_idempotent(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mid = "8cafe039-15a2-4581-937a-e2c711ef6330"
    api(capsys, root, "mailbox-mark-delivered", worker="worker-3", message_id=mid)
    size = box(root, "worker-3").stat().st_size
    # the receipt the TS tool wrote is honoured too: marking it again writes nothing
    api(
        capsys,
        root,
        "mailbox-mark-delivered",
        worker="worker-2",
        message_id="b6bdf87c-fe5b-44a8-8910-a8c0f7e3d15f",
    )
    api(capsys, root, "mailbox-mark-delivered", worker="worker-3", message_id=mid)
    assert box(root, "worker-3").stat().st_size == size
    assert len(raw_lines(box(root, "worker-2"))) == 6


def test_what_omp_writes_has_exactly_the_ts_line_shapes(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = box(root, "worker-4").read_bytes()
    sent = api(
        capsys,
        root,
        "send-message",
        **{"from": "worker-2", "to": "worker-4", "body": 'unicode \u2713 and "quotes"\nx'},
    )
    api(capsys, root, "broadcast", **{"from": "worker-3", "body": "omp broadcast"})
    api(capsys, root, "mailbox-mark-delivered", worker="worker-4", message_id=sent["messageId"])
    data = box(root, "worker-4").read_bytes()
    assert data.startswith(before)
    new = data[len(before) :].splitlines()
    recs = [json.loads(x) for x in new]
    assert [list(r) for r in recs] == [MESSAGE_KEYS, MESSAGE_KEYS, RECEIPT_KEYS]
    for raw, rec in zip(new, recs, strict=True):
        # the same compact, non-ASCII-as-is serialization JSON.stringify produces
        assert raw + b"\n" == jsonl.encode(rec)
    for rec in recs[:2]:
        assert ISO_MS.match(rec["timestamp"])
        assert isinstance(rec["id"], str) and rec["id"]
    assert ISO_MS.match(recs[2]["deliveredAt"])
    for name in ("leader", "worker-2"):  # the broadcast's other copies
        last = raw_lines(box(root, name))[-1]
        rec = json.loads(last)
        assert list(rec) == MESSAGE_KEYS and rec["body"] == "omp broadcast"
        assert jsonl.encode(rec) == last


@pytest.mark.parametrize("recipient", RECIPIENTS)
def test_omp_serializes_every_ts_line_byte_for_byte(recipient: str) -> None:
    for raw in raw_lines(TS_FIXTURES / "mailbox" / f"{recipient}.jsonl"):
        assert jsonl.encode(json.loads(raw)) == raw


def test_ts_timestamps_match_omps_format() -> None:
    for name in RECIPIENTS:
        for rec in fixture_lines(name):
            assert ISO_MS.match(str(rec.get("timestamp") or rec.get("deliveredAt")))


def test_sending_into_a_ts_mailbox_appends_after_its_lines(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = box(root, "leader").read_bytes()
    sent = api(capsys, root, "send-message", **{"from": "worker-4", "to": "leader", "body": "hi"})
    msgs = api(capsys, root, "mailbox-list", worker="leader")["messages"]
    assert [m["id"] for m in msgs] == [r["id"] for r in fixture_lines("leader")] + [
        sent["messageId"]
    ]
    assert box(root, "leader").read_bytes().startswith(original)
    und = api(capsys, root, "mailbox-list", worker="leader", undelivered_only=True)["messages"]
    assert len(und) == 3


def test_the_ts_config_loads_with_its_fields_kept(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg_path = root / ".omp" / "state" / "team" / "demo" / "config.json"
    before = cfg_path.read_bytes()
    r = call_api(
        capsys,
        "send-message",
        {"team_name": "demo", "cwd": str(root), "from": "worker-1", "to": "worker-9", "body": "x"},
    )
    assert r.json["error"] == "unknown_recipient"
    assert r.json["candidates"] == ["worker-1", "worker-2", "worker-3", "worker-4", "leader"]
    assert cfg_path.read_bytes() == before


def test_human_form_of_a_ts_mailbox(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = call_api(
        capsys,
        "mailbox-list",
        {"team_name": "demo", "cwd": str(root), "worker": "worker-2"},
        as_json=False,
    )
    lines = [x for x in r.stdout.splitlines() if not x.startswith("(")]  # not the notes
    assert lines[0] == "23:53:52  worker-1 *: hello from worker-1"
    assert lines[1] == "23:53:52  worker-3: worker-3: can you review src/a.py?"
    assert lines[2].startswith('23:53:52  worker-4 *: unicode \u2713 and "quotes"')
    assert "and a newline" not in lines[2] and "7b98e74d" in lines[2]
    assert len(lines) == 5
