"""Loop modes: the `ralph`, `ultrawork` and `ultraqa` state files, and "is a loop active".

Each mode is one pretty JSON object at `.omp/state/<mode>.json`, readable by the TypeScript tool
and by this one. A loop counts as active iff its file parses to an object whose `active` is the
boolean `true`: the string "true" or the number 1 is not enough, so a hand-edited or half-migrated
file can never switch idle prompting on by accident.

Rewrites keep fields this module does not know (a newer omp, the TS agent-stop hook), except the
per-run fields a fresh `start` must reset.

`cancel` (and `ultraqa cycle pass`) rewrite the file with `active: false` instead of deleting it as
the TS tool does. Every reader, ours and the TS one, tests `active === true`, so both choices stop
the loop equally; keeping the file keeps what the loop was doing (prompt, iteration reached, when it
ended), which is what someone asks next, and it is the same shape the TS hook leaves behind when a
loop completes or hits its cap. The next `start` overwrites it.

The counters (`iteration`, `cycleCount`) belong to the stop hook (`omp hook stop`, omp/stophook),
which writes them under its own lock; `start`, `cancel` and `ultraqa cycle pass` make the hook
forget the decisions it remembered, as the TS tool's `start`/`cancel` delete its
`.omp/state/locks/agentstop-*` files. Those commands' read-modify-write is not locked: they are
run by a person or an agent at a prompt.
"""

from __future__ import annotations

import os

from omp import clock
from omp.errors import OmpError
from omp.store import fs

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.store.layout import ProjectFiles
    from omp.store.paths import StatePaths

    State = dict[str, Any]
else:
    State = dict

MODES = ("ralph", "ultrawork", "ultraqa")
VERDICTS = ("pass", "fail", "pending")

DEFAULT_MAX_ITERATIONS = 10
DEFAULT_MAX_CYCLES = 5
DEFAULT_MAX_ULTRAWORK = 20

# Fields that describe one run. A new `start` drops them from the old file instead of carrying
# them over: e.g. the TS hook's ultrawork `iteration` would otherwise end the new loop at once.
_RUN_FIELDS = frozenset(
    {
        "active",
        "iteration",
        "maxIterations",
        "completedSlices",
        "cycleCount",
        "maxCycles",
        "lastVerdict",
        "taskCount",
        "taskSummary",
        "sessionId",
        "startedAt",
        "cancelledAt",
        "completedAt",
        "prompt",
        "objective",
        "goal",
        "endedAt",
        "endReason",
        "lastDecision",
    }
)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise OmpError("usage", f"unknown loop mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def is_active(state: object) -> bool:
    """The one activity test: a JSON object whose `active` is the boolean true."""
    return isinstance(state, dict) and state.get("active") is True


# ---- reading (never writes, never creates a directory) ------------------------------------


def read_state(paths: StatePaths | ProjectFiles, mode: str) -> State | None:
    """The mode's state object; None if the file is missing or is not a JSON object.

    Raises `unsafe_path` for a symlinked or foreign-owned state tree or file (fail-closed). On
    the per-call layer: every stop hook asks it of each mode (the tree as strings).
    """
    files = paths.files
    path = files.mode_file(check_mode(mode))
    if not files.check(files.state):
        return None
    try:
        obj = fs.read_json(path)
    except OSError as exc:
        raise OmpError("storage_error", f"cannot read {path}: {exc.strerror or exc}") from exc
    return obj if isinstance(obj, dict) else None


def active_loops(paths: StatePaths) -> list[str]:
    """Names of the active loops, in `MODES` order. Called by the monitor on every scan.

    Cheap and quiet: a few lstat/open calls, no writes. An unreadable or unsafe file counts as
    inactive here rather than raising, so one bad file cannot crash the monitor's scan.
    """
    found: list[str] = []
    for mode in MODES:
        try:
            state = read_state(paths, mode)
        except OmpError:
            continue
        if is_active(state):
            found.append(mode)
    return found


def loop_summaries(paths: StatePaths) -> list[State]:
    """Each active loop's `{mode, step, max, lastDecision}` (read-only; unreadable = inactive)."""
    from omp.stophook.decision import BY_MODE, cap_of, counter_of

    out: list[State] = []
    for mode in MODES:
        try:
            state = read_state(paths, mode)
        except OmpError:
            continue
        if state is None or not is_active(state):
            continue
        spec = BY_MODE[mode]
        last = state.get("lastDecision")
        out.append(
            {
                "mode": mode,
                "step": counter_of(state, spec),
                "max": cap_of(state, spec),
                "lastDecision": last if isinstance(last, dict) else None,
            }
        )
    return out


def is_loop_active(paths: StatePaths) -> bool:
    """True iff ralph, ultrawork or ultraqa has `"active": true`: the idle-prompt gate."""
    return bool(active_loops(paths))


def status(paths: StatePaths, mode: str) -> State:
    """Read-only status: the state's fields plus `ok`, `mode` and the strict `active`."""
    out: State = {"ok": True, "mode": mode}
    path = paths.mode_file(check_mode(mode))
    try:
        state = read_state(paths, mode)
    except OmpError as exc:  # damaged (`corrupt_state`): shown as unreadable, saying why
        if exc.code != "corrupt_state":
            raise
        return {**out, "active": False, "unreadable": True, "file": str(path), "why": exc.message}
    if state is None:
        out["active"] = False
        if os.path.lexists(path):
            out["unreadable"] = True  # present but not a JSON object: shown, never "repaired"
            out["file"], out["why"] = str(path), f"{path} is not a JSON object"
        return out
    out.update(state)
    out["ok"] = True
    out["mode"] = mode
    out["active"] = is_active(state)
    return out


# ---- writing ------------------------------------------------------------------------------


def _positive(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or value < 1):
        raise OmpError("invalid_input", f"{name} must be a positive integer, got {value}")


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise OmpError("invalid_input", f"{what} must not be empty")
    return value


def _write(paths: StatePaths, mode: str, state: State) -> None:
    was = is_active(read_state(paths, mode))
    paths.ensure(paths.state)
    fs.write_json_atomic(paths.mode_file(mode), state)
    if was != is_active(state):  # a loop started or ended: every live team's history says so
        from omp.record import history

        history.loop(paths, mode, "started" if is_active(state) else "ended")


def write_state(paths: StatePaths, mode: str, state: State) -> None:
    """Replace the mode's state file atomically (the stop hook's counter and end of a loop)."""
    _write(paths, check_mode(mode), state)


def _forget_hook_decisions(paths: StatePaths) -> None:
    from omp.stophook import memory

    memory.clear(paths)


def _start(paths: StatePaths, mode: str, fields: State) -> State:
    # Unknown fields of the previous file survive; its per-run fields do not.
    old = read_state(paths, mode) or {}
    state: State = {k: v for k, v in old.items() if k not in _RUN_FIELDS}
    state.update(fields)
    _write(paths, mode, state)
    _forget_hook_decisions(paths)
    return {"ok": True, "mode": mode, **state}


def start_ralph(
    paths: StatePaths,
    prompt: str,
    *,
    max_iterations: int | None = None,
    now: clock.Clock = clock.now,
) -> State:
    text = _text(prompt, "ralph task")
    _positive(max_iterations, "--max-iterations")
    return _start(
        paths,
        "ralph",
        {
            "active": True,
            "iteration": 0,
            "maxIterations": max_iterations or DEFAULT_MAX_ITERATIONS,
            "completedSlices": 0,
            "startedAt": clock.iso(now()),
            "prompt": text,
            "projectPath": str(paths.root),
        },
    )


def start_ultrawork(
    paths: StatePaths,
    objective: str,
    *,
    task_count: int | None = None,
    max_iterations: int | None = None,
    now: clock.Clock = clock.now,
) -> State:
    text = _text(objective, "ultrawork objective")
    _positive(task_count, "--task-count")
    _positive(max_iterations, "--max-iterations")
    return _start(
        paths,
        "ultrawork",
        {
            "active": True,
            "objective": text,
            "startedAt": clock.iso(now()),
            "projectPath": str(paths.root),
            "taskCount": task_count or 0,  # 0 = not given, as in the TS tool
            "iteration": 0,
            "maxIterations": max_iterations or DEFAULT_MAX_ULTRAWORK,
        },
    )


def start_ultraqa(
    paths: StatePaths,
    goal: str,
    *,
    max_cycles: int | None = None,
    now: clock.Clock = clock.now,
) -> State:
    text = _text(goal, "ultraqa goal")
    _positive(max_cycles, "--max-cycles")
    return _start(
        paths,
        "ultraqa",
        {
            "active": True,
            "goal": text,
            "cycleCount": 0,
            "maxCycles": max_cycles or DEFAULT_MAX_CYCLES,
            "startedAt": clock.iso(now()),
            "projectPath": str(paths.root),
            "lastVerdict": "pending",
        },
    )


def cancel(paths: StatePaths, mode: str, *, now: clock.Clock = clock.now) -> State:
    """Stop the loop by rewriting it with `active: false`; a no-op when none is active.

    Idempotent so scripts may cancel blindly: no file, or an inactive one, writes nothing.
    """
    state = read_state(paths, mode)
    if not is_active(state):
        return {"ok": True, "mode": mode, "active": False, "cancelled": False}
    assert state is not None
    state["active"] = False
    state["cancelledAt"] = clock.iso(now())
    _write(paths, mode, state)
    _forget_hook_decisions(paths)
    return {"ok": True, "mode": mode, **state, "cancelled": True}


def record_cycle(paths: StatePaths, verdict: str, *, now: clock.Clock = clock.now) -> State:
    """`ultraqa cycle pass|fail|pending`: pass ends the loop, the others only set lastVerdict.

    The cycle counter is not touched: as in the TS tool it belongs to the agent-stop hook.
    """
    if verdict not in VERDICTS:
        raise OmpError("usage", f"ultraqa cycle expects pass|fail|pending, got {verdict}")
    state = read_state(paths, "ultraqa")
    if not is_active(state):
        from omp.invocation import hint

        raise OmpError(
            "no_active_loop", f"no active ultraqa loop; start one with `{hint('ultraqa start')}`"
        )
    assert state is not None
    state["lastVerdict"] = verdict
    if verdict == "pass":
        state["active"] = False
        state["completedAt"] = clock.iso(now())
    _write(paths, "ultraqa", state)
    if verdict == "pass":
        _forget_hook_decisions(paths)
    return {"ok": True, "mode": "ultraqa", **state}
