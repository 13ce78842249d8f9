"""Which agent session a worker pane runs, as the worker's own hooks report it.

A worker's stop is never held by the leader's loop (`omp.stophook.run`). What a worker's hook
does instead is record the agent's session for that worker, in
`workers/<worker>/session.json`:

    {"agent": "copilot", "sessionId": "...", "transcriptPath": "...", "cwd": "...",
     "updatedAt": "<when the record last changed>"}

`omp team resume` starts the CLI back into that session (the profile's `resume_args`); the token
usage readers find the agent's own record through `transcriptPath`. The field names are shared
with them: add fields, never rename one.

Nothing is written unless the pane proves it is a current member of an existing team: its
`OMP_TEAM` / `OMP_WORKER` name a worker of the config under `OMP_ROOT`, and its
`OMP_LAUNCH_TOKEN` is that worker's current one (a pane of an earlier generation, fenced off after
a resume or a relaunch, must not overwrite its successor's record). The worker's directory must
exist: a team's directories are never created here. The write is atomic, and skipped when nothing
changed (a hook fires on every stop).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.record import config as team_config
from omp.store import fs, names
from omp.store.paths import StatePaths, TeamPaths, find_root

# What a session id may look like before omp puts it on an agent's command line: the UUIDs and
# ids the CLIs print, never a path or a shell word.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
FIELDS = ("agent", "sessionId", "transcriptPath", "cwd")


def valid_id(value: object) -> str | None:
    return value if isinstance(value, str) and SESSION_ID.fullmatch(value) else None


def read(team: TeamPaths, worker: str) -> dict[str, Any] | None:
    """The recorded session of `worker`, or None (none, unreadable, or an id omp would not put
    on a command line). Read-only."""
    try:
        if not team.project.check(team.worker_dir(worker)):
            return None
        obj = fs.read_json(team.session(worker))
    except Exception:
        return None
    if not isinstance(obj, dict) or valid_id(obj.get("sessionId")) is None:
        return None
    return obj


def _member(env: Mapping[str, str], cwd: str | None) -> tuple[TeamPaths, str] | None:
    """(team, worker) when the pane's identity names a current member; else None."""
    team_name, worker = env.get("OMP_TEAM", ""), env.get("OMP_WORKER", "")
    token = env.get("OMP_LAUNCH_TOKEN", "")
    if not (names.is_valid_name(team_name) and names.is_valid_name(worker) and token):
        return None
    root = env.get("OMP_ROOT") or None
    project = StatePaths(find_root(root or cwd))
    team = project.team(team_name)
    try:
        cfg = team_config.load(team)
    except OmpError as exc:
        if exc.code == "unknown_team":
            return None  # a deleted team: nothing to record, nothing to say
        raise
    entry = cfg.worker(worker)
    if entry is None:
        return None
    if (entry.get("launchToken") or cfg.raw.get("launchToken")) != token:
        return None  # a pane of an earlier generation
    if not team.project.check(team.worker_dir(worker)):
        return None
    return team, worker


def record(
    env: Mapping[str, str],
    *,
    agent: str,
    session_id: str | None,
    transcript_path: str | None,
    cwd: str | None,
) -> bool:
    """Record the worker's session (see the module docstring); True when the file changed.
    Raises on an unreadable config or a full disk: the hook logs it and still lets the agent
    stop."""
    sid = valid_id(session_id)
    if sid is None:
        return False
    found = _member(env, cwd)
    if found is None:
        return False
    team, worker = found
    old = read(team, worker) or {}
    new: dict[str, Any] = {**old, "agent": agent, "sessionId": sid, "cwd": cwd or old.get("cwd")}
    if transcript_path:
        new["transcriptPath"] = transcript_path
    elif old.get("sessionId") != sid:
        new["transcriptPath"] = None  # another session: the old transcript is not its record
    if all(old.get(k) == new.get(k) for k in FIELDS):
        return False
    new["updatedAt"] = clock.iso()
    fs.write_json_atomic(team.session(worker), new)
    return True
