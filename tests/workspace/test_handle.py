"""`handle.Repo`, one command's door to git: what a merge asks again and again is asked once,
and a write never leaves a stale fact behind."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from omp.workspace import create
from omp.workspace.handle import Repo
from omp.workspace.merge import merge_branches
from tests.workspace.gitrepo import commit_file, g

pytestmark = pytest.mark.slow  # real git


def _counting_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that writes its arguments to a log, then runs the real one."""
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "git-calls.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "git"
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    return log


def _workers(repo: Path, n: int) -> list[str]:
    base = g(repo, "rev-parse", "HEAD")
    out = []
    for i in range(1, n + 1):
        path = create.worktree_dir(repo, "t", f"w{i}")
        with create.provisioned(repo, path, f"omp/t/w{i}", base):
            pass
        commit_file(path, f"w{i}.txt", f"{i}\n")
        out.append(f"omp/t/w{i}")
    return out


def test_a_merge_of_three_branches_asks_the_runs_facts_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branches = _workers(repo, 3)
    log = _counting_git(tmp_path, monkeypatch)
    results = merge_branches(Repo(repo), branches)
    assert [r.status for r in results] == ["fast_forward", "merged", "merged"]
    calls = log.read_text().splitlines()
    once = ["--version", "rev-parse --git-common-dir", "config --type=bool --get commit.gpgsign",
            "rev-parse --git-path hooks"]  # fmt: skip
    for words in once:
        assert sum(c.startswith(words) for c in calls) <= 1, (words, calls)
    # the list once, then once more right before each move (a fresh look)
    assert sum(c.startswith("worktree list") for c in calls) == 1 + 3
    # the leader's checkout: one status before the first branch, then one before each move
    assert sum(c.startswith("status") for c in calls) == 1 + 3
    assert len(calls) <= 40, calls  # 60 before the handle


def test_a_move_is_remembered_and_an_outside_move_is_seen_when_asked_afresh(repo: Path) -> None:
    r = Repo(repo)
    old = r.resolve("refs/heads/main")
    new = commit_file(repo, "x.txt", "x\n")  # the user commits behind the handle's back
    assert r.resolve("refs/heads/main") == old  # kept: this command's view
    assert r.resolve("refs/heads/main", fresh=True) == new  # the checks before a move ask again
    r.moved("main", "f" * 40)
    assert r.resolve("refs/heads/main") == "f" * 40
