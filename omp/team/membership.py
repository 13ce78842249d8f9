"""Changing a live team's members: `omp team remove-worker` (and the bookkeeping `add-worker`
shares with it; the panes of `add-worker` are made by `omp.team.launch`).

The rules are pi-team's. Removing a member is refused while its pane is alive unless `--force`,
which first closes that pane (only if it is still the pane recorded for the worker). Then the work
around it is settled, never replayed (edits may already have happened):

- requests it emitted that are still open are cancelled: the worker doing them gets an automatic
  `task_cancel` (and owes no acknowledgement: the requester is gone);
- requests addressed to it, and tasks it claimed, become `interrupted`, and their requesters get
  an automatic `task_fail` saying so (the sweep's own path for a worker that went offline);
- its mailbox, results and directory stay readable; its name leaves the roster;
- its identity is fenced: the name is kept in `removedWorkers`, and a process still carrying the
  old `OMP_WORKER` / `OMP_LAUNCH_TOKEN` is refused (`worker_removed`, or `stale_generation` once a
  new worker took the name with a token of its own: a new generation).

Config changes happen under `team/<name>/.members.lock`, so two membership changes never lose one
another's edit; the config is rewritten atomically (readers see the old or the new roster).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from omp import clock, procs
from omp.conversations import record as conversations
from omp.errors import OmpError
from omp.mail import mailbox
from omp.monitor import sweep
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.store import fs, locks
from omp.store.names import worker_name
from omp.store.paths import TeamPaths
from omp.tasks import tasks


@contextlib.contextmanager
def members_locked(team: TeamPaths) -> Iterator[None]:
    # the lock file may be made here, its team's directory never (a team deleted meanwhile)
    try:
        fd = fs.open_file(team.members_lock, os.O_RDWR, create=True)
    except FileNotFoundError:
        raise team.gone() from None
    try:
        locks.acquire(fd)
        yield
    finally:
        os.close(fd)


def removed_names(raw: dict[str, Any]) -> list[str]:
    gone = raw.get("removedWorkers")
    if not isinstance(gone, list):
        return []
    return [str(g.get("name")) for g in gone if isinstance(g, dict) and g.get("name")]


def require_worker(cfg: TeamConfig, name: str) -> dict[str, Any]:
    worker_name(name)
    entry = cfg.worker(name)
    if entry is None:
        gone = name in removed_names(cfg.raw)
        raise OmpError(
            "unknown_worker",
            f"{name!r} is not a worker of team {cfg.name}"
            + (" (it was removed)" if gone else "")
            + f"; workers: {', '.join(cfg.worker_names) or 'none'}",
            candidates=cfg.worker_names,
        )
    return entry


def _pane_state(cfg: TeamConfig, name: str) -> str:
    from omp.mail.panes import pane_views

    view = pane_views(cfg).get(name)
    return view.state if view is not None else "none"


LIVE = ("alive", "unknown", "unreachable")  # a pane not proven down (a host that does not answer)


def _where(cfg: TeamConfig, name: str) -> str | None:
    """`%3@build1` for a worker on another host, else its pane id."""
    remote = (cfg.worker(name) or {}).get("remote")
    if isinstance(remote, dict):
        return f"{remote.get('pane')}@{remote.get('host')}"
    return cfg.pane_of(name)


def _close_pane(cfg: TeamConfig, name: str, close: bool) -> tuple[str | None, procs.Ended]:
    """Kill the worker's pane if `close` and it is still the one recorded, and end every process
    the worker started (its pane's tree, and what carries its environment even after a
    `setsid`, pane or no pane); returns the pane killed."""
    from omp.mail.panes import tmux_for, tmux_identity
    from omp.team.shutdown import team_match

    pane = cfg.pane_of(name)
    ident = tmux_identity(cfg)
    match = team_match(cfg, [name])
    if not close or pane is None or not ident or pane == cfg.raw.get("leaderPaneId"):
        return None, procs.end_after(lambda: None, [], match)
    tmux = tmux_for(cfg)
    if not ident.same_server(tmux.server_identity()):
        return None, procs.end_after(lambda: None, [], match)
    st = tmux.pane_states([pane]).get(pane)
    if st is None or st.window_id != ident.window_id:
        return None, procs.end_after(lambda: None, [], match)
    return pane, procs.end_after(lambda: tmux.kill_pane(pane), [st.pid], match)


def remove_worker(cfg: TeamConfig, name: str, *, force: bool = False) -> dict[str, Any]:
    """Take `name` off the team, then settle what it held (see the module docstring).

    The roster changes first, then the work is settled: a `claim-task` checks membership under
    the tasks' guard (`omp.tasks.tasks.claim`), and the settling starts by taking that guard, so
    a claim racing this removal either lands before the settling (which interrupts it) or finds
    the worker gone; a task is never left in_progress with an owner who is not a member. Run on
    a worker removed already (by an older omp, or a removal killed midway), it settles again."""
    team = cfg.paths
    worker_name(name)
    already = name not in cfg.worker_names and name in removed_names(cfg.raw)
    close = False
    if not already:
        require_worker(cfg, name)
        state = _pane_state(cfg, name)
        if state in LIVE and not force:
            where = _where(cfg, name)
            raise OmpError(
                "worker_alive",
                f"{name}'s pane ({where}) is {state}; stop its agent first, or use "
                "--force to close the pane"
                + (" (a host that does not answer keeps what is there)" if where else ""),
                worker=name,
                pane=cfg.pane_of(name),
            )
        close = state in LIVE
    # Removed already (a removal killed midway): no pane to close, but whatever process of the
    # worker outlived it is still ended.
    killed, ended = _close_pane(cfg, name, close)
    before = cfg
    now = clock.now()
    with members_locked(team):
        cfg = team_config.load(team)  # fresh, under the lock
        raw = cfg.raw
        removed_now = name in cfg.worker_names
        if removed_now:
            entry = require_worker(cfg, name)
            raw["workers"] = [w for w in cfg.workers if w.get("name") != name]
            raw["workerCount"] = len(raw["workers"])
            gone = [g for g in raw.get("removedWorkers") or [] if isinstance(g, dict)]
            gone.append(
                {
                    "name": name,
                    "removedAt": clock.iso(now),
                    "paneId": entry.get("paneId"),
                    "launchToken": entry.get("launchToken") or raw.get("launchToken"),
                    # its branch stays, for `omp team merge` (and delete's safety check)
                    **({"workspace": entry["workspace"]} if "workspace" in entry else {}),
                    # where it ran: a later remove-worker finishes the host's part
                    **({"remote": entry["remote"]} if "remote" in entry else {}),
                }
            )
            raw["removedWorkers"] = gone
            team_config.write(team, raw)
        elif name not in removed_names(raw):
            require_worker(cfg, name)  # unknown_worker
        # Every claim that read the old roster under the guard is done once we hold it.
        tasks.settle_claims(team)
        actions = sweep.interrupt_worker(cfg, name, "it was removed from the team", now)
        actions += _cancel_emitted(cfg, name, now)
    if removed_now:
        history.member(team, name, "removed")
    far = _remote_part(before, name, raw)
    tree = _drop_worktree(cfg, name) if removed_now and far is None else None
    down = _tell_hosts(before, raw) if far is None else []
    return {
        "ok": True,
        "team": cfg.name,
        "worker": name,
        "alreadyRemoved": not removed_now,
        "killedPane": killed,
        "endedProcesses": ended.found,
        **({"processesLeft": ended.left} if ended.left else {}),
        "interrupted": [a for a in actions if a.get("action") == "interrupted"],
        "cancelled": [a for a in actions if a.get("action") == "cancelled"],
        "workers": [w["name"] for w in raw["workers"] if isinstance(w, dict)],
        "worktree": tree,
        **({"remote": far} if far is not None else {}),
        **({"hostsNotUpdated": down} if down else {}),
    }


def _remote_part(cfg: TeamConfig, name: str, raw_after: dict[str, Any]) -> dict[str, Any] | None:
    """A worker on another host: its pane there closed, its branch fetched back, its checkout
    removed once safe, the host's mirrored config updated (`omp.team.remote_life.remove_one`).
    None for a local worker (nothing of ssh loaded). Run again on a worker removed already, it
    finishes what a host that did not answer left."""
    from omp.mail.panes import has_remote

    gone = raw_after.get("removedWorkers")
    if not has_remote(cfg) and not any(
        isinstance(g, dict) and g.get("name") == name and isinstance(g.get("remote"), dict)
        for g in (gone if isinstance(gone, list) else [])
    ):
        return None
    from omp.team import remote_life

    return remote_life.remove_one(cfg, name, raw_after)


def _tell_hosts(cfg: TeamConfig, raw_after: dict[str, Any]) -> list[dict[str, Any]]:
    """A local worker removed from a team with workers on other hosts: each host's mirrored
    config learns it (the omp there fences the removed identity too); the hosts that did not
    answer. Nothing of ssh loaded for a team on this host alone."""
    from omp.mail.panes import has_remote

    if not has_remote(cfg):
        return []
    from omp.team.grow_hosts import mirror_everywhere

    return mirror_everywhere(raw_after, cfg.name)


def _drop_worktree(cfg: TeamConfig, name: str) -> dict[str, Any] | None:
    """A removed worker's worktree goes when it holds nothing uncommitted; its branch always
    stays (merge it, or delete the team once it is merged)."""
    from omp.record.workspace import worktree_of
    from omp.team import worktrees

    gone = [g for g in cfg.raw.get("removedWorkers") or [] if isinstance(g, dict)]
    wt = worktree_of(next((g for g in reversed(gone) if g.get("name") == name), None))
    if wt is None:
        return None
    rows = worktrees.remove_safely(cfg.paths.project.root, [(name, wt)], keep_branch=True)
    return rows[0]._asdict() if rows else None


def _cancel_emitted(cfg: TeamConfig, name: str, now: float) -> list[dict[str, Any]]:
    """Cancel the open requests `name` emitted: their workers are told to stop."""
    team = cfg.paths
    out: list[dict[str, Any]] = []
    with conversations.locked(team):
        for conv in conversations.open_conversations(team):
            if conv.requester != name:
                continue
            body = (
                f"{name} was removed from the team: its request {conv.task_id} is cancelled. "
                "Stop work on it; no acknowledgement is needed."
            )
            msg = mailbox.new_message(
                name,
                conv.worker,
                body,
                {"event": "task_cancel", "intent": "requester_removed", "auto": True},
            )
            msg["task_id"] = conv.task_id
            msg["ref_message_id"] = conv.task_id
            before = conv.payload()
            conv.state = "cancelled"
            conv.reason = f"{name} was removed"
            conv.closed_at = now
            conv.clarify_open = None
            conv.add_event(msg, now)
            action: dict[str, Any] = {
                "action": "cancelled",
                "team": cfg.name,
                "taskId": conv.task_id,
                "worker": conv.worker,
                "requester": name,
                "messageId": msg["id"],
                "notify": conv.worker,
            }
            sweep.commit(team, conv, before, conv.worker, msg, action)
            out.append(action)
    return out
