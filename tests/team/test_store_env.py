"""A worker inherits the leader's store: launch hands its pane OMP_STORE or OMP_STORE_FILE,
whatever the tmux server's own environment holds."""

from __future__ import annotations

from pathlib import Path

from omp.agents import load_profiles
from omp.team.launch import worker_env


def test_a_worker_gets_the_leader_s_store(tmp_path: Path) -> None:
    profile = load_profiles(tmp_path)["demo"]
    base = {"PATH": "/usr/bin", "HOME": str(tmp_path)}
    kw = {"team": "t", "worker": "worker-1", "root": tmp_path, "token": "x", "omp": "omp"}
    plain = worker_env(base, profile, **kw)  # type: ignore[arg-type]
    assert "OMP_STORE" not in plain and "OMP_STORE_FILE" not in plain
    url = "redis://127.0.0.1:6379/0?ns=p"
    got = worker_env({**base, "OMP_STORE": url, "OMP_STORE_FILE": "/run/u"}, profile, **kw)  # type: ignore[arg-type]
    assert got["OMP_STORE"] == url and got["OMP_STORE_FILE"] == "/run/u"
