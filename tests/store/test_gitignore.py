"""`.omp/` carries its own `.gitignore` (`*`), written when omp creates `.omp/`: git never sees
omp's state, and the project's own `.gitignore` is left as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from omp.store.paths import StatePaths

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


def test_an_existing_omp_dir_is_left_as_the_user_made_it(tmp_path: Path) -> None:
    (tmp_path / ".omp").mkdir()
    (tmp_path / ".omp" / "config.toml").write_text("[team]\n")
    paths = StatePaths(tmp_path)
    paths.ensure(paths.state)
    assert not (tmp_path / ".omp" / ".gitignore").exists()


def test_a_gitignore_the_user_put_there_is_never_overwritten(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.ensure(paths.state)
    ignore = tmp_path / ".omp" / ".gitignore"
    ignore.write_text("state/\n")
    paths.ensure(paths.team("t").dir)
    assert ignore.read_text() == "state/\n"
