"""A backlog's start: the tasks of a file as records, and each worker's first task, for `omp team
launch --tasks` and `omp team create --tasks`.

`first_tasks` decides in memory who starts with what (the queue's own rule,
`omp.tasks.graph.choose`), so the launch can make those tasks' worktrees before the panes
open and write each worker's inbox with its task already claimed for it; `omp.tasks.queue.add`
then writes every record (and the claimed ones' locks) before the team's config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omp.backlog.files import Spec
from omp.tasks import queue
from omp.tasks.graph import Graph, Worker, choose


class Start(NamedTuple):
    records: list[dict[str, Any]]  # every task, in the file's order
    given: dict[str, dict[str, Any]]  # worker -> its first task, claimed for it


def records_of(
    specs: Sequence[Spec], *, source: str, created_by: str = "leader"
) -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(specs, start=1):
        rec = queue.new_task(
            s.id,
            s.title,
            s.description,
            blocked_by=s.blocked_by,
            agent=s.agent,
            model=s.model,
            verify=s.verify,
            priority=s.priority,
            retries=s.retries,
            created_by=created_by,
            source=source,
        )
        rec["order"] = i
        out.append(rec)
    return out


def first_tasks(
    specs: Sequence[Spec], workers: Sequence[Worker], *, source: str, claim: bool = True
) -> Start:
    """Every task's record and, with `claim`, each worker's first one (claimed for it)."""
    records = records_of(specs, source=source)
    given: dict[str, dict[str, Any]] = {}
    if claim:
        for w, rec in choose(Graph(records), list(workers)):
            given[w.name] = queue.claim_fields(rec, w.name)
    return Start(records, given)


def source_name(path: Path) -> str:
    return str(path)
