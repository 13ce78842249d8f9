"""The usage index: which agent session each member of a team runs, where that session's record
is, and how far it was read.

A member's session is found (`_locate`), in this order:
1. `workers/<member>/session.json`, which the member's own stop hook records (`{agent,
   sessionId, transcriptPath, cwd, updatedAt}`): the record is its transcript path, else the
   one the session id leads to in the CLI's layout (`omp.usage.locate.from_hook`);
2. else (no session.json, or one that leads to no record), for a worker with a pane, the pane's
   processes (the pane's pid from tmux, and its
   process tree: `omp.usage.locate.from_process`): Copilot's session lock, Codex's open rollout,
   or the record in the cwd's session folder written since the CLI started and naming the
   worker's inbox (only that worker's first prompt holds its path).
The leader, the same two ways: 1. its stop hook, when it fires in the team's recorded leader
pane, records `workers/leader/session.json` (`omp.stophook.sessions.record_leader`); 2. else the
leader pane's processes, when the pane is alive in the team's window: Copilot's lock and Codex's
open rollout name the record; for the CLIs found by their cwd, the record written since the
pane's process started that names no worker's inbox (a worker sharing the cwd has its inbox in
its first prompt), and only when exactly one fits: another session of the person's in the same
folder makes it ambiguous, said, never guessed. The leader's row counts its whole session, which
may have begun before the team; the team's budget never counts it (`team_tokens`).

A member may run more than one session in a team's life (a CLI restarted in its pane): every
record found is kept, and the member's usage is their sum, subagents' records included
(`omp.usage.locate.session_files`). A record that was counted and cannot be read any more
(deleted) keeps what was counted of it and is named `stale`. A member whose session is not
found, or whose CLI's record omp cannot read, is a row that says so, never a zero.

The monitor keeps the index on its scan (`refresh`), written only when something changed:

    .omp/state/team-monitor/usage/<team>.json
    {"schemaVersion": 1, "team": "t", "generation": "<launch>", "updatedAt": "<iso>",
     "members": {"worker-1": {"agent": "copilot", "how": "...", "pid": 4242, "lookedAt": 1.0,
                              "session": ["<id>", "<transcript>"],
                              "records": [{"path": "...", "kind": "copilot",
                                           "state": <omp.usage.totals.ReadState>}]}}}

`omp team usage`, `status` and `collect` (`snapshot`) start from it and read only the bytes past
its offsets, writing nothing; a member it does not know yet they find themselves. Without a
monitor they read whole records: slower, the same numbers.

Every read is bounded (`omp.usage.limits`): the monitor's scan and each view command give an
`Allowance` (bytes, seconds, and for the monitor its stop flag) that all the members' reads
share; what a read could not reach in it is said (`unreadBytes`), and the monitor's next scan
reads on from where this one stopped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from omp import clock
from omp.record.budget import generation
from omp.record.config import TeamConfig
from omp.store import fs
from omp.store.names import LEADER
from omp.usage import limits
from omp.usage.limits import Allowance
from omp.usage.totals import KINDS, ReadState, Tokens, Unreadable, UsageTotals

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SCHEMA = 1
RELOOK = 60.0  # seconds between looks at a pane's processes for a session already found
RELOOK_MISSING = 10.0  # ... while none was found yet


class Row(NamedTuple):
    """What one member spent, as its agent's own records say."""

    member: str
    role: str  # worker | leader
    agent: str | None
    records: tuple[str, ...]
    how: str  # how its session was found, or why it was not
    totals: UsageTotals | None  # None: unknown or unreadable, never shown as zeros
    problem: str | None = None  # `unknown` (no session found) or an `Unreadable` reason
    why: str | None = None
    stale: tuple[str, ...] = ()  # counted before, unreadable now: their counts are kept

    @property
    def tokens(self) -> Tokens | None:
        return self.totals.tokens if self.totals is not None else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.member,
            "role": self.role,
            "agent": self.agent,
            "records": list(self.records),
            "how": self.how,
        }
        if self.totals is None:
            out.update(unreadable=self.problem, why=self.why)
            return out
        out.update(self.totals.to_json())
        out["total"] = self.totals.tokens.total
        if self.stale:
            out["staleRecords"] = list(self.stale)
        return out


# ---- the index file -------------------------------------------------------------------------


def load(cfg: TeamConfig) -> dict[str, Any] | None:
    """The team's index as the monitor last wrote it (None: none, unsafe, or of another launch
    of the team). Read-only."""
    project = cfg.paths.project
    try:
        if not project.check(project.monitor_usage):
            return None
        doc = fs.read_json(project.monitor_usage_index(cfg.name))
    except Exception:
        return None
    if (
        not isinstance(doc, dict)
        or doc.get("schemaVersion") != SCHEMA
        or doc.get("team") != cfg.name
        or doc.get("generation") != generation(cfg.raw)
        or not isinstance(doc.get("members"), dict)
    ):
        return None
    return doc


def refresh(
    cfg: TeamConfig,
    pids: Mapping[str, int | None],
    *,
    now: float | None = None,
    env: Mapping[str, str] | None = None,
    allow: Allowance | None = None,
) -> list[Row]:
    """The monitor's call: read what was added since its last scan (within `allow`, the scan's
    share), keep the index."""
    old = load(cfg)
    rows, doc = compute(cfg, old, pids, now=now, env=env, allow=allow)
    if old is None or _sans_time(old) != _sans_time(doc):
        project = cfg.paths.project
        project.ensure(project.monitor_usage)
        fs.write_json_atomic(project.monitor_usage_index(cfg.name), doc, pretty=False)
    return rows


def snapshot(
    cfg: TeamConfig,
    pids: Mapping[str, int | None],
    *,
    now: float | None = None,
    env: Mapping[str, str] | None = None,
    allow: Allowance | None = None,
) -> list[Row]:
    """The readers' call: the index plus the bytes past its offsets (within `allow`, default a
    view's, `limits.for_view`); writes nothing."""
    allow = allow if allow is not None else limits.for_view()
    return compute(cfg, load(cfg), pids, now=now, env=env, allow=allow)[0]


def _sans_time(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "updatedAt"}


def compute(
    cfg: TeamConfig,
    doc: Mapping[str, Any] | None,
    pids: Mapping[str, int | None],
    *,
    now: float | None = None,
    env: Mapping[str, str] | None = None,
    allow: Allowance | None = None,
) -> tuple[list[Row], dict[str, Any]]:
    """Each member's row (the workers, then the leader) and the index that reads on from here;
    every record's read takes a share of `allow` (default: a view's)."""
    now = clock.now() if now is None else now
    env = os.environ if env is None else env
    allow = allow if allow is not None else limits.for_view()
    known = doc["members"] if doc is not None else {}
    members: dict[str, Any] = {}
    rows: list[Row] = []
    procs = _Procs()
    for name in [*cfg.worker_names, LEADER]:
        entry = known.get(name)
        entry = dict(entry) if isinstance(entry, dict) else {}
        row = _member(cfg, name, entry, pids.get(name), now, env, procs, allow)
        members[name] = entry
        rows.append(row)
    new = {
        "schemaVersion": SCHEMA,
        "team": cfg.name,
        "generation": generation(cfg.raw),
        "updatedAt": clock.iso(now),
        "members": members,
    }
    return rows, new


# ---- one member -----------------------------------------------------------------------------


def agent_of(cfg: TeamConfig, member: str) -> str | None:
    """The agent profile a member runs, as the config says (a worker added with its own)."""
    if member == LEADER:
        found = cfg.raw.get("leaderAgent")
    else:
        found = (cfg.worker(member) or {}).get("agent") or cfg.raw.get("agent")
    return found if isinstance(found, str) and found else None


def _member(
    cfg: TeamConfig,
    name: str,
    entry: dict[str, Any],
    pid: int | None,
    now: float,
    env: Mapping[str, str],
    procs: _Procs,
    allow: Allowance,
) -> Row:
    """Find (or re-find) the member's session, read its records on; `entry` is updated."""
    role = "leader" if name == LEADER else "worker"
    agent = entry.get("agent")
    if not isinstance(agent, str) or not agent:  # the index is omp's cache: a bad value is redone
        agent = agent_of(cfg, name)
    records: list[dict[str, Any]] = [  # copies: the loaded index is compared with the new one
        dict(r) for r in entry.get("records") or [] if isinstance(r, dict) and r.get("path")
    ]
    how = str(entry.get("how") or "")
    sess = _session_record(cfg, name)
    if sess is not None:
        key = [sess.get("sessionId"), sess.get("transcriptPath")]
        if key != entry.get("session"):
            agent = str(sess.get("agent") or agent or "")
            found = _from_session(agent, sess, env)
            entry["session"] = key
            if found.path is not None:
                how = f"the stop hook's record ({found.how})"
                _add(records, agent, found.path)
            else:
                how = f"session.json: {found.how}"
    # A session.json that leads to no record (a CLI version whose payload omp cannot follow)
    # does not hide the session the pane's process shows.
    if (
        (sess is None or not records)
        and agent in KINDS
        and pid is not None
        and _due(entry, pid, now)
    ):
        found = _from_process(cfg, name, agent, procs.tree(pid))
        entry.update(pid=pid, lookedAt=now)
        if found is not None and found.path is not None:
            how = f"the pane's process ({found.how})"
            _add(records, agent, found.path)
        elif not records and sess is None:  # else the session.json's why stands
            how = found.how if found is not None else "no process in the pane"
            if role == "leader":
                how = f"{NO_LEADER_HOOK}, and its pane's process did not show it: {how}"
    elif not records and sess is None:
        if role == "leader":
            how = _leader_unknown(cfg, agent, pid, str(entry.get("how") or ""))
        elif pid is None and cfg.pane_of(name):
            how = "its pane is not running (no process to find the session from)"
        elif pid is None:
            how = "no pane and no session.json: its session is not known"
    # A session's subagents may write records of their own, found beside the session's.
    if records:
        from omp.usage.locate import session_files

        for r in list(records):
            if r.get("sub"):
                continue
            for extra in session_files(str(r.get("kind")), Path(str(r["path"])))[1:]:
                _add(records, str(r.get("kind")), extra, sub=True)
    entry.update(agent=agent, how=how, records=records)
    if agent is not None and agent not in KINDS and not records:
        from omp.usage.read import unknown_kind

        bad = unknown_kind(agent)
        return Row(name, role, agent, (), how or bad.why, None, bad.reason, bad.why)
    if not records:
        return Row(name, role, agent, (), how, None, "unknown", how or "its session is not known")
    return _read(name, role, agent, how, records, allow)


def _read(
    name: str,
    role: str,
    agent: str | None,
    how: str,
    records: list[dict[str, Any]],
    allow: Allowance,
) -> Row:
    from omp.usage.read import READERS, read_usage

    totals: list[UsageTotals] = []
    stale: list[str] = []
    problems: list[Unreadable] = []
    for r in records:
        kind = str(r.get("kind"))
        state = ReadState.from_json(r.get("state"), kind)
        got, new = read_usage(kind, Path(str(r["path"])), state, allow.share())
        r["state"] = new.to_json()
        if isinstance(got, UsageTotals):
            totals.append(got)
        elif new.offset or new.models:  # counted before, unreadable now: what was counted
            reader = READERS.get(kind)
            if reader is not None:
                totals.append(reader.view(new))
                stale.append(str(r["path"]))
        elif not r.get("sub"):
            problems.append(got)
    shown = tuple(str(r["path"]) for r in records)
    if not totals and problems:
        return Row(name, role, agent, shown, how, None, problems[0].reason, problems[0].why)
    return Row(name, role, agent, shown, how, add_totals(totals), stale=tuple(stale))


def add_totals(parts: list[UsageTotals]) -> UsageTotals:
    tokens = Tokens()
    models: dict[str, Tokens] = {}
    last: float | None = None
    skipped = long_lines = unread = 0
    for t in parts:
        tokens = tokens.plus(t.tokens)
        for m, v in t.models.items():
            models[m] = models[m].plus(v) if m in models else v
        if t.last_call is not None and (last is None or t.last_call > last):
            last = t.last_call
        skipped += t.skipped
        long_lines += t.long_lines
        unread += t.unread
    return UsageTotals(tokens, models, last, skipped, long_lines, unread)


def _add(records: list[dict[str, Any]], kind: str, path: Path, *, sub: bool = False) -> None:
    if any(r.get("path") == str(path) for r in records):
        return
    rec: dict[str, Any] = {"path": str(path), "kind": kind, "state": None}
    if sub:
        rec["sub"] = True
    records.append(rec)


def _due(entry: Mapping[str, Any], pid: int, now: float) -> bool:
    """Look at the pane's processes: never yet, another process, or not for RELOOK seconds
    (RELOOK_MISSING while no session was found: a CLI writes its record at its first call)."""
    looked = entry.get("lookedAt")
    if entry.get("pid") != pid or not isinstance(looked, int | float) or now < looked:
        return True
    return now - looked >= (RELOOK if entry.get("records") else RELOOK_MISSING)


def _session_record(cfg: TeamConfig, member: str) -> dict[str, Any] | None:
    """`workers/<member>/session.json`, if the member's hook recorded one. Read-only."""
    from omp.stophook import sessions

    return sessions.read(cfg.paths, member)


def _from_session(agent: str, sess: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    from omp.usage.locate import from_hook

    payload = {
        k: sess.get(k) for k in ("sessionId", "transcriptPath", "cwd") if sess.get(k) is not None
    }
    return from_hook(agent, payload, env)


class _Procs:
    """The pane's process trees of one read, from one pass over /proc (made when first asked)."""

    def __init__(self) -> None:
        self.children: dict[int, list[int]] | None = None

    def tree(self, pid: int) -> list[Any]:
        from omp.usage import process

        if self.children is None:
            self.children = process.children_of()
        return process.tree(pid, children=self.children)


def _from_process(cfg: TeamConfig, member: str, agent: str, procs: list[Any]) -> Any:
    from omp.usage.locate import from_process

    if member == LEADER:  # no text of its own: what is not a worker's (module docstring)
        shun = [str(cfg.paths.inbox(w)) for w in cfg.worker_names]
        return from_process(agent, procs, exclude=shun)
    return from_process(agent, procs, marker=str(cfg.paths.inbox(member)))


NO_LEADER_HOOK = "no stop hook recorded the leader's session (workers/leader/session.json)"


def _leader_unknown(cfg: TeamConfig, agent: str | None, pid: int | None, last: str) -> str:
    """Why the leader's session is not known, when its pane was not looked at now."""
    if pid is not None and last.startswith(NO_LEADER_HOOK):
        return last  # looked at lately (`_due`): what that look found
    if not cfg.pane_of(LEADER):
        return f"{NO_LEADER_HOOK}, and the team records no leader pane to look in"
    if agent is None:
        return f"{NO_LEADER_HOOK}, and the leader's agent is not known (launch --leader-agent)"
    if agent not in KINDS:
        return f"{NO_LEADER_HOOK}, and omp cannot find {agent} sessions from a process"
    if pid is None:
        return f"{NO_LEADER_HOOK}, and its pane is not running in the team's window"
    return NO_LEADER_HOOK


def team_tokens(rows: list[Row]) -> Tokens:
    """The workers' sum (the leader's session is the person's: not the team's spending)."""
    total = Tokens()
    for r in rows:
        if r.role == "worker" and r.totals is not None:
            total = total.plus(r.totals.tokens)
    return total
