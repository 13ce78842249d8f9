"""`[team]` of `.omp/config.toml`: one table whose keys several features own, read in one place
so that each accepts the others' keys and still refuses a typo (`invalid_config`).

    [team]
    stuck_after = 600             # seconds idle with a task in progress: "needs you"
                                  #   (`omp.monitor.attention`)
    budget_tokens = 2000000       # a launch's token budget for the workers together
    worker_budget_tokens = 800000 # ... for each worker (`omp.record.budget`)
    workspace = "worktree"        # launch's default workspace, "worktree" or "shared"
    verify = "pytest -q"          # every completion's check
    verify_timeout = 900          # ... its time limit, seconds (`omp.record.workspace`,
                                  #   which checks these three further)
    merge = "auto"                # a backlog's merge, "auto" or "manual" (`omp.backlog.settings`)
"""

from __future__ import annotations

from typing import NamedTuple

from omp.store import project_config
from omp.store.paths import StatePaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time


class TeamSettings(NamedTuple):
    stuck_after: float = 600.0
    budget_tokens: int = 0  # 0: no budget
    worker_budget_tokens: int = 0
    # The worktree feature's keys, read and checked by `omp.record.workspace.load_settings`:
    # listed here so that a `[team]` holding them is no "unknown team setting" to the others.
    workspace: str = ""
    verify: str = ""
    verify_timeout: float = 900.0
    merge: str = ""  # a backlog's (`omp.backlog.settings.merge_mode` checks it)


def team_settings(project: StatePaths) -> TeamSettings:
    """The `[team]` table (defaults when absent)."""
    return project_config.load_section(project, "team", TeamSettings, "team setting")
