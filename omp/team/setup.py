"""Creating a team's state: config, tasks, worker directories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.errors import OmpError
from omp.invocation import hint
from omp.record import config as team_config
from omp.record import history
from omp.store import fs, names, project_config
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths, find_root
from omp.tasks import tasks

if TYPE_CHECKING:
    from omp.store.backend import Store


def task_description(task: str, i: int, n: int) -> str:
    return task if n == 1 else f"{task} (part {i}/{n})"


def create_team(
    cwd: Path,
    name: str,
    workers: int,
    *,
    task: str = "",
    role: str = "",
    tasks_file: Path | None = None,
) -> dict[str, Any]:
    names.team_name(name)
    project = StatePaths(find_root(cwd))
    team = project.team(name)
    if tasks_file is not None and task:
        raise OmpError("usage", "give --task or --tasks FILE, not both")
    backlog = None
    if tasks_file is not None:  # checked whole before anything is written
        from omp.backlog import files
        from omp.backlog.settings import Backlog
        from omp.backlog.start import records_of

        backlog = records_of(files.load(tasks_file), source=str(tasks_file))
    raw = team_config.new_config(name, workers, cwd=cwd, task=task, role=role)
    refuse_existing(team)
    if backlog is not None:
        raw["backlog"] = Backlog(source=str(tasks_file)).to_config()
        raw["task"] = f"backlog: {len(backlog)} task(s) from {tasks_file}"
        for w in raw["workers"]:
            w["taskId"] = None  # a backlog's tasks are handed out, not one per worker
    write_state(team, raw, task, backlog=backlog)
    out: dict[str, Any] = {"ok": True, "team": name, "config": str(team.config), "workers": workers}
    if backlog is not None:
        out["tasks"] = len(backlog)
    return out


def refuse_existing(team: TeamPaths) -> None:
    if os.path.lexists(team.config) and not team.shutdown.exists():
        raise OmpError(
            "team_exists",
            f"team {team.name} already exists; shut it down first: "
            f"{hint(f'team shutdown {team.name}')}",
            team=team.name,
        )


def archive_previous_run(team: TeamPaths) -> Path | None:
    """Move the last run's tasks, conversations and per-worker results aside (never deleted)
    into `runs/<shutdown time>/`, so a relaunch neither shows old results as new nor inherits
    old claims, nor counts the last run's unread leader mail as new. Workers' mail stays where it
    is."""
    if not team.shutdown.exists():
        return None
    record = fs.read_json(team.shutdown)
    stamp = record.get("shutdownAt") if isinstance(record, dict) else None
    label = str(stamp or clock.iso()).replace(":", "-")
    run = team.run(label)
    while os.path.lexists(run.dir):
        run = team.run(run.name + "+")
    team.project.ensure(run.dir)
    moves: list[tuple[Path, Path]] = []
    for src, dst in (
        (team.tasks_dir, run.tasks_dir),
        (team.conversations_dir, run.conversations_dir),
    ):
        if team.project.check(src):
            moves.append((src, dst))
    if team.project.check(team.workers_dir):
        for w in sorted(os.listdir(team.workers_dir)):
            if not names.is_valid_name(w) or not team.project.check(team.worker_dir(w)):
                continue
            for src, dst in zip(team.run_files(w), run.run_files(w), strict=True):
                if fs.check_entry(src, want_dir=False):
                    moves.append((src, dst))
    # The leader's mail of that run goes with it: a relaunch starts with no unread mail from the
    # previous run in the leader's count (and `omp team wait` does not wake on it at once).
    # It stays readable in runs/<time>/mailbox/. Workers' mailboxes stay where they are.
    for box in (team.mailbox(LEADER), team.mailbox_index(LEADER)):
        if team.project.check(team.mailbox_dir) and fs.check_entry(box, want_dir=False):
            moves.append((box, run.mailbox_dir / box.name))
    moves.append((team.shutdown, run.shutdown))
    for src, dst in moves:
        team.project.ensure(dst.parent)
        os.rename(src, dst)
    if (store := selected_store(team.project)) is not None:
        store.archive_run(team.name, run.name, [LEADER])  # the same, where the store keeps it
    return run.dir


def selected_store(project: StatePaths) -> Store | None:
    """The project's store when its mail and tasks are not in the files (`omp.store.select`)."""
    if not project_config.store_selected(project):
        return None
    from omp.store import select

    return select.current(project)


def ensure_stored_team(team: TeamPaths) -> None:
    """A team whose mail and tasks live in a store is known there before anything is written
    (the store refuses writes to a team it does not know: a deleted one stays deleted)."""
    if (store := selected_store(team.project)) is not None:
        store.ensure_team(team.name)


def write_state(
    team: TeamPaths, raw: dict[str, Any], task: str, *, backlog: list[dict[str, Any]] | None = None
) -> None:
    """Worker directories and tasks first, the config last: a team is visible once complete.

    The one place (with launch, which calls it) that makes a team's directory: every other
    writer creates only inside an existing one (`TeamPaths.ensure_in`), so a deleted team stays
    deleted."""
    team.project.ensure(team.dir)
    ensure_stored_team(team)
    archive_previous_run(team)
    n = len(raw["workers"])
    for i, w in enumerate(raw["workers"], start=1):
        team.ensure_in(team.worker_dir(w["name"]))
        if task:
            tasks.create(team, w["taskId"], task_description(task, i, n))
    if backlog:  # a backlog's tasks (`--tasks`), the first ones claimed for their workers
        from omp.tasks import queue

        queue.add(team, backlog, source=str(raw.get("task") or "tasks"))
    team.ensure_in(team.mailbox_dir)
    team_config.write(team, raw)
    for w in raw["workers"]:
        history.member(team, w["name"], "joined")
