"""Workers on other hosts as the monitor watches them: their panes read over each host's one ssh
master connection (`omp.tmux.remote`), and what a host that stops answering means.

A team's remote workers (`omp.record.placement`: `paneId` null, `remote: {host, socket, pane,
...}`) are grouped by (host, tmux server). Per group and scan the monitor makes one
`list-panes -a` there (`RemoteTyping.remote_panes`: each pane's state with its session's name
and the server's incarnation, in the one call) and at most one `capture_many`; typing goes through
the same `type_line` as a local pane, under a local lock keyed on the host and its server
(`RemoteTmux.lock_path`), never on a local socket's path.

A pane id is only a pane of the worker's when it sits in the worker's own session
(`placement.session_of`): the host's server is shared by every team of the project there, and a
restarted one hands the same ids to other panes. A pane whose id names another session reads as
gone; the identity typed against is the one read in the scan (server pid and start time, session,
window), so a restart between the look and the keys refuses the keys (`pane_mismatch`).

A host that does not answer (`host_unreachable`: ssh's own failure, or no answer in time) is never
read as "its panes are gone". The monitor reports it (`Reach`: since when, why), retries it after
a back-off (doubling from one scan interval up to `Intervals.host_backoff`), and only when it has
failed at least twice and for longer than `Intervals.host_grace` are its workers marked gone
(the sweep then interrupts their claimed tasks; their mail stays in their mailboxes). It is
reported again when it answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from omp import clock as omp_clock
from omp.errors import OmpError
from omp.mail.typein import TypingTmux
from omp.record.placement import Placed, hosts_of, remote_workers, session_of
from omp.tmux.remote import RemotePane as RemotePane  # (the monitor's reading of a pane)
from omp.tmux.remote import RemoteTmux
from omp.tmux.remote import parse_panes as parse_panes
from omp.tmux.ssh import Host

SCAN_TIMEOUT = 10.0  # one ssh call of a scan: a link that hangs costs at most this, then backs off
HOST_GRACE = 60.0  # unreachable this long (and twice at least) before its workers count as gone
HOST_BACKOFF = 30.0  # the longest wait between two tries of an unreachable host


class RemoteTyping(TypingTmux, RemoteTmux):
    """The monitor's adapter for one host's tmux server: typing (`TypingTmux.deliver`) over the
    ssh runner (`RemoteTmux._run`); the MRO puts `deliver` first and ssh under every command."""

    def __init__(self, host: Host, socket_name: str, *, timeout: float = SCAN_TIMEOUT) -> None:
        RemoteTmux.__init__(self, host, socket_name, timeout=timeout)


class RemoteAdapter(Protocol):
    """What the monitor uses of a host's server (`RemoteTyping`; tests hand in a fake). It also
    answers the monitor's `Adapter` (captures and typing)."""

    def remote_panes(self) -> Mapping[str, RemotePane] | None: ...

    def capture(self, pane_id: str, lines: int = 40) -> list[str]: ...

    def capture_many(self, pane_ids: Sequence[str], lines: int = 40) -> dict[str, list[str]]: ...


def group_key(host: Host, socket: str) -> str:
    """The adapter's and the screens' key of a host's server: never a local socket's path (those
    are absolute paths), whatever the host is called."""
    s = host.settings
    return f"ssh://{host.destination}:{s.port}/{socket}"


# ---- grouping -------------------------------------------------------------------------------


class Member(NamedTuple):
    team: str
    worker: str
    placed: Placed


@dataclass
class Group:
    """The remote workers of the watched teams on one host's tmux server."""

    host: Host
    socket: str
    key: str
    members: list[Member] = field(default_factory=list)


def groups_of(teams: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Group]:
    """(team name, its config) of the watched teams -> their remote workers by group key."""
    out: dict[str, Group] = {}
    for team, raw in teams:
        placed = remote_workers(dict(raw))
        if not placed:
            continue
        hosts = hosts_of(dict(raw))
        for worker, p in sorted(placed.items()):
            host = hosts.get(p.host) or Host(p.host)
            key = group_key(host, p.socket)
            group = out.setdefault(key, Group(host, p.socket, key))
            group.members.append(Member(team, worker, p))
    return out


# ---- a host that does not answer ------------------------------------------------------------


@dataclass
class Outage:
    since: float
    why: str
    failures: int = 1
    retry_at: float = 0.0
    gone: bool = False  # its workers were marked gone (after the grace)


class Reach:
    """Which hosts answer, as this monitor process saw them (memory only: a restarted monitor
    starts every host's grace afresh, which can only delay a sweep, never hasten one)."""

    def __init__(self, grace: float = HOST_GRACE, backoff: float = HOST_BACKOFF) -> None:
        self.grace = grace
        self.backoff = backoff
        self.down: dict[str, Outage] = {}
        self.seen: set[str] = set()  # every host looked at, answering or not

    def due(self, host: str, now: float) -> bool:
        """May the host be tried this scan (not backing off)?"""
        out = self.down.get(host)
        return out is None or now >= out.retry_at

    def failed(self, host: str, now: float, why: str, step: float) -> bool:
        """Record a failed try; True when it starts an outage (report it). The next try waits
        `step` (a scan interval), doubled with each failure, at most `backoff`."""
        self.seen.add(host)
        out = self.down.get(host)
        first = out is None
        if out is None:
            out = self.down[host] = Outage(since=now, why=why)
        else:
            out.failures += 1
            out.why = why
        out.retry_at = now + min(step * 2 ** (out.failures - 1), max(self.backoff, step))
        return first

    def answered(self, host: str) -> Outage | None:
        """The host answered: its outage (now over), if it had one."""
        self.seen.add(host)
        return self.down.pop(host, None)

    def expired(self, host: str, now: float) -> bool:
        """Unreachable past the grace (and on two tries at least): its workers count as gone."""
        out = self.down.get(host)
        return out is not None and out.failures >= 2 and now - out.since >= self.grace

    def status(self) -> list[dict[str, Any]]:
        """For the monitor's `status.json`: each host looked at and whether it answers."""
        rows: list[dict[str, Any]] = []
        for host in sorted(self.seen):
            out = self.down.get(host)
            if out is None:
                rows.append({"host": host, "state": "reachable"})
                continue
            rows.append(
                {
                    "host": host,
                    "state": "unreachable",
                    "since": omp_clock.iso(out.since),
                    "failures": out.failures,
                    "retryAt": omp_clock.iso(out.retry_at),
                    "workersGone": out.gone,
                    "why": out.why,
                }
            )
        return rows


# ---- one look at a group --------------------------------------------------------------------

Kind = Literal["pane", "gone", "unknown", "host_gone"]


class Look(NamedTuple):
    """What a scan saw of one remote worker's pane."""

    kind: Kind  # pane (alive or dead: `pane.dead`), gone, unknown (not seen), host_gone
    placed: Placed
    key: str
    pane: RemotePane | None = None
    why: str = ""


class Offline(NamedTuple):
    """A worker the sweep is to treat as gone without a pane to show (`sweep.pane_state`)."""

    state: str
    reason: str


@dataclass
class Outcome:
    looks: dict[tuple[str, str], Look] = field(default_factory=dict)  # (team, worker) -> look
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    calls: int = 0  # ssh calls made


def look_group(
    group: Group,
    adapter: RemoteAdapter,
    reach: Reach,
    now: float,
    step: float,
    missing: dict[str, int],
) -> Outcome:
    """One scan's look at a group: one `list-panes` over the host's master, unless the host is
    backing off. `missing` counts the scans in a row the group's server was not running (two,
    like a local server, before its panes read as gone)."""
    res = Outcome()
    name = group.host.name

    def all_(kind: Kind, why: str = "") -> None:
        for m in group.members:
            res.looks[(m.team, m.worker)] = Look(kind, m.placed, group.key, why=why)

    def unanswered() -> Outcome:
        out = reach.down[name]
        if not reach.expired(name, now):
            all_("unknown", out.why)
            return res
        if not out.gone:
            out.gone = True
            workers = ", ".join(f"{m.team}/{m.worker}" for m in group.members)
            res.events.append(
                (
                    "host-gone",
                    {
                        "host": name,
                        "since": omp_clock.iso(out.since),
                        "message": f"unreachable for {now - out.since:.0f} s: its workers "
                        f"count as gone ({workers})",
                    },
                )
            )
        all_("host_gone", out.why)
        return res

    if not reach.due(name, now):
        return unanswered()
    try:
        res.calls += 1
        panes = adapter.remote_panes()
    except OmpError as exc:
        if exc.code != "host_unreachable":
            res.diagnostics.append(f"host {name}: {exc.message}")
            all_("unknown")
            return res
        if reach.failed(name, now, exc.message, step):
            res.events.append(("host-unreachable", {"host": name, "message": exc.message}))
        return unanswered()
    except Exception as exc:  # anything else: this scan misses the group, the next retries
        res.diagnostics.append(f"host {name}: {type(exc).__name__}: {exc}")
        all_("unknown")
        return res
    back = reach.answered(name)
    if back is not None:
        res.events.append(
            (
                "host-restored",
                {
                    "host": name,
                    "since": omp_clock.iso(back.since),
                    "message": f"answers again after {now - back.since:.0f} s"
                    + (" (its workers were marked gone)" if back.gone else ""),
                },
            )
        )
    if panes is None or not panes:
        missing[group.key] = missing.get(group.key, 0) + 1
        if missing[group.key] < 2:
            all_("unknown", "its tmux server is not running")
            return res
        panes = {}
    else:
        missing.pop(group.key, None)
    for m in group.members:
        st = panes.get(m.placed.pane)
        if st is None or st.session_name != session_of(m.team, m.worker):
            res.looks[(m.team, m.worker)] = Look("gone", m.placed, group.key)
        else:
            res.looks[(m.team, m.worker)] = Look("pane", m.placed, group.key, st)
    return res
