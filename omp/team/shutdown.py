"""`omp team shutdown`: kill the team's worker panes (never the leader's) and every process the
workers started (`omp.procs`: each pane's tree and whatever carries the team's environment, even
after a `setsid`), keep every file."""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from omp import clock, procs
from omp.errors import OmpError
from omp.mail.panes import tmux_for, tmux_identity
from omp.record import history
from omp.record.config import TeamConfig
from omp.store import fs
from omp.store.paths import TeamPaths
from omp.tasks import tasks

if TYPE_CHECKING:
    from omp.tmux import Tmux


def team_match(cfg: TeamConfig | TeamPaths, workers: list[str] | None = None) -> procs.EnvMatch:
    """The processes of `cfg`'s team in this project (any launch of it), or of `workers` only."""
    team = cfg.paths if isinstance(cfg, TeamConfig) else cfg
    return procs.EnvMatch(team=team.name, root=str(team.project.root), workers=workers)


def shutdown(cfg: TeamConfig) -> dict[str, Any]:
    team = cfg.paths
    skipped: list[dict[str, str]] = []
    doomed: list[str] = []
    roots: list[int | None] = []
    ident = tmux_identity(cfg)
    leader = cfg.raw.get("leaderPaneId")
    panes = [(w, cfg.pane_of(w)) for w in cfg.worker_names]
    tmux: Tmux | None = None
    if ident and any(p for _, p in panes):
        try:
            tmux = tmux_for(cfg)
            server = tmux.server_identity()
        except Exception:
            server = None
        if not ident.same_server(server):
            tmux = None
            skipped = [{"pane": p, "why": "tmux server gone or restarted"} for _, p in panes if p]
        else:
            assert tmux is not None
            states = tmux.pane_states([p for _, p in panes if p])
            for _w, p in panes:
                if not p:
                    continue
                st = states.get(p)
                if p == leader:
                    skipped.append({"pane": p, "why": "the leader's pane"})
                elif st is None:
                    skipped.append({"pane": p, "why": "already gone"})
                elif st.window_id != ident.window_id:
                    skipped.append({"pane": p, "why": "pane id now belongs to another window"})
                else:
                    doomed.append(p)
                    roots.append(st.pid)
    killed: list[str] = []
    closed_session: list[bool] = []

    def close() -> None:
        if tmux is None:
            return
        for p in doomed:
            tmux.kill_pane(p)
            killed.append(p)
        sess = cfg.raw.get("tmuxSession")
        if cfg.raw.get("createdSession") and isinstance(sess, str) and tmux.has_session(sess):
            tmux.kill_session(sess)
            closed_session.append(True)

    # Every process the team started, whether its pane is still there or not (a worker's agent
    # that setsid'd outlives its pane, its session and its tmux server).
    ended = procs.end_after(close, roots, team_match(cfg))
    # Workers on other hosts: their panes closed there, their branches fetched back before
    # their checkouts go; a host that does not answer is said, the rest completes here.
    far = _remote_part(cfg)
    cleared = tasks.clear_locks(team)
    record = {
        "shutdownAt": clock.iso(),
        "killedPanes": killed,
        "killedSession": bool(closed_session),
        "clearedLocks": cleared,
        "endedProcesses": ended.found,
        **far,
    }
    fs.write_json_atomic(team.shutdown, record)
    for w in cfg.worker_names:
        history.member(team, w, "left", "team shut down")
    from omp.record.workspace import worktrees

    # Worktrees and branches are work: they stay for `omp team merge` (delete or prune removes
    # them once merged).
    kept = [{"worker": w, "path": wt.path, "branch": wt.branch} for w, wt, _ in worktrees(cfg.raw)]
    for row in far.get("remote", []):
        for k in kept:
            if k["worker"] == row["worker"]:
                k["host"] = row["host"]  # its path is on that host
                k["checkoutRemoved"] = row["checkoutRemoved"]
    _mark_merged(cfg, kept)
    return {
        "ok": True,
        "team": cfg.name,
        **record,
        "skipped": skipped,
        "worktrees": kept,
        **_left(ended),
    }


def _remote_part(cfg: TeamConfig) -> dict[str, Any]:
    """`omp.team.remote_life.shut_down` for a team with workers on other hosts (nothing of ssh
    is loaded for a local team)."""
    from omp.mail.panes import has_remote

    if not has_remote(cfg):
        return {}
    from omp.team import remote_life

    return remote_life.shut_down(cfg)


def _mark_merged(cfg: TeamConfig, kept: list[dict[str, Any]]) -> None:
    """`merged` and `target` on each kept worktree: whether the leader's branch already has its
    work (so the text asks to merge only what is not), and `nothingCommitted` for a branch with
    no commit of its own (never called merged). Left out where git cannot tell."""
    if not kept:
        return
    from omp.record.workspace import worktrees
    from omp.workspace.handle import HEADS, Repo

    bases = {w: wt.base for w, wt, _ in worktrees(cfg.raw)}
    try:
        r = Repo(cfg.paths.project.root)
        target = r.current_branch()
    except OmpError:
        return
    if not target:
        return
    for k in kept:
        try:
            tip = r.resolve(HEADS + k["branch"])
            base = bases.get(k["worker"])
            if tip is not None and base and tip == r.since(base, tip, HEADS + target):
                k["nothingCommitted"] = True
            k["merged"] = r.merged_into(k["branch"], target)
            k["target"] = target
        except OmpError:
            continue


def _left(ended: procs.Ended) -> dict[str, Any]:
    """What could not be ended (another user's, unkillable): said, never hidden."""
    return {"processesLeft": ended.left} if ended.left else {}


# ---- `--force`: a team whose config cannot be read ---------------------------------------------

_SOCKET_RE = re.compile(rb'"socketPath"\s*:\s*"((?:[^"\\]|\\.)*)"')


pane_environ = procs.environ  # the environment a pane's process started with (psutil)


def started_by_omp(env: dict[str, str] | None, team: TeamPaths) -> bool:
    """Proof that launch started this pane as a worker of `team` of this project: the variables
    only launch gives a worker's pane (`OMP_TEAM`, `OMP_WORKER`, `OMP_LAUNCH_TOKEN`, `OMP_ROOT`).
    A leader's pane, a person's shell, another project's or team's workers have no such proof."""
    if not env or env.get("OMP_TEAM") != team.name:
        return False
    if not env.get("OMP_WORKER") or not env.get("OMP_LAUNCH_TOKEN"):
        return False
    root = env.get("OMP_ROOT") or ""
    return bool(root) and os.path.realpath(root) == os.path.realpath(team.project.root)


def _servers(team: TeamPaths, socket: str | None) -> list[Tmux]:
    """The tmux servers the team's panes may live on: the socket still legible in the broken
    config, the one named by `--socket`/`OMP_TMUX_SOCKET`, and the default server."""
    from omp.tmux import Tmux

    out: list[Tmux] = []
    try:
        data = fs.read_bytes(team.config) or b""
    except Exception:
        data = b""
    for m in _SOCKET_RE.finditer(data):
        try:
            path = json.loads(b'"' + m.group(1) + b'"')
        except ValueError:
            continue
        if isinstance(path, str) and path:
            out.append(Tmux(socket_path=path))
    name = socket or os.environ.get("OMP_TMUX_SOCKET")
    if name:
        out.append(Tmux(socket_name=name))
    out.append(Tmux())
    return out


def force_shutdown(team: TeamPaths, *, socket: str | None = None) -> dict[str, Any]:
    """Shut down a team whose config cannot be read: kill only the panes omp can prove it
    started for this team (`started_by_omp`), clear its task locks, write `shutdown.json`.
    Every file stays; the name can be launched again."""
    if not team.project.check(team.dir):
        raise OmpError("unknown_team", f"no team named {team.name!r} under {team.project.state}")
    own = os.environ.get("TMUX_PANE")
    killed: list[str] = []
    skipped: list[dict[str, str]] = []
    seen: set[str] = set()
    can_prove = procs.environ_readable()
    found = procs.collect([], team_match(team)) if can_prove else []  # before any pane closes
    for tmux in _servers(team, socket) if can_prove else []:
        try:
            server = tmux.server_identity()
            if server is None or server["socket_path"] in seen:
                continue
            seen.add(server["socket_path"])
            panes = tmux.all_panes()
        except Exception:
            continue
        for pane_id, st in sorted(panes.items()):
            if st.pid is None or pane_id == own or st.dead:
                continue
            if started_by_omp(pane_environ(st.pid), team):
                tmux.kill_pane(pane_id)
                killed.append(pane_id)
    if not can_prove:
        skipped.append(
            {
                "pane": "-",
                "why": "no process environments here: omp cannot prove which panes it started",
            }
        )
    ended = procs.terminate(found)
    cleared = tasks.clear_locks(team)
    record = {
        "shutdownAt": clock.iso(),
        "killedPanes": killed,
        "killedSession": False,
        "clearedLocks": cleared,
        "forced": True,
        "endedProcesses": ended.found,
    }
    fs.write_json_atomic(team.shutdown, record)
    return {"ok": True, "team": team.name, **record, "skipped": skipped, **_left(ended)}
