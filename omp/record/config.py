"""A team's `config.json`: the TypeScript tool's fields plus omp's (leader pane, tmux identity).

On the per-call layer (CONTRIBUTING.md): loaded, checked and asked about its members by every
`omp team api` call, over the team's files as strings (`omp.store.layout`); `TeamConfig.paths`,
the same directory as pathlib Paths for the rest of omp, is made when first asked for.
"""

from __future__ import annotations

import os

from omp import clock
from omp.errors import OmpError
from omp.store import fs
from omp.store.layout import TeamFiles
from omp.store.names import LEADER, is_valid_name, worker_name

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from omp.store.layout import ProjectFiles
    from omp.store.paths import StatePaths, TeamPaths

MAX_WORKERS = 32


class TeamConfig:
    """The parsed config; `raw` keeps every field, known or not, so rewrites lose nothing.
    `files` is the team's directory as strings (the per-call layer's), `paths` as Paths."""

    __slots__ = ("_paths", "files", "raw")

    def __init__(self, team: TeamPaths | TeamFiles, raw: dict[str, Any]) -> None:
        self.files = team.files
        self._paths = None if isinstance(team, TeamFiles) else team
        self.raw = raw

    @property
    def paths(self) -> TeamPaths:
        if self._paths is None:
            from pathlib import Path

            from omp.store.paths import StatePaths, TeamPaths

            f = self.files
            self._paths = TeamPaths(StatePaths(Path(f.project.root)), Path(f.dir), f.ident)
        return self._paths

    @property
    def name(self) -> str:
        return self.files.name

    @property
    def workers(self) -> list[dict[str, Any]]:
        ws = self.raw.get("workers")
        return [w for w in ws if isinstance(w, dict)] if isinstance(ws, list) else []

    @property
    def worker_names(self) -> list[str]:
        return [w["name"] for w in self.workers if is_valid_name(w.get("name"))]

    @property
    def recipients(self) -> list[str]:
        return [*self.worker_names, LEADER]

    def worker(self, name: str) -> dict[str, Any] | None:
        for w in self.workers:
            if w.get("name") == name:
                return w
        return None

    def pane_of(self, name: str) -> str | None:
        if name == LEADER:
            pane = self.raw.get("leaderPaneId")
        else:
            w = self.worker(name)
            pane = w.get("paneId") if w else None
        return pane if isinstance(pane, str) and pane.startswith("%") else None

    @property
    def tmux(self) -> dict[str, Any] | None:
        ident = self.raw.get("tmuxIdentity")
        return ident if isinstance(ident, dict) else None


def load(team: TeamPaths | TeamFiles) -> TeamConfig:
    """Read a team's config (read-only); `unknown_team` if it has none. The config it gives is
    pinned to the team's directory as it is now (`TeamPaths.ident`)."""
    paths = team.files
    if not paths.project.check(paths.dir):
        raise _unknown(paths)
    try:
        obj = fs.read_json(paths.config)
    except OSError as exc:
        raise OmpError("storage_error", f"cannot read {paths.config}: {exc.strerror}") from exc
    except OmpError as exc:
        if exc.code != "corrupt_state":
            raise
        raise OmpError("invalid_config", exc.message, team=paths.name, file=paths.config) from None
    if obj is None:
        raise _unknown(paths)
    if not isinstance(obj, dict):
        raise OmpError("invalid_config", f"{paths.config} is not a JSON object", team=paths.name)
    why = problem(obj, paths.name)
    if why is not None:
        raise OmpError(
            "invalid_config", f"{paths.config} {why}", team=paths.name, file=paths.config
        )
    try:
        pinned = paths.pinned()
    except FileNotFoundError:
        raise _unknown(paths) from None
    if isinstance(team, TeamFiles):
        return TeamConfig(pinned, obj)
    return TeamConfig(team._replace(ident=pinned.ident), obj)


# Fields omp reads as text (names, ids, keys of its tables): another type in one of them is a
# config omp cannot trust (`invalid_config`), not a value to be compared or hashed as it is.
_WORKER_TEXT = ("paneId", "taskId", "agent", "launchToken")
_TEAM_TEXT = ("agent", "leaderPaneId", "tmuxSession")


def problem(raw: dict[str, Any], team: str) -> str | None:
    """What makes a config unusable, or None. Checked on every read: a config omp cannot trust
    is a clear error naming the file, never read with silent defaults. Unknown fields (the
    TypeScript tool's, a newer omp's) are fine."""
    name = raw.get("name")
    if name is not None and name != team:
        return f"names team {name!r}, but it is in the directory of team {team!r}"
    workers = raw.get("workers")
    if not isinstance(workers, list):
        return "has no workers list"
    seen: set[str] = set()
    for i, w in enumerate(workers):
        wname = w.get("name") if isinstance(w, dict) else None
        if not is_valid_name(wname) or wname == LEADER:
            return f"has an invalid worker at position {i + 1}: {str(wname)[:40]!r}"
        assert isinstance(wname, str)
        if wname in seen:
            return f"lists worker {wname} twice"
        seen.add(wname)
        for key in _WORKER_TEXT:
            if w.get(key) is not None and not isinstance(w[key], str):
                return f"has a {key} of {wname} that is not a string"
    for key in _TEAM_TEXT:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            return f"has a {key} that is not a string"
    ident = raw.get("tmuxIdentity")
    if ident is not None and not isinstance(ident, dict):
        return "has a tmuxIdentity that is not an object"
    return None


def _unknown(paths: TeamFiles) -> OmpError:
    known = list_teams(paths.project)
    hint = f"; teams here: {', '.join(known)}" if known else ""
    return OmpError(
        "unknown_team",
        f"no team named {paths.name!r} under {paths.project.state}{hint}",
        team=paths.name,
        teams=known,
    )


def team_dir_entries(project: StatePaths | ProjectFiles) -> list[str]:
    """Every name in the teams directory, sorted ([] when it is missing or unsafe; read-only)."""
    files = project.files
    try:
        if not files.check(files.teams):
            return []
        return sorted(os.listdir(files.teams))
    except (OSError, OmpError):
        return []


def list_teams(project: StatePaths | ProjectFiles) -> list[str]:
    """Names of the teams with a config (read-only)."""
    files = project.files
    names = team_dir_entries(files)
    return [n for n in names if is_valid_name(n) and os.path.isfile(files.team(n).config)]


def new_config(
    name: str,
    workers: int,
    *,
    cwd: Path,
    task: str = "",
    role: str = "",
) -> dict[str, Any]:
    from omp.invocation import omp_command  # team creation only: not on the per-call paths

    if not 1 <= workers <= MAX_WORKERS:
        raise OmpError(
            "invalid_input", f"workers must be between 1 and {MAX_WORKERS}, got {workers}"
        )
    return {
        "name": name,
        "task": task,
        "role": role,
        "workerCount": workers,
        "workers": [
            {"name": worker_name(f"worker-{i}"), "role": role, "taskId": str(i)}
            for i in range(1, workers + 1)
        ],
        "cwd": str(cwd),
        "createdAt": clock.iso(),
        # The omp every text for this team names (`omp.invocation`): the one that made it.
        "ompCommand": omp_command(),
    }


def write(team: TeamPaths | TeamFiles, raw: dict[str, Any]) -> None:
    """Rewrite the config of a team that exists (atomically). Only launch and create make a
    team's directory (`omp.team.setup`); a team deleted meanwhile stays deleted."""
    paths = team.files
    if not paths.project.check(paths.dir):
        raise paths.gone()
    try:
        fs.write_json_atomic(paths.config, raw)
    except OmpError:
        paths.verify()
        raise
