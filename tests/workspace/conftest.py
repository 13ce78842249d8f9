"""Every test here runs real git in a temporary repository, isolated from the user's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workspace.gitrepo import isolate_git, make_repo


@pytest.fixture(autouse=True)
def git_isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate_git(monkeypatch, tmp_path)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project repository with one commit on `main`."""
    return make_repo(tmp_path / "proj")
