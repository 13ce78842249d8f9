"""The task store's guard and writes when a project keeps its tasks in a store (`OMP_STORE`,
`[store] url`): `omp.tasks.tasks` keeps every rule (claims, owner-only moves, tokens, the
verify step) and hands its three primitives here: the guard, the read, the write.

The guard is a lease on the store's lock `tasks.<team>` instead of the flock of `tasks/.guard`:
one writer of a team's tasks at a time, on whichever host it runs (`omp.store.backend.held`).
A lease runs out (a holder that died frees it after `LEASE_TTL` seconds, as a flock frees at
once), so every write under it carries the lease's fencing token: a holder that stalled past
its lease and lost it to another writes nothing (`stale_fence`), and never overwrites its
successor's work.
"""

from __future__ import annotations

from omp.store import select
from omp.store.backend import held, held_lease

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.store.backend import Store
    from omp.store.layout import TeamFiles


def _store(team: TeamFiles) -> Store:
    store = select.current(team.project)
    assert store is not None  # only reached when a store is selected
    return store


class Guard:
    """The store's lease on a team's tasks for a block (re-entrant within one process)."""

    __slots__ = ("_held", "_team")

    def __init__(self, team: TeamFiles) -> None:
        self._team = team
        what = f"the tasks of team {team.name}"
        self._held = held(_store(team), f"tasks.{team.name}", team=team.name, what=what)

    def __enter__(self) -> None:
        self._team.verify()  # the team as this host knows it (its config) is still there
        self._held.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._held.__exit__(*exc)


def write(store: Store, team: TeamFiles, task: dict[str, Any]) -> None:
    """Write the task, fenced by this process's guard of the team (held by the caller)."""
    lease = held_lease(f"tasks.{team.name}", "a task write")
    store.update(team.name, "tasks", task["id"], lambda _: task, fence=lease)
