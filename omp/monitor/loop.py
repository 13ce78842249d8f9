"""The project's monitor: one detached process that re-nudges unread mail and, while a loop is
active, prompts idle workers. Decisions live in `monitor_policy`; this module does the I/O.

A scan, every `Intervals.scan` seconds (5 s by default):

1. the live teams (found by `monitor_ctl.watched_teams`, the same discovery a start uses): no
   `shutdown.json`, a tmux identity whose server (pid + start time) is the one
   running now, and at least one worker pane that exists, is not dead and sits in the recorded
   session and window. One `server_identity` and one `pane_states` call per tmux server;
   per live team, the usage index read on (`omp.monitor.usage`: only what each member's agent
   session record gained since; the leader's pane is looked at for its session too) and its
   token budgets checked (`omp.monitor.budget`: a crossed
   budget tells the leader once and holds idle prompts back);
2. per live worker pane (and the leader's, for its mail only, with `--nudge-leader`): its
   undelivered mail through the mailbox index (cached by the mailbox file's stat, so an
   unchanged mailbox costs one `lstat`), then the
   screen, captured only if the policy could send something and the window has shown output
   since the last capture (tmux's `window_activity`);
3. under the target's flock, the policy's decision; a send is reserved on disk first, then typed
   (after re-checking ownership, the loop gate and shutdown), then its outcome is recorded.

It stops after `empty_scans` consecutive scans with no live team (one transient tmux miss does not
end it), when another process owns the lock, or on SIGTERM/SIGINT, writing a final status and
releasing the lock. Files (all 0600 in 0700 directories): `team-monitor/status.json`,
`events.jsonl` (newest 200 lines), and the tracker store's `targets/<id>.json` (+ `.lock`, see
`monitor_trackers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from omp import clock as omp_clock
from omp import modes
from omp.errors import OmpError
from omp.invocation import team_command
from omp.mail import delivery
from omp.mail.mailbox import Mailbox
from omp.monitor import ctl as ctl
from omp.monitor import policy as policy
from omp.monitor import remote as rmt
from omp.monitor.trackers import Trackers
from omp.record.config import TeamConfig
from omp.record.placement import hosts_of, placed_of
from omp.store import fs
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks.tasks import TERMINAL
from omp.tmux.identity import PaneIdentity, TmuxIdentity
from omp.tmux.ssh import Host

if TYPE_CHECKING:
    from omp.agents import AgentProfile

CAPTURE_LINES = 40
MAX_HOST_THREADS = 8  # hosts looked at side by side in a scan
RACY_SECONDS = 1.5  # a stat key newer than this is not trusted for caching (coarse mtimes)


class PaneLike(Protocol):
    @property
    def dead(self) -> bool: ...
    @property
    def in_mode(self) -> bool: ...
    @property
    def session_id(self) -> str: ...
    @property
    def window_id(self) -> str: ...
    @property
    def activity(self) -> float | None: ...


class Adapter(Protocol):
    """The part of tmux the monitor uses: the thin client plus typing
    (`omp.mail.typein.TypingTmux`); tests hand in a fake."""

    def server_identity(self) -> Mapping[str, Any] | None: ...

    def pane_states(self, pane_ids: Sequence[str]) -> Mapping[str, PaneLike | None]: ...

    def capture(self, pane_id: str, lines: int = 40) -> list[str]: ...

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]: ...

    def deliver(
        self,
        pane_id: str,
        text: str,
        profile: AgentProfile,
        *,
        lock_dir: Path,
        expected: PaneIdentity | None = None,
        only_idle: bool = False,
        guard: Callable[[], str | None] | None = None,
        on_submitted: Callable[[], None] | None = None,
    ) -> bool: ...


AdapterFactory = Callable[[str], Adapter]
RemoteFactory = Callable[[Host, str], "RemoteAdapter"]


class RemoteAdapter(Adapter, rmt.RemoteAdapter, Protocol):
    """A host's tmux server: the monitor's `Adapter` plus the one-call pane listing."""


Clock = Callable[[], float]
Sleep = Callable[[float], None]
StopCheck = Callable[[], str | None]


def _nudged_members(cfg: TeamConfig) -> list[str]:
    """Whose panes the monitor watches: the workers, and the leader when launched with
    `--nudge-leader` (its mail only)."""
    names = list(cfg.worker_names)
    if cfg.raw.get("nudgeLeader") is True and cfg.pane_of(LEADER):
        names.append(LEADER)
    return names


def _is_remote(cfg: TeamConfig, worker: str) -> bool:
    return placed_of(cfg.worker(worker)) is not None


def _remote_team(cfg: TeamConfig) -> bool:
    workers = cfg.raw.get("workers")
    return isinstance(workers, list) and any(
        isinstance(w, dict) and w.get("remote") for w in workers
    )


def _adapter_of(it: _Pane) -> Adapter:
    assert it.adapter is not None
    return it.adapter


def tmux_adapter(socket_path: str) -> Adapter:
    from omp.mail.typein import TypingTmux

    return TypingTmux(socket_path=socket_path)


def ssh_adapter(host: Host, socket_name: str) -> RemoteAdapter:
    return rmt.RemoteTyping(host, socket_name)


# ---- one scan -------------------------------------------------------------------------------


@dataclass
class _Team:
    cfg: TeamConfig
    ident: TmuxIdentity | None  # None: no pane here (every worker on other hosts)
    gen: str

    @property
    def name(self) -> str:
        return self.cfg.name

    @property
    def socket(self) -> str:
        return str(self.ident.socket_path) if self.ident else ""


@dataclass
class _Look:
    """What one scan saw of a team's panes, here and on other hosts."""

    # pane id -> state on the local server; None: not looked at this scan (a tmux miss, the
    # server missing once, or no server of the team's here)
    local: Mapping[str, PaneLike | None] | None = None
    adapter: Adapter | None = None  # the local server's, when it answers as recorded
    why: str = ""  # why the local panes were not looked at ("tmux server gone")
    server_gone: bool = False  # missing two scans in a row: every local pane is gone
    remote: dict[str, rmt.Look] = field(default_factory=dict)  # worker -> its pane's look


@dataclass
class ScanReport:
    live_teams: int = 0
    teams: list[dict[str, Any]] = field(default_factory=list)
    captures: int = 0
    remote_calls: int = 0  # ssh calls of the scan's looks and captures (not typing)
    sent: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    active_loops: list[str] = field(default_factory=list)


@dataclass
class _Screen:
    captured_wall: float
    screen: str  # the policy's reading: `dialog` whenever a person is needed
    scan: int  # the scan that captured it
    need: str | None = None  # what only a person can answer (`omp.agents.screen_state`)
    lines: tuple[str, ...] = ()  # what the screen shows of it (raw; sanitised when published)


@dataclass
class _Pane:
    """One live worker pane in one scan."""

    team: _Team
    worker: str
    pane: str
    state: PaneLike
    tid: str
    obs: policy.Observation
    # The nudge record `obs.covered` was judged on: a different one under the pane's lock means
    # a nudge was typed since (`delivery.Due`), and ours is not.
    record: delivery.Record | None = None
    adapter: Adapter | None = None  # the pane's server (here, or a host's over ssh)
    key: str = ""  # that server's key (a local socket's path, or `remote.group_key`)
    expected: PaneIdentity | None = None  # a remote pane's identity as the scan read it
    label: str = ""  # how diagnostics name the server ("tmux <socket>", "host <name>")


def _stat_key(path: Path, wall: float) -> tuple[int, int, int] | None:
    """(ino, size, mtime_ns) of a file old enough that its mtime tells every change; else None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return (0, 0, 0)
    if wall - st.st_mtime < RACY_SECONDS:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Monitor:
    """The state one monitor process keeps between scans (caches only; the files are the truth)."""

    def __init__(
        self,
        root: Path,
        token: str,
        *,
        clock: Clock = omp_clock.now,
        adapter_factory: AdapterFactory = tmux_adapter,
        intervals: policy.Intervals | None = None,
        wall: Clock = time.time,
        stop: StopCheck = lambda: None,
        remote_factory: RemoteFactory = ssh_adapter,
    ) -> None:
        self.paths = StatePaths(root)
        self.stop = stop  # a signal received: long work (reading records) ends at once
        self.token = token
        self.clock = clock
        self.wall = wall  # real time, compared with tmux's own activity stamps
        self.adapter_factory = adapter_factory
        self.remote_factory = remote_factory
        self.iv = intervals or policy.Intervals.from_env()
        self.reach = rmt.Reach(self.iv.host_grace, self.iv.host_backoff)
        self._remote_adapters: dict[str, RemoteAdapter] = {}
        self._remote_missing: dict[str, int] = {}  # group key -> scans in a row without server
        self.lock_dir = self.paths.tmux_locks
        self.scans = 0
        self.nudges_sent = 0
        self.idle_prompts_sent = 0
        self.last_report = ScanReport()
        self._adapters: dict[str, Adapter] = {}
        self._configs: dict[str, tuple[tuple[int, int, int], Any]] = {}
        self._mail: dict[tuple[str, str], tuple[tuple[int, int, int], policy.Unread]] = {}
        self._indexed: dict[tuple[str, str], tuple[int, int, int]] = {}  # see _keep_indexes
        self._screens: dict[tuple[str, str], _Screen] = {}
        self.trackers = Trackers(self.paths, self.iv.target_ttl)
        self._profiles: dict[str, AgentProfile] | None = None
        self._profile_error: str | None = None
        self._server_gone: dict[str, int] = {}  # team -> scans in a row its server was missing
        self._paneless: dict[str, int] = {}  # team -> scans in a row with no live worker pane
        self._ready_since: dict[str, float] = {}  # target id -> since when its screen is ready
        # team -> (the tasks directory's stat key, (all done, worker -> its task in progress))
        self._owned: dict[str, tuple[tuple[int, int, int], tuple[bool, dict[str, str]]]] = {}
        self._emitted: set[str] = set()  # notification keys this process queued
        # team -> ((tasks dir, config, live workers), when) its backlog last had nothing to do
        self._backlog_seen: dict[str, tuple[tuple[Any, ...], float]] = {}
        self._task_reader: Any = None  # `omp.tasks.queue.Reader`, made on a backlog's first look
        self._reading: Any = None  # the scan's allowance for agents' records (`omp.usage.limits`)

    # -- discovery --------------------------------------------------------------------------

    def _teams(self, report: ScanReport) -> list[_Team]:
        out: list[_Team] = []
        wall = self.wall()
        for team, raw in ctl.watched_teams(
            self.paths, read=lambda team: self._config(team, wall), problems=report.diagnostics
        ):
            cfg = TeamConfig(team, raw)
            # None: no tmux server of the team's here (every worker runs on another host)
            ident = TmuxIdentity.from_config(raw["tmuxIdentity"]) if ctl.has_ident(raw) else None
            if ident is not None or _remote_team(cfg):
                out.append(_Team(cfg, ident, policy.generation(raw)))
        return out

    def _config(self, team: TeamPaths, wall: float) -> Any:
        key = _stat_key(team.config, wall)
        cached = self._configs.get(team.name)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        raw = fs.read_json(team.config)
        if key is not None:
            self._configs[team.name] = (key, raw)
        return raw

    def _adapter(self, socket: str) -> Adapter:
        ad = self._adapters.get(socket)
        if ad is None:
            ad = self._adapters[socket] = self.adapter_factory(socket)
        return ad

    def _profile(self, cfg: TeamConfig, member: str | None = None) -> AgentProfile | None:
        if self._profiles is None:
            from omp.agents import load_profiles

            try:
                self._profiles = load_profiles(self.paths.root)
            except OmpError as exc:  # a broken agents.toml: no screen can be judged, none typed
                self._profiles = {}
                self._profile_error = exc.message
        # The leader's pane runs the leader's own agent: judge it by that profile; a worker
        # added with its own --agent (add-worker) by its own.
        key = "leaderAgent" if member == LEADER else "agent"
        own = (cfg.worker(member) or {}).get("agent") if member else None
        name = own or cfg.raw.get(key) or cfg.raw.get("agent") or "copilot"
        return self._profiles.get(str(name)) or self._profiles.get("copilot")

    # -- the scan ---------------------------------------------------------------------------

    def scan(self) -> ScanReport:
        report = ScanReport()
        self.scans += 1
        self._reading = None  # made at the scan's first usage read, shared by every team
        self._profiles = None  # re-read once per scan, and only if a screen must be judged
        self._profile_error = None
        now = self.clock()
        report.active_loops = modes.active_loops(self.paths)
        teams = self._teams(report)
        looks = {t.name: _Look() for t in teams}
        by_socket: dict[str, list[_Team]] = {}
        for t in teams:
            if t.ident is not None:
                by_socket.setdefault(t.socket, []).append(t)
        for socket, group in by_socket.items():

            def here(socket: str = socket, group: list[_Team] = group) -> None:
                self._look_here(socket, group, looks, report)

            self._guarded(f"tmux {socket}", report, here)
        self._guarded("hosts", report, lambda: self._look_hosts(teams, looks, report, now))
        seen: set[str] = set()
        items: list[_Pane] = []
        passed: list[_Team] = []
        for t in teams:

            def one(t: _Team = t) -> None:
                found = self._team_pass(t, looks[t.name], report, seen)
                if found is not None:
                    items.extend(found)
                    passed.append(t)

            self._guarded(f"team {t.name}", report, one)
        if items:
            self._guarded("panes", report, lambda: self._work(items, report, now))
        for t in passed:
            if not self._complete(t, looks[t.name]):
                continue  # a pane not seen this scan keeps its "needs you" entry
            live_workers = {it.worker for it in items if it.team is t}
            try:
                from omp.monitor import attention

                attention.prune(t.cfg, live_workers)
            except Exception as exc:
                report.diagnostics.append(f"team {t.name}: attention: {_why(exc)}")
        if self._profile_error:
            report.diagnostics.append(f"agent profiles: {self._profile_error}")
        self._maybe_compact(now, seen, report)
        self.deliver_notifications(report)
        self.last_report = report
        return report

    def _guarded(self, what: str, report: ScanReport, fn: Callable[[], None]) -> None:
        """Run one part of a scan; what fails is said, and the rest of the scan goes on."""
        try:
            fn()
        except OmpError as exc:
            if exc.code == "unsafe_path" and str(self.paths.monitor) in exc.message:
                raise  # our own directory is not safe to write: stop, do not work around it
            report.diagnostics.append(f"{what}: {_why(exc)}")
        except Exception as exc:
            report.diagnostics.append(f"{what}: {_why(exc)}")

    def deliver_notifications(self, report: ScanReport | None = None) -> None:
        """Run the notify command for what was queued (`omp.notify`); never the monitor's end."""
        from omp import notify

        try:
            results = notify.deliver(self.paths)
        except Exception as exc:
            if report is not None:
                report.diagnostics.append(f"notify: {_why(exc)}")
            return
        for res in results:
            ctl.log_event(
                self.paths, "notify", now=self.clock(), token=self.token, kind=res.kind,
                outcome=res.outcome, message=res.detail or None,
            )  # fmt: skip

    def _emit(self, t: _Team, kind: str, text: str, report: ScanReport, **extra: Any) -> None:
        """Queue one notification per team launch and kind (`omp.notify`, keyed)."""
        key = f"{kind}:{t.name}:{t.gen}"
        if key in self._emitted:
            return
        from omp import notify

        try:
            notify.emit(self.paths, {"kind": kind, "team": t.name, "text": text, **extra}, key=key)
            self._emitted.add(key)
        except Exception as exc:
            report.diagnostics.append(f"team {t.name}: notify: {_why(exc)}")

    # -- looking at the panes ---------------------------------------------------------------

    def _look_here(
        self, socket: str, teams: list[_Team], looks: dict[str, _Look], report: ScanReport
    ) -> None:
        """The local server of `teams`: one `server_identity`, one `pane_states`."""
        adapter = self._adapter(socket)
        try:
            server = adapter.server_identity()
        except Exception as exc:  # a tmux hiccup: this scan misses the server, the next retries
            report.diagnostics.append(f"tmux {socket}: {_why(exc)}")
            return
        live: list[_Team] = []
        for t in teams:
            assert t.ident is not None
            if not t.ident.same_server(server):
                look = looks[t.name]
                look.why = "tmux server gone"
                # Every pane went with its server, but a sweep cannot be undone: act only when
                # two scans in a row found it gone.
                self._server_gone[t.name] = self._server_gone.get(t.name, 0) + 1
                if self._server_gone[t.name] >= 2:
                    look.local, look.server_gone = {}, True
            else:
                self._server_gone.pop(t.name, None)
                live.append(t)
        wanted = [p for t in live for w in _nudged_members(t.cfg) if (p := t.cfg.pane_of(w))]
        # the leader's pane too, for its usage (its session found from its processes)
        wanted += [p for t in live if (p := t.cfg.pane_of(LEADER)) and p not in wanted]
        if not wanted:
            for t in live:  # no pane here to look at (its workers run on other hosts)
                looks[t.name].local, looks[t.name].adapter = {}, adapter
            return
        try:
            states = adapter.pane_states(wanted)
        except Exception as exc:
            report.diagnostics.append(f"tmux {socket}: {_why(exc)}")
            return
        for t in live:
            looks[t.name].local, looks[t.name].adapter = states, adapter

    def _remote_adapter(self, group: rmt.Group) -> RemoteAdapter:
        ad = self._remote_adapters.get(group.key)
        if ad is None:
            ad = self._remote_adapters[group.key] = self.remote_factory(group.host, group.socket)
        return ad

    def _look_hosts(
        self, teams: list[_Team], looks: dict[str, _Look], report: ScanReport, now: float
    ) -> None:
        """The panes of the teams' workers on other hosts: one `list-panes` per host's server
        (`omp.monitor.remote.look_group`), none for a host that is backing off. Hosts are
        looked at side by side: one that hangs until its timeout does not add to the others'
        (a scan must stay well inside the owner lock's stale interval)."""
        groups = rmt.groups_of([(t.name, t.cfg.raw) for t in teams if _remote_team(t.cfg)])
        by_host: dict[str, list[rmt.Group]] = {}
        for group in groups.values():
            by_host.setdefault(group.host.name, []).append(group)

        def look(host_groups: list[rmt.Group]) -> list[rmt.Outcome]:
            # one host's groups in turn: its outage, once seen, spares its other servers a try
            step, missing = self.iv.scan, self._remote_missing
            return [
                rmt.look_group(g, self._remote_adapter(g), self.reach, now, step, missing)
                for g in host_groups
            ]

        if len(by_host) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(len(by_host), MAX_HOST_THREADS)) as pool:
                results = list(pool.map(look, by_host.values()))
        else:
            results = [look(gs) for gs in by_host.values()]
        for out in (o for outs in results for o in outs):
            report.remote_calls += out.calls
            report.diagnostics.extend(out.diagnostics)
            for (team, worker), seen in out.looks.items():
                looks[team].remote[worker] = seen
            for kind, fields in out.events:
                ctl.log_event(self.paths, kind, now=self.clock(), token=self.token, **fields)

    def _complete(self, t: _Team, look: _Look) -> bool:
        """Was every pane of the team looked at this scan?"""
        local = any(t.cfg.pane_of(w) for w in t.cfg.worker_names)
        if local and look.local is None:
            return False
        return all(r.kind != "unknown" for r in look.remote.values())

    def _team_pass(
        self, t: _Team, look: _Look, report: ScanReport, seen: set[str]
    ) -> list[_Pane] | None:
        """Presence, sweep, usage, the backlog and the watched panes of one team; None when
        nothing of it could be looked at this scan."""
        if not look.remote:  # a team here only: as it always was
            if look.why:
                report.teams.append({"team": t.name, "live": False, "why": look.why})
            if look.server_gone:
                self._presence_and_sweep(t, {}, look, report)
                self._emit(t, "gone", f"team {t.name} is gone: its tmux server is gone", report)
            if look.local is None or look.server_gone:
                return None
        self._presence_and_sweep(t, look.local, look, report)
        if look.local is not None and not look.server_gone:
            self._usage(t, look.local, report)
        panes: list[_Pane] = []
        if look.local is not None and look.adapter is not None and not look.server_gone:
            panes += [
                self._here(t, w, pane, st, look.adapter)
                for w, pane, st in self._live_panes(t, look.local)
            ]
        panes += self._there(t, look)
        waiting = sorted({r.placed.host for r in look.remote.values() if r.kind == "unknown"})
        entry: dict[str, Any] = {
            "team": t.name,
            "live": bool(panes or waiting),
            "panes": len(panes),
        }
        if look.remote:
            entry["remotePanes"] = sum(1 for it in panes if it.expected is not None)
        if waiting:
            entry["waitingFor"] = waiting  # hosts not answering, or not looked at this scan
        if not panes and not waiting:
            entry["why"] = look.why or "no live worker pane"
        report.teams.append(entry)
        if not panes:
            if waiting:
                report.live_teams += 1  # its hosts may answer again: keep watching
                return []
            self._paneless[t.name] = self._paneless.get(t.name, 0) + 1
            if self._paneless[t.name] >= 2:  # two scans in a row: not a tmux hiccup
                self._emit(t, "gone", f"team {t.name} is gone: no worker pane is alive", report)
            return []
        self._paneless.pop(t.name, None)
        report.live_teams += 1
        if self._complete(t, look):  # a worker not seen this scan is not handed work
            self._backlog(t, [it.worker for it in panes if it.worker != LEADER], report)
        self._maybe_all_done(t, report)
        try:
            gate = bool(report.active_loops) and not self._all_done(t.cfg.paths)
        except Exception as exc:  # unreadable tasks: no idle prompts, mail still watched
            report.diagnostics.append(f"team {t.name}: tasks: {_why(exc)}")
            gate = False
        held = self._held(t, report) if gate else set()
        items: list[_Pane] = []
        for it in panes:
            worker = it.worker
            seen.add(it.tid)
            try:
                unread = self._unread(t.cfg.paths, worker)
            except Exception as exc:
                report.diagnostics.append(f"team {t.name} {worker}: {_why(exc)}")
                continue
            record = delivery.read_record(t.cfg, worker) if unread.count else None
            covered = delivery.covered_since(record, unread.newest_at) if unread.count else None
            # The leader gets its mail nudged, never an idle prompt; nor does a worker
            # whose token budget (or its team's) was crossed in this loop.
            prompts = gate and worker != LEADER and worker not in held
            # a worker on another host types the omp of its host (`[hosts.<name>] omp`)
            omp = it.obs.omp
            it.obs = policy.Observation(t.name, worker, unread, None, prompts, omp, covered)
            it.record = record
            items.append(it)
        return items

    def _here(self, t: _Team, worker: str, pane: str, st: PaneLike, adapter: Adapter) -> _Pane:
        tid = policy.target_id(t.name, t.gen, pane, t.cfg.tmux or {})
        obs = policy.Observation(
            t.name, worker, policy.Unread(), None, False, team_command(t.cfg.raw)
        )
        return _Pane(
            t, worker, pane, st, tid, obs, None, adapter, t.socket, None, f"tmux {t.socket}"
        )

    def _there(self, t: _Team, look: _Look) -> list[_Pane]:
        """The team's live panes on other hosts."""
        if not look.remote:
            return []
        hosts = hosts_of(t.cfg.raw)
        out: list[_Pane] = []
        for worker, r in sorted(look.remote.items()):
            if r.kind != "pane" or r.pane is None or r.pane.dead:
                continue
            host = hosts.get(r.placed.host) or Host(r.placed.host)
            group = rmt.Group(host, r.placed.socket, r.key)
            tid = policy.target_id(
                t.name, t.gen, r.placed.pane, {**r.pane.ident_json(), "socketPath": r.key}
            )
            obs = policy.Observation(
                t.name, worker, policy.Unread(), None, False, host.settings.omp
            )
            out.append(
                _Pane(
                    t, worker, r.placed.pane, r.pane, tid, obs,
                    adapter=self._remote_adapter(group), key=r.key,
                    expected=r.pane.identity(), label=f"host {host.name}",
                )
            )  # fmt: skip
        return out

    def _work(self, items: list[_Pane], report: ScanReport, now: float) -> None:
        """Judge the watched panes: screens captured (one `capture_many` per server), "needs
        you" read from them, then nudges and idle prompts decided and typed."""
        self.trackers.ensure_dir()
        by_key: dict[str, list[_Pane]] = {}
        for it in items:
            by_key.setdefault(it.key, []).append(it)
        # Screens the policy may need (judged on what this process last knew of each tracker;
        # the locked pass below re-reads the truth and captures whatever is still missing).
        # Every worker's screen is judged each scan (needs it a person?); one that cannot have
        # changed since its last capture is not captured again.
        for group in by_key.values():
            todo = [
                it
                for it in group
                if (it.worker != LEADER or self._may_need_screen(it, now, report))
                and self._cached(it) is None
            ]
            if todo and todo[0].expected is not None:
                report.remote_calls += 1
            self._capture_all(_adapter_of(group[0]), todo, report)
        # Needs a person? Judged on the screen as captured, before anything may be typed.
        for it in items:
            if it.worker == LEADER:
                continue
            try:
                self._attend(it, _adapter_of(it), report, now)
            except Exception as exc:
                report.diagnostics.append(
                    f"team {it.team.name} {it.worker}: attention: {_why(exc)}"
                )
        for it in items:
            try:
                self._judge(it, _adapter_of(it), report, now)
            except Exception as exc:  # one odd pane must not stop the watch of the others
                report.diagnostics.append(f"team {it.team.name} {it.worker}: {_why(exc)}")

    def _presence_and_sweep(
        self,
        t: _Team,
        states: Mapping[str, PaneLike | None] | None,
        look: _Look,
        report: ScanReport,
    ) -> None:
        """Record what tmux says of each worker's pane, then rescue orphaned or timed-out work.

        `states`: the local server's panes (None: not looked at this scan, so the local workers
        are left as they were); the remote workers' panes are in `look.remote`. A remote worker
        not seen (its host not answering, within the grace) is left as it was too.
        Both write only when something changed, so an idle team costs a few stats per scan.
        """
        from omp.monitor import sweep
        from omp.tasks import presence

        now = self.wall()
        seen: dict[str, object] = {}
        pane: str | None
        for w in t.cfg.worker_names:
            r = look.remote.get(w)
            if r is not None:
                if r.kind == "unknown":
                    continue
                alive = r.kind == "pane" and r.pane is not None and not r.pane.dead
                if r.kind == "host_gone":
                    seen[w] = rmt.Offline("gone", f"its host {r.placed.host} does not answer")
                else:
                    seen[w] = r.pane
                activity = r.pane.activity if r.pane is not None else None
                pane, pid = r.placed.pane, None  # the host's pid means nothing here
            elif states is None or _is_remote(t.cfg, w):
                continue  # not looked at this scan (or a remote worker not seen at all)
            else:
                pane = t.cfg.pane_of(w)
                st = states.get(pane) if pane else None
                if st is not None and t.ident is not None and not t.ident.holds(st):
                    st = None  # the id now names someone else's pane
                seen[w] = st
                alive = st is not None and not st.dead
                activity = st.activity if st is not None else None
                pid = getattr(st, "pid", None)
            try:
                presence.observe_pane(
                    t.cfg, w, now=now, alive=alive, activity_at=activity, pane_id=pane, pid=pid
                )
            except Exception as exc:
                report.diagnostics.append(f"team {t.name} {w}: presence: {_why(exc)}")
        self._keep_indexes(t, report)
        try:
            actions = sweep.sweep_team(t.cfg, now, seen)
        except Exception as exc:
            report.diagnostics.append(f"team {t.name}: sweep: {_why(exc)}")
            return
        try:
            from omp.monitor import verifying

            actions += verifying.settle_team(t.cfg)  # checks of completions (`--verify`)
        except Exception as exc:
            report.diagnostics.append(f"team {t.name}: verify: {_why(exc)}")
        for action in actions:
            ctl.log_event(
                self.paths, "sweep", now=self.clock(), token=self.token, team=t.name,
                action=action,
            )  # fmt: skip

    def _backlog(self, t: _Team, live: list[str], report: ScanReport) -> None:
        """A backlog team's hand-overs, retries, landings and prepared worktrees
        (`omp.backlog.tick`), run when its tasks, its config or its live workers changed (an
        unchanged team costs two stats)."""
        team = t.cfg.paths
        wall = self.wall()
        key = (_stat_key(team.tasks_dir, wall), _stat_key(team.config, wall), tuple(live))
        seen = self._backlog_seen.get(t.name)
        # unchanged, and looked at lately (a landing that failed is tried again after a while)
        if None not in key and seen is not None and seen[0] == key and wall - seen[1] < 15:
            return
        from omp.backlog import tick

        if self._task_reader is None:
            from omp.tasks.queue import Reader

            self._task_reader = Reader(self.wall)
        try:
            actions = tick.tick(t.cfg, live=live, read=self._task_reader)
        except Exception as exc:
            report.diagnostics.append(f"team {t.name}: backlog: {_why(exc)}")
            return
        if None not in key and not actions:
            self._backlog_seen[t.name] = (key, wall)
        for action in actions:
            ctl.log_event(
                self.paths, "backlog", now=self.clock(), token=self.token, team=t.name,
                action=action,
            )  # fmt: skip

    def _keep_indexes(self, t: _Team, report: ScanReport) -> None:
        """Catch up the index of every mailbox of the team that history no omp writer has
        indexed yet (the TypeScript tool's, a lost index): `status` and the other read-only
        calls, which may not write, then start from it instead of reading it all. A mailbox
        unchanged since it was last checked costs one stat."""
        for name in t.cfg.recipients:
            key = _stat_key(t.cfg.paths.mailbox(name), self.wall())
            if key is None or self._indexed.get((t.name, name)) == key:
                continue
            try:
                Mailbox(t.cfg.paths, name).keep_index()
            except Exception as exc:
                report.diagnostics.append(f"team {t.name} {name}: mailbox index: {_why(exc)}")
                continue
            self._indexed[(t.name, name)] = key

    def _live_panes(
        self, t: _Team, states: Mapping[str, PaneLike | None]
    ) -> list[tuple[str, str, PaneLike]]:
        leader = t.cfg.raw.get("leaderPaneId")
        out: list[tuple[str, str, PaneLike]] = []
        for w in _nudged_members(t.cfg):
            pane = t.cfg.pane_of(w)
            st = states.get(pane) if pane else None
            if pane is None or st is None or st.dead or (pane == leader and w != LEADER):
                continue
            if t.ident is None or not t.ident.holds(st, session=True):
                continue
            out.append((w, pane, st))
        return out

    def _usage(self, t: _Team, states: Mapping[str, PaneLike | None], report: ScanReport) -> None:
        """Read the members' session records on (the usage index; the leader's pane too) and
        check the team's token budgets (`omp.monitor.usage`, `omp.monitor.budget`)."""
        from omp.monitor import budget, usage

        pids: dict[str, int | None] = {}
        for w in [*t.cfg.worker_names, LEADER]:
            pane = t.cfg.pane_of(w)
            st = states.get(pane) if pane else None
            if st is not None and t.ident is not None and t.ident.holds(st) and not st.dead:
                pids[w] = getattr(st, "pid", None)  # tmux's pane_pid (a test's fake may lack it)
        if self._reading is None:
            from omp.usage import limits

            stop = self.stop
            self._reading = limits.Allowance(
                limits.SCAN_BYTES, limits.SCAN_SECONDS, stop=lambda: stop() is not None
            )
        try:
            rows = usage.refresh(t.cfg, pids, now=self.wall(), allow=self._reading)
            budget.check(t.cfg, rows, now=self.wall())
        except Exception as exc:
            report.diagnostics.append(f"team {t.name}: usage: {_why(exc)}")

    def _held(self, t: _Team, report: ScanReport) -> set[str]:
        """The workers a crossed token budget keeps idle prompts from (`omp.monitor.budget`)."""
        from omp.monitor import budget

        try:
            states = {m: modes.read_state(self.paths, m) for m in modes.MODES}
            return budget.held(t.cfg, budget.loop_started(states))
        except Exception as exc:  # fail closed: a budget that cannot be read holds every prompt
            report.diagnostics.append(f"team {t.name}: budget: {_why(exc)}")
            return set(t.cfg.worker_names)

    def _all_done(self, team: TeamPaths) -> bool:
        """Every task terminal (and at least one): idle prompts would only disturb."""
        return self._task_view(team)[0]

    def _task_view(self, team: TeamPaths) -> tuple[bool, dict[str, str]]:
        """(every task terminal, and at least one; worker -> a task it owns in progress),
        re-read only when the tasks directory changed (a task write replaces its file)."""
        from omp.tasks import tasks

        key = _stat_key(team.tasks_dir, self.wall())
        cached = self._owned.get(team.name)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        found = tasks.list_all(team)
        done = bool(found) and all(t.get("status") in TERMINAL for t in found)
        owned: dict[str, str] = {}
        for task in found:
            if task.get("status") == "in_progress" and isinstance(task.get("owner"), str):
                owned.setdefault(str(task["owner"]), str(task.get("id")))
        view = (done, owned)
        if key is not None:
            self._owned[team.name] = (key, view)
        return view

    def _maybe_all_done(self, t: _Team, report: ScanReport) -> None:
        try:
            done = self._all_done(t.cfg.paths)
        except Exception:
            return  # unreadable tasks are never "all done"
        if done:
            self._emit(t, "all_done", f"team {t.name}: every task is done", report)

    # -- needs you (`omp.monitor.attention`) -------------------------------------------------

    def _attend(self, it: _Pane, adapter: Adapter, report: ScanReport, now: float) -> None:
        """Open or close the worker's "needs you" episode from what its screen shows now."""
        from omp.monitor import attention

        seen = self._seen(it)
        if seen is None or it.state.in_mode:
            return  # not judged this scan (capture failed, or the user scrolls): no change
        if seen.screen == "ready":
            self._ready_since.setdefault(it.tid, now)
        else:
            self._ready_since.pop(it.tid, None)
        need, lines = seen.need, list(seen.lines)
        if need is None and it.tid in self._ready_since:
            stuck = attention.settings(self.paths).stuck_after
            if now - self._ready_since[it.tid] >= stuck:
                task = self._task_view(it.team.cfg.paths)[1].get(it.worker)
                if task is not None:
                    need = attention.stuck_text(stuck, task)
                    lines = self._bottom(it, adapter)
        known = self.trackers.known.get(it.tid)
        if known is None:
            known, _ = self._load(it.tid, it.team, it.worker, it.pane, report)
        if (known.attention.what if known.attention else None) == need:
            return
        t = it.team
        with self.trackers.lock(it.tid, wait=True):
            tr, doc = self._load(it.tid, t, it.worker, it.pane, report)
            old = tr.attention
            if (old.what if old else None) == need:
                return
            new = None
            if need is not None:
                seq = attention.publish_open(t.cfg, it.worker, need, now, lines, it.pane)
                new = policy.Episode(what=need, since=now, seq=seq)
            elif old is not None:
                attention.publish_close(t.cfg, it.worker, old.seq)
            self._save(
                it.tid, t, it.worker, it.pane, dataclasses.replace(tr, attention=new), doc, now
            )
        if old is not None:
            attention.tell_closed(t.cfg, it.worker, old.what, old.seq)
        if new is not None:
            attention.tell_opened(t.cfg, it.worker, new.what, new.seq, lines, it.pane)
        ctl.log_event(
            self.paths, "attention", now=self.clock(), token=self.token, team=t.name,
            worker=it.worker, pane=it.pane, message=new.what if new else "resolved",
        )  # fmt: skip

    def _bottom(self, it: _Pane, adapter: Adapter) -> list[str]:
        """The last lines of an idle worker's screen (what a stuck worker shows)."""
        profile = self._profile(it.team.cfg, it.worker)
        try:
            lines = adapter.capture(it.pane, CAPTURE_LINES)
        except Exception:
            return []
        from omp.agents import person_lines

        return person_lines(profile, lines) if profile else [ln for ln in lines if ln.strip()][-3:]

    def _unread(self, team: TeamPaths, worker: str) -> policy.Unread:
        box = Mailbox(team, worker)
        # mail in a store (`omp.mail.stored`) has no file whose stat tells a change: ask it
        key = None if box.stored is not None else _stat_key(team.mailbox(worker), self.wall())
        cached = self._mail.get((team.name, worker))
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        msgs, _ = box.undelivered(keep=True)
        newest = omp_clock.parse_iso(str(msgs[-1].get("timestamp", ""))) if msgs else None
        ids = tuple(str(m["id"]) for m in msgs[-policy.BATCH_IDS :])
        unread = policy.Unread(count=len(msgs), ids=ids, newest_at=newest)
        if key is not None:
            self._mail[(team.name, worker)] = (key, unread)
        return unread

    def _cached(self, it: _Pane) -> str | None:
        """The pane's screen judged earlier, if it cannot have changed since; else None."""
        if it.state.in_mode:
            return "copy_mode"  # the user is scrolling: nothing may be typed now
        seen = self._seen(it)
        return None if seen is None else seen.screen

    def _seen(self, it: _Pane) -> _Screen | None:
        """What the pane's screen was judged to be, if it cannot have changed since."""
        cached = self._screens.get((it.key, it.pane))
        if cached is None:
            return None
        if cached.scan == self.scans:
            return cached
        # tmux stamps a window's last output in whole seconds: output strictly before the second
        # of our capture means the screen we judged is still the screen.
        act = it.state.activity
        if act is not None and act < math.floor(cached.captured_wall):
            return cached
        return None

    def _capture(self, it: _Pane, adapter: Adapter, lines: list[str] | None = None) -> str:
        profile = self._profile(it.team.cfg, it.worker)
        if profile is None:
            return "unknown"
        from omp.agents import person_lines, screen_state

        wall = self.wall()
        if lines is None:
            lines = adapter.capture(it.pane, CAPTURE_LINES)
        state, what = screen_state(profile, lines)
        need = (what or "a person") if state == "needs_person" else None
        # A screen only a person can answer is never idle to the policy: nothing is typed.
        screen = "dialog" if need else state
        shown = tuple(person_lines(profile, lines)) if need else ()
        self._screens[(it.key, it.pane)] = _Screen(wall, screen, self.scans, need, shown)
        return screen

    def _capture_all(self, adapter: Adapter, todo: list[_Pane], report: ScanReport) -> None:
        """Capture the panes that need judging through one tmux client (`capture_many`)."""
        if not todo:
            return
        for it in todo:
            self._profile(it.team.cfg)  # load the profiles once, before judging
        try:
            screens = adapter.capture_many([it.pane for it in todo], CAPTURE_LINES)
        except Exception as exc:  # the locked pass captures one by one what is missing
            report.diagnostics.append(f"{todo[0].label}: capture: {_why(exc)}")
            return
        for it in todo:
            lines = screens.get(it.pane)
            if lines is not None:
                self._capture(it, adapter, list(lines))
                report.captures += 1

    def _screen(self, it: _Pane, adapter: Adapter, report: ScanReport) -> str:
        cached = self._cached(it)
        if cached is not None:
            return cached
        try:
            screen = self._capture(it, adapter)
        except Exception as exc:
            report.diagnostics.append(f"team {it.team.name} {it.worker}: capture: {_why(exc)}")
            return "unknown"
        report.captures += 1
        return screen

    def _may_need_screen(self, it: _Pane, now: float, report: ScanReport) -> bool:
        known = self.trackers.known.get(it.tid)
        if known is None:  # first sight in this process: what the file says (read unlocked)
            known, _ = self._load(it.tid, it.team, it.worker, it.pane, report)
        return policy.wants_screen(known, it.obs, now, self.iv)

    def _quiet(self, it: _Pane, now: float) -> bool:
        """Nothing can be sent and nothing would change: skip the lock and the file this scan.

        Judged on the tracker this process last read or wrote; skipping can only delay a send,
        never add one.
        """
        known = self.trackers.known.get(it.tid)
        if known is None or self.trackers.refresh_due(it.tid, now):
            return False
        if policy.wants_screen(known, it.obs, now, self.iv):
            return False
        new, send = policy.decide(known, it.obs, now, self.iv)
        return send is None and new == known

    def _judge(self, it: _Pane, adapter: Adapter, report: ScanReport, now: float) -> None:
        t, worker, pane, tid = it.team, it.worker, it.pane, it.tid
        if self._quiet(it, now):
            return
        with self.trackers.lock(tid) as locked:
            if not locked:
                report.diagnostics.append(f"team {t.name} {worker}: target lock busy")
                return
            tr, doc = self._load(tid, t, worker, pane, report)
            obs = it.obs
            if policy.wants_screen(tr, obs, now, self.iv):
                obs = dataclasses.replace(obs, screen=self._screen(it, adapter, report))
            new, send = policy.decide(tr, obs, now, self.iv)
            if new != tr or doc is None or self.trackers.refresh_due(tid, now):
                self._save(tid, t, worker, pane, new, doc, now)  # the reservation, before the send
        if send is None:
            return
        outcome = self._send(it, adapter, send)
        with self.trackers.lock(tid, wait=True):
            tr, doc = self._load(tid, t, worker, pane, report)
            done = policy.record_outcome(tr, send.attempt_id, outcome, self.clock())
            if done != tr:
                self._save(tid, t, worker, pane, done, doc, self.clock())
        if outcome == "sent":
            if send.kind == "idle":
                self.idle_prompts_sent += 1
            else:
                self.nudges_sent += 1
        entry = {"team": t.name, "worker": worker, "pane": pane, "kind": send.kind}
        report.sent.append(entry | {"outcome": outcome})
        ctl.log_event(
            self.paths,
            "idle-prompt" if send.kind == "idle" else "unread-nudge",
            now=self.clock(),
            token=self.token,
            outcome=outcome,
            **entry,
        )

    def _send(self, it: _Pane, adapter: Adapter, send: policy.Send) -> policy.Outcome:
        t, worker, pane = it.team, it.worker, it.pane
        # Re-check what may have changed since the decision: the lock, the loop, the team.
        if not ctl.is_owner(self.paths, self.token):
            return "skipped"
        if send.kind == "idle" and not modes.is_loop_active(self.paths):
            return "skipped"
        if os.path.lexists(t.cfg.paths.shutdown):
            return "skipped"
        from omp.mail.panes import expected_identity

        try:
            # a remote pane: as this scan read it (the host's server is not in the config)
            expected = it.expected or expected_identity(t.cfg, pane)
            profile = self._profile(t.cfg, worker)
            if expected is None or profile is None:
                return "skipped"
            # An unread nudge races the send path's (see `omp.mail.delivery`): checked again
            # under the pane's lock, and recorded there (one nudge outstanding per pane: the
            # send path sees it and does not type).
            due = None
            if send.kind == "unread":
                due = delivery.Due(t.cfg, worker, it.record, self.wall)
            ok = adapter.deliver(
                pane,
                send.text,
                profile,
                lock_dir=self.lock_dir,
                expected=expected,
                only_idle=True,
                guard=due.guard if due else None,
                on_submitted=due.typed if due else None,
            )
            if due is not None and due.refused is not None:
                return "skipped"
        except OmpError as exc:
            return "skipped" if exc.code == "pane_mismatch" else "failed"
        except Exception:
            return "failed"
        self._screens.pop((it.key, pane), None)  # we typed into it: judge it afresh
        return "sent" if ok else "failed"

    # -- tracker files (the store is `monitor_trackers`) ------------------------------------

    def _load(
        self, tid: str, t: _Team, worker: str, pane: str, report: ScanReport
    ) -> tuple[policy.Tracker, dict[str, Any] | None]:
        tr, doc, bad = self.trackers.load(tid, t.name, t.gen, pane)
        if bad is not None:
            report.diagnostics.append(f"team {t.name} {worker}: unreadable {bad}")
        return tr, doc

    def _save(
        self,
        tid: str,
        t: _Team,
        worker: str,
        pane: str,
        tr: policy.Tracker,
        doc: dict[str, Any] | None,
        now: float,
    ) -> None:
        self.trackers.save(
            tid,
            team=t.name,
            worker=worker,
            generation=t.gen,
            pane=pane,
            tracker=tr,
            doc=doc,
            now=now,
        )

    def _maybe_compact(self, now: float, seen: set[str], report: ScanReport) -> None:
        report.diagnostics.extend(self.trackers.compact(now, seen))

    # -- status -----------------------------------------------------------------------------

    def status(self, reason: str, *, terminal: bool, started_at: float, **extra: Any) -> None:
        r = self.last_report
        ctl.write_status(
            self.paths,
            {
                "pid": os.getpid(),
                "token": self.token,
                "scans": self.scans,
                "reason": reason,
                "terminal": terminal,
                "startedAt": omp_clock.iso(started_at),
                "updatedAt": omp_clock.iso(self.clock()),
                "nudgesSent": self.nudges_sent,
                "idlePromptsSent": self.idle_prompts_sent,
                "activeLoops": r.active_loops,
                "teams": r.teams,
                "lastScan": {"captures": r.captures, "sent": r.sent},
                "diagnostics": r.diagnostics[:20],
                # workers' hosts: whether each answers, and since when not (`omp.monitor.remote`)
                "hosts": self.reach.status(),
                "intervals": {
                    "scan": self.iv.scan,
                    "idleDelay": self.iv.idle_delay,
                    "unreadRepeat": self.iv.unread_repeat,
                },
                **extra,
            },
        )


def _why(exc: BaseException) -> str:
    return exc.message if isinstance(exc, OmpError) else f"{type(exc).__name__}: {exc}"


# ---- the loop -------------------------------------------------------------------------------


def run_monitor(
    root: Path,
    token: str,
    *,
    clock: Clock = omp_clock.now,
    sleep: Sleep = time.sleep,
    adapter_factory: AdapterFactory = tmux_adapter,
    intervals: policy.Intervals | None = None,
    stop: StopCheck = lambda: None,
    max_scans: int | None = None,
    wall: Clock = time.time,
) -> dict[str, Any]:
    """Adopt the lock for `token`, scan until there is nothing left to do, release the lock.

    Returns `{"reason": ..., "scans": n, "nudgesSent": n, "idlePromptsSent": n}`; reason is
    `owner-mismatch` (the lock was not ours to adopt: nothing written), `owner-lost`,
    `no-live-teams`, `signal`, `max-scans` (tests) or `error`.
    """
    iv = intervals or policy.Intervals.from_env()
    paths = StatePaths(Path(root))
    started = clock()
    if not ctl.adopt(paths, token, pid=os.getpid(), now=started):
        return {"reason": "owner-mismatch", "scans": 0, "nudgesSent": 0, "idlePromptsSent": 0}
    mon = Monitor(
        Path(root),
        token,
        clock=clock,
        adapter_factory=adapter_factory,
        intervals=iv,
        wall=wall,
        stop=stop,
    )
    ctl.log_event(paths, "owner-adopted", now=started, token=token, pid=os.getpid())
    reason = "error"
    extra: dict[str, Any] = {}
    last_diags: list[str] = []
    streak = 0
    try:
        while True:
            if (sig := stop()) is not None:
                reason, extra = "signal", {"signal": sig}
                break
            if not ctl.heartbeat(paths, token, now=clock()):
                reason = "owner-lost"
                break
            report = mon.scan()
            if report.diagnostics != last_diags:
                last_diags = report.diagnostics
                if report.diagnostics:
                    ctl.log_event(
                        paths, "scan-diagnostic", now=clock(), token=token,
                        message="; ".join(report.diagnostics[:10]),
                    )  # fmt: skip
            streak = policy.empty_streak(streak, report.live_teams)
            if policy.should_stop(streak, iv):
                reason = "no-live-teams"
                break
            if not ctl.is_owner(paths, token):
                reason = "owner-lost"
                break
            mon.status("running", terminal=False, started_at=started)
            if max_scans is not None and mon.scans >= max_scans:
                reason = "max-scans"
                break
            if _pause(clock, sleep, stop, iv, lambda: ctl.heartbeat(paths, token, now=clock())):
                continue
            reason = "owner-lost"
            break
    except Exception as exc:
        reason, extra = "error", {"error": _why(exc)}
    finally:
        if reason != "owner-lost" and ctl.is_owner(paths, token):
            with contextlib.suppress(Exception):
                mon.status(reason, terminal=True, started_at=started, **extra)
                ctl.log_event(
                    paths, "monitor-terminal", now=clock(), token=token, message=reason, **extra
                )
            with contextlib.suppress(Exception):
                ctl.release(paths, token)
    return {
        "reason": reason,
        "scans": mon.scans,
        "nudgesSent": mon.nudges_sent,
        "idlePromptsSent": mon.idle_prompts_sent,
        **extra,
    }


def _pause(
    clock: Clock, sleep: Sleep, stop: StopCheck, iv: policy.Intervals, beat: Callable[[], bool]
) -> bool:
    """Sleep one scan interval in heartbeat-sized slices; False if ownership was lost."""
    deadline = clock() + iv.scan
    while (left := deadline - clock()) > 0:
        if stop() is not None:
            return True  # the loop sees the signal at its top
        sleep(min(left, iv.heartbeat))
        if deadline - clock() > 0 and not beat():
            return False
    return True


class _WakeSleeper:
    """`sleep` that a signal cuts short: the handler's wakeup byte ends the `select`."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)

    def sleep(self, seconds: float) -> None:
        ready, _, _ = select.select([self.r], [], [], max(0.0, seconds))
        if ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(self.r, 512):
                    pass


def serve(root: Path, token: str) -> int:
    """The `omp team monitor-run` process: signals end it cleanly. Always exits 0."""
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sleeper = _WakeSleeper()
    run_monitor(root, token, sleep=sleeper.sleep, stop=lambda: received[0] if received else None)
    return 0
