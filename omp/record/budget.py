"""A team's token budgets, and the record of the budgets it crossed.

The budgets are config.json fields (added, never renamed), set at launch:

    "budgetTokens": N          the workers together (`omp team launch --budget-tokens N`)
    "workerBudgetTokens": N    each worker on its own (`--worker-budget N`)

without the options, `[team] budget_tokens` and `worker_budget_tokens` of `.omp/config.toml`
give them (read at launch, then recorded). A token is any token a model call moved, as the
agents' own records give them (`omp.usage`): fresh input, output, cache reads and cache writes
(`Tokens.total`). The leader's own session is not counted: it is the person's session, often
begun before the team, and omp may not even know which it is.

`budget.json` in the team's directory is what was crossed, one entry per crossing, written by
the monitor alone (under `.budget.lock`) on its scan:

    {"schemaVersion": 1, "generation": "<the launch>", "seq": 2, "crossings": [
      {"seq": 1, "scope": "team", "budget": 100000, "used": 100412, "at": "<iso>",
       "mailId": "<the leader's message>", "mailed": true},
      {"seq": 2, "scope": "worker", "worker": "worker-2", ...}]}

A crossing is a budget value reached: the same budget is crossed once per launch; a budget
raised (config.json) and reached again is a new crossing. What a crossing does (the leader's
one mail, the `attention` event, the loops no longer driven) is `omp.monitor.budget`; the stop
hook, `wait` and `status` read this file (read-only here: `read`, `crossed_since`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from omp import clock
from omp.errors import OmpError
from omp.record.settings import team_settings
from omp.store import fs, locks
from omp.store.paths import StatePaths, TeamPaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SCHEMA = 1
MAX_TOKENS = 10**15  # a number no session reaches: anything above is a typo


class Budgets(NamedTuple):
    team: int | None  # tokens of every worker together
    worker: int | None  # tokens of each worker

    @property
    def any(self) -> bool:
        return self.team is not None or self.worker is not None

    def to_config(self) -> dict[str, int | None]:
        return {"budgetTokens": self.team, "workerBudgetTokens": self.worker}


def check_tokens(value: int | None, option: str) -> int | None:
    """A budget given on the command line: a whole number of tokens >= 1, or `invalid_input`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise OmpError("invalid_input", f"{option} takes a number of tokens >= 1, got {value!r}")
    return value


def for_launch(project: StatePaths, team: int | None, worker: int | None) -> Budgets:
    """The budgets a launch records: the options, else the project's `[team]` settings."""
    team = check_tokens(team, "--budget-tokens")
    worker = check_tokens(worker, "--worker-budget")
    if team is None or worker is None:
        s = team_settings(project)  # `[team]`, 0: no budget
        team = team if team is not None else (s.budget_tokens or None)
        worker = worker if worker is not None else (s.worker_budget_tokens or None)
    return Budgets(team, worker)


def of_config(raw: Mapping[str, Any]) -> Budgets:
    """The budgets a team's config records (a value that is not a whole number >= 1: none)."""

    def one(key: str) -> int | None:
        v = raw.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else None

    return Budgets(one("budgetTokens"), one("workerBudgetTokens"))


def generation(raw: Mapping[str, Any]) -> str:
    """One launch of a team (as the monitor's trackers name it: `omp.monitor.policy`)."""
    return f"{raw.get('createdAt', '')}|{raw.get('launchToken', '')}"


def percent(used: int, budget: int | None) -> float | None:
    return None if not budget else round(100.0 * used / budget, 1)


# ---- budget.json ----------------------------------------------------------------------------


def _empty(gen: str) -> dict[str, Any]:
    return {"schemaVersion": SCHEMA, "generation": gen, "seq": 0, "crossings": []}


def read(team: TeamPaths, gen: str | None = None) -> dict[str, Any]:
    """The crossings recorded (of launch `gen` only, when given). Read-only; a missing,
    damaged or unsafe file reads as none crossed."""
    try:
        if not team.project.check(team.dir) or not fs.check_entry(team.budget, want_dir=False):
            return _empty(gen or "")
        doc = fs.read_json(team.budget)
    except (OSError, OmpError):
        return _empty(gen or "")
    if not isinstance(doc, dict) or not isinstance(doc.get("crossings"), list):
        return _empty(gen or "")
    if gen is not None and doc.get("generation") != gen:
        return _empty(gen)
    doc["crossings"] = [c for c in doc["crossings"] if isinstance(c, dict)]
    if not isinstance(doc.get("seq"), int):
        doc["seq"] = max((int(c.get("seq") or 0) for c in doc["crossings"]), default=0)
    return doc


def update(team: TeamPaths, gen: str, change: Any) -> Any:
    """Read-modify-write under `.budget.lock`; `change(doc)` edits the doc of launch `gen` in
    place (a file of an earlier launch starts empty) and returns what the caller wants back.
    Written only when it changed."""
    with locks.flocked(team.budget_lock):
        doc = read(team, gen)
        before = repr(doc)
        out = change(doc)
        if repr(doc) != before:
            fs.write_json_atomic(team.budget, doc)
    return out


def key(c: Mapping[str, Any]) -> tuple[str, str, int]:
    """What makes a crossing one: its scope, worker and budget value."""
    return (str(c.get("scope")), str(c.get("worker") or ""), int(c.get("budget") or 0))


def crossed_since(project: StatePaths, since: float | None) -> list[dict[str, Any]]:
    """Every team's crossings at or after `since` (epoch seconds; None: all of them), each with
    its `team`: what a loop started at `since` has not seen yet. For the stop hook: a directory
    listing and one small file per team."""
    from omp.record.config import list_teams

    out: list[dict[str, Any]] = []
    try:
        names = list_teams(project)
    except (OSError, OmpError):
        return out
    for name in names:
        for c in read(project.team(name))["crossings"]:
            at = clock.parse_iso(str(c.get("at") or ""))
            if at is not None and (since is None or at >= since):
                out.append({**c, "team": name})
    return out


def describe(c: Mapping[str, Any], team: str | None = None) -> str:
    """One line for a person: `team t crossed its token budget (1,204 of 1,000 tokens)`."""
    who = f"{c.get('worker')}" if c.get("scope") == "worker" else f"team {team or c.get('team')}"
    what = "its token budget" if c.get("scope") == "team" else "its worker token budget"
    used, budget = int(c.get("used") or 0), int(c.get("budget") or 0)
    return f"{who} crossed {what} ({used:,} of {budget:,} tokens)"
