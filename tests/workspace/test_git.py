"""The git runner: a clean environment, checked exit codes, time limits, stable error codes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omp import procs
from omp.errors import CODES, OmpError
from omp.workspace import git as gitmod
from omp.workspace.git import git, git_env, nul_fields
from omp.workspace.repo import head, toplevel
from tests.helpers import poll
from tests.workspace.gitrepo import g, make_repo


def test_git_env_drops_redirections_and_injected_config_but_keeps_identity() -> None:
    env = git_env(
        {
            "PATH": "/bin",
            "GIT_DIR": "/elsewhere/.git",
            "GIT_WORK_TREE": "/elsewhere",
            "GIT_INDEX_FILE": "/elsewhere/index",
            "GIT_CONFIG_PARAMETERS": "'core.hooksPath'='/tmp/evil'",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/tmp/evil",
            "GIT_OBJECT_DIRECTORY": "/elsewhere/objects",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "A",
            "GIT_COMMITTER_EMAIL": "c@x",
            "GIT_SSH_COMMAND": "ssh -i key",
        }
    )
    assert env == {
        "PATH": "/bin",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "A",
        "GIT_COMMITTER_EMAIL": "c@x",
        "GIT_SSH_COMMAND": "ssh -i key",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def test_a_git_dir_in_the_environment_does_not_redirect_our_calls(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_repo(tmp_path / "other", {"o.txt": "other\n"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.hooksPath'='/nonexistent'")
    monkeypatch.delenv("GIT_DIR")  # `g` itself must see the right repo
    want = g(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert head(repo) == want
    assert toplevel(repo) == repo


def test_a_failing_command_is_git_failed_with_the_command_and_gits_message(repo: Path) -> None:
    with pytest.raises(OmpError) as err:
        git(repo, "rev-parse", "--verify", "no-such-branch")
    assert err.value.code == "git_failed"
    assert err.value.detail["command"] == ["rev-parse", "--verify", "no-such-branch"]
    assert err.value.detail["exit"] == 128
    assert "no-such-branch" in err.value.message or "Needed a single revision" in err.value.message


def test_allowed_exit_codes_are_returned_not_raised(repo: Path) -> None:
    res = git(repo, "merge-base", "--is-ancestor", "HEAD", "HEAD~0", ok=(0, 1))
    assert res.rc == 0


def test_git_missing_is_git_not_found(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(repo / "empty-bin"))
    with pytest.raises(OmpError) as err:
        git(repo, "status")
    assert err.value.code == "git_not_found"


@pytest.mark.slow
def test_a_hung_git_is_killed_with_what_it_started(repo: Path, tmp_path: Path) -> None:
    # an editor that never returns stands in for a hang; it records its pid first
    pidfile = tmp_path / "editor.pid"
    editor = tmp_path / "slow-editor"
    editor.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    editor.chmod(0o755)
    with pytest.raises(OmpError) as err:
        git(repo, "-c", f"core.editor={editor}", "commit", "--allow-empty", timeout=1)
    assert err.value.code == "git_failed"
    assert err.value.detail.get("timedOut") is True
    pid = int(pidfile.read_text())
    poll(lambda: not procs.running(pid), what="the editor git started to be stopped")


def test_nul_fields_keep_any_byte_of_a_path() -> None:
    raw = b"a b\0new\nline\0caf\xc3\xa9\0bad\xff\0"
    assert nul_fields(raw) == ["a b", "new\nline", "café", os.fsdecode(b"bad\xff")]
    assert nul_fields(b"") == []


def test_version_is_read_and_old_gits_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    have = gitmod.version()
    assert have >= (2, 0) and len(have) >= 2
    assert gitmod.check_version() == have
    monkeypatch.setattr(gitmod, "version", lambda cwd=None: (2, 37, 1))
    with pytest.raises(OmpError) as err:
        gitmod.check_version()
    assert err.value.code == "git_too_old"
    assert err.value.detail == {"version": "2.37.1", "required": "2.38"}


def test_every_code_the_package_raises_is_registered() -> None:
    import ast

    pkg = Path(gitmod.__file__).parent
    found: set[str] = set()
    for path in pkg.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "OmpError"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(str(node.args[0].value))
    assert {"git_failed", "leader_dirty", "unmerged_work", "carry_failed"} <= found
    assert found <= set(CODES)
