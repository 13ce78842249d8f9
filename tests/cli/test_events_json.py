"""`omp team events --json` (`omp.cli.events_json`) prints byte for byte what the parse path
prints (`history.iter_since` and `_print(..., as_json=True)`, which `--follow` uses), for any log:
omp's own lines, other writers' blanks and escapes, duplicate keys, NaN, raw controls, bytes UTF-8
cannot hold, CRLF, a torn last line; while it parses only the first line of each shape."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from omp.cli import events_cmd, events_json
from omp.record import history
from omp.store import jsonl
from omp.store.paths import StatePaths
from tests.helpers import isolate, make_project, make_team, snapshot_tree


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "t", 1, no_limits=True)
    return r


def captured(run: Callable[[], None]) -> bytes:
    """The bytes `run` writes to stdout (`output.write_bytes` writes to its buffer)."""
    buf = io.BytesIO()
    saved = sys.stdout
    out = sys.stdout = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
    try:
        try:
            run()
        except SystemExit as exc:
            assert exc.code in (0, None), exc
        out.flush()
        return buf.getvalue()
    finally:
        sys.stdout = saved


def parse_path(root: Path, offset: int, log: str | None) -> bytes:
    """What every line parsed and encoded again prints: the reference."""
    tp = StatePaths(root).team("t")

    def run() -> None:
        for evs, _ in history.iter_since(tp, offset, log=log):
            events_cmd._print(evs, True)

    return captured(run)


def command(root: Path, since: str | None) -> bytes:
    project = StatePaths(root)
    return captured(
        lambda: events_cmd.events_loop(project, "t", since=since, follow=False, as_json=True)
    )


def by_blocks(root: Path, offset: int, log: str | None, block: int) -> bytes:
    """`events_json.render` over blocks of `block` bytes, the verdicts kept across them."""
    tp = StatePaths(root).team("t")
    shapes = events_json.new_shapes()
    out = []
    for data, start, lid in history.iter_blocks(tp, offset, block, log=log):
        out.append(events_json.render(data, start, f"t:{lid}:", shapes)[0])
    return b"".join(out)


# ---- generated logs ----------------------------------------------------------------------------

# Few keys and telling strings, so that lines of one shape recur with other values
_KEYS = st.sampled_from(["type", "id", "to", "at", "cursor", "log", "é", 'a"b', "x y", "", "\\"])
_STRINGS = ["log", "task", "", "leader", 'a,"b', ':"', "é—", "\x85", "\u202e", "\x7f", "\t"]
_STRINGS += ["\n", "\\", "/", "\ud800", "{[", "\u2028", "😀", "\x00", "NaN", "Infinity", "\ufeff"]
_TEXT = st.sampled_from(_STRINGS) | st.text(max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**17, max_value=10**30)
    | st.floats()  # NaN and the infinities too: `json.dumps` writes them, the parse refuses them
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=6,
)
_ODD = st.sampled_from(
    [
        b"",
        b" ",
        b"\t",
        b"not json",
        b"{}",
        b"[]",
        b"1",
        b'"s"',
        b"null",
        b'{"a":1e999}',
        b'{"a":-0}',
        b'{"a":-1}',
        b'{"a":01}',
        b'{"a":11}',
        b'{"a":0.30000000000000004}',  # as `json.dumps` writes it
        b'{"a":0.20000000000000001}',  # the same shape, written back as 0.2
        b'{"a":2.50}',
        b'{"a":1.0}',
        b'{"a":1E2}',
        b'{"a":NaN}',
        b'{"a":-Infinity}',
        b'\xef\xbb\xbf{"a":1}',
        b'{"a":"\xff"}',
        b'{"a":"\xed\xa0\x80"}',
        b'{"a":"x\ty"}',
        b'{"a":"x\x1by"}',
        b'{"a":"\x7f\xc2\x85"}',
        b'{"type":"log","log":"0123abcd","at":"x"}',
        b'{"type":"note","type":"log"}',
        b'{"type":"log","type":"note"}',
        b'{"a":"\\u0041"}',
        b'{"a":"\\/"}',
        b'{"a":"\\u0085"}',
        b'{"a":"\\ud83d\\ude00"}',
        b'{"a":"\\u001B"}',
        b'{"a":"\\u001b"}',
        b'{"a":' + b"[" * 70 + b"]" * 70 + b"}",
        b'{"a":' + b"1" * 5000 + b"}",
        b'{"a":1,"a":2}',
        b'{"a":{"b":1,"b":2}}',
        b'{"v":{"type":"log"}}',
        b'{"a":"b"}}',
        b'{"a":"b"',
        b'{"a" :"b"}',
        b'{"cursor":"mine","type":"note"}',
        b'{"type":"note","cursor":"mine"}',
    ]
)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    templates = draw(st.lists(st.lists(_KEYS, min_size=1, max_size=4), min_size=1, max_size=3))
    out = []
    for _ in range(draw(st.integers(min_value=0, max_value=12))):
        kind = draw(st.sampled_from(["omp", "omp", "omp", "spaced", "ascii", "pairs", "odd"]))
        keys = draw(st.sampled_from(templates))
        pairs = [(k, draw(_VALUES)) for k in keys]
        obj = dict(pairs)
        if kind == "omp":  # as `jsonl.encode` writes it; a lone surrogate as raw bytes
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            raw = line.encode("utf-8", "surrogatepass")
        elif kind in ("spaced", "ascii"):
            raw = json.dumps(obj, ensure_ascii=kind == "ascii").encode("utf-8", "surrogatepass")
        elif kind == "pairs":  # duplicate keys kept
            body = ",".join(
                json.dumps(k, ensure_ascii=False) + ":" + json.dumps(v, ensure_ascii=False)
                for k, v in pairs
            )
            raw = ("{" + body + "}").encode("utf-8", "surrogatepass")
        else:
            raw = draw(_ODD)
        ending = draw(st.sampled_from([b"", b"", b"", b"\r", b" "]))
        out.append(raw + ending)
    return b"".join(line + b"\n" for line in out)


_HEADER = jsonl.encode({"type": "log", "log": "0123456789abcdef", "at": "2026-12-01T00:00:00Z"})


@pytest.mark.slow  # a property test; the two tests after it stay in the quick loop
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=_lines(),
    header=st.booleans(),
    torn=st.sampled_from([b"", b"", b'{"type":"task"', b'{"type":"x","a":1}']),
    since=st.integers(min_value=0, max_value=10**6),
    block=st.integers(min_value=1, max_value=300),
)
@example(
    body=b'{"type":"x","v":"a"}\n{"type":"x","v":"b\tc"}\n{"type":"x","v":"\\n"}\n'
    b'{"type":"x","v":"\xed\xa0\x80"}\n{"type":"x","v":"\xff"}\n{"type":"log","v":"d"}\n'
    b'{"type":"x","v":"\xc2\x85\xe2\x80\xae\x7f"}\n{"type":"x","v":"e"}\r\n',
    header=True,
    torn=b"",
    since=0,
    block=40,
)
@example(  # one shape each: how a number is written back depends on its digits or on a zero
    body=b'{"a":0.30000000000000004}\n{"a":0.20000000000000001}\n{"a":-1}\n{"a":-0}\n'
    b'{"a":11}\n{"a":01}\n{"a":1.5}\n{"a":1.0}\n{"a":2e1}\n{"a":5e1}\n',
    header=False,
    torn=b"",
    since=0,
    block=300,
)
@example(  # blocks of mostly another writer's lines take the parse path, then are tried again
    body=b'{"type": "x", "v": 1}\n' * 20 + b'{"type":"x","v":"a"}\n' * 30 + b"{}\n" * 9,
    header=True,
    torn=b"",
    since=0,
    block=50,
)
def test_the_bytes_of_the_parse_path_for_any_log(
    root: Path, body: bytes, header: bool, torn: bytes, since: int, block: int
) -> None:
    tp = StatePaths(root).team("t")
    log = (_HEADER if header else b"") + body
    tp.events.write_bytes(log + torn)
    # a cursor at a line boundary (`--since`), or none
    bounds = [0] + [i + 1 for i, c in enumerate(log) if c == ord("\n")]
    offset = bounds[since % len(bounds)] if since % 3 else 0
    cursor = history.cursor_at(tp, offset) if offset else None
    lid, _ = history.parse_cursor(cursor, "t")
    want = parse_path(root, offset, lid)
    before = snapshot_tree(root)
    assert command(root, cursor) == want
    assert snapshot_tree(root) == before  # read-only
    assert by_blocks(root, offset, lid, block) == want


def test_one_line_parsed_per_shape(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's lines as omp writes them are passed through: only the first of each shape (its
    structure and keys) is parsed, whatever its values; odd lines are parsed, each."""
    tp = StatePaths(root).team("t")
    history.member(tp, "worker-1", "online", "é \u202e \x85 done")
    for i in range(50):
        history.messages(tp, [{"id": f"m{i}", "from": "leader", "to": f"w{i}", "event": "x"}])
        history.record(tp, {"type": "attention", "worker": "w", "change": "started", "seq": i})
    with open(tp.events, "ab") as f:
        f.write(b'{"type": "note"}\n' * 3 + b'{"type":"note","v":"a\\nb"}\n' * 2)
    want = parse_path(root, 0, None)
    calls: list[bytes] = []
    real = jsonl.loads_line

    def counted(raw: bytes) -> Any:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(jsonl, "loads_line", counted)
    got = command(root, None)
    assert got == want
    lines = got.splitlines()
    assert len(lines) == 2 + 2 * 50 + 5  # the worker joined and came online, 100, 5 odd
    assert b"\\u202e \\u0085" in got and b"\xc2\x85" not in got
    # the header and each shape of omp's once (member: joined and online, with a reason, are two
    # shapes); the 5 odd lines each
    parsed = [json.loads(c).get("type") for c in calls]
    # `seq` 0..49: the pattern of a passed shape takes any integer written as `json.dumps` writes it
    assert parsed.count("message") == 1 and parsed.count("attention") == 1
    assert parsed.count("note") == 5 and parsed.count("log") == 1
    assert parsed.count("member") == 2 and len(calls) == 1 + 2 + 1 + 1 + 5


def test_the_same_bytes_when_few_shapes_are_kept(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the shapes and patterns it keeps (memory bounded whatever the log), a line takes the
    parse path: the bytes stay the parse path's."""
    tp = StatePaths(root).team("t")
    for i in range(30):
        history.record(tp, {"type": "note", f"k{i % 7}": i, "v": "é" * (i % 3)})
        history.messages(tp, [{"id": f"m{i}", "from": "leader", "to": "w", "event": i}])
    want = parse_path(root, 0, None)
    for shapes, patterns in ((1, 1), (0, 0), (3, 2)):
        monkeypatch.setattr(events_json, "_MAX_SHAPES", shapes)
        monkeypatch.setattr(events_json, "_MAX_PATTERNS", patterns)
        assert command(root, None) == want


def test_a_log_of_new_shapes_goes_to_the_parse_path_and_keeps_little(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every line with keys of its own (another writer's log): each first-of-shape parse counts,
    so such a block makes the next ones take the parse path at once; and the structures and key
    sets kept are bounded all together, not per structure."""
    monkeypatch.setattr(events_json, "_MAX_SHAPES", 10)
    block = b"".join(b'{"type":"x","k%d":1}\n' % i for i in range(40))
    shapes = events_json.new_shapes()
    prefix = "t:0123456789abcdef:"
    out, n = events_json.render(block, 0, prefix, shapes)
    assert (out, n) == events_json._parse_path(block.split(b"\n")[:-1], 0, prefix)
    assert n == 40
    assert shapes.poor  # 40 lines, 40 parsed: the next blocks take the parse path
    assert shapes.kept == 10  # one structure and nine key sets, not 10 key sets per structure
    assert sum(len(v[1]) for v in shapes.known.values()) + len(shapes.known) == 10
