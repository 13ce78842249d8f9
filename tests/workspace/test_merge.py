"""Merging workers' branches: fast-forward, merge commits, squash, conflicts that touch nothing,
a dirty leader refused, a check of the merged result before the target moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.workspace import create, merge, review
from omp.workspace.create import Provision
from omp.workspace.merge import Verify, merge_branch, merge_branches
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, write

# Real git in temporary repositories: dozens of git processes a test (the quick loop skips them).
pytestmark = pytest.mark.slow


def _worker(repo: Path, name: str, base: str | None = None) -> Path:
    path = create.worktree_dir(repo, "t", name)
    with create.provisioned(repo, path, f"omp/t/{name}", base or g(repo, "rev-parse", "HEAD")):
        pass
    return path


def test_three_workers_with_distinct_files_all_reach_the_leaders_branch(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    for name in ("w1", "w2", "w3"):
        commit_file(_worker(repo, name, base), f"{name}.txt", f"by {name}\n")
    results = merge_branches(repo, ["omp/t/w1", "omp/t/w2", "omp/t/w3"])
    assert [r.status for r in results] == ["fast_forward", "merged", "merged"]
    assert all(r.moved and r.checkout == repo for r in results)
    head = g(repo, "rev-parse", "main")
    assert results[-1].commit == head
    for name in ("w1", "w2", "w3"):
        assert (repo / f"{name}.txt").read_text() == f"by {name}\n"  # the checkout moved too
        assert review.merged_into(repo, f"omp/t/{name}", "main")
    assert g(repo, "status", "--porcelain") == ""
    assert g(repo, "log", "-1", "--format=%P", head).split() == [
        results[1].commit,
        g(repo, "rev-parse", "omp/t/w3"),
    ]
    assert "omp merge omp/t/w3" in g(repo, "reflog", "-1", "main")
    # again: everything is merged already
    again = merge_branches(repo, ["omp/t/w1", "omp/t/w2", "omp/t/w3"])
    assert [r.status for r in again] == ["up_to_date"] * 3 and not any(r.moved for r in again)
    assert g(repo, "rev-parse", "main") == head


def test_the_same_line_edited_twice_is_a_conflict_that_touches_nothing(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    w1, w2 = _worker(repo, "w1", base), _worker(repo, "w2", base)
    commit_file(w1, "src/app.py", "x = 'one'\n")
    commit_file(w2, "src/app.py", "x = 'two'\n")
    commit_file(w2, "other.txt", "fine\n")
    first = merge_branch(repo, "omp/t/w1")
    assert first.status == "fast_forward"
    write(repo / "untracked-note.txt", "the leader's own\n")  # untracked work does not block
    before = checkout_snapshot(repo)
    second = merge_branch(repo, "omp/t/w2")
    assert second.status == "conflict" and not second.moved
    assert second.conflicts == ["src/app.py"]
    assert second.commit is None and second.previous == first.commit
    assert checkout_snapshot(repo) == before  # byte for byte, index and refs included
    assert (repo / "src" / "app.py").read_text() == "x = 'one'\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()


def test_a_conflict_does_not_stop_the_others_unless_asked(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    w1, w2, w3 = (_worker(repo, n, base) for n in ("w1", "w2", "w3"))
    commit_file(w1, "README.md", "one\n")
    commit_file(w2, "README.md", "two\n")
    commit_file(w3, "three.txt", "3\n")
    branches = ["omp/t/w1", "omp/t/w2", "omp/t/w3"]
    dry = merge_branches(repo, branches, dry_run=True)
    assert [r.status for r in dry] == ["fast_forward", "fast_forward", "fast_forward"]
    assert g(repo, "rev-parse", "main") == base  # a dry run moves nothing
    stopped = merge_branches(repo, branches, stop_on_conflict=True)
    assert [r.status for r in stopped] == ["fast_forward", "conflict"]
    assert not (repo / "three.txt").exists()
    rest = merge_branches(repo, branches)
    assert [r.status for r in rest] == ["up_to_date", "conflict", "merged"]
    assert (repo / "three.txt").read_text() == "3\n"


def test_a_dirty_leader_is_refused_naming_the_files(repo: Path) -> None:
    commit_file(_worker(repo, "w1"), "w1.txt", "w1\n")
    write(repo / "README.md", "the user's unsaved work\n")
    write(repo / "src" / "app.py", "x = 'staged'\n")
    g(repo, "add", "src/app.py")
    before = checkout_snapshot(repo)
    for dry in (False, True):
        with pytest.raises(OmpError) as err:
            merge_branch(repo, "omp/t/w1", dry_run=dry)
        assert err.value.code == "leader_dirty"
        assert err.value.detail["files"] == ["README.md", "src/app.py"]
        assert "README.md" in err.value.message
    assert checkout_snapshot(repo) == before
    assert not (repo / "w1.txt").exists()


def test_into_a_branch_nobody_has_checked_out(repo: Path) -> None:
    g(repo, "branch", "release")
    write(repo / "README.md", "dirty, but not the target's checkout\n")
    before = checkout_snapshot(repo)
    commit_file(_worker(repo, "w1"), "w1.txt", "w1\n")
    res = merge_branch(repo, "omp/t/w1", into="release", squash=True, message="Add w1\n\nbody")
    assert res.status == "squashed" and res.checkout is None
    assert g(repo, "rev-parse", "release") == res.commit
    assert g(repo, "log", "-1", "--format=%B", "release") == "Add w1\n\nbody"
    assert checkout_snapshot(repo)["files"] == before["files"]
    assert checkout_snapshot(repo)["status"] == before["status"]


def test_squash_makes_one_commit_with_the_callers_message(repo: Path) -> None:
    old = g(repo, "rev-parse", "main")
    wt = _worker(repo, "w1")
    commit_file(wt, "a.txt", "a\n")
    commit_file(wt, "b.txt", "b\n")
    res = merge_branch(repo, "omp/t/w1", squash=True, message="Task 3: add a and b\n\nDone.")
    assert res.status == "squashed"
    assert g(repo, "rev-list", "--count", f"{old}..main") == "1"
    assert g(repo, "log", "-1", "--format=%P", "main") == old  # one parent
    assert g(repo, "log", "-1", "--format=%s", "main") == "Task 3: add a and b"
    assert (repo / "a.txt").exists() and (repo / "b.txt").exists()
    assert g(repo, "status", "--porcelain") == ""
    assert review.merged_into(repo, "omp/t/w1", "main")  # a squash counts as merged
    assert merge_branch(repo, "omp/t/w1", squash=True).status == "up_to_date"


def test_a_check_on_the_merged_result_gates_the_move(repo: Path, tmp_path: Path) -> None:
    write(repo / ".gitignore", "deps/\n")
    g(repo, "add", ".gitignore")
    g(repo, "commit", "-qm", "ignore deps")
    write(repo / "deps" / "tool.sh", "echo tool-ran\n")
    base = g(repo, "rev-parse", "HEAD")
    commit_file(_worker(repo, "good", base), "good.txt", "ok\n")
    commit_file(_worker(repo, "bad", base), "bad.txt", "FAIL\n")
    commit_file(_worker(repo, "slow", base), "slow.txt", "ok\n")
    command = (
        "sh deps/tool.sh && test -f good.txt && ! grep -q FAIL *.txt "
        "&& { [ ! -f slow.txt ] || sleep 300; }"
    )
    log = tmp_path / "merge-verify.log"
    check = Verify(command, timeout=60, log=log, provision=Provision(link=("deps",)))
    good = merge_branch(repo, "omp/t/good", check=check)
    assert good.status == "fast_forward" and good.verify is not None
    assert good.verify.status == "passed" and "tool-ran" in log.read_text()
    moved = g(repo, "rev-parse", "main")
    before = checkout_snapshot(repo)
    bad = merge_branch(repo, "omp/t/bad", check=check)
    assert bad.status == "verify_failed" and not bad.moved and bad.commit is None
    assert bad.verify is not None and bad.verify.status == "failed" and bad.verify.exit == 1
    assert "omp/t/bad" in bad.message
    # (it sleeps 300 s: any time limit ends it; a short one keeps the quick loop quick)
    slow = merge_branch(repo, "omp/t/slow", check=check._replace(timeout=0.2))
    assert slow.status == "verify_failed"
    assert slow.verify is not None and slow.verify.status == "timed_out"
    assert g(repo, "rev-parse", "main") == moved
    assert checkout_snapshot(repo) == before
    # the scratch checkouts are gone
    assert [
        line
        for line in g(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ] == [
        f"worktree {repo}",
        f"worktree {create.worktree_dir(repo, 't', 'bad')}",
        f"worktree {create.worktree_dir(repo, 't', 'good')}",
        f"worktree {create.worktree_dir(repo, 't', 'slow')}",
    ]


def test_a_commit_made_during_the_check_is_never_lost(repo: Path, tmp_path: Path) -> None:
    commit_file(_worker(repo, "w1"), "w1.txt", "w1\n")
    # the user commits on the target while the check runs
    sneaky = f"git -C {repo} commit -q --allow-empty -m 'the user was quicker'"
    res = merge_branch(repo, "omp/t/w1", check=Verify(sneaky, log=tmp_path / "v.log"))
    assert res.status == "target_moved" and not res.moved
    assert g(repo, "log", "-1", "--format=%s", "main") == "the user was quicker"
    assert not (repo / "w1.txt").exists()
    g(repo, "branch", "side", "HEAD~1")
    commit_file(repo, "main-only.txt", "m\n")
    res = merge_branch(
        repo,
        "omp/t/w1",
        into="side",
        check=Verify(f"git -C {repo} branch -f side main", log=tmp_path / "v2.log"),
    )
    assert res.status == "target_moved"
    assert g(repo, "rev-parse", "side") == g(repo, "rev-parse", "main")


def test_a_checkout_git_refuses_to_update_is_left_alone(repo: Path) -> None:
    commit_file(_worker(repo, "w1"), "new.txt", "from the worker\n")
    write(repo / "new.txt", "the user's untracked file of the same name\n")
    res = merge_branch(repo, "omp/t/w1")
    assert res.status == "checkout_refused" and not res.moved
    assert (repo / "new.txt").read_text() == "the user's untracked file of the same name\n"
    assert g(repo, "rev-parse", "main") == res.previous


def test_bad_requests(repo: Path) -> None:
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "omp/t/none")
    assert err.value.code == "unknown_revision"
    _worker(repo, "w1")
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "omp/t/w1", into="nope")
    assert err.value.code == "unknown_revision"
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "main")
    assert err.value.code == "invalid_input"
    g(repo, "checkout", "-q", "--detach")
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "omp/t/w1")
    assert err.value.code == "detached_head"
    assert merge.MergeResult._fields[2] == "status"
