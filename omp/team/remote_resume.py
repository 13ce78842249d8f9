"""`omp team resume` for workers on other hosts: each one whose pane there is dead or gone gets a
new pane on its host, in the checkout kept there (`omp.team.remote.reopen`), as a local member
gets one beside the team's panes (`omp.team.resume`).

Per member, as a local resume does: a new launch token (a new generation: the earlier pane's
agent, if it somehow lives, is refused there too, since the host's mirrored config is written
again first), its recorded command (`command` of its config entry: what launch started on the
host), its resume inbox written on the host (`workers/<w>/resume.md` under its mirrored state),
the agent waited for and typed `Read <resume.md> and follow it.`. A member whose host does not
answer is skipped, said so, never started twice: a pane that cannot be looked at may be alive.
The config is written once the new pane runs (the token first reached the host: the mirror).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.mail import bootstrap, mailbox
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.record.placement import Placed, host_of, placed_of
from omp.tasks import tasks
from omp.team.membership import members_locked

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.tmux import Tmux


def split(cfg: TeamConfig, names: list[str] | None) -> tuple[list[str] | None, list[str]]:
    """(the local members to resume: None for all of them, [] for none; the remote ones)."""
    far = [w for w in cfg.worker_names if isinstance((cfg.worker(w) or {}).get("remote"), dict)]
    if names is None:
        local = [w for w in cfg.worker_names if w not in far]
        return (None if len(local) == len(cfg.worker_names) else local), far
    return [n for n in names if n not in far], [n for n in names if n in far]


def _store_url(cfg: TeamConfig) -> str:
    """The store's URL with the project's namespace named: what the host's omp is given
    (through ssh's stdin into its 0600 file, never a command line)."""
    from omp.store import select

    url = select.configured_url(cfg.paths.project)
    return select.with_namespace(url, select.namespace(cfg.paths.project, url)) if url else ""


def _task_of(cfg: TeamConfig, worker: str) -> dict[str, Any] | None:
    found = tasks.list_all(cfg.paths)
    held = [t for t in found if t.get("owner") == worker and t.get("status") == "in_progress"]
    if held:
        return held[0]
    tid = (cfg.worker(worker) or {}).get("taskId")
    return next((t for t in found if str(t.get("id")) == str(tid)), None) if tid else None


# (the host's tmux, the agent's profile, the worker, its new pane, its resume inbox there):
# waits for the agent and types the line that hands it over (`omp.team.resume` gives launch's)
Waiter = Callable[["Tmux", "AgentProfile", str, str, Path], None]


def resume_remote(cfg: TeamConfig, names: list[str], *, wait: Waiter) -> dict[str, Any]:
    """Resume the remote members `names` (see the module docstring): `resumed`, `skipped`."""
    from omp.agents import load_profiles
    from omp.mail.remote_panes import remote_views
    from omp.team import remote
    from omp.tmux.remote import RemoteTmux

    if not names:
        return {"resumed": [], "skipped": []}
    views = remote_views(cfg, names)
    resumed: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    profiles = load_profiles(cfg.paths.project.root)
    url = _store_url(cfg)
    for w in names:
        entry = cfg.worker(w) or {}
        view = views.get(w)
        placed = placed_of(entry)
        host = host_of(cfg.raw, entry)
        if view is None or placed is None or host is None:
            skipped.append({"name": w, "why": "its record does not say where it runs"})
            continue
        row = {"name": w, "host": placed.host}
        if view.state == "alive":
            skipped.append({**row, "paneId": placed.pane, "why": "its pane is alive"})
            continue
        if view.state in ("unreachable", "unknown"):
            skipped.append(
                {**row, "why": f"its host {placed.host} did not answer: {view.note or '?'}"}
            )
            continue
        command = entry.get("command")
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise OmpError(
                "resume_failed",
                f"{w} on {placed.host}: its config entry records no command to start it with",
                worker=w,
            )
        agent = str(entry.get("agent") or cfg.raw.get("agent") or "copilot")
        profile = profiles.get(agent)
        if profile is None:
            raise OmpError("unknown_agent", f"{w} ran agent {agent!r}, which has no profile now")
        why = "its agent had exited" if view.state == "dead" else "its pane was gone"
        token = secrets.token_hex(8)
        now = clock.iso()
        raw = team_config.load(cfg.paths).raw  # the newest, with the new token for the mirror
        for e in raw.get("workers") or []:
            if isinstance(e, dict) and e.get("name") == w:
                e["launchToken"] = token
        text = bootstrap.resume_markdown(
            team=cfg.name,
            worker=w,
            restarted_at=now,
            why=why,
            inbox=Path(remote.inbox_path(placed.root, cfg.name, w)),
            conversation_resumed=False,
            task=_task_of(cfg, w),
            result_path=Path(f"{remote.state_dir(placed.root, cfg.name)}/workers/{w}/result.md"),
            worktree={"path": placed.worktree, "branch": placed.branch},
            unread=mailbox.Mailbox(cfg.paths, w).unread_count(),
            omp=host.settings.omp,
        )
        new = remote.reopen(
            host,
            placed,
            team=cfg.name,
            worker=w,
            config=raw,
            token=token,
            store_url=url,
            agent_command=list(command),
            resume_text=text,
        )
        _record(cfg, w, new, token, now)
        history.member(cfg.paths, w, "resumed", why)
        inbox = Path(remote.resume_inbox_path(placed.root, cfg.name, w))
        wait(RemoteTmux(host, placed.socket), profile, w, new.pane, inbox)
        resumed.append(
            {
                **row,
                "paneId": None,
                "pane": new.pane,
                "agent": profile.name,
                "why": why,
                "conversation": "new",
                "sessionId": None,
                "sessionFrom": None,
                "cwd": placed.worktree,  # on its host
                "worktree": {"path": placed.worktree, "branch": placed.branch},
                "missingEnv": [],
                "inbox": str(inbox),  # on its host
            }
        )
    return {"resumed": resumed, "skipped": skipped}


def _record(cfg: TeamConfig, worker: str, placed: Placed, token: str, now: str) -> None:
    """The member's new pane and token in the leader's config, under the members lock."""
    team = cfg.paths
    with members_locked(team):
        fresh = team_config.load(team)
        for entry in fresh.workers:
            if entry.get("name") != worker:
                continue
            entry["remote"] = placed.to_config()
            entry["launchToken"] = token
            entry["resumedAt"] = now
            entry["resumes"] = int(entry.get("resumes") or 0) + 1
        team_config.write(team, fresh.raw)
