"""What omp says about a team is true (issue 12, class 3): a team whose tmux server or panes are
gone ends `omp team wait` at once with its own exit code and why, reads as not running in
`status`, and `team list` shows when a team was shut down."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from omp.cli.team_text import status_text, wait_text
from omp.mail.panes import why_unreachable
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.team.shutdown import shutdown
from omp.views.status import status
from omp.views.wait import EXIT_GONE, wait
from tests.helpers import child_env, isolate, make_project, make_team, run_cli
from tests.monitor.test_monitor_policy import live_config


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    live_config(r)  # panes on a tmux server that does not exist
    raw = team_config.load(StatePaths(r).team("t")).raw
    raw["tmuxIdentity"]["socketPath"] = str(tmp_path / "no-such-tmux-socket")
    team_config.write(StatePaths(r).team("t"), raw)
    return r


def cfg(root: Path) -> team_config.TeamConfig:
    return team_config.load(StatePaths(root).team("t"))


def test_a_team_whose_server_is_gone_says_why(root: Path) -> None:
    why = why_unreachable(cfg(root))
    assert why is not None and "tmux server is gone" in why and "no-such-tmux-socket" in why
    make_team(root, "headless", 1)  # no panes: nothing to judge by tmux
    assert why_unreachable(team_config.load(StatePaths(root).team("headless"))) is None


def test_wait_returns_at_once_when_the_panes_are_gone(root: Path) -> None:
    t0 = time.monotonic()
    r = wait(cfg(root), timeout=60)
    assert time.monotonic() - t0 < 10
    assert r["event"] == "gone" and r["exitCode"] == EXIT_GONE == 13
    assert "tmux server is gone" in r["why"]
    assert "team t is not running: its tmux server is gone" in wait_text(r)


def test_wait_keeps_waiting_while_a_pane_is_reachable(root: Path) -> None:
    looks: list[float] = []

    def reachable(_: team_config.TeamConfig) -> None:
        looks.append(time.monotonic())

    r = wait(cfg(root), timeout=0.3, poll=0.01, unreachable=reachable)
    assert r["event"] == "timeout" and looks  # asked, and it said reachable


def test_wait_cli_exit_code_and_json(root: Path) -> None:
    env = child_env(Path(str(root.parent / "home")), OMP_NO_MONITOR="1")
    r = run_cli("team", "wait", "t", "--timeout", "60", "--json", cwd=root, env=env)
    assert r.rc == 13 and r.json["event"] == "gone" and r.json["why"]


def test_status_says_a_team_is_not_running(root: Path) -> None:
    out = status(StatePaths(root), "t")
    team = out["teams"][0]
    assert team["running"] is False and "gone" in team["notRunning"]
    assert "(not running: every worker pane is gone" in status_text(out)
    make_team(root, "headless", 1)
    assert status(StatePaths(root), "headless")["teams"][0]["running"] is True


def test_team_list_shows_when_a_team_was_shut_down(root: Path) -> None:
    rec = shutdown(cfg(root))
    env = child_env(Path(str(root.parent / "home")), OMP_NO_MONITOR="1")
    r = run_cli("team", "list", "--json", cwd=root, env=env)
    (row,) = r.json["teams"]
    assert row["shutdownAt"] == rec["shutdownAt"]
    text = run_cli("team", "list", cwd=root, env=env).stdout
    assert f"shut down {rec['shutdownAt']}" in text and row["createdAt"] not in text
    assert json.loads((StatePaths(root).team("t").shutdown).read_text())["shutdownAt"]
