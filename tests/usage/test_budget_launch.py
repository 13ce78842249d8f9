"""`omp team launch --budget-tokens N --worker-budget N` on real tmux: recorded in config.json
(additive fields), `[team]` of `.omp/config.toml` the defaults, a bad value refused before
anything is made; `status` and `usage` show the budgets."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from omp.views.usage import usage
from tests.helpers import child_env, run_omp, snapshot_tree
from tests.team.test_launch_tmux import _launch, project, server

pytestmark = [pytest.mark.tmux, pytest.mark.slow]
__all__ = ["project", "server"]  # the fixtures, used by name


def test_launch_records_the_budgets(server: Tmux, project: Path) -> None:
    _launch(server, project, n=2, budget_tokens=5000, worker_budget=3000)
    cfg = team_config.load(StatePaths(project).team("t1"))
    assert (cfg.raw["budgetTokens"], cfg.raw["workerBudgetTokens"]) == (5000, 3000)
    got = usage(cfg)
    assert got["budget"] == {"tokens": 5000, "used": 0, "percent": 0.0}
    assert got["workerBudget"] == 3000
    # the demo agent keeps no session record omp can read: rows that say so, never zeros
    assert {m["name"]: m.get("unreadable") for m in got["members"]} == {
        "worker-1": "unknown_kind", "worker-2": "unknown_kind", "leader": "unknown"
    }  # fmt: skip


def test_config_toml_gives_the_budgets_and_the_options_win(server: Tmux, project: Path) -> None:
    (project / ".omp").mkdir()
    (project / ".omp" / "config.toml").write_text(
        "[team]\nbudget_tokens = 100000\nworker_budget_tokens = 40000\n"
    )
    env = child_env(OMP_TMUX_SOCKET=str(server.socket_name), OMP_DEMO_WORK_SECONDS="0.3")
    res = run_omp("team", "launch", "1:demo", "x", "--name", "b1", "--worker-budget", "7",
                  "--json", cwd=project, env=env)  # fmt: skip
    assert res.rc == 0, res.stderr
    raw = team_config.load(StatePaths(project).team("b1")).raw
    assert (raw["budgetTokens"], raw["workerBudgetTokens"]) == (100000, 7)


def test_a_bad_budget_is_refused_before_anything_is_made(server: Tmux, project: Path) -> None:
    before = snapshot_tree(project)
    with pytest.raises(OmpError) as err:
        _launch(server, project, n=1, budget_tokens=0)
    assert err.value.code == "invalid_input" and "--budget-tokens" in err.value.message
    env = child_env(OMP_TMUX_SOCKET=str(server.socket_name))
    res = run_omp("team", "launch", "1:demo", "--worker-budget", "-5", "--json", cwd=project,
                  env=env)  # fmt: skip
    assert res.rc == 2 and res.json["error"] == "invalid_input", res.stdout
    assert snapshot_tree(project) == before
    assert server.server_identity() is None
