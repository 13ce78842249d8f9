"""Repository facts and uncommitted changes, read without writing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.workspace import repo as facts
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, make_repo, write


def test_has_commit_decides_the_default_workspace(repo: Path, tmp_path: Path) -> None:
    assert facts.has_commit(repo)
    assert facts.has_commit(repo / "src")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not facts.has_commit(plain)
    empty = tmp_path / "empty"
    empty.mkdir()
    g(empty, "init", "-q")
    assert not facts.has_commit(empty)
    assert not facts.has_commit(repo / ".git")  # inside the git directory: no work tree
    assert not facts.has_commit(tmp_path / "missing")


def test_top_head_branch_and_detached(repo: Path) -> None:
    assert facts.toplevel(repo / "src") == repo
    sha = g(repo, "rev-parse", "HEAD")
    assert facts.head(repo) == sha
    assert facts.current_branch(repo) == "main"
    assert facts.common_dir(repo) == (repo / ".git").resolve()
    assert facts.resolve(repo, "main") == sha
    assert facts.resolve(repo, "nope") is None
    assert facts.resolve(repo, "--all") is None
    g(repo, "checkout", "-q", "--detach")
    assert facts.current_branch(repo) is None


def test_not_a_repo(tmp_path: Path) -> None:
    with pytest.raises(OmpError) as err:
        facts.toplevel(tmp_path)
    assert err.value.code == "not_a_git_repo"


def test_worktrees_are_parsed_from_the_porcelain_listing(repo: Path, tmp_path: Path) -> None:
    odd = tmp_path / "wt with space"
    g(repo, "worktree", "add", "-q", "--lock", "--reason", "busy now", "-b", "w1", str(odd))
    g(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "gone"))
    (tmp_path / "gone" / ".git").unlink()
    import shutil

    shutil.rmtree(tmp_path / "gone")
    entries = facts.worktrees(repo)
    assert entries[0].path == repo  # the main checkout first
    by_path = {e.path: e for e in entries}
    assert set(by_path) == {repo, odd, tmp_path / "gone"}
    main, locked, gone = by_path[repo], by_path[odd], by_path[tmp_path / "gone"]
    assert main.branch == "main" and main.locked is None and not main.prunable
    assert locked.branch == "w1" and locked.locked == "busy now"
    assert gone.branch is None and gone.prunable
    assert facts.checkout_of(repo, "w1") == odd
    assert facts.checkout_of(repo, "main") == repo
    assert facts.checkout_of(repo, "nope") is None


def test_changes_lists_tracked_and_untracked_not_ignored(repo: Path) -> None:
    assert not facts.changes(repo)
    write(repo / ".gitignore", "build/\n")
    g(repo, "add", ".gitignore")
    g(repo, "commit", "-qm", "ignore")
    write(repo / "README.md", "changed\n")
    write(repo / "new file.txt", "n\n")
    write(repo / "we\nird.txt", "n\n")
    write(repo / "build/out.o", "x")
    write(repo / "staged.txt", "s\n")
    g(repo, "add", "staged.txt")
    g(repo, "rm", "-q", "src/app.py")
    found = facts.changes(repo)
    assert sorted(found.tracked) == ["README.md", "src/app.py", "staged.txt"]
    assert sorted(found.untracked) == ["new file.txt", "we\nird.txt"]
    assert facts.changes(repo, untracked=False).untracked == []


def test_changes_sees_new_files_even_when_config_hides_them(repo: Path) -> None:
    g(repo, "config", "status.showUntrackedFiles", "no")
    write(repo / "agent-made.py", "x\n")
    assert facts.changes(repo).untracked == ["agent-made.py"]


def test_looking_writes_nothing(repo: Path) -> None:
    write(repo / "README.md", "changed\n")
    import os
    import time

    os.utime(repo / "README.md", (time.time() - 100, time.time() - 100))  # stale index stat
    before = checkout_snapshot(repo)
    facts.changes(repo)
    facts.worktrees(repo)
    facts.has_commit(repo)
    assert checkout_snapshot(repo) == before


def test_commits_since_a_base_newest_first(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    first = commit_file(repo, "a.txt", "a", "first: with\ttab")
    second = commit_file(repo, "b.txt", "b", "second")
    assert facts.commits(repo, base, "HEAD") == [
        facts.Commit(second, "second"),
        facts.Commit(first, "first: with\ttab"),
    ]
    assert facts.commits(repo, "HEAD", "HEAD") == []
    other = make_repo(repo.parent / "other")
    assert facts.commits(other, "HEAD", "HEAD") == []
