"""`omp team resume TEAM [--worker NAME…]`: bring back every member that has no live pane.

Resume is launch reading what launch recorded. Per worker, config.json holds what started it
(`agent`, `command`, `forwardedEnv`: names only, never values; `workspace` when it works in a git
worktree of its own), and the stop hook recorded which agent session it ran
(`workers/<w>/session.json`, `omp.stophook.sessions`).

Order, as launch's. Everything that can refuse is checked before a pane is started or a file
written: the team exists (a deleted one is `unknown_team`), was not shut down
(`team_shut_down`) and has panes (`team_headless`); each named worker is a member
(`worker_removed`, `unknown_worker`); then tmux is looked at (read-only), and each member to start
has its worktree (`worktree_missing`) and its agent's program (`unknown_agent`,
`agent_not_found`). Members whose pane lives are left alone.

Where the new panes go:
- in place: the server recorded for the team is the one running (same pid and start time) and a
  pane of the team is still in its window (a live one preferably; tmux splits a dead one too):
  the new panes split that window; the dead panes of the members resumed are closed once their
  successors run;
- anew: otherwise (a killed server, a reboot: the recorded server is gone, maybe its socket file
  and its socket directory too). Panes are then matched by nothing but the team's files. The
  server is `--socket`'s (or `OMP_TMUX_SOCKET`'s), else the caller's own when resume runs inside
  tmux (its window is split, as launch does), else the recorded socket (by its name under
  today's socket directory when the recorded directory is gone); outside tmux the workers get a
  new session `omp-team-<team>`. The team's tmux identity is recorded anew, and the pane ids of
  members not resumed now are moved aside (`lostPaneId`): on a new server the same ids name
  other panes.

Each started pane carries a new launch token: a new generation, as add-worker's, so a pane of an
earlier one that is somehow still alive is refused (`stale_generation`). The agent starts with its
recorded command, plus its profile's `resume_args` when its session id is known (its own
conversation comes back), else fresh. Forwarded variables take their values from the environment
of the `resume` call; a recorded name missing there is named in the report.

Then the state: the config, under the members lock (from then on the monitor sees the new panes);
tasks the monitor interrupted because the member went offline, given back to it (same claim, same
token; the leader is told); each member's resume inbox (`workers/<w>/resume.md`: when and why it
was restarted, its task and claim, its worktree, its unread mail). Each agent is waited for and
typed `Read <resume.md> and follow it.`; the monitor is ensured, and loops still active go on.

A failure after the first pane kills the new panes, ends every process started in them
(`omp.procs`, as a launch's rollback) and puts the members' records back: the team is as before
(a reclaimed task stays claimed by its worker). Once the successors run, whatever the members'
earlier panes left running (an agent that `setsid`'d out of its pane) is ended.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import secrets
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint, team_command
from omp.mail import bootstrap, mailbox
from omp.record import config as team_config
from omp.record import history
from omp.record.config import TeamConfig
from omp.store import fs
from omp.store.names import LEADER, worker_name
from omp.store.paths import TeamPaths
from omp.tasks import tasks
from omp.team.launch import Launch, LaunchRequest, Progress, _attach_hint, session_name
from omp.team.membership import members_locked, removed_names

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.tmux import PaneState, Tmux

# Config fields a resume changes in a member's entry (put back as they were if it fails).
_ENTRY_FIELDS = (
    "paneId",
    "launchToken",
    "resumedAt",
    "resumes",
    "lostPaneId",
    "agent",
    "command",
    "forwardedEnv",
)
_TEAM_FIELDS = ("tmuxIdentity", "leaderPaneId", "tmuxSession", "createdSession", "leaderAgent")
_SOCKET_DIR = re.compile(r"tmux-\d+")


@dataclass
class Member:
    """One worker to start again, and what it is started with."""

    name: str
    entry: dict[str, Any]
    why: str  # what became of its pane
    profile: AgentProfile | None = None
    command: list[str] = field(default_factory=list)  # as recorded: what the next resume reuses
    argv: list[str] = field(default_factory=list)  # what starts now (+ the resume option)
    cwd: Path | None = None
    worktree: dict[str, Any] | None = None
    session_id: str | None = None  # the agent session it comes back into; None: a fresh one
    session_from: str | None = None  # hook: its stop hook's record; record: its session record
    missing_env: list[str] = field(default_factory=list)
    recorded_env: list[str] = field(default_factory=list)  # forwardedEnv as recorded
    pane: str | None = None
    old_pane: str | None = None  # its dead pane, closed once the new one runs


@dataclass
class Place:
    """Where the new panes go: the tmux server, the pane to split, the window."""

    tmux: Tmux
    anchor: str
    window: str
    in_place: bool
    leader: str | None = None
    session_id: str | None = None
    session: str | None = None  # a session this resume created (anew, outside tmux)
    inside: bool = False
    leader_agent: str | None = None  # the agent in the leader's pane, when anew


class Resume(Launch):
    def __init__(
        self,
        cfg: TeamConfig,
        workers: list[str] | None,
        *,
        env: Mapping[str, str] | None = None,
        tmux_factory: Callable[..., Tmux] | None = None,
        progress: Progress | None = None,
        socket: str | None = None,
        new_session: bool = False,
        ready_timeout: float | None = None,
    ) -> None:
        cwd = Path(str(cfg.raw.get("cwd") or cfg.paths.project.root))
        req = LaunchRequest(
            workers=max(1, len(cfg.worker_names)),
            task="",
            agent=str(cfg.raw.get("agent") or cfg.raw.get("role") or "copilot"),
            name=cfg.name,
            socket=socket,
            new_session=new_session,
            cwd=cwd if cwd.is_dir() else cfg.paths.project.root,
            ready_timeout=ready_timeout,
        )
        super().__init__(req, env=env, tmux_factory=tmux_factory, progress=progress)
        self.cfg = cfg
        self.wanted = workers
        self.trigger_file = TeamPaths.resume_inbox
        self.saved: dict[str, dict[str, Any]] = {}
        self.saved_team: dict[str, Any] = {}
        self.config_written = False
        self.place: Place | None = None

    # ---- checks that touch nothing ------------------------------------------------------------

    def check(self) -> list[str]:
        """The members asked for (all by default), each a current member; the team resumable."""
        cfg = self.cfg
        if os.path.lexists(cfg.paths.shutdown):
            raise OmpError(
                "team_shut_down",
                f"team {cfg.name} was shut down; launch it again instead: "
                f"{hint(f'team launch N --name {cfg.name}')}",
                team=cfg.name,
            )
        if not cfg.tmux:
            raise OmpError(
                "team_headless",
                f"team {cfg.name} has no panes to resume (made with `team create`); give it "
                f"workers with {hint(f'team add-worker {cfg.name}')}",
                team=cfg.name,
            )
        names = list(dict.fromkeys(self.wanted or cfg.worker_names))
        for name in names:
            worker_name(name)
            if name in cfg.worker_names:
                continue
            if name in removed_names(cfg.raw):
                raise OmpError(
                    "worker_removed",
                    f"{name} was removed from team {cfg.name} (remove-worker); it cannot be "
                    f"resumed. Add a new worker instead: {hint(f'team add-worker {cfg.name}')}",
                    team=cfg.name,
                    worker=name,
                )
            raise OmpError(
                "unknown_worker",
                f"{name!r} is not a worker of team {cfg.name}; workers: "
                f"{', '.join(cfg.worker_names) or 'none'}",
                team=cfg.name,
                worker=name,
                candidates=cfg.worker_names,
            )
        return names

    def look(self, names: list[str]) -> tuple[list[Member], list[dict[str, Any]], Place | None]:
        """Which members have no live pane (read-only), and a live pane of the team to split
        next to, when its server is the recorded one."""
        from omp.mail.panes import tmux_for, tmux_identity

        cfg = self.cfg
        ident = tmux_identity(cfg)
        recorded = tmux_for(cfg)
        # None when no server answers on the recorded socket; a server that is there but does
        # not answer in time is a `tmux_error`: never judged gone (its panes may still run)
        server = recorded.server_identity()
        same = ident is not None and ident.same_server(server)
        leader = (
            cfg.raw.get("leaderPaneId") if isinstance(cfg.raw.get("leaderPaneId"), str) else None
        )
        states: dict[str, PaneState | None] = {}
        if same:
            ids = [p for p in (cfg.pane_of(w) for w in cfg.worker_names) if p]
            states = recorded.pane_states([*ids, *([leader] if leader else [])])
        assert ident is not None  # check() refused a team without one

        def mine(pane: str | None) -> PaneState | None:
            st = states.get(pane) if pane else None
            return st if st is not None and ident.holds(st) else None

        members: list[Member] = []
        skipped: list[dict[str, Any]] = []
        for w in names:
            entry = cfg.worker(w) or {}
            pane = cfg.pane_of(w)
            st = mine(pane)
            if st is not None and not st.dead:
                skipped.append({"name": w, "paneId": pane, "why": "its pane is alive"})
                continue
            if not same:
                why = "the team's tmux server was gone"
            elif st is not None:
                why = f"its agent had exited (status {st.dead_status})"
            else:
                why = "its pane was gone"
            m = Member(w, entry, why)
            if st is not None:
                m.old_pane = pane
            members.append(m)
        place = None
        if same and members:
            starting = {m.name for m in members}
            alive = [
                p
                for w in cfg.worker_names
                if w not in starting and (p := cfg.pane_of(w)) and (s := mine(p)) and not s.dead
            ]
            lead = mine(leader)
            # a live pane of the team first; else its dead ones still in the window (tmux
            # splits a dead pane too), so the team stays in its window and session
            dead = [m.old_pane for m in members if m.old_pane]
            anchors = [*reversed(alive), *([leader] if lead is not None and leader else []), *dead]
            if anchors:
                st0 = mine(anchors[0])
                assert st0 is not None
                place = Place(recorded, anchors[0], st0.window_id, True, leader, st0.session_id)
        return members, skipped, place

    def prepare(self, members: list[Member]) -> None:
        """Each member's worktree, agent and command line (checked; nothing is written)."""
        from omp.agents import load_profiles, missing_program, start_refusal
        from omp.stophook import sessions

        cfg = self.cfg
        profiles = load_profiles(cfg.paths.project.root)
        self.profiles = profiles
        for m in members:
            ws = m.entry.get("workspace")
            if isinstance(ws, dict) and ws.get("kind") == "worktree":
                path = ws.get("path")
                if not isinstance(path, str) or not os.path.isdir(path):
                    raise OmpError(
                        "worktree_missing",
                        f"{m.name}'s worktree {path} is gone; its work cannot be resumed there. "
                        f"Nothing was started. Remove the worker "
                        f"({hint(f'team remove-worker {cfg.name} {m.name}')}) or check its "
                        f"branch out there again ({_restore_command(cfg, ws)}), then resume "
                        "again",
                        team=cfg.name,
                        worker=m.name,
                        path=path,
                    )
                m.cwd = Path(path)
                m.worktree = {**ws}
            else:
                m.cwd = self.req.cwd
            name = str(
                m.entry.get("agent") or cfg.raw.get("agent") or cfg.raw.get("role") or "copilot"
            )
            profile = profiles.get(name)
            if profile is None:
                raise OmpError(
                    "unknown_agent",
                    f"{m.name} ran agent {name!r}, which has no profile now; profiles: "
                    f"{', '.join(sorted(profiles))}",
                    worker=m.name,
                    profiles=sorted(profiles),
                )
            missing = missing_program(profile)
            if missing:
                raise OmpError(
                    "agent_not_found",
                    f"{m.name}'s agent {profile.name!r} needs the program {missing!r}, which is "
                    "not on PATH; nothing was started",
                    worker=m.name,
                    program=missing,
                )
            m.profile = profile
            recorded = m.entry.get("command")
            if (
                isinstance(recorded, list)
                and recorded
                and all(isinstance(a, str) for a in recorded)
            ):
                m.command = list(recorded)
            refused = start_refusal(profile, m.command or profile.command, self.env, os.geteuid())
            if refused is not None:
                raise OmpError(
                    "launch_blocked",
                    f"{m.name}: {refused[0]}; nothing was started",
                    worker=m.name,
                    fix=refused[1],
                )
            known = sessions.read(cfg.paths, m.name)
            cli = os.path.basename(profile.program)
            if known and profile.resume_args and known.get("agent") in (cli, profile.name):
                m.session_id, m.session_from = str(known["sessionId"]), "hook"
            elif profile.resume_args:
                m.session_id = _from_record(cfg, m.name, (cli, profile.name))
                m.session_from = "record" if m.session_id else None
            names = m.entry.get("forwardedEnv")
            recorded_names = (
                [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
            )
            m.recorded_env = recorded_names
            m.missing_env = [n for n in recorded_names if n not in self.env]

    def _command_lines(self, members: list[Member], omp: str) -> None:
        """Each member's command: as recorded (the files it names for omp's hook rewritten if
        they went away), else the profile's as launch makes it; plus the resume option."""
        from omp.stophook.workers import hook_args

        project = self.cfg.paths.project
        for m in members:
            assert m.profile is not None
            if m.command:
                hook_args(os.path.basename(m.profile.program), project, omp)
            else:  # started by an omp that did not record it
                m.command = self.agent_command(m.profile, self.cfg.paths, omp)
            m.argv = list(m.command)
            if m.session_id is not None:
                sid = m.session_id
                m.argv += [a.replace("{session_id}", sid) for a in m.profile.resume_args]

    # ---- where the panes go -------------------------------------------------------------------

    def _server_anew(self) -> tuple[Tmux, bool]:
        """(the server, inside: split the caller's window) for a team whose server is gone."""
        from omp.mail.panes import tmux_identity

        inside = self._inside()
        if inside:
            return self.tmux_factory(socket_path=self.env["TMUX"].split(",")[0]), True
        if self.req.socket:
            return self.tmux_factory(socket_name=self.req.socket), False
        ident = tmux_identity(self.cfg)
        sock = ident.socket_path if ident else None
        if sock:
            parent = os.path.dirname(sock)
            if os.path.isdir(parent):
                return self.tmux_factory(socket_path=sock), False
            if _SOCKET_DIR.fullmatch(os.path.basename(parent)):
                # a reboot emptied /tmp: the same name under today's socket directory
                return self.tmux_factory(socket_name=os.path.basename(sock)), False
        return self.tmux_factory(), False

    def _check_anew(self) -> tuple[Tmux, bool]:
        """The server for a team whose own is gone, and no session of its name in the way."""
        tmux, inside = self._server_anew()
        sess = session_name(self.cfg.name)
        if not inside and tmux.has_session(sess):
            raise OmpError(
                "session_exists",
                f"tmux session {sess} already exists on that server, but it holds no pane of "
                f"team {self.cfg.name}; close it (tmux kill-session -t {sess}) and resume again",
                session=sess,
            )
        return tmux, inside

    def _place_anew(self, tmux: Tmux, inside: bool) -> Place:
        sess = session_name(self.cfg.name)
        if inside:
            leader = self.env.get("TMUX_PANE", "")
            state = tmux.pane_states([leader]).get(leader)
            if state is None:
                raise OmpError("tmux_error", f"cannot find your pane {leader!r} ($TMUX_PANE)")
            return Place(
                tmux,
                leader,
                state.window_id,
                False,
                leader,
                state.session_id,
                inside=True,
                leader_agent=self._leader_agent(state),
            )
        session_id, window_id, leader = tmux.new_session(
            sess, cwd=str(self.req.cwd), command=None, env={}
        )
        self.created_session = sess
        return Place(tmux, leader, window_id, False, leader, session_id, session=sess)

    # ---- the resume ---------------------------------------------------------------------------

    def watches(self, result: dict[str, Any]) -> bool:
        return bool(result["resumed"] or result["skipped"])

    def project_root(self) -> Path:
        return self.cfg.paths.project.root

    def run(self) -> dict[str, Any]:
        names = self.check()
        members, skipped, place = self.look(names)
        if not members:
            return self._report([], skipped, None, [])
        self.prepare(members)
        server = self._check_anew() if place is None else None
        try:
            return self._resume(members, skipped, place, server)
        except BaseException as exc:
            self._undo(members)
            if isinstance(exc, OmpError):
                raise OmpError(
                    exc.code if exc.code.startswith("launch") else "resume_failed",
                    f"resume of team {self.cfg.name} failed: {exc.message}; the team is as before",
                    **exc.detail,
                ) from None
            raise

    def _resume(
        self,
        members: list[Member],
        skipped: list[dict[str, Any]],
        place: Place | None,
        server: tuple[Tmux, bool] | None,
    ) -> dict[str, Any]:
        cfg = self.cfg
        team = cfg.paths
        token = secrets.token_hex(8)
        omp = team_command(cfg.raw)
        self._command_lines(members, omp)
        if place is None:
            assert server is not None
            place = self._place_anew(*server)
        self.place = place
        total = len(cfg.worker_names)
        layout = "main-vertical" if total <= 6 else "tiled"
        self.progress(f"resuming {len(members)} worker(s) of team {cfg.name}")
        prev = place.anchor
        panes: dict[str, str] = {}
        for i, m in enumerate(members):
            assert m.profile is not None
            pane = self.open_pane(
                place.tmux,
                m.profile,
                team,
                m.name,
                after=prev,
                token=token,
                omp=omp,
                first=not place.in_place and i == 0,
                command=m.argv,
                cwd=m.cwd,
            )
            started = self.started[m.name]
            started["command"] = m.command  # never the resume option: it changes
            # the names launch passed on stay recorded, so a later resume still names a gap
            started["forwardedEnv"] = sorted({*started["forwardedEnv"], *m.recorded_env})
            m.pane = panes[m.name] = prev = pane
            place.tmux.select_layout(place.window, layout)
        now = clock.iso()
        # The config first: from here the monitor sees live panes, and never interrupts the
        # tasks given back next because their worker looked offline.
        self._write_config(members, place, token, now)
        reclaimed = self._reclaim(members)
        for m in members:
            self._write_resume_inbox(m, now, omp)
            if m.worktree and isinstance(m.worktree.get("path"), str):
                _mark_project(Path(m.worktree["path"]), cfg.paths.project.root)
        for m in members:
            history.member(team, m.name, "resumed", m.why)
        groups: dict[str, dict[str, str]] = {}
        for m in members:
            assert m.profile is not None
            groups.setdefault(m.profile.name, {})[m.name] = panes[m.name]
        for name, group in groups.items():
            self.wait_and_trigger(place.tmux, team, self.profiles[name], group)
        self._close_dead(members, place)
        self._end_earlier(members, token)
        return self._report(members, skipped, place, reclaimed)

    def _reclaim(self, members: list[Member]) -> list[dict[str, Any]]:
        """Tasks the monitor interrupted when a member went offline: its own again."""
        team = self.cfg.paths
        out: list[dict[str, Any]] = []
        names = {m.name for m in members}
        for t in tasks.list_all(team):
            owner = t.get("owner")
            if t.get("status") != "interrupted" or owner not in names:
                continue
            assert isinstance(owner, str)
            back = tasks.reclaim(team, str(t["id"]), owner)
            if back is None:
                continue
            out.append({"taskId": back["id"], "worker": owner})
            body = (
                f"omp team resume: task {back['id']}, interrupted when {owner} went offline, is "
                f"{owner}'s again (same claim): {owner} was restarted and goes on with it."
            )
            with contextlib.suppress(OmpError):
                msg = mailbox.new_message(owner, LEADER, body, {"auto": True})
                mailbox.Mailbox(team, LEADER).append_messages([msg])
        return out

    def _task_of(self, m: Member) -> dict[str, Any] | None:
        """The member's task: one it holds in progress, else the one it was given."""
        found = tasks.list_all(self.cfg.paths)
        held = [t for t in found if t.get("owner") == m.name and t.get("status") == "in_progress"]
        if held:
            return held[0]
        tid = m.entry.get("taskId")
        return next((t for t in found if str(t.get("id")) == str(tid)), None) if tid else None

    def _write_resume_inbox(self, m: Member, now: str, omp: str) -> None:
        team = self.cfg.paths
        self.state_written = True
        team.ensure_in(team.worker_dir(m.name))
        worktree = _worktree_view(m.worktree) if m.worktree else None
        if worktree is not None:
            m.worktree = worktree
        task = self._task_of(m)
        own = task.get("workspace") if task is not None else None
        if worktree is None and isinstance(own, dict) and own.get("kind") == "worktree":
            worktree = _worktree_view(own)  # a backlog task's own worktree
        text = bootstrap.resume_markdown(
            team=team.name,
            worker=m.name,
            restarted_at=now,
            why=m.why,
            inbox=team.inbox(m.name),
            conversation_resumed=m.session_id is not None,
            task=task,
            result_path=team.result(m.name),
            worktree=worktree,
            unread=mailbox.Mailbox(team, m.name).unread_count(),
            omp=omp,
        )
        fs.write_atomic(team.resume_inbox(m.name), text.encode())

    def _write_config(self, members: list[Member], place: Place, token: str, now: str) -> None:
        team = self.cfg.paths
        by_name = {m.name: m for m in members}
        with members_locked(team):
            fresh = team_config.load(team)
            raw = fresh.raw
            self.saved_team = {k: copy.deepcopy(raw[k]) for k in _TEAM_FIELDS if k in raw}
            for entry in fresh.workers:
                m = by_name.get(str(entry.get("name")))
                if m is None:
                    if not place.in_place and entry.get("paneId"):
                        # on another server the same id names someone else's pane
                        self.saved[str(entry["name"])] = _fields(entry)
                        entry["lostPaneId"] = entry.pop("paneId")
                    continue
                self.saved[m.name] = _fields(entry)
                entry.pop("lostPaneId", None)
                entry.update(self.started[m.name])
                entry["paneId"] = m.pane
                entry["launchToken"] = token
                entry["resumedAt"] = now
                entry["resumes"] = int(entry.get("resumes") or 0) + 1
            if not place.in_place:
                from omp.tmux import TmuxIdentity

                server = place.tmux.server_identity()
                assert place.session_id is not None
                ident = TmuxIdentity.of(server, place.session_id, place.window)
                raw["tmuxIdentity"] = ident.to_config()
                raw["leaderPaneId"] = place.leader
                raw["tmuxSession"] = place.session
                raw["createdSession"] = place.session is not None
                # the leader's pane is another one now: its agent, if known, is the caller's
                raw["leaderAgent"] = place.leader_agent
            self.config_written = True
            team_config.write(team, raw)

    def _close_dead(self, members: list[Member], place: Place) -> None:
        """The members' dead panes go once their successors run (kept until then: a failed
        resume leaves the team exactly as it was)."""
        dead = [m.old_pane for m in members if m.old_pane and place.in_place]
        for pane in dead:
            with contextlib.suppress(OmpError):
                place.tmux.kill_pane(pane)
        if dead:
            layout = "main-vertical" if len(self.cfg.worker_names) <= 6 else "tiled"
            with contextlib.suppress(OmpError):
                place.tmux.select_layout(place.window, layout)

    def _end_earlier(self, members: list[Member], token: str) -> None:
        """What the members' earlier panes left running ends once their successors run: an agent
        that `setsid`'d out of its pane (Gemini CLI's relaunched node) outlives the pane and the
        tmux server, and must not go on as a second copy of the worker (issue 20). Matched by
        worker name and the earlier launch token, so the new agents are never touched."""
        from omp import procs

        team = self.cfg.paths
        for m in members:
            before = self.saved.get(m.name, {}).get("launchToken") or self.cfg.raw.get(
                "launchToken"
            )
            if not isinstance(before, str) or not before or before == token:
                continue  # an earlier omp recorded no token: its processes cannot be told apart
            match = procs.EnvMatch(team.name, str(team.project.root), [m.name], [before])
            with contextlib.suppress(Exception):
                procs.terminate(procs.collect([], match))

    def _undo(self, members: list[Member]) -> None:
        tmux = self.place.tmux if self.place else None
        # The new panes close, and every process started in them ends (the tree of each, and
        # what carries this resume's token even after a `setsid`), as a launch's rollback.
        self.end_created(tmux, self.cfg.paths)
        if self.created_session and tmux is not None:
            with contextlib.suppress(Exception):
                tmux.kill_session(self.created_session)
        if not self.config_written:
            return
        team = self.cfg.paths
        with contextlib.suppress(OSError, OmpError), members_locked(team):
            fresh = team_config.load(team)
            for entry in fresh.workers:
                old = self.saved.get(str(entry.get("name")))
                if old is None:
                    continue
                for k in _ENTRY_FIELDS:
                    entry.pop(k, None)
                entry.update(old)
            for k in _TEAM_FIELDS:
                fresh.raw.pop(k, None)
            fresh.raw.update(self.saved_team)
            team_config.write(team, fresh.raw)
        for m in members:
            with contextlib.suppress(OSError, OmpError):
                history.member(team, m.name, "resume failed")

    def _report(
        self,
        members: list[Member],
        skipped: list[dict[str, Any]],
        place: Place | None,
        reclaimed: list[dict[str, Any]],
    ) -> dict[str, Any]:
        cfg = self.cfg
        out: dict[str, Any] = {
            "ok": True,
            "team": cfg.name,
            "resumed": [
                {
                    "name": m.name,
                    "paneId": m.pane,
                    "agent": m.profile.name if m.profile else None,
                    "why": m.why,
                    "conversation": "resumed" if m.session_id else "new",
                    "sessionId": m.session_id,
                    "sessionFrom": m.session_from,
                    "cwd": str(m.cwd) if m.cwd else None,
                    "worktree": m.worktree,
                    "missingEnv": m.missing_env,
                    "inbox": str(cfg.paths.resume_inbox(m.name)),
                }
                for m in members
            ],
            "skipped": skipped,
            "reclaimed": reclaimed,
        }
        if place is not None:
            out["place"] = (
                "in place" if place.in_place else "your window" if place.inside else "new session"
            )
            if not place.in_place:
                ident = place.tmux.server_identity()
                sock = ident["socket_path"] if ident else None
                name = place.tmux.socket_name
                out["attach"] = _attach_hint(sock, name, session_name(cfg.name), place.inside)
        return out


def _from_record(cfg: TeamConfig, member: str, agents: tuple[str, ...]) -> str | None:
    """The session of the member's newest record in the monitor's usage index (found from its
    pane while it ran: Codex and Gemini workers get no hook of omp's), when the record names it
    plainly; else None. Read-only."""
    from omp.monitor.usage import load
    from omp.stophook.sessions import valid_id
    from omp.usage.locate import session_id

    entry = ((load(cfg) or {}).get("members") or {}).get(member)
    records = entry.get("records") if isinstance(entry, dict) else None
    newest: tuple[float, str, Path] | None = None
    for rec in records if isinstance(records, list) else []:
        if not isinstance(rec, dict) or rec.get("sub") or rec.get("kind") not in agents:
            continue
        path = Path(str(rec.get("path")))
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, str(rec["kind"]), path)
    return valid_id(session_id(newest[1], newest[2])) if newest else None


def _restore_command(cfg: TeamConfig, ws: Mapping[str, Any]) -> str:
    """The git line that puts a member's branch back at its recorded worktree path. `-f`: git
    still lists a worktree whose directory was deleted by hand, and refuses a plain `add` there
    ("missing but already registered worktree")."""
    team_ws = cfg.raw.get("workspace")
    repo = team_ws.get("repo") if isinstance(team_ws, dict) else None
    repo = repo if isinstance(repo, str) and repo else str(cfg.paths.project.root)
    path, branch = str(ws.get("path")), str(ws.get("branch") or "<branch>")
    return shlex.join(["git", "-C", repo, "worktree", "add", "-f", path, branch])


def _mark_project(worktree: Path, root: Path) -> None:
    """The project mark in a worktree's git directory (`omp.store.paths.PROJECT_MARK`), written
    again when it is missing: a worktree checked out anew by hand (the `worktree_missing` way
    on) has a new git directory without it, and omp run there without OMP_ROOT would not find
    the team. A convenience: a failure here stops nothing."""
    from omp.workspace.create import ensure_project_mark

    with contextlib.suppress(OmpError, OSError):
        ensure_project_mark(worktree, root)


def _fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(entry[k]) for k in _ENTRY_FIELDS if k in entry}


def _worktree_view(ws: Mapping[str, Any]) -> dict[str, Any]:
    """A worktree as the resumed worker is told of it: branch, commits ahead of its base,
    uncommitted files (`omp.workspace.repo`; "?" where git does not say)."""
    from omp.workspace import repo

    path = str(ws.get("path"))
    branch: Any = ws.get("branch")
    ahead: int | str = "?"
    files: list[str] = []
    with contextlib.suppress(OmpError, OSError):
        branch = repo.current_branch(path) or branch
    base = ws.get("base")
    if isinstance(base, str) and base:
        with contextlib.suppress(OmpError, OSError):
            ahead = len(repo.commits(path, base, "HEAD"))
    with contextlib.suppress(OmpError, OSError):
        files = repo.changes(path).paths
    return {**ws, "branch": branch, "ahead": ahead, "uncommitted": files}


def resume(
    cfg: TeamConfig,
    workers: list[str] | None = None,
    *,
    socket: str | None = None,
    new_session: bool = False,
    ready_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    tmux_factory: Callable[..., Tmux] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    from omp.mail.panes import has_remote

    far: list[str] = []
    if has_remote(cfg):  # workers on other hosts: each back on its own host
        from omp.team import remote_resume

        workers, far = remote_resume.split(cfg, workers)
    out: dict[str, Any] | None = None
    if workers is None or workers:
        out = Resume(
            cfg,
            workers,
            env=env,
            tmux_factory=tmux_factory,
            progress=progress,
            socket=socket,
            new_session=new_session,
            ready_timeout=ready_timeout,
        ).watched()
    if not far:
        assert out is not None
        return out
    if os.path.lexists(cfg.paths.shutdown):
        Resume(cfg, far).check()  # team_shut_down, as for a local member
    from omp.team import remote_resume

    def wait(tmux: Tmux, profile: AgentProfile, w: str, pane: str, inbox: Path) -> None:
        waiter = Resume(cfg, [w], ready_timeout=ready_timeout, progress=progress)
        waiter.trigger_file = lambda _team, _w: inbox
        waiter.wait_and_trigger(tmux, cfg.paths, profile, {w: pane})

    done = remote_resume.resume_remote(cfg, far, wait=wait)
    out = out or {"ok": True, "team": cfg.name, "resumed": [], "skipped": [], "reclaimed": []}
    out["resumed"] += done["resumed"]
    out["skipped"] += done["skipped"]
    return out
