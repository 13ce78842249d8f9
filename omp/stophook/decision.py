"""The loop decision at one stop, as a pure function: no clock, no disk, no environment.

`decide(states, reply, now=...)` looks at the loop modes in the order ralph, ultraqa, ultrawork
(as oh-my-copilot does) and drives the first active one:

- the completion word alone on a line of the agent's *current* reply ends the loop (`active:
  false`, the rest of the state kept) and allows the stop;
- a token budget of a team crossed since the loop started (`crossed`, read by the caller from
  each team's `budget.json`: `omp.record.budget`) ends the loop the same way and says which: the
  loops stop being driven, the person decides (a loop started after the crossing runs);
- a counter at its cap ends the loop the same way and says so;
- otherwise it blocks with the next prompt (mode, step `n/max`, goal, completion word) and
  advances the counter by one.

Copilot CLI and Claude Code end a turn by themselves after 8 blocks in a row (Copilot: "Agent stop
hook blocked 8 consecutive times; ending turn", seen live on 1.0.102). Given `in_a_row` and the
CLI's `cli_limit`, a stop that would be the ignored block is let through without advancing the
counter (why `cli_limit`): the loop stays active and goes on at the agent's next turn, and a cap
of N still means N continuations the agent really got.

Caps: ralph 10, ultraqa 5, ultrawork 20 unless the state sets its own; a cap that is missing, not
a whole number or below 1 falls back to that default, never to "no cap". A counter that is not a
whole number >= 0 counts as 0. `max = N` grants exactly N continuations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    State = dict[str, Any]
else:
    State = dict


class ModeSpec(NamedTuple):
    mode: str
    word: str
    counter: str
    cap: str
    default_cap: int
    goal: str  # the state field holding the loop's goal
    ask: str  # what the next prompt asks for


SPECS = (
    ModeSpec(
        "ralph", "RALPH_COMPLETE", "iteration", "maxIterations", 10, "prompt", "keep working on"
    ),
    ModeSpec(
        "ultraqa",
        "ULTRAQA_COMPLETE",
        "cycleCount",
        "maxCycles",
        5,
        "goal",
        "test, fix and re-test until this passes:",
    ),
    ModeSpec(
        "ultrawork",
        "ULTRAWORK_COMPLETE",
        "iteration",
        "maxIterations",
        20,
        "objective",
        "keep driving the objective",
    ),
)
BY_MODE = {s.mode: s for s in SPECS}
GOAL_CHARS = 300
# How `status` words a decision's `why`.
WHY_TEXT = {
    "continue": "blocked the stop",
    "cli_limit": "paused until the next turn (the CLI's limit of blocks in a row)",
    "complete": "saw the completion word",
    "cap": "hit the cap",
    "budget": "a token budget was crossed",
}  # the goal quoted in the prompt, on one line


class Decision(NamedTuple):
    action: str  # allow | block
    mode: str | None  # the loop it is about; None when no loop is active
    why: str  # no_loop | continue | complete | budget | cap | cli_limit
    reason: str | None = None  # the next prompt, for a block
    step: int | None = None  # the counter after this stop
    cap: int | None = None
    state: State | None = None  # the mode's new state to write; None: write nothing
    budget: str | None = None  # with `budget`: the crossing, in words


def _iso(now: float) -> str:
    from datetime import UTC, datetime  # on use: `omp team status` imports this module too

    dt = datetime.fromtimestamp(now, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _whole(value: Any) -> int | None:
    """A whole number from an int, an integral float or a digit string; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and value not in (float("inf"), -float("inf")):
        return int(value) if value.is_integer() else None
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None


def counter_of(state: Mapping[str, Any], spec: ModeSpec) -> int:
    n = _whole(state.get(spec.counter))
    return n if n is not None and n >= 0 else 0


def cap_of(state: Mapping[str, Any], spec: ModeSpec) -> int:
    n = _whole(state.get(spec.cap))
    return n if n is not None and n >= 1 else spec.default_cap


def one_line(text: Any, limit: int = GOAL_CHARS) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def prompt(spec: ModeSpec, step: int, cap: int, goal: Any) -> str:
    """The next prompt. The completion word sits mid-sentence: quoted back, it never counts."""
    return (
        f"[omp {spec.mode} step {step}/{cap}] Not finished yet: {spec.ask} "
        f'"{one_line(goal)}". Continue now. When all of it is done and checked, print '
        f"{spec.word} on a line by itself."
    )


def completed(reply: str | None, word: str, injected: str | None = None) -> bool:
    """True iff `word` stands alone on a line of `reply` (optionally in backticks or bold).

    `injected` is omp's own last prompt: removed first, so an agent quoting it back, or a
    transcript that repeats it, never counts as the agent saying it is done.
    """
    if not reply:
        return False
    text = reply.replace(injected, "") if injected else reply
    import re  # on first use: `omp team status` imports this module for its texts only

    w = re.escape(word)
    return re.search(rf"(?m)^[ \t]*(?:{w}|`{w}`|\*\*{w}\*\*)[ \t]*\r?$", text) is not None


def newest_part(previous: str | None, current: str) -> str:
    """Gemini's `prompt_response` grows across retries of one prompt: the part added since."""
    if previous and current.startswith(previous):
        return current[len(previous) :]
    return current


def end_note(d: Decision) -> str | None:
    """One line for a person when a loop ends; None otherwise."""
    if d.why == "complete":
        return f"omp {d.mode} loop complete after {d.step}/{d.cap} continuations"
    if d.why == "cap":
        return f"omp {d.mode} loop stopped: its cap of {d.cap} continuations is reached"
    if d.why == "budget":
        return f"omp {d.mode} loop stopped at {d.step}/{d.cap}: {d.budget}"
    if d.why == "cli_limit":
        return (
            f"omp {d.mode} loop paused at {d.step}/{d.cap}: the CLI ends a turn after 8 blocks "
            "in a row; the loop goes on at the next turn"
        )
    return None


def _last_prompt(state: Mapping[str, Any]) -> str | None:
    last = state.get("lastDecision")
    if isinstance(last, dict) and isinstance(last.get("reason"), str):
        return str(last["reason"])
    return None


def _crossed_since(state: Mapping[str, Any], crossed: Sequence[tuple[float, str]]) -> str | None:
    """The first budget crossed at or after the loop started (its start unknown: any)."""
    started = state.get("startedAt")
    since = None
    if isinstance(started, str):
        from datetime import datetime

        try:
            since = datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
        except ValueError:
            since = None
    for at, words in crossed:
        if since is None or at >= since:
            return words
    return None


def decide(
    states: Mapping[str, Any],
    reply: str | None,
    *,
    now: float,
    stop: Mapping[str, Any] | None = None,
    in_a_row: int = 0,
    cli_limit: int | None = None,
    crossed: Sequence[tuple[float, str]] = (),
) -> Decision:
    """The decision for one stop, and the mode's new state (a new dict; inputs are not changed).

    `states` maps a mode to its parsed state file (anything; only a dict with `active is True`
    is an active loop). `stop` (cli, session, stop id) is recorded in `lastDecision`.
    `in_a_row`: the blocks omp gave this session in a row before this stop; `cli_limit`: how
    many in a row the CLI obeys (None: no limit). `crossed`: the token budgets crossed, as
    (epoch seconds, words); one at or after the loop's `startedAt` ends it.
    """
    for spec in SPECS:
        state = states.get(spec.mode)
        if not (isinstance(state, dict) and state.get("active") is True):
            continue
        cur = counter_of(state, spec)
        cap = cap_of(state, spec)
        at = _iso(now)
        new: State = dict(state)
        record: State = {"at": at, "step": cur, "max": cap, **dict(stop or {})}
        if completed(reply, spec.word, _last_prompt(state)):
            new.update(active=False, endedAt=at, endReason="complete")
            new["lastDecision"] = {"action": "allow", "why": "complete", **record}
            return Decision("allow", spec.mode, "complete", None, cur, cap, new)
        halt = _crossed_since(state, crossed)
        if halt is not None:
            new.update(active=False, endedAt=at, endReason="budget")
            new["lastDecision"] = {"action": "allow", "why": "budget", "budget": halt, **record}
            return Decision("allow", spec.mode, "budget", None, cur, cap, new, halt)
        if cur >= cap:
            new.update(active=False, endedAt=at, endReason="cap")
            new["lastDecision"] = {"action": "allow", "why": "cap", **record}
            return Decision("allow", spec.mode, "cap", None, cur, cap, new)
        if cli_limit is not None and in_a_row >= cli_limit:
            new["lastDecision"] = {"action": "allow", "why": "cli_limit", **record}
            return Decision("allow", spec.mode, "cli_limit", None, cur, cap, new)
        step = cur + 1
        reason = prompt(spec, step, cap, state.get(spec.goal))
        new[spec.counter] = step
        new["lastDecision"] = {
            "action": "block",
            "why": "continue",
            **record,
            "step": step,
            "reason": reason,
        }
        return Decision("block", spec.mode, "continue", reason, step, cap, new)
    return Decision("allow", None, "no_loop")
