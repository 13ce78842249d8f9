"""The usage index on a real tmux server (a private socket): the monitor finds a worker's session
from its pane's pid, as tmux gives it, and `omp team usage` and `status` read on from the index
it keeps, writing nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from omp.monitor.loop import Monitor
from omp.tmux import Tmux
from omp.usage.read import read_usage
from omp.usage.totals import UsageTotals
from tests.helpers import child_env, make_project, poll, run_omp, snapshot_tree
from tests.monitor.test_monitor_tmux import make_live_team
from tests.usage.team import HOLDER, Team, worker_home

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def test_the_monitor_finds_a_panes_session_by_its_pid_and_usage_reads_its_index(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "proj")
    _home, main, _ = worker_home("copilot", tmp_path / "agent-home")
    lock = main.parent / "inuse.1.hold"  # what Copilot holds open while its session runs
    lock.write_text("")
    make_live_team(root, omp_tmux, "t", 1, [sys.executable, "-c", HOLDER, str(lock)])
    team = Team(root)
    team.set_agent("worker-1", "copilot")
    mon = Monitor(root, "tok-" + "b" * 28)

    def found() -> bool:
        mon.scan()
        return team.paths.monitor_usage_index("t").exists() and b"events.jsonl" in (
            team.paths.monitor_usage_index("t").read_bytes()
        )

    poll(found, 30, "the monitor's index to name the worker's record")
    lines = main.read_bytes().splitlines(keepends=True)
    call = next(ln for ln in reversed(lines) if b'"session.usage_record"' in ln)
    with main.open("ab") as f:  # one more call, past the index
        f.write(call)
    want, _ = read_usage("copilot", main)
    assert isinstance(want, UsageTotals) and want.tokens.calls == 4
    env = child_env(tmux_env)
    before = snapshot_tree(root / ".omp")
    res = run_omp("team", "usage", "t", "--json", cwd=root, env=env)
    assert res.rc == 0, res.stderr
    [w1, leader] = res.json["members"]
    assert w1["how"].startswith("the pane's process"), w1
    assert (w1["calls"], w1["input"], w1["output"]) == want.tokens[:3]
    assert leader["unreadable"] == "unknown"
    st = run_omp("team", "status", "t", "--json", cwd=root, env=env)
    assert st.json["teams"][0]["workers"][0]["usage"]["calls"] == 4
    assert snapshot_tree(root / ".omp") == before
