"""Removing a worker's worktree and branch: only when nothing would be lost, or forced with a
list of what was thrown away; vanished worktrees are pruned."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.workspace import create, merge, remove
from omp.workspace.repo import worktrees
from tests.workspace.gitrepo import commit_file, g, write

# Real git in temporary repositories: dozens of git processes a test (the quick loop skips them).
pytestmark = pytest.mark.slow


def _worker(repo: Path, name: str = "w1") -> Path:
    path = create.worktree_dir(repo, "t", name)
    with create.provisioned(repo, path, f"omp/t/{name}", "HEAD"):
        pass
    return path


def _gone(repo: Path, path: Path, branch: str) -> None:
    assert path not in [e.path for e in worktrees(repo)]
    assert not path.exists()
    assert g(repo, "branch", "--list", branch) == ""


def test_a_worker_without_commits_is_removed(repo: Path) -> None:
    path = _worker(repo)
    done = remove.remove_worktree(repo, path, "omp/t/w1")
    assert done.worktree_removed and done.branch_removed and not done.lost
    _gone(repo, path, "omp/t/w1")


def test_a_merged_worker_is_removed(repo: Path) -> None:
    path = _worker(repo)
    commit_file(path, "w.txt", "w\n")
    write(path / "build.log", "ignored output\n")
    write(path / ".gitignore", "*.log\n")
    g(path, "add", ".gitignore")
    g(path, "commit", "-qm", "ignore logs")
    assert merge.merge_branch(repo, "omp/t/w1", squash=True, message="w").status == "squashed"
    done = remove.remove_worktree(repo, path, "omp/t/w1")
    assert done.branch_removed and not done.lost
    _gone(repo, path, "omp/t/w1")


def test_unmerged_commits_and_uncommitted_files_are_refused_and_listed(repo: Path) -> None:
    path = _worker(repo)
    sha = commit_file(path, "work.txt", "work\n", "the only copy of this work")
    write(path / "README.md", "edited\n")
    write(path / "draft.txt", "draft\n")
    with pytest.raises(OmpError) as err:
        remove.remove_worktree(repo, path, "omp/t/w1")
    assert err.value.code == "unmerged_work"
    assert err.value.detail["commits"] == [{"sha": sha, "subject": "the only copy of this work"}]
    assert err.value.detail["files"] == ["README.md", "draft.txt"]
    assert "1 unmerged commit" in err.value.message and "2 uncommitted file" in err.value.message
    assert (path / "draft.txt").exists() and g(repo, "rev-parse", "omp/t/w1") == sha
    # keeping the branch: only the uncommitted files are at risk
    with pytest.raises(OmpError) as err:
        remove.remove_worktree(repo, path, "omp/t/w1", keep_branch=True)
    assert err.value.detail["commits"] == [] and err.value.detail["files"] == [
        "README.md",
        "draft.txt",
    ]


def test_force_removes_and_lists_what_was_thrown_away(repo: Path) -> None:
    path = _worker(repo)
    sha = commit_file(path, "work.txt", "work\n", "lost work")
    write(path / "draft.txt", "draft\n")
    done = remove.remove_worktree(repo, path, "omp/t/w1", force=True)
    assert [c.sha for c in done.lost.commits] == [sha]
    assert done.lost.files == ["draft.txt"]
    assert done.lost.to_json()["commits"] == [{"sha": sha, "subject": "lost work"}]
    _gone(repo, path, "omp/t/w1")


def test_keep_branch_removes_only_the_worktree(repo: Path) -> None:
    path = _worker(repo)
    sha = commit_file(path, "work.txt", "work\n")
    done = remove.remove_worktree(repo, path, "omp/t/w1", keep_branch=True)
    assert done.worktree_removed and not done.branch_removed
    assert not path.exists() and g(repo, "rev-parse", "omp/t/w1") == sha


def test_a_branch_checked_out_elsewhere_is_not_deleted(repo: Path, tmp_path: Path) -> None:
    path = _worker(repo)
    remove.remove_worktree(repo, path, "omp/t/w1", keep_branch=True)
    g(repo, "worktree", "add", "-q", str(tmp_path / "mine"), "omp/t/w1")
    with pytest.raises(OmpError) as err:
        remove.remove_worktree(repo, path, "omp/t/w1")
    assert err.value.code == "branch_checked_out"
    assert g(repo, "branch", "--list", "omp/t/w1")


def test_a_vanished_worktree_is_pruned_and_its_branch_kept(repo: Path) -> None:
    path = _worker(repo)
    sha = commit_file(path, "w.txt", "w\n")
    shutil.rmtree(path)
    assert remove.prune(repo) == [path]
    assert [e.path for e in worktrees(repo)] == [repo]
    assert g(repo, "rev-parse", "omp/t/w1") == sha
    assert remove.prune(repo) == []
    # removing it later refuses for the unmerged commit, and forced deletes the branch
    with pytest.raises(OmpError):
        remove.remove_worktree(repo, path, "omp/t/w1")
    done = remove.remove_worktree(repo, path, "omp/t/w1", force=True)
    assert not done.worktree_removed and done.branch_removed


def test_against_another_target(repo: Path) -> None:
    g(repo, "branch", "release")
    path = _worker(repo)
    commit_file(path, "w.txt", "w\n")
    merge.merge_branch(repo, "omp/t/w1")  # into main, not release
    with pytest.raises(OmpError):
        remove.remove_worktree(repo, path, "omp/t/w1", target="release")
    assert remove.remove_worktree(repo, path, "omp/t/w1", target="main").branch_removed
