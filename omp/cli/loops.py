"""`omp ralph|ultrawork|ultraqa start|status|cancel` and `omp ultraqa cycle`.

Argument shaping and printing only; the state files are handled by `omp.modes`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from omp import modes
from omp.cli import options as opt
from omp.cli.options import JsonOpt
from omp.cli.output import Result, run
from omp.store.paths import StatePaths, find_root
from omp.textsafe import inline

if TYPE_CHECKING:
    from omp.cli.replies import LoopReply

_MONITOR_MODULE = "omp.monitor.ctl"


def _paths() -> StatePaths:
    return StatePaths(find_root())


def _quote(text: Any, limit: int = 60) -> str:
    line = inline(str(text).strip().splitlines()[0]) if str(text).strip() else ""
    return '"' + (line if len(line) <= limit else line[: limit - 1] + "…") + '"'


def _v(r: Result, key: str, default: Any = "?") -> str:
    """A value of a loop file (any text can be there) as part of one line."""
    return inline(str(r.get(key, default)))


def describe(state: Result) -> str:
    """The mode-specific middle of a human line: counters and the task text."""
    mode = state.get("mode")
    if mode == "ralph":
        return (
            f"iteration {_v(state, 'iteration')}/{_v(state, 'maxIterations')}"
            f" — {_quote(state.get('prompt', ''))}"
        )
    if mode == "ultrawork":
        count = state.get("taskCount")
        tasks = f"{count} tasks, " if isinstance(count, int) and count > 0 else ""
        return (
            f"{tasks}iteration {_v(state, 'iteration', 0)}/{_v(state, 'maxIterations', 20)}"
            f" — {_quote(state.get('objective', ''))}"
        )
    return (
        f"cycle {_v(state, 'cycleCount')}/{_v(state, 'maxCycles')}, last verdict "
        f"{_v(state, 'lastVerdict')} — {_quote(state.get('goal', ''))}"
    )


def _last(r: Result) -> str:
    """The stop hook's last decision, as a second line; empty when it has made none."""
    last = r.get("lastDecision")
    if not isinstance(last, dict):
        return ""
    from omp.stophook.decision import WHY_TEXT

    what = WHY_TEXT
    why = inline(what.get(str(last.get("why")), str(last.get("action"))))
    return (
        f"\n  last stop: {why} at step {_v(last, 'step')}/{_v(last, 'max')}, {_v(last, 'at')}"
        f" ({_v(last, 'cli')})"
    )


def _status_line(r: Result) -> str:
    mode = r["mode"]
    if r.get("active") is True:
        return f"{mode} active: {describe(r)}{_last(r)}"
    if r.get("unreadable"):
        return f"{mode} inactive ({inline(str(r.get('why') or f'{mode}.json is damaged'))})"
    ended = inline(str(r.get("cancelledAt") or r.get("completedAt") or r.get("endedAt") or ""))
    if ended:
        if r.get("cancelledAt"):
            how = "cancelled"
        elif r.get("completedAt"):
            how = "completed"
        else:
            how = "ended at its cap" if r.get("endReason") == "cap" else "completed"
        return f"{mode} inactive ({how} {ended}): {describe(r)}{_last(r)}"
    return f"{mode} inactive"


def _ensure_monitor(paths: StatePaths) -> None:
    """Start the project's shared monitor; fail-open, a loop start never fails because of it."""
    try:
        # Imported by name: the module may not exist in this build, and that must stay harmless.
        mod = importlib.import_module(_MONITOR_MODULE)
        # Its stdout would break the one-JSON-object contract of `start --json`.
        with contextlib.redirect_stdout(sys.stderr):
            mod.ensure_monitor(paths)
    except ModuleNotFoundError as exc:
        if exc.name != _MONITOR_MODULE:  # a build without the monitor is quiet; a broken one not
            _warn(exc)
    except Exception as exc:
        _warn(exc)


def _warn(exc: BaseException) -> None:
    from omp.cli.output import write_err

    write_err(f"omp: warning: loop monitor not started: {type(exc).__name__}: {inline(str(exc))}\n")


def _hook_warning(paths: StatePaths) -> None:
    """Say on stderr when the agent that will run this loop has no omp stop hook; never fails."""
    try:
        from omp.stophook.checks import start_warning

        text = start_warning(paths.root)
    except Exception:
        return
    if text:
        from omp.cli.output import write_err

        write_err(f"omp: warning: {inline(text)}\n")


def _start(fn: Callable[[StatePaths], Result], as_json: bool) -> None:
    def body() -> LoopReply:
        paths = _paths()
        result = fn(paths)
        _ensure_monitor(paths)
        _hook_warning(paths)
        return cast("LoopReply", result)

    run(body, as_json=as_json, human=lambda r: f"{r['mode']} started: {describe(r)}")


def _loop(state: Result) -> LoopReply:
    """A loop command's reply: the loop's file with `ok` and `mode` (omp.cli.replies)."""
    return cast("LoopReply", state)


def _add_status_cancel(app: typer.Typer, mode: str) -> None:
    @app.command("status")
    def status(as_json: bool = JsonOpt) -> None:
        """Show whether the loop is active (read-only; exit 0 when none is)."""
        run(lambda: _loop(modes.status(_paths(), mode)), as_json=as_json, human=_status_line)

    @app.command("cancel")
    def cancel(as_json: bool = JsonOpt) -> None:
        """Stop the loop (the file is kept with active:false)."""

        def human(r: Result) -> str:
            return f"{mode} cancelled" if r.get("cancelled") else f"no active {mode} loop"

        run(lambda: _loop(modes.cancel(_paths(), mode)), as_json=as_json, human=human)


def _sub_app(help_text: str) -> typer.Typer:
    return typer.Typer(help=help_text, no_args_is_help=True, add_completion=False)


ralph = _sub_app("Ralph loop: keep working on one task until it is done.")
ultrawork = _sub_app("Ultrawork loop: drive an objective across many tasks.")
ultraqa = _sub_app("UltraQA loop: test, fix and re-test until a goal passes.")


@ralph.command("start")
def ralph_start(
    task: Annotated[str, typer.Argument(help="What to work on.", callback=opt.text())],
    max_iterations: Annotated[
        int | None,
        typer.Option("--max-iterations", help="Iteration cap (default 10).", callback=opt.count()),
    ] = None,
    as_json: bool = JsonOpt,
) -> None:
    """Start a Ralph loop."""
    _start(lambda p: modes.start_ralph(p, task, max_iterations=max_iterations), as_json)


@ultrawork.command("start")
def ultrawork_start(
    objective: Annotated[str, typer.Argument(help="The objective.", callback=opt.text())],
    task_count: Annotated[
        int | None,
        typer.Option("--task-count", help="How many tasks it spans.", callback=opt.count()),
    ] = None,
    max_iterations: Annotated[
        int | None,
        typer.Option("--max-iterations", help="Iteration cap (default 20).", callback=opt.count()),
    ] = None,
    as_json: bool = JsonOpt,
) -> None:
    """Start an Ultrawork loop."""
    _start(
        lambda p: modes.start_ultrawork(
            p, objective, task_count=task_count, max_iterations=max_iterations
        ),
        as_json,
    )


@ultraqa.command("start")
def ultraqa_start(
    goal: Annotated[str, typer.Argument(help="What must pass.", callback=opt.text())],
    max_cycles: Annotated[
        int | None,
        typer.Option("--max-cycles", help="Cycle cap (default 5).", callback=opt.count()),
    ] = None,
    as_json: bool = JsonOpt,
) -> None:
    """Start an UltraQA loop."""
    _start(lambda p: modes.start_ultraqa(p, goal, max_cycles=max_cycles), as_json)


@ultraqa.command("cycle")
def ultraqa_cycle(
    verdict: Annotated[
        str,
        typer.Argument(
            help="pass (ends the loop), fail or pending.", callback=opt.text(max_len=256)
        ),
    ],
    as_json: bool = JsonOpt,
) -> None:
    """Record a QA cycle's verdict."""

    def human(r: Result) -> str:
        if r.get("active") is not True:
            return f"ultraqa passed: loop ended — {_quote(r.get('goal', ''))}"
        return f"ultraqa verdict recorded: {describe(r)}"

    run(lambda: _loop(modes.record_cycle(_paths(), verdict)), as_json=as_json, human=human)


for _mode, _app in (("ralph", ralph), ("ultrawork", ultrawork), ("ultraqa", ultraqa)):
    _add_status_cancel(_app, _mode)


def register(app: typer.Typer) -> None:
    app.add_typer(ralph, name="ralph")
    app.add_typer(ultrawork, name="ultrawork")
    app.add_typer(ultraqa, name="ultraqa")
