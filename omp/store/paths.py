"""Where state lives: `<root>/.omp/state/`, the root found from the working directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.store import fs
from omp.store.names import recipient_name, team_name, worker_name

ROOT_MARKERS = (".omp", ".git")


def find_root(cwd: str | os.PathLike[str] | None = None) -> Path:
    """`OMP_ROOT`, else the nearest ancestor of `cwd` holding `.omp/` or `.git`, else `cwd`."""
    env = os.environ.get("OMP_ROOT")
    if env:
        root = Path(env)
        if not root.is_absolute():
            root = Path.cwd() / root
        if not root.is_dir():
            raise OmpError("invalid_root", f"OMP_ROOT={env} is not a directory")
        return root
    start = Path(cwd) if cwd is not None else Path.cwd()
    if not start.is_absolute():
        start = Path.cwd() / start
    if not start.is_dir():
        raise OmpError("invalid_input", f"cwd {start} is not a directory")
    start = start.resolve()
    for d in (start, *start.parents):
        if any(os.path.lexists(d / m) for m in ROOT_MARKERS):
            return d
    return start


class StatePaths(NamedTuple):
    """Paths of one project's state tree. Nothing here touches the disk.

    NamedTuples, not dataclasses, on the `omp team api` path: `dataclasses` imports `inspect`,
    about 10 ms of every call.
    """

    root: Path

    @property
    def omp_dir(self) -> Path:
        return self.root / ".omp"

    @property
    def state(self) -> Path:
        return self.omp_dir / "state"

    @property
    def teams(self) -> Path:
        return self.state / "team"

    @property
    def monitor(self) -> Path:
        return self.state / "team-monitor"

    def mode_file(self, mode: str) -> Path:
        return self.state / f"{mode}.json"

    def team(self, name: str) -> TeamPaths:
        return TeamPaths(self, self.teams / team_name(name))

    def ensure(self, path: Path) -> Path:
        """Create a directory under the root, fail-closed (see `fs.ensure_dir`)."""
        return fs.ensure_dir(path, base=self.root)

    def check(self, path: Path) -> bool:
        """Check every existing directory from the root down to `path` (inclusive)."""
        cur = self.root
        for part in path.relative_to(self.root).parts:
            cur = cur / part
            if not fs.check_entry(cur, want_dir=True):
                return False
        return True


class TeamPaths(NamedTuple):
    project: StatePaths
    dir: Path

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def config(self) -> Path:
        return self.dir / "config.json"

    @property
    def shutdown(self) -> Path:
        return self.dir / "shutdown.json"

    @property
    def mailbox_dir(self) -> Path:
        return self.dir / "mailbox"

    @property
    def tasks_dir(self) -> Path:
        return self.dir / "tasks"

    @property
    def workers_dir(self) -> Path:
        return self.dir / "workers"

    def mailbox(self, recipient: str) -> Path:
        return self.mailbox_dir / f"{recipient_name(recipient)}.jsonl"

    def mailbox_index(self, recipient: str) -> Path:
        return self.mailbox_dir / f".{recipient_name(recipient)}.index.json"

    def nudge_record(self, recipient: str) -> Path:
        """The last nudge typed into the recipient's pane and the unread ids it covered."""
        return self.mailbox_dir / f".{recipient_name(recipient)}.nudge.json"

    def worker_dir(self, worker: str) -> Path:
        return self.workers_dir / worker_name(worker)

    def task(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.json"

    def task_lock(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.lock"
