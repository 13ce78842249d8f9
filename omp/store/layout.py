"""The state tree's layout as strings: where a project's root is, and the files of a project and
of a team that the per-call commands read and write.

The per-call commands (`omp team api ...`, `omp hook stop`) are a fresh process each, hundreds a
session, so their way imports no `pathlib` (see CONTRIBUTING.md, "The per-call layer"): a
`ProjectFiles` and a `TeamFiles` are plain strings joined with `os.path`. The rest of omp holds
`omp.store.paths.StatePaths`/`TeamPaths` (pathlib), whose `files` are these, and whose paths of
the same files come from here: each name is spelled once. Nothing here touches the disk except
`check`, `ensure`, `ensure_in`, `pinned` and `verify`, which say so.
"""

from __future__ import annotations

import os

from omp.errors import OmpError
from omp.store import fs
from omp.store.names import recipient_name, team_name, worker_name
from omp.store.tree import OMP_DIR, STATE_DIR, below

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.store.tree import StrPath

ROOT_MARKERS = (OMP_DIR, ".git")
PROJECT_MARK = "omp-project"  # in a worker's worktree's git directory: the project it serves
_MARK_MAX = 4096
_LOCK, _JSON, _JSONL = ".lock", ".json", ".jsonl"

join = os.path.join


def find_root(cwd: StrPath | None = None) -> str:
    """`OMP_ROOT`, else the nearest ancestor of `cwd` holding `.omp/` or `.git` (for a worker's
    git worktree: the project it serves, see `_worker_project`), else `cwd`. Absolute."""
    env = os.environ.get("OMP_ROOT")
    if env:
        root = env if os.path.isabs(env) else join(os.getcwd(), env)
        if not os.path.isdir(root):
            raise OmpError("invalid_root", f"OMP_ROOT={env} is not a directory")
        return _lexical(root)
    start = os.getcwd() if cwd is None else os.fspath(cwd)
    if not os.path.isabs(start):
        start = join(os.getcwd(), start)
    if not os.path.isdir(start):
        raise OmpError("invalid_input", f"cwd {_lexical(start)} is not a directory")
    d = os.path.realpath(start)
    while True:
        if any(os.path.lexists(join(d, m)) for m in ROOT_MARKERS):
            return _worker_project(d) or d
        up = os.path.dirname(d)
        if up == d:
            return os.path.realpath(start)
        d = up


def _lexical(path: str) -> str:
    """`path` as `pathlib` spells it: no `.` component, no doubled or trailing separator."""
    absolute, parts = path.startswith(os.sep), [p for p in path.split(os.sep) if p not in ("", ".")]
    return (os.sep if absolute else "") + os.sep.join(parts) or "."


def _worker_project(d: str) -> str | None:
    """The project a worker's git worktree at `d` belongs to, or None. Launch writes the
    project's root into the worktree's own git directory (`.git/worktrees/<name>/omp-project`,
    which git keeps out of every checkout and removes with the worktree), so omp run inside a
    worker's worktree without OMP_ROOT (a person who `cd`s there, a shell that dropped it) finds
    the team's state rather than a state tree of its own. A `.omp/` there without a state tree
    is the project's committed settings (`.omp/config.toml`, checked out in every worktree), not
    a project of its own. Cheap: two small reads, no git."""
    dot_git = join(d, ".git")
    if (
        os.path.lexists(join(d, OMP_DIR, STATE_DIR))
        or not os.path.isfile(dot_git)
        or os.path.islink(dot_git)
    ):
        return None
    try:
        with open(dot_git, "rb") as f:
            head = f.read(_MARK_MAX).decode("utf-8", "replace").strip()
        if not head.startswith("gitdir:"):
            return None
        gitdir = join(d, head[len("gitdir:") :].strip())  # an absolute one replaces `d`
        with open(join(gitdir, PROJECT_MARK), "rb") as f:
            root = _lexical(f.read(_MARK_MAX).decode("utf-8", "replace").strip())
    except OSError:
        return None
    if (
        os.path.isabs(root)
        and os.path.isdir(root)
        and any(os.path.lexists(join(root, m)) for m in ROOT_MARKERS)
    ):
        return root
    return None


class ProjectFiles:
    """One project's state tree, as strings (see the module docstring)."""

    __slots__ = ("root",)

    def __init__(self, root: StrPath) -> None:
        self.root = os.fspath(root)

    @property
    def files(self) -> ProjectFiles:
        return self

    @property
    def omp_dir(self) -> str:
        return join(self.root, OMP_DIR)

    @property
    def state(self) -> str:
        return join(self.root, OMP_DIR, STATE_DIR)

    @property
    def teams(self) -> str:
        return join(self.state, "team")

    @property
    def config_toml(self) -> str:
        return join(self.omp_dir, "config.toml")

    def mode_file(self, mode: str) -> str:
        return join(self.state, f"{mode}{_JSON}")

    @property
    def monitor(self) -> str:
        return join(self.state, "team-monitor")

    @property
    def monitor_owner(self) -> str:
        return join(self.monitor, "owner.lock")

    @property
    def monitor_status(self) -> str:
        return join(self.monitor, "status.json")

    def team(self, name: str) -> TeamFiles:
        return TeamFiles(self, join(self.teams, team_name(name)))

    def check(self, path: StrPath) -> bool:
        """Check every existing directory from the root down to `path` (inclusive): False as
        soon as one is missing; `unsafe_path` for a symlinked, foreign or widened one."""
        cur = self.root
        for part in below(path, self.root):
            cur = join(cur, part)
            if not fs.check_entry(cur, want_dir=True):
                return False
        return True

    def ensure(self, path: StrPath) -> str:
        """Create a directory under the root, fail-closed (see `fs.ensure_dir`)."""
        return os.fspath(fs.ensure_dir(path, base=self.root))


class TeamFiles:
    """One team's directory (or one archived run of it), as strings. `ident` pins one team: the
    (device, inode) of its directory when its config was loaded; see `omp.store.paths.TeamPaths`,
    which holds the same and hands these out as its `files`."""

    __slots__ = ("dir", "ident", "project")

    def __init__(
        self, project: ProjectFiles, directory: StrPath, ident: tuple[int, int] | None = None
    ) -> None:
        self.project = project
        self.dir = os.fspath(directory)
        self.ident = ident

    @property
    def files(self) -> TeamFiles:
        return self

    @property
    def name(self) -> str:
        return os.path.basename(self.dir)

    # ---- the team's identity on disk ------------------------------------------------------

    def pinned(self) -> TeamFiles:
        """These paths, pinned to the directory that is there now (see `ident`)."""
        st = os.lstat(self.dir)
        return TeamFiles(self.project, self.dir, (st.st_dev, st.st_ino))

    def gone(self) -> OmpError:
        return OmpError(
            "unknown_team",
            f"team {self.name} was deleted (or deleted and made again) while this call ran; "
            "nothing was written",
            team=self.name,
        )

    def verify(self) -> None:
        """`unknown_team` unless the team's directory is still there and, when pinned, is still
        the directory the config was loaded from. Writers call it holding their file's lock."""
        try:
            st = os.lstat(self.dir)
        except FileNotFoundError:
            raise self.gone() from None
        if self.ident is not None and (st.st_dev, st.st_ino) != self.ident:
            raise self.gone()

    def ensure_in(self, path: StrPath) -> str:
        """Create a directory inside this team's directory, which must exist: a team deleted
        meanwhile stays deleted (`unknown_team`), its directory is never made again here."""
        if not self.project.check(self.dir):
            raise self.gone()
        try:
            return os.fspath(fs.ensure_dir(path, base=self.dir))
        except OmpError:
            self.verify()  # the team went away under us: say that, not a storage error
            raise

    # ---- its files ------------------------------------------------------------------------

    @property
    def config(self) -> str:
        return join(self.dir, "config.json")

    @property
    def events(self) -> str:
        return join(self.dir, "events.jsonl")

    @property
    def shutdown(self) -> str:
        return join(self.dir, "shutdown.json")

    @property
    def conversations_dir(self) -> str:
        return join(self.dir, "conversations")

    @property
    def mailbox_dir(self) -> str:
        return join(self.dir, "mailbox")

    def mailbox(self, recipient: str) -> str:
        return join(self.mailbox_dir, f"{recipient_name(recipient)}{_JSONL}")

    def mailbox_index(self, recipient: str) -> str:
        return join(self.mailbox_dir, f".{recipient_name(recipient)}.index{_JSON}")

    def nudge_record(self, recipient: str) -> str:
        """The last nudge typed into the recipient's pane and the unread ids it covered."""
        return join(self.mailbox_dir, f".{recipient_name(recipient)}.nudge{_JSON}")

    @property
    def tasks_dir(self) -> str:
        return join(self.dir, "tasks")

    def task(self, task_id: str) -> str:
        return join(self.tasks_dir, f"{task_id}{_JSON}")

    def task_lock(self, task_id: str) -> str:
        return join(self.tasks_dir, f"{task_id}{_LOCK}")

    @property
    def tasks_guard(self) -> str:
        """The flock serialising every change of the team's tasks."""
        return join(self.tasks_dir, ".guard")

    @property
    def workers_dir(self) -> str:
        return join(self.dir, "workers")

    def worker_dir(self, worker: str) -> str:
        return join(self.workers_dir, worker_name(worker))

    def outbox(self, worker: str) -> str:
        return join(self.worker_dir(worker), "outbox.jsonl")

    def heartbeat(self, worker: str) -> str:
        return join(self.worker_dir(worker), "heartbeat.json")

    def session(self, worker: str) -> str:
        """The worker agent's own session (`{agent, sessionId, transcriptPath, cwd, updatedAt}`),
        recorded by the stop hook; `omp team resume` resumes it."""
        return join(self.worker_dir(worker), "session.json")


def task_id_of_lock(name: str) -> str | None:
    """The task id a `tasks/` entry named `name` locks, or None if it is no lock file."""
    return name[: -len(_LOCK)] if name.endswith(_LOCK) else None


def task_id_of_record(name: str) -> str | None:
    """The task id of a `tasks/` or `conversations/` record named `name`, or None (a hidden
    file such as the summary, a lock, anything else)."""
    return None if name.startswith(".") or not name.endswith(_JSON) else name[: -len(_JSON)]
