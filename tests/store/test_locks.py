"""The one lock helper: blocking, non-blocking and timed flocks; exclusive creates."""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from omp.errors import OmpError
from omp.store import locks
from tests.helpers import isolate


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


def test_flocked_creates_a_private_lock_file_and_excludes_another_holder(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with locks.flocked(path) as taken:
        assert taken
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with locks.flocked(path, False) as again:  # another open file description
            assert not again
    with locks.flocked(path, False) as after:  # closing released it
        assert after


def test_a_timeout_waits_that_long_and_no_longer(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with locks.flocked(path):
        t = time.monotonic()
        with locks.flocked(path, 0.2, poll=0.01) as taken:
            waited = time.monotonic() - t
    assert not taken
    assert waited >= 0.2


def test_holding_releases_and_keeps_the_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "x"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with locks.holding(fd) as taken:
            assert taken
            with locks.flocked(path, False) as other:
                assert not other
        with locks.flocked(path, False) as other:
            assert other
        os.fstat(fd)  # still open
    finally:
        os.close(fd)


def test_an_error_other_than_busy_is_raised(mocker: MockerFixture, tmp_path: Path) -> None:
    mocker.patch("fcntl.flock", side_effect=OSError(errno.ENOLCK, "no locks"))
    with pytest.raises(OSError) as exc, locks.flocked(tmp_path / "x.lock", 1.0):
        pass
    assert exc.value.errno == errno.ENOLCK


@pytest.mark.parametrize("whole", [False, True])
def test_create_exclusive_once(tmp_path: Path, whole: bool) -> None:
    path = tmp_path / "d" / "claim.lock"
    path.parent.mkdir()
    assert locks.create_exclusive(path, b"first\n", whole=whole)
    assert not locks.create_exclusive(path, b"second\n", whole=whole)
    assert path.read_bytes() == b"first\n"
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert os.listdir(path.parent) == ["claim.lock"]  # no temp left beside it


@pytest.mark.parametrize("whole", [False, True])
def test_create_exclusive_leaves_nothing_on_a_failed_write(
    mocker: MockerFixture, tmp_path: Path, whole: bool
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    mocker.patch("os.write", side_effect=OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(OmpError) as exc:
        locks.create_exclusive(d / "claim.lock", b"x", whole=whole)
    assert exc.value.code == "storage_error"
    assert os.listdir(d) == []
