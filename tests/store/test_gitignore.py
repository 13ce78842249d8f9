"""`.omp/` carries its own `.gitignore`, written when omp creates `.omp/` (`*`) or its state tree
under a `.omp/` the user made (`/state/`): git never sees omp's state, and the project's own
`.gitignore` is left as it was."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.store.fs import FILE_MODE, IGNORE_ALL, IGNORE_STATE, write_gitignore
from omp.store.paths import StatePaths
from tests.helpers import failing_writes, umask

GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True
    ).stdout


def test_a_new_state_tree_is_invisible_to_git(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("build/\n")
    git(tmp_path, "add", ".gitignore")
    git(tmp_path, "commit", "-qm", "init")
    paths = StatePaths(tmp_path)
    paths.ensure(paths.team("t").dir / "mailbox")
    (paths.team("t").dir / "mailbox" / "leader.jsonl").write_text("{}\n")
    assert (tmp_path / ".omp" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""
    git(tmp_path, "add", "-A")  # an agent's sweep takes nothing of omp's
    assert git(tmp_path, "diff", "--cached", "--name-only") == ""
    assert (tmp_path / ".gitignore").read_text() == "build/\n"


def test_an_omp_dir_the_user_made_first_keeps_their_settings_visible_and_hides_the_state(
    tmp_path: Path,
) -> None:
    """The docs' own flow: `.omp/config.toml` written (and committed) before the first launch.
    omp's state under it is still never seen by git; the user's settings still are."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".omp").mkdir()
    (tmp_path / ".omp" / "config.toml").write_text("[team]\n")
    git(tmp_path, "add", ".omp/config.toml")
    git(tmp_path, "commit", "-qm", "settings")
    paths = StatePaths(tmp_path)
    paths.ensure(paths.team("t").dir / "mailbox")
    (paths.team("t").dir / "mailbox" / "leader.jsonl").write_text("{}\n")
    (tmp_path / ".omp" / "agents.toml").write_text("[x]\n")  # a new setting of theirs
    status = git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert status == ["?? .omp/.gitignore", "?? .omp/agents.toml"]
    git(tmp_path, "add", "-A")  # an agent's sweep takes nothing of omp's state
    assert not [n for n in git(tmp_path, "diff", "--cached", "--name-only").split() if "state" in n]
    assert (tmp_path / ".omp" / "config.toml").read_text() == "[team]\n"


def test_a_gitignore_the_user_put_there_is_never_overwritten(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.ensure(paths.state)
    ignore = tmp_path / ".omp" / ".gitignore"
    ignore.write_text("state/\n")
    paths.ensure(paths.team("t").dir)
    assert ignore.read_text() == "state/\n"


# The one writer (`omp.store.fs.write_gitignore`), which the state tree and the worktrees
# directory (`omp.workspace.create.ensure_worktrees_dir`) share.


@pytest.fixture
def umask_022() -> Iterator[None]:
    with umask(0o022):
        yield


def test_the_writer_creates_the_file_private(tmp_path: Path, umask_022: None) -> None:
    assert write_gitignore(tmp_path, b"# x\n*\n") is True
    ignore = tmp_path / ".gitignore"
    assert ignore.read_bytes() == b"# x\n*\n"
    # git's file, not omp's state: readable by whoever runs git in the checkout (umask applies)
    assert stat.S_IMODE(os.lstat(ignore).st_mode) == FILE_MODE == 0o600


def test_the_writer_leaves_whatever_is_there_untouched(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / ".gitignore").write_bytes(b"build/\n")
    os.chmod(own / ".gitignore", 0o640)
    assert write_gitignore(own, IGNORE_ALL) is False
    assert write_gitignore(own, IGNORE_ALL, required=True) is False  # there is one: not an error
    assert (own / ".gitignore").read_bytes() == b"build/\n"
    assert stat.S_IMODE(os.lstat(own / ".gitignore").st_mode) == 0o640
    # a symlink (dangling or not) is neither followed nor replaced
    link = tmp_path / "link"
    link.mkdir()
    (link / ".gitignore").symlink_to(tmp_path / "elsewhere")
    assert write_gitignore(link, IGNORE_ALL, required=True) is False
    assert not (tmp_path / "elsewhere").exists()
    assert os.readlink(link / ".gitignore") == str(tmp_path / "elsewhere")
    # nor is a directory of that name
    sub = tmp_path / "sub"
    (sub / ".gitignore").mkdir(parents=True)
    assert write_gitignore(sub, IGNORE_ALL, required=True) is False
    assert (sub / ".gitignore").is_dir()


def test_a_failure_is_swallowed_by_default_and_raised_when_required(tmp_path: Path) -> None:
    gone = tmp_path / "no-such-dir"
    assert write_gitignore(gone, IGNORE_ALL) is False
    with pytest.raises(OmpError) as err:
        write_gitignore(gone, IGNORE_ALL, required=True)
    assert err.value.code == "storage_error"
    assert err.value.detail["path"] == str(gone / ".gitignore")
    assert not gone.exists()


@pytest.mark.parametrize("required", [False, True])
def test_a_failed_write_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, required: bool
) -> None:
    """An empty or half-written `.gitignore` would pass for the whole one forever after (it is
    never overwritten): the writer removes what it made."""
    calls = failing_writes(monkeypatch, times=1)
    if required:
        with pytest.raises(OmpError) as err:
            write_gitignore(tmp_path, IGNORE_ALL, required=True)
        assert err.value.code == "storage_error"
    else:
        assert write_gitignore(tmp_path, IGNORE_ALL) is False
    assert calls, "the write was never tried"
    assert not os.path.lexists(tmp_path / ".gitignore")
    assert write_gitignore(tmp_path, IGNORE_ALL) is True  # the next one starts afresh
    assert (tmp_path / ".gitignore").read_bytes() == IGNORE_ALL


def test_the_state_tree_works_without_its_gitignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Best-effort there: a send that happens to make the tree must not fail for the file."""
    calls = failing_writes(monkeypatch, times=99)
    paths = StatePaths(tmp_path)
    paths.ensure(paths.team("t").dir)
    assert len(calls) == 2  # `.omp/`'s `*`, then (none there) `state/`'s `/state/`
    assert paths.team("t").dir.is_dir()
    assert not os.path.lexists(tmp_path / ".omp" / ".gitignore")


def test_the_state_trees_gitignore_is_the_shared_writers(tmp_path: Path, umask_022: None) -> None:
    paths = StatePaths(tmp_path)
    paths.ensure(paths.state)
    ignore = tmp_path / ".omp" / ".gitignore"
    assert ignore.read_bytes() == IGNORE_ALL
    assert stat.S_IMODE(os.lstat(ignore).st_mode) == FILE_MODE
    user = tmp_path / "user"
    (user / ".omp").mkdir(parents=True)
    StatePaths(user).ensure(StatePaths(user).state)
    assert (user / ".omp" / ".gitignore").read_bytes() == IGNORE_STATE
