"""`omp team add-worker TEAM [N] [--agent A] [TASK]`: new workers join a running team.

The panes, inboxes and triggers are made by the launch's own code (`Launch.open_pane`,
`write_inbox`, `wait_and_trigger`); what is particular here is where they go and what they are
called. New workers take the next free numbers (after every current *and* removed name, so a
newcomer never inherits a removed worker's mailbox), split off the team's window on the server
recorded at launch, and carry a launch token of their own (a new generation: `OMP_LAUNCH_TOKEN`
fences them apart from every earlier pane). The config gains their entries under the team's
members lock, so the roster, broadcasts, `status` and the monitor include them at once; teammates'
inboxes are not rewritten (they list teammates with `roster`). A headless team (no panes: `omp
team create`) gets the entries and inboxes only.

`--host NAME[:N]` places N of the newcomers on another host as launch places its remote workers
(`omp.team.grow_hosts`); after any add to a team with workers on other hosts, every one of its
hosts is sent the grown config (the omp there knows its new teammates).

Everything that can refuse is checked before tmux or the disk is touched; a failure after the
first pane kills the new panes and takes their entries and tasks back out of the team.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint, team_command
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.store.names import worker_name
from omp.tasks import tasks
from omp.team import setup
from omp.team.launch import MAX_WORKERS, Launch, LaunchRequest, Progress
from omp.team.membership import members_locked, removed_names

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.tmux import Tmux

_NUMBERED = re.compile(r"worker-(\d+)")


def next_names(cfg: TeamConfig, n: int) -> list[str]:
    used = [*cfg.worker_names, *removed_names(cfg.raw)]
    top = max((int(m.group(1)) for u in used if (m := _NUMBERED.fullmatch(u))), default=0)
    return [worker_name(f"worker-{top + i}") for i in range(1, n + 1)]


def _next_task_ids(cfg: TeamConfig, n: int) -> list[str]:
    ids = [str(t["id"]) for t in tasks.list_all(cfg.paths)]
    ids += [str(w.get("taskId")) for w in cfg.workers if w.get("taskId")]
    top = max((int(i) for i in ids if i.isdigit()), default=0)
    return [str(top + i) for i in range(1, n + 1)]


class AddWorkers(Launch):
    def __init__(
        self,
        cfg: TeamConfig,
        count: int,
        *,
        agent: str | None,
        task: str,
        env: Mapping[str, str] | None = None,
        tmux_factory: Callable[..., Tmux] | None = None,
        progress: Progress | None = None,
        ready_timeout: float | None = None,
        workspace: str | None = None,
        carry_changes: bool = False,
        hosts: Sequence[tuple[str, int]] = (),
    ) -> None:
        cwd = Path(str(cfg.raw.get("cwd") or cfg.paths.project.root))
        req = LaunchRequest(
            workers=count,
            task=task.strip(),
            agent=agent or str(cfg.raw.get("agent") or cfg.raw.get("role") or "copilot"),
            name=cfg.name,
            cwd=cwd if cwd.is_dir() else cfg.paths.project.root,
            ready_timeout=ready_timeout,
            workspace=workspace,
            carry_changes=carry_changes,
            hosts=list(hosts),
        )
        super().__init__(req, env=env, tmux_factory=tmux_factory, progress=progress)
        self.cfg = cfg
        self.added: list[str] = []
        self.created_tasks: list[str] = []
        # a team with workers on other hosts (`omp.team.grow_hosts`): the config before this
        # add (what a failure mirrors back), whether the grown one reached a host, and the hosts
        # that did not take it
        self.before: dict[str, Any] = copy.deepcopy(cfg.raw)
        self.mirrored = False
        self.hosts_not_updated: list[dict[str, Any]] = []
        from omp.team.backlog import BacklogStart

        # a backlog team's newcomers take tasks from its queue (`omp.team.backlog`)
        self.backlog = BacklogStart.joining(cfg)

    # ---- checks that touch nothing ------------------------------------------------------------

    def check(self) -> AgentProfile:
        cfg, req = self.cfg, self.req
        room = MAX_WORKERS - len(cfg.worker_names)
        if not 1 <= req.workers <= max(room, 0) or req.workers > MAX_WORKERS:
            raise OmpError(
                "invalid_input",
                f"team {cfg.name} has {len(cfg.worker_names)} worker(s); it can take 1-{room} more "
                f"(at most {MAX_WORKERS})",
            )
        if req.ready_timeout is not None and req.ready_timeout <= 0:
            raise OmpError("invalid_input", f"--ready-timeout must be > 0, got {req.ready_timeout}")
        if self.backlog is not None and req.task:
            raise OmpError(
                "usage",
                f"team {cfg.name} hands out tasks from its backlog: add the task with "
                f"{hint(f'team task add {cfg.name} <title>')} and the new workers take it",
            )
        if os.path.lexists(cfg.paths.shutdown):
            raise OmpError(
                "team_shut_down",
                f"team {cfg.name} was shut down; launch it again instead: "
                f"{hint(f'team launch N --name {cfg.name}')}",
                team=cfg.name,
            )
        # a headless team's workers run nowhere: only the profile's name matters
        profile = self.resolve_profile(cfg.paths.project, need_program=bool(cfg.tmux))
        self._plan_workspace()
        if req.hosts:
            from omp.team import grow_hosts

            self.remote = grow_hosts.plan(
                cfg,
                req.hosts,
                next_names(cfg, req.workers),
                worktree=self.plan is not None and self.plan.worktree,
                backlog=self.backlog is not None,
                progress=self.progress,
            )
        return profile

    def _plan_workspace(self) -> None:
        """The newcomers' workspace: --workspace, else the team's, else the project's (a headless
        team's: shared); their completions are checked as the team's are (its launch's
        `--verify`), never by a project default the team did not launch with."""
        from omp.record.workspace import team_verify

        cfg = self.cfg
        recorded = cfg.raw.get("workspace")
        kind = recorded.get("kind") if isinstance(recorded, dict) else None
        if kind is None and not cfg.tmux:
            kind = "shared"
        check = team_verify(cfg.raw)
        self.req.verify = check[0] if check else ""
        self.req.verify_timeout = check[1] if check else None
        self.plan_workspace(
            cfg.paths.project,
            cfg.name,
            next_names(cfg, self.req.workers),
            team_default=kind if isinstance(kind, str) else None,
        )

    def _window(self) -> tuple[Tmux, str, str] | None:
        """(tmux, window, the pane to split) for a team with panes; None for a headless one."""
        from omp.mail.panes import tmux_identity

        cfg = self.cfg
        ident = tmux_identity(cfg)
        if not ident or not ident.window_id:
            return None
        sock = ident.socket_path
        tmux = self.tmux_factory(socket_path=sock) if sock else self.tmux_factory()
        if not ident.same_server(tmux.server_identity()):
            raise OmpError(
                "team_gone",
                f"the tmux server of team {cfg.name} is gone or was restarted; its panes cannot "
                f"be joined. Shut it down and launch again: {hint(f'team shutdown {cfg.name}')}",
                team=cfg.name,
            )
        window = ident.window_id
        candidates = [p for p in (cfg.pane_of(w) for w in cfg.worker_names) if p]
        leader = cfg.pane_of("leader")
        states = tmux.pane_states([*candidates, *([leader] if leader else [])])
        for pane in [*reversed(candidates), *([leader] if leader else [])]:
            st = states.get(pane)
            if st is not None and st.window_id == window:
                return tmux, window, pane
        raise OmpError(
            "team_gone",
            f"no pane of team {cfg.name} is left in its window; shut it down and launch again",
            team=cfg.name,
        )

    # ---- the change -----------------------------------------------------------------------------

    def watches(self, result: dict[str, Any]) -> bool:
        return bool(self.cfg.tmux) or self._remote_team()

    def _remote_team(self) -> bool:
        """Does the team (as it was, or with the newcomers) have workers on other hosts?"""
        from omp.mail.panes import has_remote

        return self.remote is not None or has_remote(self.cfg)

    def project_root(self) -> Path:
        return self.cfg.paths.project.root

    def run(self) -> dict[str, Any]:
        profile = self.check()
        here = self.req.workers - len(self.remote.where if self.remote else {})
        place = self._window() if here else None
        try:
            return self._add(profile, place)
        except BaseException as exc:
            self.unwind(exc)
            self._undo(place[0] if place else None)
            if self.remote is not None or self.mirrored:
                from omp.team import grow_hosts

                grow_hosts.undo(self.remote, self.before, self.cfg.name, mirrored=self.mirrored)
            if isinstance(exc, OmpError):
                raise OmpError(
                    exc.code if exc.code.startswith("launch") else "add_worker_failed",
                    f"adding to team {self.cfg.name} failed: {exc.message}; the team is as before",
                    **exc.detail,
                ) from None
            raise

    def _add(self, profile: AgentProfile, place: tuple[Tmux, str, str] | None) -> dict[str, Any]:
        cfg, req = self.cfg, self.req
        team = cfg.paths
        token = secrets.token_hex(8)
        omp = team_command(cfg.raw)
        new = next_names(cfg, req.workers)
        away = self.remote.where if self.remote is not None else {}
        panes: dict[str, str] = {}
        self.make_worktrees(cfg.name, [w for w in new if w not in away])
        if place is not None:
            tmux, window, prev = place
            total = len(cfg.worker_names) + len(new)
            layout = "main-vertical" if total <= 6 else "tiled"
            self.progress(f"adding {len(new)} {profile.name} worker(s) to team {cfg.name}")
            where = self.backlog.pane_place(self, profile, team, omp) if self.backlog else {}
            for w in [w for w in new if w not in away]:
                pane = self.open_pane(
                    tmux, profile, team, w, after=prev, token=token, omp=omp, first=False,
                    **where,
                )  # fmt: skip
                panes[w] = pane
                prev = pane
                tmux.select_layout(window, layout)
        if self.remote is not None:
            self.place_remote(team, profile, token)
        with members_locked(team):
            fresh = team_config.load(team)  # another change may have landed meanwhile
            self.before = copy.deepcopy(fresh.raw)
            if set(new) & {*fresh.worker_names, *removed_names(fresh.raw)}:
                raise OmpError("add_worker_failed", "another add-worker took these names; retry")
            task_ids = _next_task_ids(fresh, len(new)) if req.task else [None] * len(new)
            entries: list[dict[str, Any]] = []
            for i, (w, tid) in enumerate(zip(new, task_ids, strict=True), start=1):
                entry: dict[str, Any] = {
                    "name": w,
                    "role": profile.name,
                    "taskId": tid,
                    "launchToken": token,
                    "addedAt": clock.iso(),
                }
                if profile.name != fresh.raw.get("agent"):
                    entry["agent"] = profile.name
                if w in panes or w in away:
                    entry["paneId"] = panes.get(w)
                    entry.update(self.started[w])  # what `omp team resume` starts it with
                entries.append(entry)
                if tid is not None:
                    desc = setup.task_description(req.task, i, len(new))
                    tasks.create(team, tid, desc)
                    self.created_tasks.append(tid)
            self.record_workspace(fresh.raw, entries)
            if self.remote is not None:
                from omp.team import grow_hosts

                assert self.plan is not None and self.plan.base is not None
                grow_hosts.record(self.remote, fresh.raw, entries, self.plan.base)
            everyone = [*fresh.worker_names, *new]
            self.state_written = True
            for i, entry in enumerate(entries, start=1):
                desc = setup.task_description(req.task, i, len(new)) if req.task else ""
                teammates = [x for x in everyone if x != entry["name"]]
                self.write_inbox(team, entry, desc, teammates, omp)
            raw = fresh.raw
            raw["workers"] = [*fresh.workers, *entries]
            raw["workerCount"] = len(raw["workers"])
            team_config.write(team, raw)
            self.added = list(new)
        self.recorded()
        for w in new:
            history.member(team, w, "joined")
        if self._remote_team():
            self._publish(raw, req.task)
        if place is not None:
            self.wait_and_trigger(place[0], team, profile, panes)
        if self.remote is not None:
            self.trigger_remote(team, profile)
        given: list[dict[str, Any]] = []
        if self.backlog is not None:  # they join the queue at once
            from omp.backlog import handover

            self.backlog.joined(team, new)

            with contextlib.suppress(OmpError):
                given = handover.run(team_config.load(team), only=new)
        return {
            "ok": True,
            "team": cfg.name,
            "agent": profile.name,
            "workers": [
                {
                    "name": e["name"],
                    "paneId": e.get("paneId"),
                    "taskId": e["taskId"],
                    **({"host": e["remote"]["host"]} if isinstance(e.get("remote"), dict) else {}),
                }
                for e in entries
            ],
            "members": everyone,
            "workspace": self.workspace_summary(),
            **self.remote_summary(team),
            **({"hostsNotUpdated": self.hosts_not_updated} if self.hosts_not_updated else {}),
            **({"handedOver": given} if self.backlog is not None else {}),
        }

    def _publish(self, raw: dict[str, Any], task: str) -> None:
        """The grown config on every host the team uses, and each remote newcomer's inbox on its
        host (`omp.team.grow_hosts`); a host of the newcomers that does not take it fails the add,
        another one is reported."""
        from omp.team import grow_hosts, hosts

        name = self.cfg.name
        mirrored: set[tuple[str, str]] = set()
        self.mirrored = True
        if self.remote is not None:
            n = len(self.added)
            descriptions = {
                w: setup.task_description(task, i, n) if task else ""
                for i, w in enumerate(self.added, start=1)
            }
            check = self.plan.verify if self.plan is not None else None
            self.remote_inboxes, mirrored = hosts.publish(
                self.remote,
                name,
                raw,
                descriptions=descriptions,
                verify=check[0] if check else None,
            )
        self.hosts_not_updated = grow_hosts.mirror_everywhere(raw, name, skip=mirrored)
        for row in self.hosts_not_updated:
            self.progress(f"warning: host {row['host']} did not take the team's new config: "
                          f"{row['why']}")  # fmt: skip

    def _undo(self, tmux: Tmux | None) -> None:
        self.end_created(tmux, self.cfg.paths)
        self.remove_worktrees(self.cfg.paths)
        if not self.state_written:
            return
        team = self.cfg.paths
        with contextlib.suppress(OSError, OmpError), members_locked(team):
            fresh = team_config.load(team)
            if self.added:
                raw = fresh.raw
                raw["workers"] = [w for w in fresh.workers if w.get("name") not in self.added]
                raw["workerCount"] = len(raw["workers"])
                if self.remote is not None:  # the hosts the team used before, as recorded
                    raw.pop("hosts", None)
                    if "hosts" in self.before:
                        raw["hosts"] = self.before["hosts"]
                team_config.write(team, raw)
            for tid in self.created_tasks:
                with contextlib.suppress(OSError, OmpError):
                    tasks.delete_task(team, tid)
        for w in self.added:
            history.member(team, w, "left", "add-worker failed")


def add_workers(
    cfg: TeamConfig,
    count: int = 1,
    *,
    agent: str | None = None,
    task: str = "",
    ready_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    tmux_factory: Callable[..., Tmux] | None = None,
    progress: Progress | None = None,
    workspace: str | None = None,
    carry_changes: bool = False,
    hosts: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    return AddWorkers(
        cfg,
        count,
        agent=agent,
        task=task,
        env=env,
        tmux_factory=tmux_factory,
        progress=progress,
        ready_timeout=ready_timeout,
        workspace=workspace,
        carry_changes=carry_changes,
        hosts=hosts,
    ).watched()
