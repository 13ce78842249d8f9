"""`omp team add-worker --host` without a host to reach (the real placement is
tests/team/test_grow_hosts_tmux.py): what is refused before anything is touched, how the
newcomers' placements and hosts are recorded, what the reply says, and that a local team's
add-worker and answer load nothing of ssh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omp.cli.team_text import add_text
from omp.record.placement import Placed, placed_of
from omp.store.paths import StatePaths
from omp.team import grow_hosts
from omp.team.hosts import RemotePlan
from omp.tmux.ssh import Host, HostSettings
from tests.helpers import REPO, run_cli, snapshot_tree
from tests.workspace.gitrepo import isolate_git, make_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    root = make_repo(tmp_path / "proj")
    made = run_cli("team", "create", "t", "--workers", "1", "--json", cwd=root)
    assert made.rc == 0, made
    return root


def test_a_bad_host_spec_and_a_missing_store_are_refused_touching_nothing(repo: Path) -> None:
    before = snapshot_tree(repo / ".omp")
    bad = run_cli("team", "add-worker", "t", "--host", "build1:0", "--json", cwd=repo)
    assert bad.json["error"] == "invalid_input" and "--host" in bad.json["message"]
    shared = run_cli("team", "add-worker", "t", "--host", "build1", "--json", cwd=repo)
    assert shared.json["error"] == "invalid_input", shared.json
    assert "worktree" in shared.json["message"]
    no_store = run_cli(
        "team", "add-worker", "t", "--host", "build1", "--workspace", "worktree", "--json",
        cwd=repo,
    )  # fmt: skip
    assert no_store.json["error"] == "store_required", no_store.json
    more = run_cli("team", "add-worker", "t", "1", "--host", "build1:3", "--json", cwd=repo)
    assert more.json["error"] == "invalid_input" and "only 1 added" in more.json["message"]
    assert snapshot_tree(repo / ".omp") == before


def _plan() -> RemotePlan:
    host = Host("build2", HostSettings(address="me@b2", port=2222))
    rp = RemotePlan({"build2": host}, {"worker-2": "build2"}, "redis://x", "proj-1234")
    rp.placed["worker-2"] = Placed(
        "build2", "/h/.omp-remote/proj-1234/root", "/h/wt", "omp/t/worker-2", "omp-proj", "%4"
    )
    return rp


def test_newcomers_are_recorded_per_the_contract_and_recorded_hosts_are_kept() -> None:
    raw: dict[str, Any] = {"hosts": {"build1": {"address": "me@b1", "port": 22}}, "workers": []}
    entries: list[dict[str, Any]] = [
        {"name": "worker-1", "paneId": "%1"},
        {"name": "worker-2", "paneId": None},
    ]
    grow_hosts.record(_plan(), raw, entries, "abc123")
    assert set(raw["hosts"]) == {"build1", "build2"}
    assert raw["hosts"]["build1"] == {"address": "me@b1", "port": 22}  # never replaced
    assert raw["hosts"]["build2"]["port"] == 2222
    assert entries[0] == {"name": "worker-1", "paneId": "%1"}
    placed = placed_of(entries[1])
    assert placed is not None and placed.pane == "%4" and entries[1]["paneId"] is None
    assert entries[1]["workspace"] == {
        "kind": "worktree", "path": "/h/wt", "branch": "omp/t/worker-2", "base": "abc123",
        "host": "build2",
    }  # fmt: skip


def test_the_reply_names_the_host_where_a_pane_id_stands_and_a_host_left_behind() -> None:
    text = add_text(
        {
            "team": "t",
            "workers": [{"name": "worker-2", "paneId": None, "taskId": None, "host": "build1"}],
            "members": ["worker-1", "worker-2"],
            "workspace": {},
            "remoteAttach": ["ssh -t me@b1 tmux -L omp-p attach -t omp-t-worker-2"],
            "hostsNotUpdated": [{"host": "build3", "error": "host_unreachable", "why": "down"}],
        }
    )
    assert "added worker-2(@build1)" in text
    assert "attach:   ssh -t me@b1" in text
    assert "host build3 did not take the team's new config (down)" in text


def test_a_local_teams_add_worker_and_answer_load_nothing_of_ssh(repo: Path) -> None:
    code = (
        "import sys\n"
        "from omp.cli import main\n"
        "for args in (['team', 'add-worker', 't', '--json'],\n"
        "             ['team', 'answer', 't', 'worker-1', '--json']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('SSH', sorted(m for m in sys.modules if m in ('omp.tmux.remote',"
        " 'omp.team.grow_hosts', 'omp.mail.remote_answer', 'omp.team.remote')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert "SSH []" in out.stdout, out.stdout + out.stderr
    assert "worker-2" in out.stdout  # the add itself ran
    assert StatePaths(repo).team("t").config.is_file()
