"""The leader's usage on a real tmux server (a private socket): `omp hook stop` run in the
team's leader pane knows it is there from tmux's own `$TMUX_PANE` and `$TMUX` and records the
leader's session; without a hook, `omp team usage` and the monitor find it from the leader
pane's process. `usage` writes nothing either way."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from omp.monitor import usage as index
from omp.monitor.loop import Monitor
from omp.stophook import sessions
from omp.tmux import Tmux
from omp.usage.totals import Tokens
from tests.helpers import child_env, make_project, poll, run_omp, snapshot_tree
from tests.monitor.test_monitor_tmux import make_live_team
from tests.usage import fixtures as fx
from tests.usage.team import HOLDER, Team, worker_home

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

IDLE = [sys.executable, "-c", "import time; time.sleep(600)"]


def leader_pane(tmux: Tmux, team: Team, panes: dict[str, str], script: str) -> str:
    """A pane beside the workers' running `script` (sh), recorded as the team's leader pane.
    `make_live_team` gives worker-1's variables to its whole session (`new-session -e`), so
    they are dropped here: launch's leader pane has none of a worker's."""
    drop = "unset OMP_TEAM OMP_WORKER OMP_ROOT OMP_LAUNCH_TOKEN OMP_TEAM_WORKER; "
    pane = tmux.split_pane(
        panes["worker-1"], cwd=team.root, command=["/bin/sh", "-c", drop + script]
    )
    team.update(leaderPaneId=pane, leaderAgent="copilot")
    return pane


def leader_of(result: dict[str, object]) -> dict[str, object]:
    members = result["members"]
    assert isinstance(members, list)
    [row] = [m for m in members if m["name"] == "leader"]
    assert isinstance(row, dict)
    return row


def test_the_hook_in_the_leader_pane_records_the_leaders_session(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "proj")
    panes = make_live_team(root, omp_tmux, "t", 1, IDLE)
    team = Team(root)
    _home, main, stop = worker_home("copilot", tmp_path / "agent-home")
    payload = tmp_path / "stop.json"
    payload.write_text(json.dumps({**stop, "cwd": str(root)}))
    go, out = tmp_path / "go", tmp_path / "hook-out.txt"
    hook = shlex.join([sys.executable, "-m", "omp", "hook", "stop"])
    script = (
        f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done; "
        f"{hook} < {shlex.quote(str(payload))} > {shlex.quote(str(out))} 2>&1; "
        f"exec {shlex.join(IDLE)}"
    )
    leader_pane(omp_tmux, team, panes, script)
    go.touch()  # the config names the pane now: let its hook fire
    poll(lambda: out.exists() and out.read_text().strip() != "", 30, "the leader's hook to run")
    assert out.read_text().strip() == "{}"
    rec = sessions.read(team.paths.team("t"), "leader")
    assert rec is not None and rec["sessionId"] == stop["sessionId"], rec
    assert not team.paths.team("t").session("worker-1").exists()
    before = snapshot_tree(root / ".omp")
    res = run_omp("team", "usage", "t", "--json", cwd=root, env=child_env(tmux_env))
    assert res.rc == 0, res.stderr
    row = leader_of(res.json)
    assert str(row["how"]).startswith("the stop hook's record"), row
    assert row["records"] == [str(main)]
    got = Tokens(
        *(int(str(row[k])) for k in ("calls", "input", "output", "cacheRead", "cacheWrite"))
    )
    assert got == fx.EXPECTED["copilot"]
    assert snapshot_tree(root / ".omp") == before


def test_without_a_hook_the_leader_panes_process_gives_its_session(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "proj")
    panes = make_live_team(root, omp_tmux, "t", 1, IDLE)
    team = Team(root)
    _home, main, _ = worker_home("copilot", tmp_path / "agent-home")
    lock = main.parent / "inuse.1.hold"  # what Copilot holds open while its session runs
    lock.write_text("")
    leader_pane(omp_tmux, team, panes, shlex.join([sys.executable, "-c", HOLDER, str(lock)]))
    env = child_env(tmux_env)

    def usage() -> dict[str, object]:
        res = run_omp("team", "usage", "t", "--json", cwd=root, env=env)
        assert res.rc == 0, res.stderr
        return leader_of(res.json)

    before = snapshot_tree(root / ".omp")
    poll(lambda: "calls" in usage(), 30, "usage to find the leader's session from its pane")
    row = usage()
    assert str(row["how"]).startswith("the pane's process"), row
    assert row["records"] == [str(main)] and row["calls"] == fx.EXPECTED["copilot"].calls
    assert snapshot_tree(root / ".omp") == before  # read-only
    mon = Monitor(root, "tok-" + "c" * 28)
    mon.scan()
    doc = index.load(team.cfg)
    assert doc is not None and doc["members"]["leader"]["records"][0]["path"] == str(main)
