"""`.omp/` carries its own `.gitignore`, written when omp creates `.omp/` (`*`) or its state tree
under a `.omp/` the user made (`/state/`): git never sees omp's state, and the project's own
`.gitignore` is left as it was."""

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
