"""`omp team launch`: panes, state, a ready wait per agent, one trigger each.

Order matters. Everything that can refuse (names, agent program, a team or session of that name)
is checked before tmux or the disk is touched. Then panes are made, then the state the agents will
read (inboxes, tasks, config last), then each agent is waited for and handed its trigger. A failure
after the first pane removes what this launch made, so no half team stays behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint, omp_argv
from omp.mail import bootstrap
from omp.record import budget as budgets
from omp.record import config as team_config
from omp.store import fs, names
from omp.store.paths import StatePaths, TeamPaths, find_root
from omp.team import setup

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.record.workspace import Worktree
    from omp.team.backlog import BacklogStart
    from omp.team.hosts import RemotePlan
    from omp.team.worktrees import Plan
    from omp.tmux import PaneState, Tmux

MAX_WORKERS = team_config.MAX_WORKERS
Progress = Callable[[str], None]


@dataclass
class LaunchRequest:
    workers: int
    task: str
    agent: str = "copilot"
    name: str | None = None
    socket: str | None = None
    new_session: bool = False
    nudge_leader: bool = False
    leader_agent: str | None = None  # the agent in the leader's pane; None: detect it
    cwd: Path = field(default_factory=Path.cwd)
    ready_timeout: float | None = None  # None: the profile's own
    budget_tokens: int | None = None  # the workers together (`omp.record.budget`)
    worker_budget: int | None = None  # each worker
    notify: str | None = None  # the team's notify command (`omp.notify`), or `tmux`
    workspace: str | None = None  # worktree | shared; None: the project's default
    carry_changes: bool = False  # apply the leader's uncommitted diff to each new worktree
    verify: str | None = None  # the check of every completion; None: the project's, "": none
    verify_timeout: float | None = None  # None: the project's (default 15 min)
    worktrees_under: Path | None = None  # where worktrees go (`omp demo`); None: the default
    tasks_file: Path | None = None  # a backlog (`omp.backlog.files`): tasks handed out in turn
    merge: str | None = None  # a backlog's merge: auto | manual; None: the project's
    # workers on other hosts (`--host NAME:N`, `omp.team.hosts`); []: `[hosts.*] workers`, if any
    hosts: list[tuple[str, int]] = field(default_factory=list)


def parse_spec(spec: str) -> tuple[int, str | None]:
    """`3` or the TypeScript tool's `3:copilot`."""
    count, _, agent = spec.partition(":")
    if not (count.isascii() and count.isdigit()) or len(count) > 6:  # `²` is a digit, no int
        raise OmpError(
            "invalid_input", f"expected a worker count like 3 or 3:copilot, got {spec!r}"
        )
    n = int(count)
    if not 1 <= n <= MAX_WORKERS:
        raise OmpError("invalid_input", f"worker count must be 1-{MAX_WORKERS}, got {n}")
    return n, (agent or None)


def session_name(team: str) -> str:
    """The tmux session omp makes for a team. A team name may hold '.', which tmux does not
    allow in a session name (it means "session.window" in a target): '_' stands for it."""
    return f"omp-team-{team.replace('.', '_')}"


def _session_owner_hint(project: StatePaths, sess: str) -> str:
    """How to free a tmux session a new launch needs: shut down the team of this project that
    recorded it (not necessarily the team being launched: `a.b` and `a_b` share one), else it
    is no team's here and the person decides."""
    for name in team_config.list_teams(project):
        with contextlib.suppress(OmpError):
            if team_config.load(project.team(name)).raw.get("tmuxSession") == sess:
                return (
                    f"it is team {name}'s: {hint(f'team shutdown {name}')}, or use another --name"
                )
    return (
        "no team of this project recorded it: use another --name, or end it "
        f"(tmux kill-session -t {sess})"
    )


def default_team_name(agent: str) -> str:
    return f"{agent}-{int(time.time() * 1000):x}"


def forwarded_names(env: Mapping[str, str], profile: AgentProfile) -> list[str]:
    """The variables of `env` a worker of `profile` is given (its `env_prefixes`): their names
    are recorded per worker in config.json (`forwardedEnv`), never their values."""
    return sorted(k for k in env if k.startswith(profile.env_prefixes))


def worker_env(
    env: Mapping[str, str],
    profile: AgentProfile,
    *,
    team: str,
    worker: str,
    root: Path,
    token: str,
    omp: str,
) -> dict[str, str]:
    from omp.agents import forwarded_env

    out = forwarded_env(profile, env)
    # Agents run `omp team api ...`: make the omp that launched them the one they find first.
    bindir = os.path.dirname(omp_argv()[0]) or str(Path(sys.executable).parent)
    path = env.get("PATH", os.defpath)
    out.update(
        OMP_TEAM=team,
        OMP_WORKER=worker,
        OMP_TEAM_WORKER="1",
        OMP_ROOT=str(root),
        OMP_LAUNCH_TOKEN=token,
        OMP_COMMAND=omp,
        PATH=path if path.split(os.pathsep)[0] == bindir else f"{bindir}{os.pathsep}{path}",
    )
    # the store the leader uses (docs/remote.md), whatever the tmux server's own environment:
    # the URL itself, or the 0600 file that holds it; never written into the pane's screen
    out.update({k: env[k] for k in ("OMP_STORE", "OMP_STORE_FILE") if env.get(k)})
    return out


class Launch:
    """One launch attempt; `created_*` record what to undo if it fails midway. `Resume` and
    `AddWorkers` are launches too: the same panes, the same tmux, the same monitor after."""

    def __init__(
        self,
        req: LaunchRequest,
        *,
        env: Mapping[str, str] | None = None,
        tmux_factory: Callable[..., Tmux] | None = None,
        progress: Progress | None = None,
    ) -> None:
        if tmux_factory is None:
            from omp.tmux import Tmux

            tmux_factory = Tmux
        self.req = req
        self.env = os.environ if env is None else env
        self.tmux_factory = tmux_factory
        self.progress = progress or (lambda _msg: None)
        self.created_panes: list[str] = []
        self.tokens: set[str] = set()  # launch tokens the created panes carry (what to end)
        self.profiles: Mapping[str, AgentProfile] = {}
        self.created_session: str | None = None
        self.team_was_new = False
        self.state_written = False
        self.budgets = budgets.Budgets(None, None)  # the token budgets to record (preflight's)
        self._answered: dict[tuple[str, str], int] = {}  # answers per (worker, dialog)
        self._ready_since: dict[str, float] = {}  # when each worker's screen turned ready
        # What each pane was started with, recorded per worker for `omp team resume`.
        self.started: dict[str, dict[str, Any]] = {}
        self.trigger_file: Callable[[TeamPaths, str], Path] = TeamPaths.inbox
        # Workers' worktrees (omp.team.worktrees): the plan, an earlier run's leftovers with
        # nothing at risk, the worktrees made (provisional in `stack` until the config that
        # records them is written), and those recorded (a later failure removes them).
        self.plan: Plan | None = None
        self.leftovers: list[tuple[Path, str]] = []
        self.stack = contextlib.ExitStack()
        self.made: dict[str, Worktree] = {}
        self.worktrees: dict[str, Worktree] = {}
        # A backlog (`--tasks`): its tasks and settings, and each worker's first task
        self.backlog: BacklogStart | None = None
        # Workers on other hosts (`omp.team.hosts`): where each goes, what was placed, and the
        # inbox each is triggered with there
        self.remote: RemotePlan | None = None
        self.remote_inboxes: dict[str, Path] = {}

    # ---- checks that touch nothing --------------------------------------------------------

    def preflight(self) -> tuple[StatePaths, TeamPaths, AgentProfile]:
        req = self.req
        if not 1 <= req.workers <= MAX_WORKERS:
            raise OmpError("invalid_input", f"worker count must be 1-{MAX_WORKERS}")
        if req.notify is not None:
            from omp.notify import check_command

            check_command(req.notify)
        if req.ready_timeout is not None and req.ready_timeout <= 0:
            raise OmpError(
                "invalid_input", f"--ready-timeout must be > 0, got {req.ready_timeout:g}"
            )
        req.task = req.task.strip()
        project = StatePaths(find_root(req.cwd))
        self.budgets = budgets.for_launch(project, req.budget_tokens, req.worker_budget)
        profile = self.resolve_profile(project)
        profiles = self.profiles
        if req.leader_agent is not None and req.leader_agent not in profiles:
            raise OmpError(
                "unknown_agent",
                f"no agent profile {req.leader_agent!r} for --leader-agent; "
                f"profiles: {', '.join(sorted(profiles))}",
                profiles=sorted(profiles),
            )
        name = names.team_name(req.name or default_team_name(profile.name))
        team = project.team(name)
        setup.refuse_existing(team)
        if shutil.which("tmux") is None:
            raise OmpError(
                "tmux_not_found", "tmux is not installed; install it (apt-get install tmux)"
            )
        self.plan_workspace(project, team.name, [f"worker-{i}" for i in range(1, req.workers + 1)])
        if req.tasks_file is not None or req.merge is not None:
            from omp.team.backlog import BacklogStart

            self.backlog = BacklogStart.load(req, project, team.name, self.plan)
        self.plan_hosts(project, [f"worker-{i}" for i in range(1, req.workers + 1)])
        self.warn_about_store(project)
        return project, team, profile

    def plan_hosts(self, project: StatePaths, workers: list[str]) -> None:
        """Which workers run on other hosts (`--host`, `[hosts.*] workers`), every host checked
        before anything is touched; nothing to do for a team on this host alone."""
        from omp.store import project_config

        if not self.req.hosts and not project_config.load_table(project, "hosts"):
            return
        from omp.team import hosts

        self.remote = hosts.plan(
            project,
            self.req.hosts,
            workers,
            worktree=self.plan is not None and self.plan.worktree,
            backlog=self.backlog is not None,
            progress=self.progress,
        )

    def warn_about_store(self, project: StatePaths) -> None:
        """A store open to anyone on its network is said before a team uses it (docs/remote.md)."""
        if setup.selected_store(project) is None:
            return
        from omp.store import select

        for warning in select.warnings(select.configured_url(project)):
            self.progress(f"warning: {warning}")

    # ---- workers' worktrees (omp.team.worktrees): what launch and add-worker both do ------

    def plan_workspace(
        self,
        project: StatePaths,
        team: str,
        workers: list[str],
        team_default: str | None = None,
    ) -> None:
        """Decide the new workers' workspace and check an earlier run's worktrees (touches
        nothing)."""
        from omp.team import worktrees

        req = self.req
        self.plan = worktrees.plan(
            project,
            req.cwd,
            requested=req.workspace,
            team_default=team_default,
            carry=req.carry_changes,
            verify=req.verify,
            verify_timeout=req.verify_timeout,
            under=req.worktrees_under,
        )
        self.leftovers = worktrees.check_leftovers(self.plan, team, workers)

    def make_worktrees(self, team: str, workers: list[str]) -> dict[str, Worktree]:
        """The new workers' worktrees, provisional until `recorded` (their config is written);
        `unwind` rolls them back."""
        from omp.team import worktrees

        if self.backlog is not None:  # a worktree per task, not per worker
            return self.backlog.make_worktrees(self, team, workers)
        if self.plan is None or not self.plan.worktree:
            return {}
        worktrees.clear_leftovers(self.plan, self.leftovers)
        self.leftovers = []
        root = find_root(self.req.cwd)
        self.made = worktrees.provision(self.stack, self.plan, team, workers, root)
        if self.made:
            where = os.path.commonpath([os.path.dirname(w.path) for w in self.made.values()])
            self.progress(f"{len(self.made)} worktree(s) of {self.plan.top} made under {where}")
        return self.made

    def record_workspace(self, raw: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        """The workspace (and the team's check) into the config about to be written."""
        from omp.team import worktrees

        if self.plan is None:
            return
        if "workspace" not in raw:
            raw["workspace"] = self.plan.team_json()
        check = self.plan.verify_json()
        if check is not None and "verify" not in raw:
            raw["verify"] = check
        for w in entries:
            w["workspace"] = worktrees.entry_json(self.made, w["name"])
        if self.backlog is not None:
            self.backlog.record(raw, entries)

    def recorded(self) -> None:
        """The config records the worktrees: no longer provisional; a later failure of this
        attempt removes them only where nothing would be lost (`remove_worktrees`)."""
        self.stack.close()
        self.worktrees, self.made = self.made, {}

    def unwind(self, exc: BaseException) -> None:
        """A failure before the config was written: the provisional worktrees go."""
        with contextlib.suppress(Exception):
            self.stack.__exit__(type(exc), exc, exc.__traceback__)
        self.made = {}

    def remove_worktrees(self, team: TeamPaths) -> None:
        """Remove the worktrees this attempt made and recorded, each only if nothing in it
        would be lost (an agent that got its task before the failure may have started)."""
        if not self.worktrees:
            return
        from omp.team import worktrees

        with contextlib.suppress(Exception):
            worktrees.remove_safely(team.project.root, list(self.worktrees.items()))
        self.worktrees = {}

    def workspace_summary(self) -> dict[str, Any]:
        """What a launch or add-worker result says of the workspace."""
        p = self.plan
        if p is None:
            return {"kind": "shared"}
        out: dict[str, Any] = {"kind": p.kind}
        if p.worktree:
            tracked, untracked = p.uncommitted
            out.update(
                base=p.base,
                repo=str(p.top),
                uncommitted={"tracked": tracked, "untracked": untracked},
                carried=p.carry,
            )
        if p.verify is not None:
            out["verify"] = p.verify_json()
        return out

    def resolve_profile(self, project: StatePaths, *, need_program: bool = True) -> AgentProfile:
        """The requested agent's profile, its program on PATH (checked, nothing touched)."""
        from omp.agents import load_profiles, missing_program, start_refusal

        req = self.req
        profiles = load_profiles(project.root)
        profile = profiles.get(req.agent)
        if profile is None:
            raise OmpError(
                "unknown_agent",
                f"no agent profile {req.agent!r}; profiles: {', '.join(sorted(profiles))}",
                profiles=sorted(profiles),
            )
        missing = missing_program(profile) if need_program else None
        if missing:
            raise OmpError(
                "agent_not_found",
                f"agent {profile.name!r} needs the program {missing!r}, which is not on PATH; "
                f"install it or choose another profile with --agent "
                f"({', '.join(sorted(profiles))}; 'demo' needs no model)",
                program=missing,
                profiles=sorted(profiles),
            )
        refused = start_refusal(profile, profile.command, self.env, os.geteuid())
        if refused is not None and need_program:
            raise OmpError("launch_blocked", f"{refused[0]}; nothing was started", fix=refused[1])
        self.profiles = profiles
        return profile

    # ---- the launch ------------------------------------------------------------------------

    def watched(self) -> dict[str, Any]:
        """`run`, then make sure the project's monitor runs while the team has panes to watch
        (`watches`). Fail-open: a monitor that cannot start never fails the command."""
        result = self.run()
        if self.watches(result):
            try:
                from omp.monitor.ctl import ensure_monitor

                ensure_monitor(self.project_root())
            except Exception:
                pass
        return result

    def watches(self, result: dict[str, Any]) -> bool:
        """Whether the team now has panes for the monitor (a launch always does)."""
        return True

    def project_root(self) -> Path:
        return find_root(self.req.cwd)

    def run(self) -> dict[str, Any]:
        project, team, profile = self.preflight()
        inside = self._inside()
        tmux = self._server(inside)
        sess = session_name(team.name)
        if not inside and tmux.has_session(sess):
            raise OmpError(
                "session_exists",
                f"tmux session {sess} already exists; {_session_owner_hint(project, sess)}",
                session=sess,
            )
        self.team_was_new = not os.path.lexists(team.dir)
        try:
            return self._launch(tmux, project, team, profile, inside, sess)
        except BaseException as exc:
            self.unwind(exc)
            self._rollback(tmux, team)
            kept: list[str] = []
            if self.remote is not None and self.plan is not None and self.plan.base:
                from omp.team import hosts

                kept = hosts.undo(self.remote, team.name, self.plan.base)
            left = (
                f"kept on its host, where work was started: {', '.join(kept)}"
                if kept
                else "nothing was left behind"
            )
            if isinstance(exc, OmpError):
                raise OmpError(
                    exc.code if exc.code.startswith("launch") else "launch_failed",
                    f"launch of team {team.name} failed: {exc.message}; {left}",
                    **exc.detail,
                ) from None
            raise

    def _inside(self) -> bool:
        """Split the leader's own window: launched from a tmux pane onto that pane's server,
        however the server was named (no --socket, or a --socket / OMP_TMUX_SOCKET that names
        the same socket file)."""
        from omp.tmux import same_socket, socket_file_for

        mine = self.env.get("TMUX", "").split(",")[0]
        if not mine or self.req.new_session:
            return False
        return self.req.socket is None or same_socket(mine, socket_file_for(self.req.socket))

    def _server(self, inside: bool) -> Tmux:
        if inside:
            return self.tmux_factory(socket_path=self.env["TMUX"].split(",")[0])
        if self.req.socket:
            return self.tmux_factory(socket_name=self.req.socket)
        return self.tmux_factory()

    def _leader_agent(self, state: PaneState | None) -> str | None:
        """The agent in the leader's pane: --leader-agent, else the profile whose program is
        the pane's foreground command (None: unknown; nudges then judge by the workers')."""
        if self.req.leader_agent:
            return self.req.leader_agent
        from omp.agents import profile_for_command, profile_of_ancestors

        found = profile_for_command(self.profiles, state.current_command) if state else None
        if found is None and self.env.get("TMUX_PANE") == (state.pane_id if state else None):
            found = profile_of_ancestors(self.profiles)  # omp run by the leader's own agent
        return found.name if found else None

    def _launch(
        self,
        tmux: Tmux,
        project: StatePaths,
        team: TeamPaths,
        profile: AgentProfile,
        inside: bool,
        sess: str,
    ) -> dict[str, Any]:
        req = self.req
        token = secrets.token_hex(8)
        raw = team_config.new_config(
            team.name, req.workers, cwd=req.cwd, task=req.task, role=profile.name
        )
        worker_names = [w["name"] for w in raw["workers"]]
        if not req.task:  # no task: workers wait for the leader, nothing to claim
            for w in raw["workers"]:
                w["taskId"] = None

        if inside:
            leader = self.env.get("TMUX_PANE", "")
            state = tmux.pane_states([leader]).get(leader)
            if state is None:
                raise OmpError("tmux_error", f"cannot find the leader pane {leader!r} ($TMUX_PANE)")
            session_id, window_id = state.session_id, state.window_id
            created_session = False
            leader_agent = self._leader_agent(state)
        else:
            session_id, window_id, leader = tmux.new_session(
                sess, cwd=str(req.cwd), command=None, env={}
            )
            self.created_session = sess
            created_session = True
            leader_agent = self.req.leader_agent
        self.progress(f"starting {req.workers} {profile.name} worker(s) for team {team.name}")
        away = self.remote.where if self.remote is not None else {}
        local_names = [w for w in worker_names if w not in away]
        self.make_worktrees(team.name, local_names)
        prev = leader
        panes: dict[str, str] = {}
        # The leader on the left, the workers stacked beside it; a big team tiles instead.
        layout = "main-vertical" if len(local_names) <= 6 else "tiled"
        for i, w in enumerate(local_names):
            where = (
                self.backlog.pane_place(self, profile, team, raw["ompCommand"])
                if (self.backlog is not None)
                else {}
            )
            pane = self.open_pane(
                tmux, profile, team, w, after=prev, token=token, omp=raw["ompCommand"],
                first=i == 0, **where,
            )  # fmt: skip
            panes[w] = pane
            prev = pane
            # Rebalance after every split: halving the last pane each time runs out of rows
            # (tmux: "no space for new pane") by the sixth worker.
            tmux.select_layout(window_id, layout)
        if self.remote is not None:
            self.place_remote(team, profile, token)

        from omp.tmux import TmuxIdentity

        ident = TmuxIdentity.of(tmux.server_identity(), session_id, window_id)
        raw.update(
            agent=profile.name,
            tmuxSession=sess if created_session else None,
            createdSession=created_session,
            leaderPaneId=leader,
            nudgeLeader=req.nudge_leader,
            leaderAgent=leader_agent,
            launchToken=token,
            tmuxIdentity=ident.to_config(),
        )
        if self.budgets.any:
            raw.update(self.budgets.to_config())
        if req.notify is not None:
            raw["notify"] = req.notify
        for w in raw["workers"]:
            w["paneId"] = panes.get(w["name"])
            w.update(self.started[w["name"]])
        self.record_workspace(raw, raw["workers"])
        if self.remote is not None:
            self.record_remote(raw)
        self._write_state(team, raw, worker_names)
        if self.remote is not None:
            self.publish_remote(team, raw)
        self.recorded()
        self.wait_and_trigger(tmux, team, profile, panes)
        if self.remote is not None:
            self.trigger_remote(team, profile)
        if self.backlog is not None:
            self.backlog.joined(team, worker_names)
        attach = _attach_hint(ident.socket_path, self.req.socket, sess, inside)
        return {
            "ok": True,
            "team": team.name,
            "agent": profile.name,
            "session": raw["tmuxSession"],
            "leaderPaneId": leader,
            "workers": [
                {
                    "name": w["name"],
                    "paneId": w["paneId"],
                    "taskId": w["taskId"],
                    **({"host": w["remote"]["host"]} if isinstance(w.get("remote"), dict) else {}),
                }
                for w in raw["workers"]
            ],
            "config": str(team.config),
            "attach": attach,
            **self.remote_summary(team),
            "workspace": self.workspace_summary(),
            **({"backlog": self.backlog.summary()} if self.backlog is not None else {}),
        }

    # ---- workers on other hosts (omp.team.hosts, omp.team.remote) ---------------------------

    def place_remote(self, team: TeamPaths, profile: AgentProfile, token: str) -> None:
        """Each remote worker's checkout (its branch at the base the local worktrees start at)
        and its agent's pane on its host."""
        from omp.team import hosts

        rp, plan = self.remote, self.plan
        assert rp is not None and plan is not None and plan.base is not None
        self.tokens.add(token)
        knobs = hosts.knobs(profile, self.env)
        hosts.place_all(
            rp,
            leader_repo=team.project.root,
            team=team.name,
            token=token,
            start=plan.base,
            profile=profile,
            progress=self.progress,
            env=knobs,
        )
        for w, name in rp.where.items():
            self.started[w] = {
                "agent": profile.name,
                "command": hosts.agent_command(profile, rp.hosts[name], rp.placed[w].root),
                "forwardedEnv": sorted(knobs),
            }

    def record_remote(self, raw: dict[str, Any]) -> None:
        rp, plan = self.remote, self.plan
        assert rp is not None and plan is not None and plan.base is not None
        raw["hosts"] = rp.config()
        for w in raw["workers"]:
            if w["name"] in rp.placed:
                w.update(rp.entry(w["name"], plan.base))

    def publish_remote(self, team: TeamPaths, raw: dict[str, Any]) -> None:
        """The team's config and each remote worker's inbox, on its host."""
        from omp.team import hosts

        assert self.remote is not None
        names = [w["name"] for w in raw["workers"]]
        descriptions = {
            w: setup.task_description(self.req.task, i, len(names)) if self.req.task else ""
            for i, w in enumerate(names, start=1)
        }
        check = self.plan.verify if self.plan is not None else None
        self.remote_inboxes, _ = hosts.publish(
            self.remote, team.name, raw, descriptions=descriptions,
            verify=check[0] if check else None,
        )  # fmt: skip

    def trigger_remote(self, team: TeamPaths, profile: AgentProfile) -> None:
        """Wait for each remote agent to be ready and hand it its task: `hosts.PARALLEL` workers
        of a host at a time (typing a trigger and seeing it land is a dozen round trips over
        ssh; one after another, 16 workers took 15 s)."""
        from omp.team.hosts import on_each
        from omp.tmux.remote import RemoteTmux

        rp = self.remote
        assert rp is not None

        def trigger(w: str) -> None:
            p = rp.placed[w]
            tmux = RemoteTmux(rp.hosts[p.host], p.socket)
            self.wait_and_trigger(tmux, team, profile, {w: p.pane})

        on_each(rp, list(rp.placed), trigger)

    def remote_summary(self, team: TeamPaths) -> dict[str, Any]:
        """What a launch result says of its remote workers: how to look at their panes."""
        if self.remote is None or not self.remote.placed:
            return {}
        from omp.team import hosts

        return {
            "hosts": sorted(self.remote.hosts),
            "remoteAttach": hosts.attach_lines(self.remote, team.name),
        }

    # ---- one worker: what launch and add-worker (omp.team.grow) both do -------------------

    def open_pane(
        self,
        tmux: Tmux,
        profile: AgentProfile,
        team: TeamPaths,
        w: str,
        *,
        after: str,
        token: str,
        omp: str,
        first: bool,
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
    ) -> str:
        """Split a worker's pane off `after`, its agent started with the worker's identity, in
        its worktree when it has one (OMP_ROOT still names the project: its state is there);
        `command` and `cwd`: a resume's, else the profile's command."""
        env = worker_env(
            self.env,
            profile,
            team=team.name,
            worker=w,
            root=team.project.root,
            token=token,
            omp=omp,
        )
        if command is None:
            # The agent may run the omp it is told to run, wherever that is installed; a worker
            # in a worktree outside the project may also use the project (its inbox is there).
            dirs: list[str] = []
            worktree = self.made.get(w)
            if worktree is not None and self.plan is not None and cwd is None:
                from omp.team.worktrees import pane_cwd

                cwd, dirs = Path(pane_cwd(self.plan, worktree)), [str(team.project.root)]
            command = self.agent_command(profile, team, omp, dirs)
        self.started[w] = {
            "agent": profile.name,
            "command": list(command),
            "forwardedEnv": forwarded_names(self.env, profile),
        }
        pane = tmux.split_pane(
            after, cwd=str(cwd or self.req.cwd), command=command, env=env, horizontal=first
        )
        self.created_panes.append(pane)
        self.tokens.add(token)
        try:
            # Keep a crashed agent's pane on screen: status then says `dead` and its code.
            tmux.set_pane_option(pane, "remain-on-exit", "on")
            tmux.set_pane_title(pane, w)
        except OmpError:
            if tmux.pane_states([pane]).get(pane) is None:
                raise OmpError(
                    "launch_worker_exited",
                    f"{w}'s agent ({shlex.join(command)}) exited as soon as it started",
                    worker=w,
                ) from None
            raise
        return pane

    @staticmethod
    def agent_command(
        profile: AgentProfile, team: TeamPaths, omp: str, dirs: Sequence[str] = ()
    ) -> list[str]:
        """A new worker's command line: the profile's, granted the directory of the omp it
        runs and `dirs`, with omp's hook handed over where the CLI takes it
        (`omp.stophook.workers`)."""
        from omp.agents import agent_argv
        from omp.stophook.workers import hook_args

        words = shlex.split(omp)
        program = os.path.basename(profile.program)
        return [*agent_argv(profile, words, dirs), *hook_args(program, team.project, omp)]

    def write_inbox(
        self, team: TeamPaths, w: dict[str, Any], description: str, teammates: list[str], omp: str
    ) -> None:
        from omp.record.workspace import worktree_of

        team.ensure_in(team.worker_dir(w["name"]))
        if self.backlog is not None:
            text = self.backlog.inbox(self, team, w, teammates, omp)
            fs.write_atomic(team.inbox(w["name"]), text.encode())
            return
        wt = worktree_of(w)
        check = self.plan.verify if self.plan is not None else None
        text = bootstrap.inbox_markdown(
            team=team.name,
            worker=w["name"],
            task_id=w["taskId"],
            description=description,
            teammates=teammates,
            result_path=team.result(w["name"]),
            omp=omp,
            worktree=(wt.path, wt.branch) if wt is not None else None,
            verify=check[0] if check else None,
        )
        fs.write_atomic(team.inbox(w["name"]), text.encode())

    def _write_state(self, team: TeamPaths, raw: dict[str, Any], worker_names: list[str]) -> None:
        self.state_written = True
        team.project.ensure(team.dir)  # launch and create are the only makers of a team directory
        n = len(worker_names)
        for i, w in enumerate(raw["workers"], start=1):
            self.write_inbox(
                team,
                w,
                setup.task_description(self.req.task, i, n) if self.req.task else "",
                [x for x in worker_names if x != w["name"]],
                raw["ompCommand"],
            )
        if self.backlog is not None:
            setup.write_state(team, raw, "", backlog=self.backlog.records)
            self.backlog.written(team)
            return
        setup.write_state(team, raw, self.req.task)

    def wait_and_trigger(
        self, tmux: Tmux, team: TeamPaths, profile: AgentProfile, panes: dict[str, str]
    ) -> None:
        timeout = self.req.ready_timeout or profile.startup_timeout
        deadline = time.monotonic() + timeout
        waiting = dict(panes)
        lock_dir = team.project.tmux_locks
        team.project.ensure(lock_dir)
        delay = 0.05
        while waiting:
            states = tmux.pane_states(list(waiting.values()))
            for w, pane in list(waiting.items()):
                inbox = self.remote_inboxes.get(w) or self.trigger_file(team, w)
                try:
                    handed = self._step(tmux, profile, w, pane, states.get(pane), inbox, lock_dir)
                except OmpError as exc:
                    if exc.code == "tmux_error" and tmux.pane_states([pane]).get(pane) is None:
                        raise _exited(w, "") from None  # it died between two looks
                    raise
                if handed:
                    del waiting[w]
                    self.progress(f"{w}: ready, task handed over ({len(waiting)} still starting)")
            if not waiting:
                break
            if time.monotonic() > deadline:
                raise OmpError(
                    "launch_timeout",
                    f"{', '.join(waiting)} not ready after {timeout:.0f}s "
                    f"(agent {profile.name}); attach to see why",
                    workers=list(waiting),
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _step(
        self,
        tmux: Tmux,
        profile: AgentProfile,
        w: str,
        pane: str,
        st: PaneState | None,
        inbox: Path,
        lock_dir: Path,
    ) -> bool:
        """One look at a starting worker: answer a dialog, or hand over the task once ready."""
        from omp.agents import blocked_reason, classify_screen, match_dialog, person_fix

        if st is None or st.dead:
            last = tmux.capture(pane, lines=40) if st else []
            # An agent that exits at a first-run screen (Claude Code's onboarding, offline)
            # says what a person must do: that is a blocked launch, not a crash.
            dialog = match_dialog(profile, last)
            if dialog is not None and not dialog.keys and dialog.fix:
                raise _blocked(w, f"the agent exited at its {dialog.what} screen", dialog.fix)
            raise _exited(w, "\n".join(last[-8:]))
        lines = tmux.capture(pane, lines=40)
        blocked = blocked_reason(profile, lines)
        fix = person_fix(profile, lines)
        dialog = match_dialog(profile, lines)
        if dialog is not None and not dialog.keys:
            blocked = f"the agent shows a screen only a person can answer ({dialog.what})"
        if blocked:
            raise _blocked(w, blocked, fix)
        if dialog is not None:
            n = self._answered.get((w, dialog.name), 0)
            if n >= 3:
                raise OmpError(
                    "launch_blocked",
                    f"{w}: the {dialog.name} screen stayed after 3 answers; attach and answer it",
                    worker=w,
                )
            self._answered[(w, dialog.name)] = n + 1
            self._ready_since.pop(w, None)
            for i, key in enumerate(dialog.keys):
                if i:
                    time.sleep(0.1)  # a TUI may drop a key that follows another too closely
                tmux.send_key(pane, key)
            self.progress(f"{w}: answered the {dialog.name} screen")
            # Look again only once the screen has changed: a menu answered in steps (Down,
            # then Enter once "Yes" is selected) must not get a second Down from a stale look.
            end = time.monotonic() + 3.0
            while time.monotonic() < end and tmux.capture(pane, lines=40) == lines:
                time.sleep(0.05)
            return False
        if classify_screen(profile, lines) != "ready":
            self._ready_since.pop(w, None)
            return False
        # Some agents draw their prompt before a dialog replaces it: trust a ready screen only
        # once it has stayed ready for the profile's settle time.
        first = self._ready_since.setdefault(w, time.monotonic())
        if time.monotonic() - first < profile.ready_settle:
            return False
        from omp.mail.typein import type_line

        return type_line(tmux, pane, bootstrap.trigger_line(inbox), profile, lock_dir=lock_dir).ok

    def _rollback(self, tmux: Tmux, team: TeamPaths) -> None:
        self.end_created(tmux, team)
        if self.created_session:
            try:
                tmux.kill_session(self.created_session)
            except Exception:
                pass
        self.remove_worktrees(team)
        if not self.state_written:
            return
        try:
            if self.team_was_new:
                shutil.rmtree(team.dir)
            else:
                fs.write_json_atomic(
                    team.shutdown, {"shutdownAt": clock.iso(), "reason": "launch failed"}
                )
        except (OSError, OmpError):
            pass

    def end_created(self, tmux: Tmux | None, team: TeamPaths) -> None:
        """Close the panes this attempt created and end every process started in them (the
        tree of each, and what carries this attempt's launch token even after a `setsid`: an
        agent refused at its sign-in screen must not outlive its pane)."""
        from omp import procs

        panes = list(reversed(self.created_panes))
        roots: list[int | None] = []
        if tmux is not None and panes:
            with contextlib.suppress(Exception):
                states = tmux.pane_states(panes)
                roots = [st.pid for p in panes if (st := states.get(p)) is not None]

        def close() -> None:
            for pane in panes:
                if tmux is not None:
                    with contextlib.suppress(Exception):
                        tmux.kill_pane(pane)

        match = procs.EnvMatch(team.name, str(team.project.root), tokens=set(self.tokens))
        with contextlib.suppress(Exception):
            procs.end_after(close, roots, match if self.tokens else None)


def _blocked(w: str, what: str, fix: str | None) -> OmpError:
    todo = fix or "attach to the pane and handle it"
    extra = {"fix": fix} if fix else {}
    return OmpError("launch_blocked", f"{w}: {what}; {todo}, then launch again", worker=w, **extra)


def _exited(w: str, screen: str) -> OmpError:
    return OmpError(
        "launch_worker_exited",
        f"{w}'s agent exited before it was ready"
        + (f"; its screen ended with: {screen.strip()[-300:]}" if screen.strip() else ""),
        worker=w,
    )


def _attach_hint(socket_path: str | None, socket_name: str | None, sess: str, inside: bool) -> str:
    if inside:
        return "the workers are in your current tmux window"
    if socket_name:
        return f"tmux -L {socket_name} attach -t {sess}"
    default = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / "default"
    if socket_path and Path(socket_path) != default:
        return f"tmux -S {socket_path} attach -t {sess}"
    return f"tmux attach -t {sess}"


def launch(
    req: LaunchRequest,
    *,
    env: Mapping[str, str] | None = None,
    tmux_factory: Callable[..., Tmux] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    return Launch(req, env=env, tmux_factory=tmux_factory, progress=progress).watched()
