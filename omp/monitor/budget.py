"""Token budgets crossed: found on the monitor's scan, told once, and the loops no longer driven.

On each scan, once the usage index is read on (`omp.monitor.usage.refresh`), `check` compares
what the workers spent with the team's budgets (`omp.record.budget`). A budget reached for the
first time in this launch of the team is a crossing. It is recorded in `budget.json` first
(under its lock), then told:
- the team's `events.jsonl` gets `{"type": "budget", ...}`;
- the leader gets exactly one message (automatic; from the worker, or from `omp` for the team's
  budget). Its id is chosen and recorded with the crossing before it is appended, and it is
  appended only if the leader's mailbox does not hold it yet, then the crossing is marked
  `mailed`: a monitor killed in between sends it on its next scan, never twice;
- a notification is queued for the person's notify command (kind `attention`, keyed by the
  crossing: once);
- `omp team wait` returns the event `attention` (it reads `budget.json`).

The loops stop being driven: at its next stop the stop hook ends a loop (ralph, ultrawork,
ultraqa) that was started before the crossing and lets the agent stop
(`omp.stophook.decision`), and the monitor types no idle prompt into a worker whose budget, or
whose team's, was crossed after the running loop started (`held`). Nothing is killed and mail
nudges still go: the person decides. A loop started after the crossing is that decision and
runs; a budget raised in config.json can be crossed again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from omp import clock, ids
from omp.invocation import team_command
from omp.mail import mailbox
from omp.monitor.usage import Row, team_tokens
from omp.record import budget as budgets
from omp.record import history
from omp.record.config import TeamConfig
from omp.store.names import LEADER

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SENDER = "omp"  # the team's budget is nobody's: its message comes from omp itself


def check(
    cfg: TeamConfig, rows: Sequence[Row], *, now: float | None = None
) -> list[dict[str, Any]]:
    """Record and tell the crossings the rows show; returns those recorded now."""
    b = budgets.of_config(cfg.raw)
    team = cfg.paths
    gen = budgets.generation(cfg.raw)
    wanted: list[dict[str, Any]] = []
    if b.team is not None:
        used = team_tokens(list(rows)).total
        if used >= b.team:
            wanted.append({"scope": "team", "budget": b.team, "used": used})
    if b.worker is not None:
        for r in rows:
            used = r.tokens.total if r.role == "worker" and r.tokens is not None else -1
            if used >= b.worker:
                wanted.append(
                    {"scope": "worker", "worker": r.member, "budget": b.worker, "used": used}
                )
    if not b.any and not os.path.lexists(team.budget):
        return []  # the common case: no budget, nothing recorded
    doc = budgets.read(team, gen)
    have = {budgets.key(c) for c in doc["crossings"]}
    fresh = [c for c in wanted if budgets.key(c) not in have]
    unmailed = [c for c in doc["crossings"] if not c.get("mailed")]
    if not fresh and not unmailed:
        return []
    at = clock.iso(now)

    def record(doc: dict[str, Any]) -> list[dict[str, Any]]:
        known = {budgets.key(c) for c in doc["crossings"]}
        added = []
        for c in wanted:
            if budgets.key(c) in known:
                continue
            doc["seq"] = int(doc["seq"]) + 1
            entry = {"seq": doc["seq"], **c, "at": at, "mailId": ids.new_id(), "mailed": False}
            doc["crossings"].append(entry)
            added.append(entry)
        return added

    added: list[dict[str, Any]] = budgets.update(team, gen, record) if fresh else []
    for c in added:
        history.record(team, {"type": "budget", **_public(c)})
    for c in budgets.read(team, gen)["crossings"]:
        if not c.get("mailed"):
            _tell(cfg, c, gen)
            _mark_mailed(cfg, gen, int(c.get("seq") or 0))
    return added


def _public(c: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("seq", "scope", "worker", "budget", "used", "at")
    return {k: c[k] for k in keep if c.get(k) is not None}


def text(cfg: TeamConfig, c: Mapping[str, Any]) -> str:
    """The leader's message about a crossing."""
    omp = team_command(cfg.raw)
    return (
        f"{budgets.describe(c, cfg.name)}, as the agents' own session records count them. "
        "The loops are no longer driven: the stop hook lets the agents stop and the monitor "
        "types no idle prompts; nothing was killed and mail still goes. "
        f"See {omp} team usage {cfg.name}; a loop you start again runs."
    )


class _AlreadySent(Exception):
    pass


def _tell(cfg: TeamConfig, c: Mapping[str, Any], gen: str) -> None:
    mail_id = str(c.get("mailId") or "")
    sender = str(c.get("worker")) if c.get("scope") == "worker" else SENDER
    msg = mailbox.new_message(
        sender, LEADER, text(cfg, c), {"intent": "budget", "auto": True, "budget": _public(c)}
    )
    if mail_id:
        msg["id"] = mail_id

    def not_yet(view: mailbox.View) -> None:
        # Only a monitor that died between the append and `mailed` finds it: a rare full read.
        if mail_id and view.holds(mail_id):
            raise _AlreadySent(mail_id)

    try:
        mailbox.Mailbox(cfg.paths, LEADER).append_messages([msg], check=not_yet)
    except _AlreadySent:
        pass
    _notify(cfg, c, gen)


def _notify(cfg: TeamConfig, c: Mapping[str, Any], gen: str) -> None:
    """Queue the crossing for the person's notify command (`omp.notify`: kind `attention`, as a
    worker that needs you), once: keyed by the crossing, across monitor restarts."""
    from omp import notify

    event = {
        "kind": "attention",
        "team": cfg.name,
        "what": "budget",
        "text": f"{cfg.name}: {budgets.describe(c, cfg.name)}",
        "budget": _public(c),
    }
    if c.get("worker"):
        event["worker"] = c["worker"]
    try:
        notify.emit(cfg.paths.project, event, key=f"budget:{cfg.name}:{gen}:{c.get('seq')}")
    except Exception:
        pass  # a notification is best effort: the crossing and the mail stand


def _mark_mailed(cfg: TeamConfig, gen: str, seq: int) -> None:
    def change(doc: dict[str, Any]) -> None:
        for c in doc["crossings"]:
            if c.get("seq") == seq:
                c["mailed"] = True

    budgets.update(cfg.paths, gen, change)


# ---- the loops ------------------------------------------------------------------------------


def held(cfg: TeamConfig, loop_started: float | None) -> set[str]:
    """The workers no idle prompt may go to: their budget, or the team's, was crossed since
    the running loop started (`loop_started`; None: unknown, every crossing counts)."""
    out: set[str] = set()
    for c in budgets.read(cfg.paths, budgets.generation(cfg.raw))["crossings"]:
        at = clock.parse_iso(str(c.get("at") or ""))
        if loop_started is not None and at is not None and at < loop_started:
            continue
        if c.get("scope") == "team":
            return set(cfg.worker_names)
        if isinstance(c.get("worker"), str):
            out.add(c["worker"])
    return out


def loop_started(states: Mapping[str, Any]) -> float | None:
    """When the newest active loop started (`startedAt` of the mode files); None if unknown."""
    starts = []
    for state in states.values():
        if isinstance(state, dict) and state.get("active") is True:
            at = clock.parse_iso(str(state.get("startedAt") or ""))
            if at is None:
                return None
            starts.append(at)
    return max(starts, default=None)
