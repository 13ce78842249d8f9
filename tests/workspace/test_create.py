"""Creating a worker's worktree: branch and checkout, all or nothing, carry-changes, copy and
link, and the crash between creating a worktree and recording it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.workspace import create
from omp.workspace.create import Provision
from omp.workspace.repo import changes, worktrees
from tests.helpers import REPO, child_env, failing_writes
from tests.workspace.gitrepo import checkout_snapshot, commit_file, g, write

# Real git in temporary repositories: dozens of git processes a test (the quick loop skips them).
pytestmark = pytest.mark.slow


def _make(repo: Path, worker: str = "w1", **kw: object) -> create.Created:
    path = create.worktree_dir(repo, "t", worker)
    made = create.create_worktree(
        repo,
        path,
        create.branch_name("t", worker),
        "HEAD",
        **kw,  # type: ignore[arg-type]
    )
    create.finalize(made.worktree)
    return made


def _nothing_left(repo: Path, path: Path, branch: str) -> None:
    assert [e.path for e in worktrees(repo)] == [repo]
    assert g(repo, "branch", "--list", branch) == ""
    assert not path.exists()


def test_a_worktree_on_its_own_branch_from_the_base(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    commit_file(repo, "later.txt", "after the base\n")
    # by default outside the project (jest, vitest and a project's own pytest would collect a
    # worktree under it); `.omp/worktrees` is the alternative this test makes
    assert create.worktree_dir(repo, "t", "w1") == create.outside_worktrees_dir(repo) / "t" / "w1"
    path = create.worktree_dir(repo, "t", "w1", under=create.worktrees_dir(repo))
    assert path == repo / ".omp" / "worktrees" / "t" / "w1"
    made = create.create_worktree(repo, path, "omp/t/w1", base)
    assert made.worktree == create.Worktree(repo, path, "omp/t/w1", base)
    assert g(path, "rev-parse", "HEAD") == base
    assert g(path, "symbolic-ref", "--short", "HEAD") == "omp/t/w1"
    assert (path / "src" / "app.py").read_text() == "x = 1\n"
    assert not (path / "later.txt").exists()
    entry = next(e for e in worktrees(repo) if e.path == path)
    assert entry.locked is not None and entry.locked.startswith("omp provisioning pid=")
    create.finalize(made.worktree)
    entry = next(e for e in worktrees(repo) if e.path == path)
    assert entry.locked is None
    # nothing of omp's shows in the leader's status, and the user's .gitignore is not made
    assert g(repo, "status", "--porcelain") == ""
    assert (repo / ".omp" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not (repo / ".gitignore").exists()


def test_an_existing_omp_dir_without_a_gitignore_still_hides_the_worktrees(repo: Path) -> None:
    write(repo / ".omp" / "config.toml", "[team]\n")
    g(repo, "add", ".omp/config.toml")
    g(repo, "commit", "-qm", "project config")
    path = create.worktree_dir(repo, "t", "w1", under=create.worktrees_dir(repo))
    create.finalize(create.create_worktree(repo, path, "omp/t/w1", "HEAD").worktree)
    assert not (repo / ".omp" / ".gitignore").exists()  # omp did not create this .omp/
    assert (repo / ".omp" / "worktrees" / ".gitignore").exists()
    assert g(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_a_worktrees_dir_git_would_see_refuses_the_worktree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its `.gitignore` is required (`storage_error`), before git makes anything."""
    write(repo / ".omp" / "config.toml", "[team]\n")  # the user's `.omp/`: only ours hides it
    path = create.worktree_dir(repo, "t", "w1", under=create.worktrees_dir(repo))
    real_write = os.write
    failing_writes(monkeypatch, times=99)
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, path, "omp/t/w1", "HEAD")
    assert err.value.code == "storage_error"
    monkeypatch.setattr(os, "write", real_write)  # (not `undo`: it would drop the git isolation)
    assert not path.exists()
    assert [e.path for e in worktrees(repo)] == [repo]
    assert g(repo, "branch", "--list", "omp/t/w1") == ""
    assert not (repo / ".omp" / "worktrees" / ".gitignore").exists()


def test_names_git_would_refuse_are_refused_before_anything_is_made(repo: Path) -> None:
    assert create.branch_name("team-1", "worker-2") == "omp/team-1/worker-2"
    with pytest.raises(OmpError) as err:
        create.branch_name("t", "a..b")
    assert err.value.code == "invalid_branch"
    with pytest.raises(OmpError) as err:
        create.branch_name("t", "x.lock")
    assert err.value.code == "invalid_branch"
    with pytest.raises(OmpError) as err:
        create.branch_name("t", "../x")
    assert err.value.code == "invalid_worker_name"


def test_an_existing_branch_or_directory_is_refused(repo: Path, tmp_path: Path) -> None:
    _make(repo)
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, tmp_path / "elsewhere", "omp/t/w1", "HEAD")
    assert err.value.code == "worktree_exists"
    busy = write(tmp_path / "busy" / "file", "mine\n").parent
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, busy, "omp/t/w2", "HEAD")
    assert err.value.code == "worktree_exists"
    assert (busy / "file").read_text() == "mine\n"
    assert g(repo, "branch", "--list", "omp/t/w2") == ""
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, tmp_path / "w3", "omp/t/w3", "no-such-commit")
    assert err.value.code == "unknown_revision"


def test_an_exception_while_recording_rolls_back(repo: Path) -> None:
    path = create.worktree_dir(repo, "t", "w1")
    with (
        pytest.raises(RuntimeError, match="config write failed"),
        create.provisioned(repo, path, "omp/t/w1", "HEAD") as made,
    ):
        assert made.worktree.path.is_dir()
        raise RuntimeError("config write failed")
    _nothing_left(repo, path, "omp/t/w1")


def test_a_failing_checkout_hook_rolls_back(repo: Path) -> None:
    hook = write(repo / ".git" / "hooks" / "post-checkout", "#!/bin/sh\nexit 3\n")
    hook.chmod(0o755)
    path = create.worktree_dir(repo, "t", "w1")
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, path, "omp/t/w1", "HEAD")
    assert err.value.code == "git_failed"
    _nothing_left(repo, path, "omp/t/w1")


CRASHER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from omp.workspace import create
    repo = Path(sys.argv[1])
    path = create.worktree_dir(repo, "t", "w1")
    with create.provisioned(repo, path, "omp/t/w1", "HEAD", carry=True):
        print("created", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # dies before the team's config is written
    """
)


def test_a_crash_between_creating_and_recording_leaves_nothing_after_recovery(
    repo: Path,
) -> None:
    write(repo / "README.md", "uncommitted\n")  # carried: the orphan is dirty, still rolled back
    proc = subprocess.run(
        [sys.executable, "-c", CRASHER, str(repo)],
        env=child_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9 and proc.stdout == "created\n", proc.stderr
    path = create.worktree_dir(repo, "t", "w1")
    assert path.is_dir() and g(repo, "branch", "--list", "omp/t/w1")  # the crash left them
    # a provisional worktree of a live process (this one) is not touched
    mine = create.create_worktree(repo, create.worktree_dir(repo, "t", "w2"), "omp/t/w2", "HEAD")
    recovered = create.recover_unfinished(repo)
    assert [w.path for w in recovered] == [path]
    assert {e.path for e in worktrees(repo)} == {repo, mine.worktree.path}
    assert g(repo, "branch", "--list", "omp/t/w1") == ""
    assert not path.exists()
    assert create.recover_unfinished(repo) == []


def test_without_carry_the_leaders_uncommitted_work_stays_behind(repo: Path) -> None:
    write(repo / "README.md", "leader's edit\n")
    write(repo / "notes.txt", "untracked\n")
    assert create.uncommitted_count(repo) == (1, 1)
    made = _make(repo)
    assert made.carried == []
    assert (made.worktree.path / "README.md").read_text() == "# demo\n"
    assert not changes(made.worktree.path)


def test_carry_applies_the_leaders_diff_of_tracked_files_binary_safe(repo: Path) -> None:
    blob = bytes(range(256)) * 4
    commit_file(repo, "img.bin", "placeholder")
    write(repo / "img.bin", blob)
    write(repo / "README.md", "leader's edit\n")
    write(repo / "staged-new.txt", "new and staged\n")
    g(repo, "add", "staged-new.txt")
    g(repo, "rm", "-q", "src/app.py")
    write(repo / "untracked.txt", "stays\n")
    g(repo, "config", "diff.noprefix", "true")  # a user's setting must not break the patch
    before = checkout_snapshot(repo)
    assert create.uncommitted_count(repo) == (4, 1)
    made = _make(repo, carry=True)
    wt = made.worktree.path
    assert sorted(made.carried) == ["README.md", "img.bin", "src/app.py", "staged-new.txt"]
    assert (wt / "img.bin").read_bytes() == blob
    assert (wt / "README.md").read_text() == "leader's edit\n"
    assert (wt / "staged-new.txt").read_text() == "new and staged\n"
    assert not (wt / "src" / "app.py").exists()
    assert not (wt / "untracked.txt").exists()
    assert checkout_snapshot(repo) == before  # the leader's checkout is untouched


def test_a_carry_that_does_not_apply_rolls_back(repo: Path) -> None:
    base = g(repo, "rev-parse", "HEAD")
    commit_file(repo, "README.md", "moved on\n")
    write(repo / "README.md", "moved on, then edited\n")
    path = create.worktree_dir(repo, "t", "w1")
    with pytest.raises(OmpError) as err:
        create.create_worktree(repo, path, "omp/t/w1", base, carry=True)
    assert err.value.code == "carry_failed"
    assert err.value.detail["files"] == ["README.md"]
    _nothing_left(repo, path, "omp/t/w1")


def test_copy_and_link_bring_what_a_fresh_checkout_lacks(repo: Path) -> None:
    write(repo / ".gitignore", "node_modules/\n.venv/\n")
    g(repo, "add", ".gitignore")
    g(repo, "commit", "-qm", "ignores")
    write(repo / ".env", "SECRET=1\n")  # untracked, not ignored
    write(repo / "node_modules" / "dep" / "index.js", "module.exports = 1\n")
    write(repo / ".venv" / "bin" / "python", "#!/bin/sh\n")
    spec = Provision(
        copy=(".env", "config/local.json", "README.md"), link=("node_modules", ".venv")
    )
    made = _make(repo, spec=spec)
    wt = made.worktree.path
    got = made.provisioned
    assert got.copied == [".env"] and got.linked == ["node_modules", ".venv"]
    assert got.missing == ["config/local.json"] and got.present == ["README.md"]
    assert (wt / ".env").read_text() == "SECRET=1\n"
    assert os.readlink(wt / "node_modules") == str(repo / "node_modules")
    assert (wt / "node_modules" / "dep" / "index.js").read_text() == "module.exports = 1\n"
    # `node_modules/` matches directories only, not a symlink; none of it may be committed
    assert sorted(got.excluded) == [".env", ".venv", "node_modules"]
    assert not changes(wt), changes(wt)
    g(wt, "add", "-A")
    assert g(wt, "diff", "--cached", "--name-only") == ""
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert "/.env\n" in exclude and "/node_modules\n" in exclude
    # removing the worktree removes the links, never what they point at
    g(repo, "worktree", "remove", "--force", str(wt))
    assert (repo / "node_modules" / "dep" / "index.js").exists()
    # a second worker adds no duplicate lines
    _make(repo, "w2", spec=spec)
    assert (repo / ".git" / "info" / "exclude").read_text().count("/.env\n") == 1


@pytest.mark.parametrize(
    "bad", ["../outside", "/etc/passwd", "a/../../outside", ".git/config", "", ".", "up/secret"]
)
def test_paths_leaving_the_repository_are_refused_and_nothing_is_made(
    repo: Path, tmp_path: Path, bad: str
) -> None:
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "secret").write_text("s\n")
    os.symlink(outside, repo / "up")
    path = create.worktree_dir(repo, "t", "w1")
    for spec in (Provision(copy=(bad,)), Provision(link=(bad,))):
        with pytest.raises(OmpError) as err:
            create.create_worktree(repo, path, "omp/t/w1", "HEAD", spec=spec)
        assert err.value.code == "unsafe_path"
        _nothing_left(repo, path, "omp/t/w1")


def test_tools_run_from_the_project_root_do_not_see_worktrees(repo: Path) -> None:
    commit_file(repo, "tests/test_one.py", "def test_one() -> None:\n    assert True\n")
    made = _make(repo)
    wt = made.worktree.path
    commit_file(wt, "tests/test_two.py", "def test_two() -> None:\n    assert True\n")
    commit_file(wt, "lint_me.py", "import os\nNEEDLE_ONLY_IN_WORKTREE = 1\n")
    env = child_env()
    assert g(repo, "status", "--porcelain", "--untracked-files=all", "--ignored=no") == ""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "tests/test_one.py::test_one" in collected.stdout, collected.stdout
    assert "test_two" not in collected.stdout
    ruff = Path(sys.executable).parent / "ruff"
    linted = subprocess.run(
        [str(ruff), "check", "--no-cache", "--select", "F401", "."],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0 and "lint_me" not in linted.stdout, linted.stdout
    assert (
        "lint_me"
        in subprocess.run(  # the same check does find it inside the worktree
            [str(ruff), "check", "--no-cache", "--select", "F401", "."],
            cwd=wt,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    rg = shutil.which("rg")
    if rg is not None:
        found = subprocess.run(
            [rg, "-l", "NEEDLE_ONLY_IN_WORKTREE"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert found.returncode == 1 and found.stdout == "", found.stdout


def test_recovery_also_clears_a_dead_merge_check_and_a_vanished_provisional(
    repo: Path, tmp_path: Path
) -> None:
    base = g(repo, "rev-parse", "HEAD")
    dead = f"omp provisioning pid=999999999 start=1 base={base}"
    scratch = tmp_path / "scratch"
    g(repo, "worktree", "add", "-q", "--detach", "--lock", "--reason", dead, str(scratch), base)
    gone = tmp_path / "gone"
    g(repo, "worktree", "add", "-q", "--lock", "--reason", dead, "-b", "omp/t/gone", str(gone))
    shutil.rmtree(gone)
    mine = tmp_path / "mine"
    g(repo, "worktree", "add", "-q", "--lock", "--reason", "a person's lock", "-b", "m", str(mine))
    recovered = create.recover_unfinished(repo)
    assert sorted(w.path for w in recovered) == [gone, scratch]
    assert {e.path for e in worktrees(repo)} == {repo, mine}
    assert not scratch.exists() and g(repo, "branch", "--list", "omp/t/gone") == ""


def test_the_outside_location_is_per_project_and_never_a_cache(repo: Path, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    where = create.outside_worktrees_dir(repo, env)
    assert where.parent == tmp_path / "home" / ".local" / "state" / "omp" / "worktrees"
    assert where.name.startswith("proj-") and len(where.name) == len("proj-") + 10
    assert create.outside_worktrees_dir(repo, {"XDG_STATE_HOME": "/xdg"}).parent == Path(
        "/xdg/omp/worktrees"
    )
    other = repo.parent / "other" / "proj"
    assert create.outside_worktrees_dir(other, env) != where  # same name, another project
    path = create.worktree_dir(repo, "t", "w1", under=where)
    made = create.create_worktree(repo, path, "omp/t/w1", "HEAD")
    assert made.worktree.path == path and (path / "README.md").exists()
    assert not (repo / ".omp").exists()  # nothing made in the project
    assert g(repo, "status", "--porcelain", "--untracked-files=all") == ""
