"""The human form of `omp team usage`: one row per member, the totals, the budgets."""

from __future__ import annotations

from typing import Any

from omp.textsafe import inline


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def _cost(row: dict[str, Any]) -> str:
    if "estimatedCost" not in row:
        return ""
    cost = f"${row['estimatedCost']:.4f}"
    return cost + ("+?" if row.get("unpricedModels") else "")


def _when(value: Any) -> str:
    return inline(str(value)).replace("T", " ")[:19] if value else "-"


def budget_line(label: str, b: dict[str, Any] | None) -> str | None:
    if not b:
        return None
    used = b.get("used")
    pct = b.get("percent")
    shown = f"{_n(used)} of {_n(b['tokens'])} tokens" + (f" ({pct:g}%)" if pct is not None else "")
    return f"{label}: {shown}"


def bounds_note(row: dict[str, Any]) -> str:
    """What a row's numbers leave out: lines too long to read, bytes not reached yet."""
    parts = []
    if row.get("longLines"):
        parts.append(f"{_n(row['longLines'])} line(s) too long to read, skipped")
    if row.get("unreadBytes"):
        parts.append(f"{_n(row['unreadBytes'])} bytes not read yet (counted later)")
    return "; ".join(parts)


def usage_text(r: dict[str, Any]) -> str:
    priced = bool(r.get("prices"))
    head = (
        f"{'member':<12} {'agent':<8} {'calls':>6} {'input':>11} {'output':>9} "
        f"{'cache read':>11} {'cache write':>11} {'total':>12}  {'last call':<19}"
        + ("  cost" if priced else "")
    )
    lines = [f"team {inline(r['team'])}: tokens from the agents' own session records", head]
    for m in r["members"]:
        name = inline(str(m["name"])) + (" (L)" if m["role"] == "leader" else "")
        agent = inline(str(m.get("agent") or "?"))
        if m.get("unreadable"):
            lines.append(
                f"{name:<12} {agent:<8} {m['unreadable']}: {inline(str(m.get('why') or ''))}"
            )
            continue
        row = (
            f"{name:<12} {agent:<8} {_n(m['calls']):>6} {_n(m['input']):>11} "
            f"{_n(m['output']):>9} {_n(m['cacheRead']):>11} {_n(m['cacheWrite']):>11} "
            f"{_n(m['total']):>12}  {_when(m.get('lastCall')):<19}"
        )
        if priced:
            row += f"  {_cost(m)}"
        if m.get("budget") and m["budget"].get("percent") is not None:
            row += f"  {m['budget']['percent']:g}% of its budget"
        lines.append(row)
    t = r["totals"]
    row = (
        f"{'total':<12} {'':<8} {_n(t['calls']):>6} {_n(t['input']):>11} {_n(t['output']):>9} "
        f"{_n(t['cacheRead']):>11} {_n(t['cacheWrite']):>11} {_n(t['total']):>12}  "
        f"{_when(t.get('lastCall')):<19}"
    )
    if priced:
        row += f"  {_cost(t)}"
    lines.append(row)
    if t.get("notCounted"):
        lines.append(f"  not counted (unknown or unreadable): {', '.join(t['notCounted'])}")
    for m in r["members"]:
        note = bounds_note(m)
        if note:
            lines.append(f"  {inline(str(m['name']))}: {note}")
    if priced and t.get("unpricedModels"):
        models = ", ".join(inline(str(m)) for m in t["unpricedModels"])
        lines.append(f"  no price for: {models} (not in the cost)")
    for line in (
        budget_line("team budget (workers)", r.get("budget")),
        f"worker budget: {_n(r['workerBudget'])} tokens each" if r.get("workerBudget") else None,
    ):
        if line:
            lines.append(line)
    for c in r.get("crossed") or []:
        who = inline(str(c.get("worker"))) if c.get("scope") == "worker" else "the team"
        lines.append(
            f"crossed: {who} reached {_n(c.get('budget'))} tokens at {_when(c.get('at'))}: "
            "the loops are no longer driven"
        )
    return "\n".join(lines)
