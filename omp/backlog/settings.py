"""What a team's config records of its backlog, and the project's settings for it.

`config.json` of a team launched or created with `--tasks` carries (additively)::

    "backlog": {"merge": "auto" | "manual", "target": "main", "worktrees": true,
                "dir": "<where the tasks' worktrees go>", "source": "<the tasks file>"}

`worktrees`: each task gets its own worktree and branch (`omp/<team>/task-<id>`) from `target`
as it is when the task starts; `merge = "auto"` merges each task as soon as it is done (its
check passed, when the team verifies). A team without the record (tasks added by `omp team
task add` to a team launched otherwise) hands tasks out all the same: each worker works where
it already does, and the leader merges.

`.omp/config.toml`::

    [team]
    merge = "auto"                  # the default of --merge (default: manual)

    [backlog]
    max_tasks_per_worker = 20       # tasks one worker may create (create-task)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.store import project_config
from omp.store.paths import StatePaths

AUTO, MANUAL = "auto", "manual"
MERGES = (AUTO, MANUAL)
DEFAULT_MAX_PER_WORKER = 20


class Backlog(NamedTuple):
    merge: str = MANUAL
    target: str | None = None
    worktrees: bool = False
    dir: str | None = None
    source: str | None = None

    @property
    def auto(self) -> bool:
        return self.merge == AUTO

    def to_config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"merge": self.merge, "worktrees": self.worktrees}
        for key in ("target", "dir", "source"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out


def of(cfg: TeamConfig) -> Backlog | None:
    """The team's backlog record, or None (a team launched without `--tasks`)."""
    raw = cfg.raw.get("backlog")
    if not isinstance(raw, dict):
        return None
    merge = raw.get("merge") if raw.get("merge") in MERGES else MANUAL
    target, where, source = raw.get("target"), raw.get("dir"), raw.get("source")
    return Backlog(
        merge=str(merge),
        target=target if isinstance(target, str) and target else None,
        worktrees=raw.get("worktrees") is True and isinstance(where, str) and bool(where),
        dir=where if isinstance(where, str) and where else None,
        source=source if isinstance(source, str) else None,
    )


def merge_mode(value: str | None, project: StatePaths) -> str:
    """`--merge`, else `[team] merge` of `.omp/config.toml`, else manual."""
    if value is not None:
        if value not in MERGES:
            raise OmpError("invalid_input", f"--merge takes auto or manual, got {value!r}")
        return value
    found = project_config.load_table(project, "team").get("merge")
    if found is None:
        return MANUAL
    if found not in MERGES:
        path = project.config_toml
        raise OmpError(
            "invalid_config",
            f'{path}: [team] merge must be "auto" or "manual", got {found!r}',
            file=str(path),
        )
    return str(found)


class Limits(NamedTuple):
    max_tasks_per_worker: int = DEFAULT_MAX_PER_WORKER


def limits(project: StatePaths) -> Limits:
    return project_config.load_section(project, "backlog", Limits, "backlog")


def tasks_dir_for(top: Path, team: str, under: Path | None) -> Path:
    """Where a team's task worktrees go: `<worktrees dir>/<team>/` (beside where workers'
    own worktrees would be; `omp.workspace.create.worktree_dir`)."""
    from omp.store.names import team_name
    from omp.workspace import create

    return (under or create.outside_worktrees_dir(top)) / team_name(team)
