"""Task conversations kept in the project's store (`OMP_STORE`, `[store] url`:
`omp.store.select`) instead of `conversations/<task_id>.json`: `omp.conversations.record` hands
over to this module when a store is selected, so a worker on another host and the leader see one
record of each conversation (who is busy, which task a reply belongs to, who may send what).

The same envelope `{schemaVersion, revision, contentHash, payload}` is the store's doc
`conversations/<task_id>`; the files' rules hold:

- the team-level lock every publication holds becomes a lease on the store's lock
  `conversations.<team>` (the files' flock on the team directory holds only on one host), and
  every write under it carries the lease's fencing token: a holder that stalled past its lease
  writes nothing;
- a publication is a compare-and-set on the revision (`stale_revision` when it moved). A send's
  check may run again on Redis when another send to the mailbox slipped in (its WATCH), so a
  publication finding its own record already there (the revision it writes, the same content)
  is done, not stale;
- the summary of open conversations is no file of its own: the records are read (one read of
  the collection), which is what the files fall back on when their summary is missing.
"""

from __future__ import annotations

from omp.errors import OmpError
from omp.store import select
from omp.store.backend import held, held_lease

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.store.backend import Store
    from omp.store.paths import TeamPaths

COLLECTION = "conversations"


def store_of(team: TeamPaths) -> Store:
    store = select.current(team.project)
    assert store is not None  # only reached when a store is selected
    return store


def envelope(team: TeamPaths, task_id: str) -> dict[str, Any] | None:
    """The stored envelope of `task_id` (`omp.conversations.record` reads it), or None."""
    return store_of(team).doc(team.name, COLLECTION, task_id)


def envelopes(team: TeamPaths) -> list[dict[str, Any]]:
    """Every stored envelope of the team (its open ones make the summary)."""
    return store_of(team).docs(team.name, COLLECTION)


def lease(team: TeamPaths) -> _Lease:
    """The store's lease on a team's conversations for a block (re-entrant in one process)."""
    return _Lease(team)


class _Lease:
    __slots__ = ("_held", "_team")

    def __init__(self, team: TeamPaths) -> None:
        self._team = team
        what = f"the conversations of team {team.name}"
        name = f"conversations.{team.name}"
        self._held = held(store_of(team), name, team=team.name, what=what)

    def __enter__(self) -> None:
        self._team.verify()  # the team as this host knows it (its config) is still there
        self._held.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._held.__exit__(*exc)


def publish(
    team: TeamPaths,
    task_id: str,
    env: dict[str, Any],
    expected: int,
    check: Callable[[dict[str, Any]], object],
) -> None:
    """Write `env` (revision `expected + 1`) if the record is still at `expected`, fenced by
    this process's lease (held by the caller). `check` refuses (raises) a damaged record, which
    is never written over."""
    lease = held_lease(f"conversations.{team.name}", "a conversation written")

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        revision = 0 if current is None else current.get("revision")
        if current is not None and current == env:
            return None  # this very publication, run again by a send's check: done
        if revision != expected:
            raise OmpError(
                "stale_revision",
                f"task {task_id} changed meanwhile (revision {revision}, expected "
                f"{expected}); read it again and retry",
                task_id=task_id,
                revision=revision,
            )
        if current is not None:
            check(current)  # never over damage
        return env

    store_of(team).update(team.name, COLLECTION, task_id, change, fence=lease)


def remove(team: TeamPaths, task_id: str) -> None:
    store_of(team).delete(team.name, COLLECTION, task_id)
