"""Who may run which command: a worker process runs nothing that changes a team or the project.

A worker launch started carries `OMP_TEAM`, `OMP_WORKER`, `OMP_LAUNCH_TOKEN`, `OMP_TEAM_WORKER`
(`omp.identity`). A worker misled by a peer's text would run the leader's commands if it could
(`team delete`, `prune`, `shutdown`, `remove-worker`, a loop start, `hooks install`, on its own
team, another team, or, with `OMP_ROOT` unset, another project). So the rule is inverted: the
commands a worker process may run are listed here, each with why, and every other command refuses
a process carrying ANY of those variables with `worker_not_allowed` (exit 1) before its body runs,
so it writes nothing. `guard_all` applies the rule to every command registered in the app when the
app is built: a command added later (`merge`, `resume`, ...) is refused to workers until someone
lists it here and says why it is safe.

What a worker does through `omp team api` is fenced there, per operation
(`omp.api.operations._fence`): it acts only as itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omp.errors import OmpError
from omp.identity import WorkerIdentity, worker_identity

if TYPE_CHECKING:
    import typer

Words = tuple[str, ...]

READ_ONLY = "read-only: writes nothing, starts nothing"

# Every command a worker process may run, by its words after `omp`, and why that is safe.
WORKER_MAY_RUN: dict[Words, str] = {
    ("team", "status"): READ_ONLY,
    ("team", "collect"): READ_ONLY,
    ("team", "list"): READ_ONLY,
    ("team", "events"): READ_ONLY,
    ("team", "wait"): READ_ONLY,
    ("team", "diff"): READ_ONLY,
    ("team", "task", "list"): READ_ONLY,
    ("team", "task", "show"): READ_ONLY,
    ("team", "usage"): READ_ONLY + "; a worker sees its own row of its own team only "
    "(the leader's session, and the leader's pane, are the person's)",
    ("ralph", "status"): READ_ONLY,
    ("ultrawork", "status"): READ_ONLY,
    ("ultraqa", "status"): READ_ONLY,
    ("doctor",): READ_ONLY,
    ("team", "api"): "every operation is fenced: a worker acts only as itself, in its own team",
    ("hook", "stop"): "the stop hook of the worker's own agent; it never holds a worker",
    ("team", "monitor-run"): "the project's monitor, which a worker's API call may (re)start",
    ("demo-agent",): "the built-in demo agent: it is the worker, and talks through the API",
}

_GUARDED = "__omp_worker_guard__"


def refuse_worker(words: Words, ident: WorkerIdentity | None = None) -> None:
    """Raise `worker_not_allowed` when this process carries a worker identity and `words` is not
    a command a worker may run."""
    ident = ident if ident is not None else worker_identity()
    if ident is None or words in WORKER_MAY_RUN:
        return
    command = " ".join(words)
    raise OmpError(
        "worker_not_allowed",
        f"`omp {command}` changes a team or the project, and this process is "
        f"{ident.describe()}: a worker may not run it; ask the leader (send-message to leader) "
        "if it is needed",
        command=command,
        worker=ident.worker,
        team=ident.team,
        carried=list(ident.carried),
    )


def _guarded(words: Words, fn: Callable[..., Any]) -> Callable[..., Any]:
    if words in WORKER_MAY_RUN or getattr(fn, _GUARDED, False):
        return fn

    @functools.wraps(fn)  # typer reads the parameters through __wrapped__
    def guarded(*args: Any, **kwargs: Any) -> Any:
        from omp.cli.output import guarded as run_guarded

        run_guarded(lambda: refuse_worker(words), bool(kwargs.get("as_json")))
        return fn(*args, **kwargs)

    setattr(guarded, _GUARDED, True)
    return guarded


def guard_all(app: typer.Typer, prefix: Words = ()) -> None:
    """Put the worker rule in front of every command registered in `app` and its sub-apps."""
    from typer.main import get_command_name

    for info in app.registered_commands:
        if info.callback is None:
            continue
        name = info.name or get_command_name(info.callback.__name__)
        info.callback = _guarded((*prefix, name), info.callback)
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        guard_all(sub, (*prefix, str(group.name or sub.info.name)))
