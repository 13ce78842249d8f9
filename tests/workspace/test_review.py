"""What a worker's branch holds since its base: commits, files, diffstat, diff, dirty paths,
merged or not. Read-only."""

from __future__ import annotations

from pathlib import Path

from omp.workspace import create, review
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, write


def _worker(repo: Path, name: str = "w1") -> tuple[Path, str, str]:
    base = g(repo, "rev-parse", "HEAD")
    path = create.worktree_dir(repo, "t", name)
    with create.provisioned(repo, path, f"omp/t/{name}", base):
        pass
    return path, f"omp/t/{name}", base


def test_a_fresh_worker_has_nothing(repo: Path) -> None:
    path, branch, base = _worker(repo)
    got = review.inspect_branch(repo, branch, base, worktree=path, target="main")
    assert got.head == base and got.commits == [] and got.files == [] and got.dirty == []
    assert got.stat == review.DiffStat(0, 0, 0)
    assert got.merged is True  # nothing to merge is merged


def test_commits_files_stat_dirty_and_merged(repo: Path) -> None:
    path, branch, base = _worker(repo)
    one = commit_file(path, "src/app.py", "x = 2\ny = 3\n", "change app")
    commit_file(path, "data.bin", "\0\1\2")
    two = g(path, "rev-parse", "HEAD")
    write(path / "README.md", "uncommitted\n")
    write(path / "scratch.txt", "new\n")
    before = checkout_snapshot(repo)
    got = review.inspect_branch(repo, branch, base, worktree=path, target="main")
    assert got.head == two
    assert [c.sha for c in got.commits] == [two, one]
    assert [c.subject for c in got.commits] == ["edit data.bin", "change app"]
    assert got.files == [
        review.FileChange("data.bin", None, None),
        review.FileChange("src/app.py", 2, 1),
    ]
    assert got.stat == review.DiffStat(2, 2, 1) and got.stat.line() == "2 files, +2 -1"
    assert got.dirty == ["README.md", "scratch.txt"]
    assert got.merged is False
    text = review.diff_text(repo, base, branch)
    assert "+y = 3" in text and "GIT binary patch" in text
    assert "src/app.py" in review.diff_text(repo, base, branch, stat=True)
    assert checkout_snapshot(repo) == before  # reading wrote nothing
    assert review.worktree_head(path) == two


def test_merged_counts_a_fast_forward_and_a_squash(repo: Path) -> None:
    path, branch, _ = _worker(repo)
    commit_file(path, "a.txt", "a\n")
    commit_file(path, "b.txt", "b\n")
    assert not review.merged_into(repo, branch, "main")
    # squashed by hand: one commit on main with the same content, not an ancestor
    g(repo, "merge", "-q", "--squash", branch)
    g(repo, "commit", "-q", "-m", "squashed")
    assert review.merged_into(repo, branch, "main")
    commit_file(repo, "c.txt", "main moved on\n")
    assert review.merged_into(repo, branch, "main")
    commit_file(path, "d.txt", "more work\n")
    assert not review.merged_into(repo, branch, "main")
    assert not review.merged_into(repo, "no-such-branch", "main")


def test_a_deleted_branch_reports_no_head(repo: Path) -> None:
    got = review.inspect_branch(repo, "omp/t/gone", g(repo, "rev-parse", "HEAD"))
    assert got.head is None and got.commits == [] and got.merged is None
