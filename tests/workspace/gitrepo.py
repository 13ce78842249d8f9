"""Real git in temporary repositories: an isolated git environment, a project, commits, and a
snapshot of a checkout that tells whether anything in it changed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import snapshot_tree

IDENTITY = {
    "GIT_AUTHOR_NAME": "Omp Test",
    "GIT_AUTHOR_EMAIL": "omp@example.invalid",
    "GIT_COMMITTER_NAME": "Omp Test",
    "GIT_COMMITTER_EMAIL": "omp@example.invalid",
}


def isolate_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """HOME pinned, no global or system git config, identity from the environment, no GIT_*
    inherited from whoever runs the tests."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    for key in list(os.environ):
        if key.startswith(("GIT_", "OMP_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))  # workers' worktrees
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    return home


def g(cwd: Path, *args: str, check: bool = True, input: bytes | None = None) -> str:
    """`git ARGS` in `cwd` as a test runs it (no optional locks: looking changes nothing)."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, input=input, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "replace").strip()


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository on `main` with one commit of `files` (default: a README and a module)."""
    path.mkdir(parents=True, exist_ok=True)
    g(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "# demo\n", "src/app.py": "x = 1\n"}).items():
        write(path / name, text)
    g(path, "add", "-A")
    g(path, "commit", "-q", "-m", "initial")
    return path


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def commit_file(checkout: Path, name: str, text: str, message: str | None = None) -> str:
    """Write `name`, commit it in `checkout`; the new commit."""
    write(checkout / name, text)
    g(checkout, "add", "--", name)
    g(checkout, "commit", "-q", "-m", message or f"edit {name}")
    return g(checkout, "rev-parse", "HEAD")


def checkout_snapshot(checkout: Path) -> dict[str, Any]:
    """Everything a person could see changed in a checkout: every file's bytes, mode and mtime
    (`.git` and omp's own `.omp/` aside), the raw index, the staged entries, `git status`,
    HEAD and the branches and tags (omp's `omp/...` branches aside)."""
    files = {
        k: v
        for k, v in snapshot_tree(checkout).items()
        if k != "." and not k.startswith((".git", ".omp"))
    }
    refs = g(checkout, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    gitdir = Path(g(checkout, "rev-parse", "--absolute-git-dir"))
    return {
        "files": files,
        "index": (gitdir / "index").read_bytes(),
        "staged": g(checkout, "ls-files", "--stage", "-z"),
        "status": g(checkout, "status", "--porcelain=v2", "-z", "--branch"),
        "head": g(checkout, "rev-parse", "HEAD"),
        "refs": [r for r in refs if not r.startswith("refs/heads/omp/")],
    }
