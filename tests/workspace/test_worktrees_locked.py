"""Parallel checks of one repository each add and remove a scratch checkout: git does not lock
its list of worktrees, so without omp's lock some adds fail on half-made or pruned entries
("could not open .git/worktrees/tree/gitdir"). With it, every one of many concurrent scratch
checkouts is made, checked out at its commit, and removed."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from omp.workspace import scratch
from omp.workspace.repo import WORKTREES_LOCK, common_dir, worktrees
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = pytest.mark.slow  # real git, dozens of processes


def test_many_scratch_checkouts_at_once_all_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "proj")
    head = g(repo, "rev-parse", "HEAD")

    def one(_: int) -> str:
        with scratch.checkout(repo, head) as where:
            return g(where, "rev-parse", "HEAD")

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(192)))
    assert got == [head] * 192
    assert [w.path for w in worktrees(repo)] == [repo.resolve()]  # nothing left registered
    assert (common_dir(repo) / WORKTREES_LOCK).exists()
