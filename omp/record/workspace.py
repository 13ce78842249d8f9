"""Where a team's workers work, as the team's config records it, and the project's settings for it.

Each worker entry of `config.json` carries (additively; the TypeScript tool ignores it)::

    "workspace": {"kind": "worktree", "path": "<abs>", "branch": "omp/<team>/<worker>",
                  "base": "<sha>"}
    "workspace": {"kind": "shared"}

and the team, when it verifies completions, `"verify": {"command": "...", "timeout": 900}`.
A worker entry without `workspace` (an older omp, the TypeScript tool, `omp team create`) works
in the shared checkout.

The project's defaults live in `.omp/config.toml`::

    [team]
    workspace = "worktree"        # or "shared"; default: worktree in a git repository with a
                                  # commit, else shared
    verify = "pytest -q"          # a check every completion must pass (default: none)
    verify_timeout = 900          # seconds (default 15 min)

    [worktree]
    copy = [".env"]               # copied into each new worktree from the leader's checkout
    link = ["node_modules", ".venv"]   # symlinked instead (big directories)

Nothing here runs git: `omp.workspace` does, imported by the callers that need it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from omp.errors import OmpError
from omp.store import project_config
from omp.store.paths import StatePaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

WORKTREE, SHARED = "worktree", "shared"
KINDS = (WORKTREE, SHARED)
DEFAULT_VERIFY_TIMEOUT = 15 * 60.0
MAX_VERIFY_TIMEOUT = 24 * 3600.0
_TEAM_KEYS = ("workspace", "verify", "verify_timeout")
_WORKTREE_KEYS = ("copy", "link")


class Worktree(NamedTuple):
    """A worker's worktree as recorded: where, which branch, from which commit."""

    path: str
    branch: str
    base: str
    host: str = ""  # a worker on another host (`omp.record.placement`): `path` is there

    def to_json(self) -> dict[str, Any]:
        out = {"kind": WORKTREE, "path": self.path, "branch": self.branch, "base": self.base}
        return {**out, "host": self.host} if self.host else out

    @property
    def shown(self) -> str:
        return f"{self.host}:{self.path}" if self.host else self.path


class Settings(NamedTuple):
    """`[team]` and `[worktree]` of `.omp/config.toml` (what a launch falls back to)."""

    workspace: str | None = None  # None: decided by the repository (see the module docstring)
    verify: str | None = None
    verify_timeout: float = DEFAULT_VERIFY_TIMEOUT
    copy: tuple[str, ...] = ()
    link: tuple[str, ...] = ()


def kind(value: str) -> str:
    """`worktree` or `shared`, else `invalid_input`."""
    if value not in KINDS:
        raise OmpError(
            "invalid_input",
            f"--workspace takes worktree or shared, got {value!r}",
            field="workspace",
        )
    return value


def verify_timeout(value: Any, where: str = "--verify-timeout") -> float:
    """Seconds above 0 and at most a day, else `invalid_input`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OmpError("invalid_input", f"{where} must be a number of seconds, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not 0 < v <= MAX_VERIFY_TIMEOUT:
        raise OmpError(
            "invalid_input", f"{where} must be above 0 and at most {MAX_VERIFY_TIMEOUT:g} s"
        )
    return v


def load_settings(project: StatePaths) -> Settings:
    """The project's `[team]` and `[worktree]` tables; `invalid_config` naming the file for a
    value of the wrong kind. `[team]` may hold keys other commands own: only these are checked;
    `[worktree]` is this module's alone, so an unknown key there is a typo and refused."""
    team = project_config.load_table(project, "team")
    wt = project_config.load_table(project, "worktree")
    path = project.config_toml

    def bad(why: str) -> OmpError:
        return OmpError("invalid_config", f"{path}: {why}", file=str(path))

    for key in wt:
        if key not in _WORKTREE_KEYS:
            raise bad(f"unknown [worktree] key {key!r}; known: {', '.join(_WORKTREE_KEYS)}")
    ws = team.get("workspace")
    if ws is not None and ws not in KINDS:
        raise bad(f'[team] workspace must be "worktree" or "shared", got {ws!r}')
    cmd = team.get("verify")
    if cmd is not None and not isinstance(cmd, str):
        raise bad("[team] verify must be a string (a shell command)")
    timeout = team.get("verify_timeout", DEFAULT_VERIFY_TIMEOUT)
    try:
        secs = verify_timeout(timeout, "[team] verify_timeout")
    except OmpError as exc:
        raise bad(exc.message) from None
    lists: dict[str, tuple[str, ...]] = {}
    for key in _WORKTREE_KEYS:
        val = wt.get(key, [])
        if not isinstance(val, list) or not all(isinstance(v, str) and v for v in val):
            raise bad(f"[worktree] {key} must be a list of paths (strings)")
        lists[key] = tuple(val)
    return Settings(
        workspace=ws,
        verify=(cmd.strip() or None) if isinstance(cmd, str) else None,
        verify_timeout=secs,
        copy=lists["copy"],
        link=lists["link"],
    )


def worktree_of(entry: dict[str, Any] | None) -> Worktree | None:
    """The worktree a worker entry records, or None (shared, or no record)."""
    ws = entry.get("workspace") if isinstance(entry, dict) else None
    if not isinstance(ws, dict) or ws.get("kind") != WORKTREE:
        return None
    path, branch, base = ws.get("path"), ws.get("branch"), ws.get("base")
    if not all(isinstance(v, str) and v for v in (path, branch, base)):
        return None
    assert isinstance(path, str) and isinstance(branch, str) and isinstance(base, str)
    host = ws.get("host")
    return Worktree(path, branch, base, host if isinstance(host, str) else "")


def team_verify(raw: dict[str, Any]) -> tuple[str, float] | None:
    """(command, timeout) the team checks completions with, or None."""
    v = raw.get("verify")
    if not isinstance(v, dict):
        return None
    cmd, timeout = v.get("command"), v.get("timeout", DEFAULT_VERIFY_TIMEOUT)
    if not isinstance(cmd, str) or not cmd.strip():
        return None
    ok = isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
    return cmd, float(timeout) if ok else DEFAULT_VERIFY_TIMEOUT


def worktrees(raw: dict[str, Any], *, removed: bool = True) -> list[tuple[str, Worktree, bool]]:
    """(worker, worktree, removed?) of every worker with a worktree, the current roster first,
    then (with `removed`) workers taken off the team whose worktree record was kept."""
    out: list[tuple[str, Worktree, bool]] = []
    seen: set[str] = set()
    groups = [("workers", False)] + ([("removedWorkers", True)] if removed else [])
    for key, gone in groups:
        entries = raw.get(key)
        for e in entries if isinstance(entries, list) else []:
            name = e.get("name") if isinstance(e, dict) else None
            wt = worktree_of(e)
            if isinstance(name, str) and wt is not None and name not in seen:
                seen.add(name)
                out.append((name, wt, gone))
    return out
