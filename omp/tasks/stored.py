"""The task store's guard and writes when a project keeps its tasks in a store (`OMP_STORE`,
`[store] url`): `omp.tasks.tasks` keeps every rule (claims, owner-only moves, tokens, the
verify step) and hands its three primitives here: the guard, the read, the write.

The guard is a lease on the store's lock `tasks.<team>` instead of the flock of `tasks/.guard`:
one writer of a team's tasks at a time, on whichever host it runs. A lease runs out (a holder
that died frees it after `TTL` seconds, as a flock frees at once), so every write under it
carries the lease's fencing token: a holder that stalled past its lease and lost it to another
writes nothing (`stale_fence`), and never overwrites its successor's work.
"""

from __future__ import annotations

import os
import socket
import time

from omp.errors import OmpError
from omp.store import select

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.store.backend import Lease, Store
    from omp.store.layout import TeamFiles

TTL = 15.0  # seconds a guard is leased: far longer than any change of tasks under it
WAIT = 30.0  # seconds a writer waits for the guard before `claim_race`

# The lease of each team's guard this process holds (a write under the guard fences with it).
_HELD: dict[str, Lease] = {}


def _store(team: TeamFiles) -> Store:
    store = select.current(team.project)
    assert store is not None  # only reached when a store is selected
    return store


class Guard:
    """The store's lease on a team's tasks for a block (re-entrant within one process)."""

    __slots__ = ("_lease", "_store", "_team")

    def __init__(self, team: TeamFiles) -> None:
        self._team = team
        self._store = _store(team)
        self._lease: Lease | None = None

    def __enter__(self) -> None:
        team = self._team
        team.verify()  # the team as this host knows it (its config) is still there
        name = f"tasks.{team.name}"
        if name in _HELD:
            return  # nested under a guard this process holds already
        owner = f"{socket.gethostname()}:{os.getpid()}"
        deadline = time.monotonic() + WAIT
        pause = 0.005
        while (lease := self._store.lock(name, owner, TTL)) is None:
            if time.monotonic() >= deadline:
                raise OmpError(
                    "claim_race",
                    f"the tasks of team {team.name} stayed locked for {WAIT:g} s in the store",
                    team=team.name,
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        self._lease = _HELD[name] = lease

    def __exit__(self, *exc: object) -> None:
        if self._lease is not None:
            _HELD.pop(self._lease.name, None)
            self._store.unlock(self._lease)
            self._lease = None


def write(store: Store, team: TeamFiles, task: dict[str, Any]) -> None:
    """Write the task, fenced by this process's guard of the team (held by the caller)."""
    lease = _HELD.get(f"tasks.{team.name}")
    if lease is None:
        raise OmpError("internal", "a task write outside its team's guard")
    store.update(team.name, "tasks", task["id"], lambda _: task, fence=lease)
