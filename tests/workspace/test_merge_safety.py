"""A merge never moves a branch git itself would not move, says what happened to the refs
whatever a hook does after, and signs its commits when the repository asks for it.

Each operation is started with git as a person would, stopped where it waits for them; the
merge must refuse (`target_busy`), change nothing, and the person's `git <op> --continue` or
`--abort` must still work."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.workspace import create, handle, merge
from omp.workspace.handle import Repo
from omp.workspace.merge import merge_branch
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, write

pytestmark = pytest.mark.slow  # real git, dozens of processes a test


def _worker(repo: Path, name: str = "w1") -> Path:
    path = create.worktree_dir(repo, "t", name)
    with create.provisioned(repo, path, f"omp/t/{name}", g(repo, "rev-parse", "HEAD")):
        pass
    commit_file(path, f"{name}.txt", f"by {name}\n")
    return path


def _refuses(repo: Path, into: str = "main", **kw: object) -> OmpError:
    before = checkout_snapshot(repo)
    tip = g(repo, "rev-parse", into)
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "omp/t/w1", into=into, **kw)  # type: ignore[arg-type]
    assert err.value.code == "target_busy", err.value.to_json()
    assert g(repo, "rev-parse", into) == tip  # nothing moved
    assert checkout_snapshot(repo) == before  # nothing touched
    return err.value


def _conflicting_side(repo: Path) -> None:
    """`side` and `main` each change README.md since their common commit."""
    g(repo, "branch", "side")
    commit_file(repo, "README.md", "main's line\n")
    g(repo, "switch", "-q", "side")
    commit_file(repo, "README.md", "side's line\n")
    g(repo, "switch", "-q", "main")


def test_a_rebase_of_the_target_stopped_on_a_conflict_is_left_alone(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    g(repo, "rebase", "side", check=False)  # stops: HEAD detached, main named in head-name
    assert (repo / ".git" / "rebase-merge" / "head-name").read_text().strip() == "refs/heads/main"
    err = _refuses(repo)
    assert err.detail["operation"] == "rebase"
    assert "being rebased" in err.message and str(repo) in err.message
    # the person's rebase goes on as if omp had never run
    write(repo / "README.md", "both\n")
    g(repo, "add", "README.md")
    subprocess.run(["git", "-c", "core.editor=true", "rebase", "--continue"], cwd=repo,
                   check=True, capture_output=True)  # fmt: skip
    assert g(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert g(repo, "rev-parse", "main~1") == g(repo, "rev-parse", "side")


def test_a_rebase_in_another_worktree_holds_the_target_too(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    g(repo, "switch", "-q", "side")  # the leader's checkout is elsewhere: main checked out nowhere
    other = repo.parent / "other"
    g(repo, "worktree", "add", "-q", "--detach", str(other), "side")
    g(other, "rebase", "side", "main", check=False)  # rebasing main, over there
    err = _refuses(repo)
    assert Path(err.detail["worktree"]).resolve() == other.resolve()
    assert err.detail["operation"] == "rebase"
    g(other, "rebase", "--abort")
    assert merge_branch(repo, "omp/t/w1", into="main").moved  # free again


def test_a_bisect_started_on_the_target_holds_it(repo: Path) -> None:
    _worker(repo)
    first = g(repo, "rev-parse", "HEAD")
    commit_file(repo, "x.txt", "1\n")
    commit_file(repo, "x.txt", "2\n")
    g(repo, "bisect", "start", "main", first)  # HEAD detached; BISECT_START names main
    err = _refuses(repo)
    assert err.detail["operation"] == "bisect"
    g(repo, "bisect", "reset")
    assert g(repo, "symbolic-ref", "HEAD") == "refs/heads/main"


def test_a_dry_run_is_refused_as_the_merge_would_be(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    g(repo, "rebase", "side", check=False)
    _refuses(repo, dry_run=True)


def test_a_cherry_pick_sequence_between_its_picks_holds_the_checked_out_target(
    repo: Path,
) -> None:
    _worker(repo)
    _conflicting_side(repo)
    commit_file(repo, "other.txt", "x\n")  # not on side
    g(repo, "switch", "-q", "side")
    one = g(repo, "rev-parse", "HEAD")
    two = commit_file(repo, "later.txt", "later\n")
    g(repo, "switch", "-q", "main")
    g(repo, "cherry-pick", one, two, check=False)  # stops on the first: README conflicts
    write(repo / "README.md", "resolved\n")
    g(repo, "add", "README.md")
    subprocess.run(["git", "-c", "core.editor=true", "commit", "-q", "--no-edit"], cwd=repo,
                   check=True, capture_output=True)  # fmt: skip
    assert g(repo, "status", "--porcelain", "--untracked-files=no") == ""  # clean, yet under way
    assert (repo / ".git" / "sequencer").is_dir()
    err = _refuses(repo)
    assert err.detail["operation"] == "cherry-pick"
    g(repo, "cherry-pick", "--continue")
    assert (repo / "later.txt").read_text() == "later\n"


def test_git_am_stopped_on_the_checked_out_target_holds_it(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    patch = g(repo, "format-patch", "-1", "--stdout", "side")
    g(repo, "am", check=False, input=(patch + "\n").encode())  # does not apply: stops
    assert (repo / ".git" / "rebase-apply" / "applying").exists()
    err = _refuses(repo)
    assert err.detail["operation"] == "am"
    g(repo, "am", "--abort")


def test_a_merge_stopped_on_the_target_is_refused_as_busy(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    g(repo, "merge", "side", check=False)  # MERGE_HEAD, README.md in conflict
    err = _refuses(repo)
    assert err.detail["operation"] == "merge"


def test_a_rebase_of_another_branch_does_not_hold_the_target(repo: Path) -> None:
    _worker(repo)
    _conflicting_side(repo)
    g(repo, "switch", "-q", "side")
    g(repo, "rebase", "main", check=False)  # side is being rebased, not main
    assert Repo(repo).in_use("main") is None
    res = merge_branch(repo, "omp/t/w1", into="main")
    assert res.moved and res.checkout is None  # main is checked out nowhere: update-ref
    g(repo, "rebase", "--abort")


# ---- hooks: the refs say what happened --------------------------------------------------------


def _hook(repo: Path, name: str, body: str) -> None:
    path = repo / ".git" / "hooks" / name
    write(path, "#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_a_failing_post_merge_hook_is_the_hooks_failure_and_the_merge_stands(
    repo: Path,
) -> None:
    _worker(repo)
    _hook(repo, "post-merge", 'echo "hook says no" >&2\nexit 3\n')
    res = merge_branch(repo, "omp/t/w1")
    assert res.status == "fast_forward" and res.moved
    assert g(repo, "rev-parse", "main") == g(repo, "rev-parse", "omp/t/w1")
    assert res.hook is not None and res.hook.status == "failed" and res.hook.exit == 3
    assert "hook says no" in res.hook.output
    assert "post-merge hook failed" in res.message
    assert res.to_json()["hook"]["status"] == "failed"


def test_a_slow_post_merge_hook_gets_its_own_limit_and_the_branch_moved(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _worker(repo)
    _hook(repo, "post-merge", "sleep 30\n")
    monkeypatch.setattr(merge, "HOOK_TIMEOUT", 0.5, raising=False)
    res = merge_branch(repo, "omp/t/w1")
    assert res.moved and res.status == "fast_forward"
    assert res.hook is not None and res.hook.status == "timed_out"
    assert res.hook.seconds < 20
    assert g(repo, "rev-parse", "main") == res.commit
    assert (repo / "w1.txt").exists()  # the checkout came along


def test_git_killed_after_the_ref_moved_still_reports_the_move(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `reference-transaction` hook that hangs once the ref is committed: git is stopped at
    the time limit, and the ref, read again, says the branch moved."""
    _worker(repo)
    g(repo, "branch", "release")
    _hook(repo, "reference-transaction", '[ "$1" = committed ] && sleep 30\nexit 0\n')
    monkeypatch.setattr(handle, "WRITE_TIMEOUT", 1.0)
    res = merge_branch(repo, "omp/t/w1", into="release")
    assert res.moved and res.status == "fast_forward"
    assert g(repo, "rev-parse", "release") == g(repo, "rev-parse", "omp/t/w1")
    assert res.warning and "did not finish" in res.warning


# ---- signed merges ----------------------------------------------------------------------------


def _ssh_signing(repo: Path, tmp_path: Path, *, broken: bool = False) -> None:
    key = tmp_path / "signing-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True,
                   capture_output=True)  # fmt: skip
    g(repo, "config", "gpg.format", "ssh")
    g(repo, "config", "user.signingkey", str(tmp_path / "no-such-key") if broken else str(key))
    g(repo, "config", "commit.gpgsign", "true")


@pytest.mark.skipif(not os.path.exists("/usr/bin/ssh-keygen"), reason="needs ssh-keygen")
def test_merge_commits_are_signed_when_commit_gpgsign_is_on(repo: Path, tmp_path: Path) -> None:
    _worker(repo, "w1")
    _worker(repo, "w2")
    _ssh_signing(repo, tmp_path)
    merge_branch(repo, "omp/t/w1")
    res = merge_branch(repo, "omp/t/w2")  # a merge commit: omp writes it
    assert res.status == "merged"
    assert "-----BEGIN SSH SIGNATURE-----" in g(repo, "cat-file", "commit", "main")
    squashed = merge_branch(repo, "omp/t/w1", into="main", squash=True)
    assert squashed.status == "up_to_date"


@pytest.mark.skipif(not os.path.exists("/usr/bin/ssh-keygen"), reason="needs ssh-keygen")
def test_a_merge_commit_that_cannot_be_signed_is_refused_naming_the_setting(
    repo: Path, tmp_path: Path
) -> None:
    _worker(repo, "w1")
    _worker(repo, "w2")
    merge_branch(repo, "omp/t/w1")
    _ssh_signing(repo, tmp_path, broken=True)
    before = g(repo, "rev-parse", "main")
    with pytest.raises(OmpError) as err:
        merge_branch(repo, "omp/t/w2")
    assert err.value.code == "signing_failed"
    assert "commit.gpgsign" in err.value.message
    assert g(repo, "rev-parse", "main") == before
