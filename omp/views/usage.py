"""`omp team usage TEAM`: what each member's agent spent, from the agents' own session records.

Per worker and the leader: model calls, input, output and cache tokens, the time of the last
call, the estimated cost where `[prices."<model>"]` gives prices (`omp.usage.prices`); then the
team's totals and its token budgets. A member whose session omp could not find, or whose record
it cannot read, is a row saying so (`unreadable` and `why`), never zeros, and is left out of the
totals (`notCounted` names it).

Read-only: it starts from the monitor's usage index and reads only the bytes written past its
offsets (`omp.monitor.usage.snapshot`), writing nothing. `usage_columns` gives `status` and
`collect` the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

from omp.mail.panes import PaneView, pane_views
from omp.monitor import usage as index
from omp.record import budget as budgets
from omp.record.config import TeamConfig
from omp.usage.totals import Tokens, UsageTotals, iso

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


def rows_for(cfg: TeamConfig, views: Mapping[str, PaneView] | None = None) -> list[index.Row]:
    """Each member's row (workers, then the leader), read-only. The leader's pane is looked at
    only when `views` holds it (`omp team usage`'s own; `status` shows no leader row)."""
    views = pane_views(cfg, leader=True) if views is None else views
    pids = {w: v.pid for w, v in views.items() if v.pid is not None}
    return index.snapshot(cfg, pids)


def usage(cfg: TeamConfig, only: str | None = None) -> dict[str, Any]:
    """The team's usage; with `only` (a worker asking: `for_worker`), that worker's row alone,
    its totals its own, and the leader's pane never looked at."""
    from omp.usage.prices import estimate, load_prices

    prices = load_prices(cfg.paths.project)  # a bad table is `invalid_config`, before any read
    rows = rows_for(cfg) if only is None else rows_for(cfg, pane_views(cfg))
    everyone = rows
    if only is not None:
        rows = [r for r in rows if r.member == only]
    b = budgets.of_config(cfg.raw)
    members = []
    for r in rows:
        row = r.to_json()
        if r.totals is not None and prices:
            row.update(estimate(r.totals.models, prices).to_json())
        if r.role == "worker" and b.worker is not None:
            row["budget"] = _budget(b.worker, r.tokens.total if r.tokens else None)
        members.append(row)
    counted = [r for r in rows if r.totals is not None]
    total = index.add_totals([r.totals for r in counted if r.totals is not None])
    totals: dict[str, Any] = {**total.to_json(), "total": total.tokens.total}
    totals["counted"] = [r.member for r in counted]
    totals["notCounted"] = [r.member for r in rows if r.totals is None]
    if prices:
        totals.update(estimate(total.models, prices).to_json())
    crossed = budgets.read(cfg.paths, budgets.generation(cfg.raw))["crossings"]
    doc = index.load(cfg)
    return {
        "ok": True,
        "team": cfg.name,
        "members": members,
        "totals": totals,
        "budget": _budget(b.team, index.team_tokens(everyone).total) if b.team else None,
        "workerBudget": b.worker,
        "crossed": [_crossing(c) for c in crossed],
        "prices": sorted(prices),
        "indexedAt": doc.get("updatedAt") if doc else None,
        **({"onlyFor": only} if only is not None else {}),
    }


def for_worker(cfg: TeamConfig, ident: Any) -> dict[str, Any]:
    """`omp team usage` run by a worker process: its own row of its own team (as `status`, which
    a worker may run, shows every worker's tokens); the leader's row and pane stay the person's.
    Another team, or a process naming no worker of this team, is refused."""
    from omp.errors import OmpError

    if ident.team != cfg.name or ident.worker not in cfg.worker_names:
        raise OmpError(
            "worker_not_allowed",
            f"this process is {ident.describe()}: a worker sees only its own usage, in its own "
            f"team (omp team usage {ident.team or '<its team>'})",
            worker=ident.worker,
            team=ident.team,
        )
    return usage(cfg, only=ident.worker)


def _budget(tokens: int, used: int | None) -> dict[str, Any]:
    return {
        "tokens": tokens,
        "used": used,
        "percent": budgets.percent(used, tokens) if used is not None else None,
    }


def _crossing(c: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("seq", "scope", "worker", "budget", "used", "at")
    return {k: c[k] for k in keep if c.get(k) is not None}


# ---- for status and collect -----------------------------------------------------------------


def usage_columns(
    cfg: TeamConfig, views: Mapping[str, PaneView]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """(worker -> its tokens, the team's: totals and budgets) for `status` and `collect`.

    A worker's entry is `{calls, input, output, cacheRead, cacheWrite, total, lastCall}` or
    `{unreadable, why}`; the team's `{total, calls, ..., budget: {tokens, used, percent},
    workerBudget, crossed}`. Never raises: usage that cannot be read is said, the view goes on.
    """
    try:
        rows = rows_for(cfg, views)
    except Exception as exc:  # a view of the team must not fail for its usage
        why = f"{type(exc).__name__}: {exc}"
        bad = {"unreadable": "io_error", "why": why}
        return {w: bad for w in cfg.worker_names}, {"unreadable": "io_error", "why": why}
    b = budgets.of_config(cfg.raw)
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.role != "worker":
            continue
        per[r.member] = _short(r.totals) if r.totals else {"unreadable": r.problem, "why": r.why}
        if b.worker is not None and r.tokens is not None:
            per[r.member]["budgetPercent"] = budgets.percent(r.tokens.total, b.worker)
    workers = [r for r in rows if r.role == "worker"]
    total = index.add_totals([r.totals for r in workers if r.totals is not None])
    team: dict[str, Any] = _short(total)
    team["notCounted"] = [r.member for r in workers if r.totals is None]
    team["budget"] = _budget(b.team, total.tokens.total) if b.team else None
    team["workerBudget"] = b.worker
    team["crossed"] = [
        _crossing(c) for c in budgets.read(cfg.paths, budgets.generation(cfg.raw))["crossings"]
    ]
    return per, team


def _short(t: UsageTotals) -> dict[str, Any]:
    tok: Tokens = t.tokens
    out: dict[str, Any] = {**tok.to_json(), "total": tok.total, "lastCall": iso(t.last_call)}
    if t.long_lines:
        out["longLines"] = t.long_lines
    if t.unread:
        out["unreadBytes"] = t.unread  # the numbers are short of these bytes, read later
    return out
