"""`.omp/worktrees/` and the `.gitignore` files that keep it out of the leader's repository:
written by the store's one writer (`omp.store.fs.write_gitignore`), required here (a worktree
git could see would be swept into the leader's commits), where the state tree's is best-effort."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.store.fs import FILE_MODE, IGNORE_ALL
from omp.workspace.create import IGNORE_WORKTREES, ensure_worktrees_dir
from tests.helpers import failing_writes, umask


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    with umask(0o022):
        yield


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_omp_dir_and_the_worktrees_dir_each_get_one(tmp_path: Path) -> None:
    where = ensure_worktrees_dir(tmp_path)
    assert where == tmp_path / ".omp" / "worktrees"
    # `.omp/`'s is the state tree's text, whichever of the two wrote it
    assert (tmp_path / ".omp" / ".gitignore").read_bytes() == IGNORE_ALL
    assert (where / ".gitignore").read_bytes() == IGNORE_WORKTREES
    assert _mode(tmp_path / ".omp" / ".gitignore") == _mode(where / ".gitignore") == FILE_MODE
    before = (where / ".gitignore").stat().st_mtime_ns
    assert ensure_worktrees_dir(tmp_path) == where  # again: nothing rewritten
    assert (where / ".gitignore").stat().st_mtime_ns == before


def test_an_omp_dir_the_user_made_is_left_without_one(tmp_path: Path) -> None:
    (tmp_path / ".omp").mkdir()
    (tmp_path / ".omp" / "config.toml").write_text("[team]\n")
    where = ensure_worktrees_dir(tmp_path)
    assert not (tmp_path / ".omp" / ".gitignore").exists()  # their settings stay visible
    assert (where / ".gitignore").read_bytes() == IGNORE_WORKTREES


def test_the_omp_dirs_is_written_again_when_the_state_tree_could_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = failing_writes(monkeypatch, times=1)  # the state tree's own try fails, swallowed
    ensure_worktrees_dir(tmp_path)
    assert len(calls) == 3
    assert (tmp_path / ".omp" / ".gitignore").read_bytes() == IGNORE_ALL
    assert (tmp_path / ".omp" / "worktrees" / ".gitignore").read_bytes() == IGNORE_WORKTREES


@pytest.mark.parametrize("user_made", [False, True])
def test_a_gitignore_that_cannot_be_written_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_made: bool
) -> None:
    if user_made:
        (tmp_path / ".omp").mkdir()
    failing_writes(monkeypatch, times=99)
    with pytest.raises(OmpError) as err:
        ensure_worktrees_dir(tmp_path)
    assert err.value.code == "storage_error"
    failed = tmp_path / ".omp" / ("worktrees" if user_made else "") / ".gitignore"
    assert err.value.detail["path"] == str(failed)
    assert not os.path.lexists(failed)  # nothing half-written left to pass for the whole file


def test_a_refused_call_leaves_nothing_and_the_next_one_writes_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk refuses the worktrees directory with nothing left of it; once there is room,
    the next call writes `.omp/.gitignore` too (the `.omp/` is still omp's own)."""
    calls = failing_writes(monkeypatch, times=99)
    with pytest.raises(OmpError):
        ensure_worktrees_dir(tmp_path)
    assert not os.path.lexists(tmp_path / ".omp")
    calls[:] = [0] * 99  # the disk has room again: writes go through
    where = ensure_worktrees_dir(tmp_path)
    assert (tmp_path / ".omp" / ".gitignore").read_bytes() == IGNORE_ALL
    assert (where / ".gitignore").read_bytes() == IGNORE_WORKTREES
    # what a refused call could not clean up (an empty worktrees/ alone) still counts as omp's
    other = tmp_path / "other"
    (other / ".omp" / "worktrees").mkdir(parents=True)
    ensure_worktrees_dir(other)
    assert (other / ".omp" / ".gitignore").read_bytes() == IGNORE_ALL
