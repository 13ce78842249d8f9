"""`omp.mail.unread.count`: a mailbox's unread count read from its bytes equals the full parse's,
or says it is not sure (None); `Mailbox.unread_count` uses it only with no index, and writes
nothing either way."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omp.mail import mailbox, unread
from omp.store import jsonl
from omp.store.paths import StatePaths
from tests.helpers import TS_FIXTURES, isolate, make_project, snapshot_tree


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def reference(data: bytes) -> int:
    """The full parse's answer: every complete line parsed; a message adds its id, a receipt
    takes it out (`MailState.apply`, folded over the whole file)."""
    chunk = jsonl.Chunk(start=0)
    jsonl.parse_lines(data, 0, chunk)
    ids: set[str] = set()
    for _, _, rec in chunk.records:
        if rec.get("type") == "message" and isinstance(rec.get("id"), str):
            ids.add(rec["id"])
        elif rec.get("type") == "delivery-receipt" and isinstance(rec.get("messageId"), str):
            ids.discard(rec["messageId"])
    return len(ids)


def counted(path: Path) -> int | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        return unread.count(fd)
    finally:
        os.close(fd)


def rebuilt(path: Path) -> int:
    """The state the usual way (`_catch_up` from nothing), as every reader did before."""
    fd = os.open(path, os.O_RDONLY)
    try:
        state = mailbox.MailState()
        mailbox._catch_up(fd, state)
        return len(state.undelivered)
    finally:
        os.close(fd)


def message(mid: str, body: str = "hello", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": mid,
        "from": "worker-1",
        "to": "worker-2",
        "body": body,
        "timestamp": "2026-11-29T23:53:52.449Z",
        **extra,
    }


def receipt(mid: str, at: str = "2026-11-29T23:53:53.834Z") -> dict[str, Any]:
    return {"type": "delivery-receipt", "messageId": mid, "deliveredAt": at}


def compact(rec: dict[str, Any]) -> bytes:
    return jsonl.encode(rec)  # omp's encoder: what JSON.stringify writes too


def spaced(rec: dict[str, Any]) -> bytes:
    return (json.dumps(rec) + "\n").encode()  # json.dumps's defaults: ", " and ": "


# ---- the shapes both writers produce ------------------------------------------------------------


def history(n: int, unread_last: int, *, layout: str = "pairs", encode: Any = compact) -> bytes:
    """`n` messages; all but the last `unread_last` delivered, as a member marking what it reads
    writes them: each receipt right after its message ("pairs"), in runs of three after the
    messages they deliver ("runs"), a burst of sixteen at a time ("bursts"), a burst's receipts in
    the reverse order ("reversed"), a pair's receipts after the next pair's messages
    ("interleaved"), or only every fifty messages ("late": beyond the count's lookahead)."""
    ids = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    run = {"pairs": 1, "runs": 3, "bursts": 16, "reversed": 5, "interleaved": 2, "late": 50}[layout]
    out: list[bytes] = []
    pending: list[str] = []
    held: list[str] = []  # "interleaved": the receipts written after the next run's messages
    for i, mid in enumerate(ids):
        out.append(encode(message(mid, f'{i} unicode ✓ "quoted"\nline \\ back')))
        if i < n - unread_last:
            pending.append(mid)
        if len(pending) == run:
            if layout == "interleaved":
                pending, held = held, pending
            out += [
                encode(receipt(p)) for p in (pending[::-1] if layout == "reversed" else pending)
            ]
            pending = []
    out += [encode(receipt(p)) for p in held + pending]
    return b"".join(out)


LAYOUTS = ["pairs", "runs", "bursts", "reversed", "interleaved"]


@pytest.mark.parametrize("encode", [compact, spaced], ids=["compact", "spaced"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("slack", [0, 300, 1 << 16])
def test_writer_shapes_are_counted_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encode: Any, layout: str, slack: int
) -> None:
    """Every order in which a member's marking leaves receipts is counted, whatever the blocks'
    edges cut (many blocks; with no lookahead past them, a little, or the usual)."""
    monkeypatch.setattr(unread, "BLOCK", 4096)
    monkeypatch.setattr(unread, "SLACK", slack)
    path = tmp_path / "box.jsonl"
    path.write_bytes(history(400, 7, layout=layout, encode=encode))
    assert reference(path.read_bytes()) == rebuilt(path) == 7
    assert counted(path) == 7


def test_receipts_beyond_the_lookahead(tmp_path: Path) -> None:
    """Receipts further away than the lookahead leave their messages waiting: a few are looked
    up and counted right, more than MAX_CANDIDATES are left to the rebuild."""
    path = tmp_path / "box.jsonl"
    for n, expect in ((60, 0), (400, None)):
        path.write_bytes(history(n, 0, layout="late"))
        assert reference(path.read_bytes()) == rebuilt(path) == 0
        assert counted(path) == expect


def test_crlf_lines_and_a_torn_last_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unread, "BLOCK", 1024)
    data = history(100, 3).replace(b"\n", b"\r\n")
    path = tmp_path / "box.jsonl"
    path.write_bytes(data + compact(message("torn"))[:-9])  # a writer died mid-line
    assert counted(path) == reference(path.read_bytes()) == 3


def test_a_history_with_nothing_unread(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    path.write_bytes(history(50, 0))
    assert counted(path) == 0


def test_not_sure_is_none(tmp_path: Path) -> None:
    """Lines of another shape are the full parse's to judge: the count does not guess."""
    path = tmp_path / "box.jsonl"
    base = history(20, 2)
    for odd in (
        b"\n",  # a blank line
        b'{"id":"x","type":"message"}\n',  # another key order
        b'{"type":"delivery-receipt","messageId":"a","deliveredAt":"\\u0041"}\n',  # an escape
        b"not json\n",
        compact(message("m")) + compact(message("n"))[:20] + b"\n",  # a torn line, repaired
    ):
        path.write_bytes(base + odd)
        assert counted(path) is None, odd
        assert rebuilt(path) == reference(path.read_bytes())


def test_an_unread_line_that_is_not_json_is_left_to_the_parse(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    path.write_bytes(history(20, 0) + b'{"type":"message","id":"z","body":"\x01"}\n')
    assert counted(path) is None
    assert reference(path.read_bytes()) == 0


def test_a_second_id_key_is_read_as_the_rest_of_the_mailbox_reads_it(tmp_path: Path) -> None:
    """Outside the contract (no JSON writer repeats a key; `reference` keeps the last, as JSON
    does): a message line is trusted to carry one `id`, by the count and the rebuild alike, so
    `status` agrees with every other reader of the mailbox."""
    path = tmp_path / "box.jsonl"
    odd = b'{"type":"message","id":"b","id":"a","body":"x"}\n' + compact(receipt("b"))
    path.write_bytes(history(400, 0) + odd)
    assert path.stat().st_size > mailbox.SMALL  # the rebuild reads it from the bytes too
    assert counted(path) == rebuilt(path) == 0
    assert reference(path.read_bytes()) == 1  # (what a full parse of every line would say)


def test_a_pair_after_an_unread_copy_of_its_message_delivers_it(tmp_path: Path) -> None:
    """The count deletes pairs without looking at their ids; an id it ends with is looked up."""
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    lines = [message(a), message(b), message(a), receipt(a), message(b)]
    path = tmp_path / "box.jsonl"
    path.write_bytes(history(30, 0) + b"".join(map(compact, lines)))
    assert counted(path) == reference(path.read_bytes()) == 1


# ---- against the full parse, on anything ---------------------------------------------------------

IDS = ["a", "b", "c", "0f1e", "01JD-x_9", "é", "a\\u0041", "A", ""]
TEXT = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12
) | st.sampled_from(['"', "\\", "\n", "\x01", "✓", "\u2028", '","id":"b'])


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["message", "receipt", "pair", "run", "odd"]))
    mid = draw(st.sampled_from(IDS))
    enc = draw(st.sampled_from([compact, spaced]))
    if kind == "run":  # a burst of messages, then their receipts in some order
        mids = draw(st.lists(st.sampled_from(IDS), min_size=2, max_size=10))
        order = draw(st.permutations(mids))
        line = b"".join(enc(message(m, draw(TEXT))) for m in mids)
        line += b"".join(enc(receipt(m)) for m in order)
    elif kind == "message":
        extras: list[dict[str, Any]] = [{}, {"auto": True}, {"verify": {"id": "c", "type": "x"}}]
        extra = draw(st.sampled_from(extras))
        line = enc(message(mid, draw(TEXT), **extra))
    elif kind == "receipt":
        at = draw(st.sampled_from(["2026-01-01T00:00:00.000Z", "", "\x01", "é", "\\"]))
        line = enc(receipt(mid, at))
    elif kind == "pair":
        line = enc(message(mid, draw(TEXT))) + enc(receipt(mid))
    else:
        line = draw(
            st.sampled_from(
                [
                    b"\n",
                    b"  \n",
                    b"garbage\n",
                    b"[1,2]\n",
                    b'{"type":"message","id":1}\n',
                    b'{"type":"message","id":"a"\n',
                    b'{"type":"delivery-receipt","messageId":"a","deliveredAt":"x"} \r\n',
                    b'{"type":"delivery-receipt","messageId":"a"}\n',
                    b'{"type":"message","id":"a","from":"x"}{"type":"message","id":"b"}\n',
                ]
            )
        )
    if draw(st.booleans()) and draw(st.booleans()):
        cut = draw(st.integers(1, max(1, len(line) - 1)))
        line = line[:cut] + b"\n"  # torn and repaired
    if draw(st.booleans()) and line.endswith(b"\n"):
        line = line[:-1] + b"\r\n"
    return bytes(line)


@pytest.mark.slow  # a property test
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(lines(), max_size=40),
    st.binary(max_size=30),
    st.sampled_from([16, 64, 1 << 20]),
    st.sampled_from([0, 40, 1 << 16]),
)
def test_the_count_is_the_full_parse_or_none(
    tmp_path: Path, body: list[bytes], tail: bytes, block: int, slack: int
) -> None:
    old = unread.BLOCK, unread.SLACK
    unread.BLOCK, unread.SLACK = block, slack
    try:
        path = tmp_path / "box.jsonl"
        path.write_bytes(b"".join(body) + tail.replace(b"\n", b""))  # maybe a torn last line
        got = counted(path)
        assert got is None or got == reference(path.read_bytes())
    finally:
        unread.BLOCK, unread.SLACK = old


@pytest.mark.slow  # a property test
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 30),
            st.sampled_from(["pair"] * 6 + ["burst", "reversed", "message", "receipt"]),
        )
    ),
    st.sampled_from([compact, spaced]),
    st.sampled_from([64, 1 << 20]),
    st.sampled_from([0, 200, 1 << 16]),
)
def test_writer_histories_are_counted(
    tmp_path: Path, steps: list[tuple[int, str]], enc: Any, block: int, slack: int
) -> None:
    """What the writers produce when members mark what they read (pairs, bursts marked in
    order or not, with messages left unread, late receipts and repeated ids among them) is
    counted, and counted right: with at most ~40 ids, never left to the rebuild."""
    old = unread.BLOCK, unread.SLACK
    unread.BLOCK, unread.SLACK = block, slack
    try:
        out: list[bytes] = []
        for n, what in steps:
            mids = [
                str(uuid.UUID(int=n + k)) for k in range(5 if what in ("burst", "reversed") else 1)
            ]
            if what != "receipt":
                out += [enc(message(m, f"body {n} ✓")) for m in mids]
            if what != "message":
                out += [enc(receipt(m)) for m in (mids[::-1] if what == "reversed" else mids)]
        data = b"".join(out)
        path = tmp_path / "box.jsonl"
        path.write_bytes(data)
        assert counted(path) == reference(data)
    finally:
        unread.BLOCK, unread.SLACK = old


# ---- the fixtures, and the Mailbox ---------------------------------------------------------------


def fixture_files() -> Iterator[Path]:
    yield from sorted((TS_FIXTURES / "mailbox").glob("*.jsonl"))


@pytest.mark.parametrize("path", list(fixture_files()), ids=lambda p: p.name)
def test_the_typescript_fixtures(tmp_path: Path, path: Path) -> None:
    """Each file the TypeScript tool wrote, and the same followed by a long history of pairs
    as it writes them (so that the count, not the rebuild, answers)."""
    data = path.read_bytes()
    assert counted(path) in (None, reference(data))
    assert rebuilt(path) == reference(data)
    more = b"".join(
        compact(message(m)) + compact(receipt(m)) for m in (str(uuid.uuid4()) for _ in range(40))
    )
    for whole in (data + more, more + data):
        box = tmp_path / "box.jsonl"
        box.write_bytes(whole)
        assert counted(box) == reference(whole) == rebuilt(box)


def test_unread_count_without_an_index_counts_and_writes_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    team_dir = root / ".omp" / "state" / "team" / "demo"
    (team_dir / "mailbox").mkdir(parents=True)
    for d in (
        root / ".omp",
        root / ".omp" / "state",
        team_dir.parent,
        team_dir,
        team_dir / "mailbox",
    ):
        d.chmod(0o700)
    shutil.copyfile(TS_FIXTURES / "config.json", team_dir / "config.json")
    box = team_dir / "mailbox" / "worker-2.jsonl"
    box.write_bytes(history(300, 4))  # past mailbox.SMALL: the count is used
    assert box.stat().st_size > mailbox.SMALL
    for f in (team_dir / "config.json", box):
        f.chmod(0o600)
    before = snapshot_tree(root)
    team = StatePaths(root).team("demo")
    assert mailbox.Mailbox(team, "worker-2").unread_count() == 4
    assert snapshot_tree(root) == before
    # the same with a spaced history, and one the count is not sure of (the rebuild answers)
    box.write_bytes(history(300, 4, encode=spaced) + b"\n" + compact(message("x")))
    before = snapshot_tree(root)
    assert mailbox.Mailbox(team, "worker-2").unread_count() == 5
    assert snapshot_tree(root) == before


def test_without_preadv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where os.preadv is missing, blocks are read with pread into the same buffer."""
    monkeypatch.setattr(unread, "_PREADV", None)
    monkeypatch.setattr(unread, "BLOCK", 512)
    path = tmp_path / "box.jsonl"
    path.write_bytes(history(60, 3) + compact(message("torn"))[:30])
    assert counted(path) == reference(path.read_bytes()) == 3
