"""Private, fail-closed file access: 0700/0600, symlinks and foreign owners refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from omp.errors import OmpError
from omp.store import fs
from tests.helpers import is_root, isolate, make_foreign, snapshot_tree, umask

needs_root = pytest.mark.skipif(not is_root(), reason="chown to another user needs root")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def _mode(path: Path) -> int:
    return os.lstat(path).st_mode & 0o777


# ---- directories ------------------------------------------------------------------------------


def test_ensure_dir_creates_every_level_0700_even_with_a_permissive_umask(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c"
    with umask(0):
        assert fs.ensure_dir(target, base=tmp_path) == target
    for d in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert d.is_dir()
        assert _mode(d) == 0o700


def test_ensure_dir_is_idempotent(tmp_path: Path) -> None:
    target = tmp_path / "x" / "y"
    fs.ensure_dir(target, base=tmp_path)
    before = snapshot_tree(tmp_path / "x")
    fs.ensure_dir(target, base=tmp_path)
    assert snapshot_tree(tmp_path / "x") == before


def test_ensure_dir_refuses_a_symlinked_component_and_creates_nothing_behind_it(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "link")
    with pytest.raises(OmpError) as exc:
        fs.ensure_dir(tmp_path / "link" / "sub", base=tmp_path)
    assert exc.value.code == "unsafe_path"
    assert "symlink" in exc.value.message
    assert exc.value.detail["path"] == str(tmp_path / "link")
    assert list(elsewhere.iterdir()) == []


def test_ensure_dir_refuses_a_file_where_a_dir_should_be(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(OmpError) as exc:
        fs.ensure_dir(tmp_path / "f" / "sub", base=tmp_path)
    assert exc.value.code == "unsafe_path"
    assert (tmp_path / "f").read_text() == "x"


@needs_root
def test_ensure_dir_refuses_a_foreign_owned_dir(tmp_path: Path) -> None:
    d = tmp_path / "theirs"
    d.mkdir()
    make_foreign(d)
    with pytest.raises(OmpError) as exc:
        fs.ensure_dir(d / "sub", base=tmp_path)
    assert exc.value.code == "unsafe_path"
    assert "owned by uid" in exc.value.message
    assert not (d / "sub").exists()


def test_foreign_owner_detected_through_euid(tmp_path: Path, mocker: MockerFixture) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    mocker.patch("omp.store.fs.os.geteuid", return_value=os.geteuid() + 1)
    with pytest.raises(OmpError) as exc:
        fs.check_entry(d, want_dir=True)
    assert exc.value.code == "unsafe_path"


def test_check_entry_reports_missing_and_present(tmp_path: Path) -> None:
    assert fs.check_entry(tmp_path / "nope", want_dir=True) is False
    assert fs.check_entry(tmp_path, want_dir=True) is True
    (tmp_path / "f").write_text("")
    assert fs.check_entry(tmp_path / "f", want_dir=False) is True
    with pytest.raises(OmpError):
        fs.check_entry(tmp_path / "f", want_dir=True)
    with pytest.raises(OmpError):
        fs.check_entry(tmp_path, want_dir=False)


def test_check_entry_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    with pytest.raises(OmpError) as exc:
        fs.check_entry(tmp_path / "dangling", want_dir=False)
    assert exc.value.code == "unsafe_path"


# ---- files ------------------------------------------------------------------------------------


def test_open_file_creates_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    with umask(0):
        fd = fs.open_file(tmp_path / "f", os.O_WRONLY, create=True)
    os.close(fd)
    assert _mode(tmp_path / "f") == 0o600


def test_open_file_does_not_create_unless_asked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open_file(tmp_path / "f", os.O_RDONLY)
    assert not (tmp_path / "f").exists()


def test_open_file_refuses_a_symlink_and_leaves_the_target_alone(tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    target.write_bytes(b"precious\n")
    before = snapshot_tree(target)
    os.symlink(target, tmp_path / "link")
    for flags, create in ((os.O_RDWR | os.O_APPEND, True), (os.O_RDONLY, False)):
        with pytest.raises(OmpError) as exc:
            fs.open_file(tmp_path / "link", flags, create=create)
        assert exc.value.code == "unsafe_path"
    assert snapshot_tree(target) == before


def test_open_file_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(OmpError) as exc:
        fs.open_file(tmp_path / "d", os.O_RDONLY)
    assert exc.value.code == "unsafe_path"


@needs_root
def test_open_file_refuses_a_foreign_owned_file(tmp_path: Path) -> None:
    f = tmp_path / "theirs.jsonl"
    f.write_bytes(b"{}\n")
    make_foreign(f)
    before = snapshot_tree(f)
    with pytest.raises(OmpError) as exc:
        fs.open_file(f, os.O_RDWR | os.O_APPEND, create=True)
    assert exc.value.code == "unsafe_path"
    assert snapshot_tree(f) == before


def test_read_bytes_and_read_json(tmp_path: Path) -> None:
    assert fs.read_bytes(tmp_path / "missing") is None
    assert fs.read_json(tmp_path / "missing") is None
    for bad in (
        b"{nope",
        b"",
        b'{"a": NaN}',
        b'{"a": [Infinity]}',
        b'{"a": -Infinity}',
        b'{"a": 1e999}',
        b'{"a": ' + b"9" * 5000 + b"}",
        b'{"a": "\xff"}',
        b"[" * 65 + b"]" * 65,
        b"[" * 100_000 + b"]" * 100_000,
    ):
        (tmp_path / "bad.json").write_bytes(bad)
        with pytest.raises(OmpError) as exc:
            fs.read_json(tmp_path / "bad.json")
        assert exc.value.code == "corrupt_state", bad[:40]
        assert exc.value.detail["file"] == str(tmp_path / "bad.json")
        assert (tmp_path / "bad.json").read_bytes() == bad
    (tmp_path / "deep.json").write_bytes(b"[" * 64 + b"]" * 64)  # the deepest taken
    assert fs.read_json(tmp_path / "deep.json") is not None
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf{"a": 1.5e308}')  # as json.loads took it
    assert fs.read_json(tmp_path / "bom.json") == {"a": 1.5e308}
    (tmp_path / "ok.json").write_text('{"a": [1, "\u00e9"]}')
    assert fs.read_json(tmp_path / "ok.json") == {"a": [1, "\u00e9"]}
    big = os.urandom(3 << 20)
    (tmp_path / "big").write_bytes(big)
    assert fs.read_bytes(tmp_path / "big") == big


def test_read_bytes_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("secret")
    os.symlink(tmp_path / "real", tmp_path / "link")
    with pytest.raises(OmpError) as exc:
        fs.read_bytes(tmp_path / "link")
    assert exc.value.code == "unsafe_path"


# ---- atomic writes ----------------------------------------------------------------------------


def test_write_atomic_writes_0600_and_replaces_the_inode(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"old")
    os.link(path, tmp_path / "old-view")  # a second name for the old inode
    with umask(0):
        fs.write_atomic(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    # written beside and renamed over, never in place: the old inode still holds the old bytes
    assert (tmp_path / "old-view").read_bytes() == b"old"
    assert _mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "old-view", "state.json"]


def test_write_json_atomic_round_trips(tmp_path: Path) -> None:
    fs.write_json_atomic(tmp_path / "a.json", {"k": "\u2713", "n": [1, 2]})
    text = (tmp_path / "a.json").read_text()
    assert text.endswith("\n") and "\u2713" in text
    assert fs.read_json(tmp_path / "a.json") == {"k": "\u2713", "n": [1, 2]}
    fs.write_json_atomic(tmp_path / "b.json", {"k": 1}, pretty=False)
    assert (tmp_path / "b.json").read_text() == '{"k": 1}\n'


def test_write_atomic_refuses_a_symlink_and_leaves_the_target_alone(tmp_path: Path) -> None:
    target = tmp_path / "outside.json"
    target.write_text("keep")
    before = snapshot_tree(target)
    os.symlink(target, tmp_path / "link.json")
    with pytest.raises(OmpError) as exc:
        fs.write_atomic(tmp_path / "link.json", b"evil")
    assert exc.value.code == "unsafe_path"
    assert snapshot_tree(target) == before
    assert os.path.islink(tmp_path / "link.json")


def test_write_atomic_failure_leaves_the_old_file_and_no_temp(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"old")
    mocker.patch("omp.store.fs.os.replace", side_effect=OSError(28, "No space left on device"))
    with pytest.raises(OmpError) as exc:
        fs.write_atomic(path, b"new")
    assert exc.value.code == "storage_error"
    assert "No space left" in exc.value.message
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "state.json"]
