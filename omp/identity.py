"""Who this process is: the leader's side, or a worker launch started.

Launch gives every worker's pane `OMP_TEAM`, `OMP_WORKER`, `OMP_LAUNCH_TOKEN` and
`OMP_TEAM_WORKER=1`. A process carrying ANY of them is a worker process: its identity is judged
from all of them together, so unsetting one (or two) never widens what it may do. Only a process
carrying none of them is the leader's side (the leader's agent, a person, a script), and that is
what omp cannot stop: the same OS user can unset them all (docs/reliability.md).

Standard library only, and cheap to import: `omp team api` asks it on every call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Mapping

# Every variable launch sets in a worker's pane that says "you are a worker".
WORKER_VARS = ("OMP_WORKER", "OMP_TEAM", "OMP_LAUNCH_TOKEN", "OMP_TEAM_WORKER")


class WorkerIdentity:
    """What a worker process carries; a field is None when its variable is unset or empty."""

    __slots__ = ("carried", "team", "token", "worker")

    def __init__(
        self,
        worker: str | None,
        team: str | None,
        token: str | None,
        carried: tuple[str, ...],  # the names of the variables that are set
    ) -> None:
        self.worker, self.team, self.token, self.carried = worker, team, token, carried

    def describe(self) -> str:
        who = self.worker or "a worker"
        team = f" of team {self.team}" if self.team else ""
        return f"{who}{team} ({', '.join(self.carried)})"


def worker_identity(env: Mapping[str, str] | None = None) -> WorkerIdentity | None:
    """The worker identity this process carries, or None when it carries none of `WORKER_VARS`."""
    e = os.environ if env is None else env
    carried = tuple(v for v in WORKER_VARS if e.get(v))
    if not carried:
        return None
    return WorkerIdentity(
        worker=e.get("OMP_WORKER") or None,
        team=e.get("OMP_TEAM") or None,
        token=e.get("OMP_LAUNCH_TOKEN") or None,
        carried=carried,
    )
