"""The JSONL store: one locked write per line, tail repair, byte-offset cursors."""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest_mock import MockerFixture

from omp.errors import OmpError
from omp.store import jsonl, strictjson
from tests.helpers import isolate, snapshot_tree, umask


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def rec(i: int, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "id": f"m{i}", "body": f"body {i}", **extra}


def _lock_is_held(path: Path) -> bool:
    """True if some other open file description holds the exclusive flock on `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the probe lock if it was taken
    return False


# ---- encoding ---------------------------------------------------------------------------------


def test_encode_is_one_compact_utf8_line() -> None:
    data = jsonl.encode({"body": 'line1\nline2 \u2713 "q"', "n": 1})
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert data == '{"body":"line1\\nline2 \u2713 \\"q\\"","n":1}\n'.encode()
    assert json.loads(data) == {"body": 'line1\nline2 \u2713 "q"', "n": 1}


# ---- appending --------------------------------------------------------------------------------


def test_append_returns_offsets_and_writes_whole_lines_0600(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    with umask(0):
        off0 = jsonl.append(path, rec(0))
    off1 = jsonl.append(path, rec(1))
    assert off0 == 0
    assert off1 == len(jsonl.encode(rec(0)))
    assert path.read_bytes() == jsonl.encode(rec(0)) + jsonl.encode(rec(1))
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_append_is_one_write_under_the_flock_on_an_append_descriptor(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    path = tmp_path / "box.jsonl"
    jsonl.append(path, rec(0))
    real_write = os.write
    seen: list[tuple[bytes, bool, bool]] = []

    def spy(fd: int, data: Any) -> int:
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            appending = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
            seen.append((bytes(data), appending, _lock_is_held(path)))
        return real_write(fd, data)

    mocker.patch("omp.store.jsonl.os.write", side_effect=spy)
    jsonl.append(path, rec(1, pad="p" * 5000))
    assert seen == [(jsonl.encode(rec(1, pad="p" * 5000)), True, True)]
    assert not _lock_is_held(path)  # released afterwards


def test_a_short_write_is_finished_while_still_holding_the_lock(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    path = tmp_path / "box.jsonl"
    real_write = os.write
    held: list[bool] = []

    def dribble(fd: int, data: Any) -> int:
        held.append(_lock_is_held(path))
        return real_write(fd, bytes(data)[:7])

    mocker.patch("omp.store.jsonl.os.write", side_effect=dribble)
    jsonl.append(path, rec(0))
    jsonl.append(path, rec(1))
    assert path.read_bytes() == jsonl.encode(rec(0)) + jsonl.encode(rec(1))
    assert len(held) > 4 and all(held)


def test_a_failed_write_is_cut_back_and_reported(tmp_path: Path, mocker: MockerFixture) -> None:
    path = tmp_path / "box.jsonl"
    jsonl.append(path, rec(0))
    before = path.read_bytes()
    real_write = os.write
    calls = {"n": 0}

    def half_then_enospc(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    mocker.patch("omp.store.jsonl.os.write", side_effect=half_then_enospc)
    with pytest.raises(OmpError) as exc:
        jsonl.append(path, rec(1))
    assert exc.value.code == "storage_error"
    assert path.read_bytes() == before  # no fragment left to glue onto the next line
    mocker.stopall()
    jsonl.append(path, rec(2))
    assert [r["id"] for r in _parse_all(path)] == ["m0", "m2"]


def _parse_all(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def test_a_file_not_ending_in_newline_gets_one_first(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    path.write_bytes(jsonl.encode(rec(0)) + b'{"type":"message","id":"torn')
    os.chmod(path, 0o600)
    off = jsonl.append(path, rec(1))
    lines = path.read_bytes().split(b"\n")
    assert lines == [
        jsonl.encode(rec(0)).rstrip(b"\n"),
        b'{"type":"message","id":"torn',  # the fragment stays one bad line
        jsonl.encode(rec(1)).rstrip(b"\n"),  # the new line is whole
        b"",
    ]
    assert path.read_bytes()[off:] == jsonl.encode(rec(1))
    chunk = jsonl.read_from(path)
    assert [r["id"] for _, _, r in chunk.records] == ["m0", "m1"]
    assert chunk.bad == 1


def test_locked_holds_the_exclusive_flock(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    with jsonl.locked(path) as fd:
        assert _lock_is_held(path)
        assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
        jsonl.append_locked(fd, jsonl.encode(rec(0)), path)
    assert not _lock_is_held(path)
    assert _parse_all(path) == [rec(0)]


def test_locked_without_create_does_not_create(tmp_path: Path) -> None:
    with pytest.raises((OmpError, FileNotFoundError)), jsonl.locked(tmp_path / "x", create=False):
        pass
    assert not (tmp_path / "x").exists()


def test_append_refuses_a_symlinked_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep\n")
    before = snapshot_tree(outside)
    os.symlink(outside, tmp_path / "box.jsonl")
    with pytest.raises(OmpError) as exc:
        jsonl.append(tmp_path / "box.jsonl", rec(0))
    assert exc.value.code == "unsafe_path"
    assert snapshot_tree(outside) == before


# ---- reading ----------------------------------------------------------------------------------


def test_read_from_a_missing_file_is_empty(tmp_path: Path) -> None:
    chunk = jsonl.read_from(tmp_path / "missing.jsonl", 17)
    assert chunk.records == [] and chunk.bad == 0 and chunk.end == 17
    assert not (tmp_path / "missing.jsonl").exists()


def test_records_carry_offsets_and_lengths(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    offs = [jsonl.append(path, rec(i)) for i in range(3)]
    chunk = jsonl.read_from(path)
    assert [(o, n) for o, n, _ in chunk.records] == [
        (offs[i], len(jsonl.encode(rec(i)))) for i in range(3)
    ]
    chunk = jsonl.read_from(path, offs[1])
    assert [r["id"] for _, _, r in chunk.records] == ["m1", "m2"]
    assert chunk.start == offs[1] and chunk.end == path.stat().st_size


def test_corrupt_lines_are_skipped_counted_kept_and_never_block(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    jsonl.append(path, rec(0))
    with open(path, "ab") as f:
        f.write(b"{not json\n[1,2]\n42\n\n   \n\xff\xfe\n")
    jsonl.append(path, rec(1))
    data = path.read_bytes()
    chunk = jsonl.read_from(path)
    assert [r["id"] for _, _, r in chunk.records] == ["m0", "m1"]
    assert chunk.bad == 4  # bad JSON, a list, a number, bad UTF-8; blank lines are not counted
    assert chunk.end == len(data)
    assert path.read_bytes() == data  # reading never rewrites
    assert b"{not json\n" in data


def test_partial_last_line_waits_and_is_delivered_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    jsonl.append(path, rec(0))
    assert [r["id"] for _, _, r in jsonl.read_new(path, cursor).records] == ["m0"]
    line = jsonl.encode(rec(1))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line[:15])  # a slow writer: half a line so far
        chunk = jsonl.read_new(path, cursor)
        assert chunk.records == [] and chunk.bad == 0
        assert jsonl.read_cursor(cursor) == len(jsonl.encode(rec(0)))
        os.write(fd, line[15:])  # the rest and its newline arrive
    finally:
        os.close(fd)
    chunk = jsonl.read_new(path, cursor)
    assert [r["id"] for _, _, r in chunk.records] == ["m1"]
    assert chunk.bad == 0
    assert jsonl.read_new(path, cursor).records == []
    assert jsonl.read_cursor(cursor) == path.stat().st_size


def test_a_file_shorter_than_the_cursor_is_read_again_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    for i in range(5):
        jsonl.append(path, rec(i))
    jsonl.read_new(path, cursor)
    path.write_bytes(jsonl.encode(rec(9)))  # replaced by a shorter file
    chunk = jsonl.read_new(path, cursor)
    assert chunk.reset is True and chunk.start == 0
    assert [r["id"] for _, _, r in chunk.records] == ["m9"]
    assert jsonl.read_cursor(cursor) == len(jsonl.encode(rec(9)))


def test_an_emptied_file_resets_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    jsonl.append(path, rec(0))
    jsonl.read_new(path, cursor)
    path.write_bytes(b"")
    chunk = jsonl.read_new(path, cursor)
    assert chunk.reset and chunk.records == []
    assert jsonl.read_cursor(cursor) == 0


# ---- cursors ----------------------------------------------------------------------------------


def test_cursor_file_format_and_bad_cursors(tmp_path: Path) -> None:
    cursor = tmp_path / ".c"
    assert jsonl.read_cursor(cursor) == 0
    jsonl.write_cursor(cursor, 123)
    assert json.loads(cursor.read_text()) == {"bytesRead": 123}
    assert jsonl.read_cursor(cursor) == 123
    for bad in (
        '{"bytesRead": -1}',
        '{"bytesRead": "9"}',
        '{"bytesRead": true}',
        '{"bytesRead": 1.5}',
        '{"bytesRead": NaN}',
        '{"bytesRead": 1e999}',
        "[]",
        "garbage",
        '{"other": 4}',
    ):
        cursor.write_text(bad)
        with pytest.raises(OmpError) as exc:  # never 0: that would hand every line out again
            jsonl.read_cursor(cursor)
        assert exc.value.code == "corrupt_state" and exc.value.detail["file"] == str(cursor), bad
        assert cursor.read_text() == bad


def test_cursor_is_written_to_a_temp_file_and_renamed(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    jsonl.write_cursor(cursor, 0)
    os.link(cursor, tmp_path / "old-cursor")
    jsonl.append(path, rec(0))
    replace = mocker.spy(os, "replace")
    jsonl.read_new(path, cursor)
    assert jsonl.read_cursor(cursor) == path.stat().st_size
    assert json.loads((tmp_path / "old-cursor").read_text()) == {"bytesRead": 0}
    assert replace.call_count == 1
    src, dst = replace.call_args.args
    assert Path(dst) == cursor and Path(src).parent == tmp_path
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert os.stat(cursor).st_mode & 0o777 == 0o600


def test_peek_never_moves_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    jsonl.append(path, rec(0))
    assert [r["id"] for _, _, r in jsonl.peek_new(path, cursor).records] == ["m0"]
    assert not cursor.exists()  # a peek creates nothing
    jsonl.read_new(path, cursor)
    jsonl.append(path, rec(1))
    before = snapshot_tree(cursor)
    for _ in range(2):
        assert [r["id"] for _, _, r in jsonl.peek_new(path, cursor).records] == ["m1"]
    assert snapshot_tree(cursor) == before
    assert [r["id"] for _, _, r in jsonl.read_new(path, cursor).records] == ["m1"]


def test_read_new_with_nothing_new_does_not_touch_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "box.jsonl"
    cursor = tmp_path / ".box.cursor"
    jsonl.append(path, rec(0))
    jsonl.read_new(path, cursor)
    before = snapshot_tree(tmp_path)
    assert jsonl.read_new(path, cursor).records == []
    assert snapshot_tree(tmp_path) == before


def test_an_appender_keeps_its_descriptor_and_still_repairs_a_foreign_fragment(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    with jsonl.Appender(path) as app:
        assert app.append({"n": 1}) == 0
        second = app.append({"n": 2})
        with open(path, "ab") as other:  # another writer died mid-line
            other.write(b'{"n": 3, "cut')
        third = app.append({"n": 4})
    data = path.read_bytes()
    assert data.splitlines() == [b'{"n":1}', b'{"n":2}', b'{"n": 3, "cut', b'{"n":4}']
    assert second == len(b'{"n":1}\n')
    assert data[third:] == b'{"n":4}\n'
    chunk = jsonl.read_from(path)
    assert [r["n"] for _, _, r in chunk.records] == [1, 2, 4] and chunk.bad == 1
    assert app.fd == -1  # closed by the context manager


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(max_size=4), _JSON_VALUES, max_size=4),
    st.sampled_from([(",", ":"), (", ", ": ")]),
    st.booleans(),
    st.binary(max_size=3),
    st.integers(min_value=0, max_value=40),
)
def test_loads_line_is_the_strict_parse_and_json_loads_on_what_omp_writes(
    obj: dict[str, Any], seps: tuple[str, str], ascii_only: bool, junk: bytes, at: int
) -> None:
    """The fast path judges every line as the strict parse does (values and errors alike), and
    that parse reads what `json.loads` reads, but NaN, Infinity and numbers past a double."""
    line = json.dumps(obj, separators=seps, ensure_ascii=ascii_only).encode()
    for raw in (line, line[:at] + junk + line[at:], b" " + line, line + junk):
        try:
            want: Any = ("ok", strictjson.loads(raw))
        except ValueError as exc:
            want = ("error", type(exc), str(exc))
        try:
            got: Any = ("ok", jsonl.loads_line(raw))
        except ValueError as exc:
            got = ("error", type(exc), str(exc))
        assert repr(got) == repr(want)  # repr: NaN equals itself there
        try:
            loose: Any = json.loads(raw)
        except ValueError:
            continue
        if want[0] == "ok":
            assert repr(want[1]) == repr(loose)
        else:
            assert any(w in str(want[2]) for w in ("NaN", "Infinity", "beyond")), want
