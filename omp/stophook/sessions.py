"""Which agent session a worker pane (or a team's leader pane) runs, as its own hooks report it.

A worker's stop is never held by the leader's loop (`omp.cli.hook_stop`). What a worker's hook
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

The leader's pane carries no team identity in its environment (the person started its agent,
often before any team): its hook records `workers/leader/session.json` (`record_leader`) in each
team of the project whose recorded leader pane is this one, proved by tmux itself: `$TMUX_PANE`
is the config's `leaderPaneId`, and `$TMUX` (`<socket>,<server pid>,<session>`) names the
socket and the server process recorded in its `tmuxIdentity` (a pane id is unique only within
one server's life). A team shut down takes a leader's record only when it has none yet and was
shut down less than `SHUT_GRACE_S` ago: a leader that ran the whole team in one turn stops for
the first time after its `shutdown`, and that session is the team's; a later session in the same
pane is not (a relaunch archives the file with the run). `workers/leader/` is made inside an
existing team's directory only (`TeamPaths.ensure_in`), never the team's own directory.

On the per-call layer (every stop of every agent runs it): the tree as strings
(`omp.store.layout`), the clock read only for a team shut down.
"""

from __future__ import annotations

import os

from omp import clock
from omp.errors import OmpError
from omp.record import config as team_config
from omp.store import fs, names
from omp.store.layout import ProjectFiles, find_root
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from omp.store.layout import TeamFiles
    from omp.store.paths import StatePaths, TeamPaths

# What a session id may look like before omp puts it on an agent's command line: the UUIDs and
# ids the CLIs print, never a path or a shell word: `[A-Za-z0-9][A-Za-z0-9._:-]{0,199}`, checked
# with str methods (a compiled pattern would load `re` on the way of `omp team status`)
_ID_CHARS = names.ALNUM + "._:-"
FIELDS = ("agent", "sessionId", "transcriptPath", "cwd")
SHUT_GRACE_S = 900.0  # a shut-down team still takes its leader's first record this long after


def valid_id(value: object) -> str | None:
    return value if names.is_word(value, _ID_CHARS, 200) else None


def read(team: TeamPaths | TeamFiles, worker: str) -> dict[str, Any] | None:
    """The recorded session of `worker`, or None (none, unreadable, or an id omp would not put
    on a command line). Read-only."""
    team = team.files
    try:
        if not team.project.check(team.worker_dir(worker)):
            return None
        obj = fs.read_json(team.session(worker))
    except Exception:
        return None
    if not isinstance(obj, dict) or valid_id(obj.get("sessionId")) is None:
        return None
    return obj


def _member(env: Mapping[str, str], cwd: str | None) -> tuple[TeamFiles, str] | None:
    """(team, worker) when the pane's identity names a current member; else None."""
    team_name, worker = env.get("OMP_TEAM", ""), env.get("OMP_WORKER", "")
    token = env.get("OMP_LAUNCH_TOKEN", "")
    if not (names.is_valid_name(team_name) and names.is_valid_name(worker) and token):
        return None
    root = env.get("OMP_ROOT") or None
    project = ProjectFiles(find_root(root or cwd))
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
    return _write(team, worker, agent, sid, transcript_path, cwd)


def _write(
    team: TeamFiles,
    member: str,
    agent: str,
    sid: str,
    transcript_path: str | None,
    cwd: str | None,
) -> bool:
    old = read(team, member) or {}
    new: dict[str, Any] = {**old, "agent": agent, "sessionId": sid, "cwd": cwd or old.get("cwd")}
    if transcript_path:
        new["transcriptPath"] = transcript_path
    elif old.get("sessionId") != sid:
        new["transcriptPath"] = None  # another session: the old transcript is not its record
    if all(old.get(k) == new.get(k) for k in FIELDS):
        return False
    new["updatedAt"] = clock.iso()
    fs.write_json_atomic(team.session(member), new)
    return True


# ---- the leader's pane ------------------------------------------------------------------------


def tmux_of(env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(pane id, socket path, server pid) of the tmux pane this process runs in, from tmux's
    own variables; None outside tmux (or when they are malformed)."""
    pane = env.get("TMUX_PANE", "")
    parts = env.get("TMUX", "").split(",")
    if not (pane.startswith("%") and pane[1:].isdigit()) or len(parts) < 2:
        return None
    sock, pid = parts[0], parts[1]
    if not sock.startswith("/") or not pid.isdigit():
        return None
    return pane, sock, pid


def leader_teams(
    project: StatePaths | ProjectFiles, env: Mapping[str, str]
) -> list[tuple[TeamFiles, bool]]:
    """(team, shut down) for the teams of `project` whose recorded leader pane is the one this
    process runs in (see the module docstring); a team shut down `SHUT_GRACE_S` ago or more is
    left out. Read-only; [] outside tmux."""
    here = tmux_of(env)
    if here is None:
        return []
    pane, sock, pid = here
    project = project.files
    out = []
    for name in team_config.team_dir_entries(project):
        if not names.is_valid_name(name):
            continue
        try:
            cfg = team_config.load(project.team(name))
        except (OmpError, OSError):
            continue  # a config omp cannot read names no pane of ours
        ident = cfg.tmux or {}
        if cfg.raw.get("leaderPaneId") != pane or ident.get("socketPath") != sock:
            continue
        server = ident.get("serverPid")
        if server is None or str(server) != pid:
            continue  # another incarnation of the server: the pane id is another pane's
        shut = os.path.lexists(cfg.files.shutdown)
        if shut and not _shut_lately(cfg.files):
            continue
        out.append((cfg.files, shut))
    return out


def _shut_lately(team: TeamFiles) -> bool:
    """Was the team shut down less than `SHUT_GRACE_S` ago (by its `shutdown.json`)?"""
    try:
        doc = fs.read_json(team.shutdown) if fs.check_entry(team.shutdown, want_dir=False) else None
    except Exception:
        return False
    at = clock.parse_iso(str(doc.get("shutdownAt") or "")) if isinstance(doc, dict) else None
    return at is not None and 0 <= clock.now() - at < SHUT_GRACE_S


def record_leader(
    env: Mapping[str, str],
    project: StatePaths | ProjectFiles,
    *,
    agent: str,
    session_id: str | None,
    transcript_path: str | None,
    cwd: str | None,
) -> list[str]:
    """Record the leader's session in every team this pane leads (see the module docstring);
    the teams whose file changed. A team deleted meanwhile is skipped, never made again; any
    other failure raises (the hook logs it and lets the agent stop)."""
    sid = valid_id(session_id)
    if sid is None:
        return []
    changed = []
    for team, shut in leader_teams(project, env):
        if shut and read(team, LEADER) is not None:
            continue  # the session that ran the team is recorded: a later one is not the team's
        try:
            team.ensure_in(team.worker_dir(LEADER))
            if _write(team, LEADER, agent, sid, transcript_path, cwd):
                changed.append(team.name)
        except OmpError as exc:
            if exc.code != "unknown_team":
                raise
    return changed
