"""The real-CLI tests' last check, on processes of its own (no agent CLI needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.agents.leftovers import assert_none_left, team_processes


def test_a_process_of_the_team_is_found_and_ended(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    elsewhere = tmp_path.parent  # not under the test's directory: known by its OMP_ROOT only
    by_cwd = subprocess.Popen(["sleep", "60"], cwd=root)
    by_env = subprocess.Popen(
        ["sleep", "61"], cwd=elsewhere, env={**os.environ, "OMP_ROOT": str(root)}
    )
    other = subprocess.Popen(["sleep", "62"], cwd=elsewhere)
    try:
        found = {pid for pid, _ in team_processes(root, tmp_path)}
        assert {by_cwd.pid, by_env.pid} <= found and other.pid not in found
        assert os.getpid() not in found
        with pytest.raises(AssertionError, match="outlived it"):
            assert_none_left(root, tmp_path, timeout=0.5)
        by_cwd.wait(10), by_env.wait(10)  # ended by the check
        assert other.poll() is None
        assert_none_left(root, tmp_path, timeout=0.5)
    finally:
        for p in (by_cwd, by_env, other):
            p.kill()
            p.wait()
