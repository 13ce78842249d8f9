"""Where state lives: `<root>/.omp/state/`, the root found from the working directory.

The one map of the tree: every file and directory name of it is spelled here and nowhere else.
The names are shared with the TypeScript tool (and pinned by the `.omp-example/` tests): keep
them as they are.

    .omp/config.toml  agents.toml | agents.json
    .omp/state/<mode>.json
    .omp/state/tmux-locks/pane-<server>-<pane>.lock
    .omp/state/locks/<name>.json .<name>.flock  (leased locks: `omp.store.filestore`)
    .omp/state/hooks/                       (the stop hook's memory, `lock`, `hook.log`)
    .omp/state/hooks/workers/               (how the stop hook reaches worker panes: a Copilot
                                             plugin, Claude Code settings)
    .omp/state/team-monitor/owner.lock status.json events.jsonl events.lock restarts.json
    .omp/state/team-monitor/targets/<id>.json (+ <id>.lock)
    .omp/state/team-monitor/usage/<team>.json (the usage index: `omp.monitor.usage`)
    .omp/state/team/<team>/config.json shutdown.json events.jsonl .members.lock
        budget.json .budget.lock             (token budgets crossed: `omp.record.budget`)
        mailbox/<recipient>.jsonl .<recipient>.index.json .<recipient>.nudge.json
        tasks/<id>.json <id>.lock .guard
        tasks/<id>.verify/verify.json verify.log verify.lock   (a completion's check)
        merges/<time>-<worker>.log           (`omp team merge`'s check of a merged result)
        conversations/<id>.json .open.json
        workers/<worker>/inbox.md result.md outbox.jsonl .outbox-offset heartbeat.json
            session.json (the agent's own session, from the stop hook) resume.md
        runs/<shutdown time>/                (a past run: laid out as a team directory)
    .omp/state/team/.tomb-<kind>~<team>~<random>   (an interrupted removal)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.store import fs
from omp.store.names import recipient_name, team_name, worker_name
from omp.store.tree import OMP_DIR, STATE_DIR, in_state_tree

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
__all__ = ["in_state_tree"]  # the test for the private part of the tree, named with the map

ROOT_MARKERS = (OMP_DIR, ".git")
TOMB_PREFIX = ".tomb-"
_LOCK, _JSON, _JSONL = ".lock", ".json", ".jsonl"


def _stem(name: str, suffix: str) -> str | None:
    return name[: -len(suffix)] if name.endswith(suffix) else None


def task_id_of_lock(name: str) -> str | None:
    """The task id a `tasks/` entry named `name` locks, or None if it is no lock file."""
    return _stem(name, _LOCK)


def recipient_of_mailbox(name: str) -> str | None:
    """The recipient a `mailbox/` entry named `name` holds mail for (unvalidated), or None."""
    return _stem(name, _JSONL)


def task_id_of_record(name: str) -> str | None:
    """The task id of a `tasks/` or `conversations/` record named `name`, or None (a hidden
    file such as the summary, a lock, anything else)."""
    return None if name.startswith(".") else _stem(name, _JSON)


def is_hook_file(name: str, kind: str) -> bool:
    """True for a `hooks/` memory file of `kind` (see `StatePaths.hook_file`)."""
    return name.startswith(f"{kind}-") and name.endswith(_JSON)


def target_id_of(name: str) -> str | None:
    """The monitor target id of a `targets/` tracker file named `name`, or None (its lock)."""
    tid, dot, ext = name.partition(".")
    return tid if dot and ext == "json" else None


def worker_of_inbox(path: Path) -> tuple[str | None, str | None]:
    """(team, worker) from `.../team/<team>/workers/<worker>/inbox.md`, where they fit."""
    parts = path.parts
    if len(parts) >= 5 and parts[-3] == "workers" and parts[-5] == "team":
        return parts[-4], parts[-2]
    return None, None


def pane_lock(lock_dir: Path, server_tag: str, pane_id: str) -> Path:
    """The flock file serialising typing into one pane of one tmux server, in `tmux-locks/`
    (`lock_dir`: callers and tests hand in the directory)."""
    return lock_dir / f"pane-{server_tag}-{pane_id.lstrip('%')}{_LOCK}"


INBOX = "inbox.md"  # agents are pointed at it by name (the demo agent finds it in a prompt)
RESUME_INBOX = "resume.md"  # what `omp team resume` tells a restarted worker (found the same way)


def find_root(cwd: str | os.PathLike[str] | None = None) -> Path:
    """`OMP_ROOT`, else the nearest ancestor of `cwd` holding `.omp/` or `.git` (for a worker's
    git worktree: the project it serves, see `_worker_project`), else `cwd`."""
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
            return _worker_project(d) or d
    return start


PROJECT_MARK = "omp-project"  # in a worker's worktree's git directory: the project it serves
_MARK_MAX = 4096


def _worker_project(d: Path) -> Path | None:
    """The project a worker's git worktree at `d` belongs to, or None. Launch writes the
    project's root into the worktree's own git directory (`.git/worktrees/<name>/omp-project`,
    which git keeps out of every checkout and removes with the worktree), so omp run inside a
    worker's worktree without OMP_ROOT (a person who `cd`s there, a shell that dropped it) finds
    the team's state rather than a state tree of its own. A `.omp/` there without a state tree
    is the project's committed settings (`.omp/config.toml`, checked out in every worktree), not
    a project of its own. Cheap: two small reads, no git."""
    dot_git = d / ".git"
    if (
        os.path.lexists(d / OMP_DIR / STATE_DIR)
        or not os.path.isfile(dot_git)
        or os.path.islink(dot_git)
    ):
        return None
    try:
        with open(dot_git, "rb") as f:
            head = f.read(_MARK_MAX).decode("utf-8", "replace").strip()
        if not head.startswith("gitdir:"):
            return None
        gitdir = Path(head[len("gitdir:") :].strip())
        gitdir = gitdir if gitdir.is_absolute() else d / gitdir
        with open(gitdir / PROJECT_MARK, "rb") as f:
            root = Path(f.read(_MARK_MAX).decode("utf-8", "replace").strip())
    except OSError:
        return None
    if (
        root.is_absolute()
        and root.is_dir()
        and any(os.path.lexists(root / m) for m in ROOT_MARKERS)
    ):
        return root
    return None


class StatePaths(NamedTuple):
    """Paths of one project's state tree. Nothing here touches the disk.

    NamedTuples, not dataclasses, on the `omp team api` path: `dataclasses` imports `inspect`,
    about 10 ms of every call.
    """

    root: Path

    @property
    def omp_dir(self) -> Path:
        return self.root / OMP_DIR

    @property
    def state(self) -> Path:
        return self.omp_dir / STATE_DIR

    @property
    def teams(self) -> Path:
        return self.state / "team"

    @property
    def config_toml(self) -> Path:
        return self.omp_dir / "config.toml"

    @property
    def agents_toml(self) -> Path:
        return self.omp_dir / "agents.toml"

    @property
    def agents_json(self) -> Path:
        return self.omp_dir / "agents.json"

    @property
    def crash_logs(self) -> Path:
        """Crash logs of internal errors (`omp.cli.crash`): `crash-<time>-<pid>.log`."""
        return self.omp_dir / "logs"

    @property
    def tmux_locks(self) -> Path:
        """Per-pane typing locks (`pane_lock`, keyed by the tmux client's `lock_path`)."""
        return self.state / "tmux-locks"

    @property
    def hooks(self) -> Path:
        """The stop hook's memory: `<kind>-<session>.json`, its `lock` and `hook.log`."""
        return self.state / "hooks"

    def hook_file(self, kind: str, session: str) -> Path:
        return self.hooks / f"{kind}-{session}.json"

    @property
    def hook_lock(self) -> Path:
        return self.hooks / "lock"

    @property
    def worker_hooks(self) -> Path:
        """The files that bring omp's stop hook to worker panes (`omp.stophook.workers`)."""
        return self.hooks / "workers"

    @property
    def hook_log(self) -> Path:
        return self.hooks / "hook.log"

    @property
    def hooks_made(self) -> Path:
        """The agents' hook files whose `hooks` object `omp hooks install` made (it had none):
        `--uninstall` removes that object again once it is left empty, and only then."""
        return self.hooks / "made-hooks.json"

    @property
    def hook_log_rotated(self) -> Path:
        return self.hooks / "hook.log.1"

    @property
    def monitor(self) -> Path:
        return self.state / "team-monitor"

    @property
    def monitor_owner(self) -> Path:
        return self.monitor / "owner.lock"

    @property
    def monitor_status(self) -> Path:
        return self.monitor / "status.json"

    @property
    def monitor_events(self) -> Path:
        return self.monitor / "events.jsonl"

    @property
    def monitor_events_lock(self) -> Path:
        return self.monitor / "events.lock"

    @property
    def monitor_restarts(self) -> Path:
        return self.monitor / "restarts.json"

    @property
    def monitor_targets(self) -> Path:
        return self.monitor / "targets"

    def monitor_target(self, target_id: str) -> Path:
        return self.monitor_targets / f"{target_id}{_JSON}"

    def monitor_target_lock(self, target_id: str) -> Path:
        return self.monitor_targets / f"{target_id}{_LOCK}"

    @property
    def monitor_usage(self) -> Path:
        """The usage index the monitor keeps (`omp.monitor.usage`), one file per team."""
        return self.monitor / "usage"

    def monitor_usage_index(self, team: str) -> Path:
        return self.monitor_usage / f"{team_name(team)}{_JSON}"

    @property
    def notify(self) -> Path:
        """Notifications (`omp.notify`): the outbox, how far it was delivered, the log."""
        return self.state / "notify"

    @property
    def notify_outbox(self) -> Path:
        return self.notify / "outbox.jsonl"

    @property
    def notify_delivered(self) -> Path:
        return self.notify / "delivered.json"

    @property
    def notify_lock(self) -> Path:
        return self.notify / "deliver.lock"

    @property
    def notify_log(self) -> Path:
        return self.notify / "notify.log"

    @property
    def store_locks(self) -> Path:
        """Leased locks with fencing tokens (`omp.store.filestore`): `<name>.json` and its
        `.<name>.flock`."""
        return self.state / "locks"

    def mode_file(self, mode: str) -> Path:
        return self.state / f"{mode}{_JSON}"

    def tombstone(self, kind: str, team: str, tag: str) -> Path:
        """`.tomb-<kind>~<team>~<tag>`: `~` is in no team name, so the team is recoverable."""
        return self.teams / f"{TOMB_PREFIX}{kind}~{team}~{tag}"

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
    """Paths of one team's directory, or of one archived run of it (`run`), laid out alike.

    `ident` pins one team: the (device, inode) of its directory when its config was loaded
    (`omp.record.config.load`). A team deleted and made again under the same name is another
    directory: a writer holding the old one's paths is refused (`verify`), never writes into
    the new team, and never brings the old one back (`ensure_in` creates nothing above the
    team's own directory; only launch and create make that).
    """

    project: StatePaths
    dir: Path
    ident: tuple[int, int] | None = None

    def pinned(self) -> TeamPaths:
        """These paths, pinned to the directory that is there now (see `ident`)."""
        st = os.lstat(self.dir)
        return self._replace(ident=(st.st_dev, st.st_ino))

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

    def ensure_in(self, path: Path) -> Path:
        """Create a directory inside this team's directory, which must exist: a team deleted
        meanwhile stays deleted (`unknown_team`), its directory is never made again here."""
        if not self.project.check(self.dir):
            raise self.gone()
        try:
            return fs.ensure_dir(path, base=self.dir)
        except OmpError:
            self.verify()  # the team went away under us: say that, not a storage error
            raise

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def config(self) -> Path:
        return self.dir / "config.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def members_lock(self) -> Path:
        return self.dir / ".members.lock"

    @property
    def runs_dir(self) -> Path:
        return self.dir / "runs"

    def run(self, label: str) -> TeamPaths:
        """An archived run, `runs/<label>/`, laid out as a team directory."""
        return TeamPaths(self.project, self.runs_dir / label)

    @property
    def conversations_dir(self) -> Path:
        return self.dir / "conversations"

    def conversation(self, task_id: str) -> Path:
        return self.conversations_dir / f"{task_id}{_JSON}"

    @property
    def open_conversations(self) -> Path:
        """The summary of the open conversations."""
        return self.conversations_dir / ".open.json"

    @property
    def shutdown(self) -> Path:
        return self.dir / "shutdown.json"

    @property
    def budget(self) -> Path:
        """The token budgets this launch of the team crossed (`omp.record.budget`)."""
        return self.dir / "budget.json"

    @property
    def budget_lock(self) -> Path:
        return self.dir / ".budget.lock"

    @property
    def attention(self) -> Path:
        """Who needs a person now, as the monitor last saw it (`omp.monitor.attention`)."""
        return self.dir / "attention.json"

    @property
    def attention_lock(self) -> Path:
        return self.dir / ".attention.lock"

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
        return self.mailbox_dir / f"{recipient_name(recipient)}{_JSONL}"

    def mailbox_index(self, recipient: str) -> Path:
        return self.mailbox_dir / f".{recipient_name(recipient)}.index.json"

    def nudge_record(self, recipient: str) -> Path:
        """The last nudge typed into the recipient's pane and the unread ids it covered."""
        return self.mailbox_dir / f".{recipient_name(recipient)}.nudge.json"

    def worker_dir(self, worker: str) -> Path:
        return self.workers_dir / worker_name(worker)

    def inbox(self, worker: str) -> Path:
        return self.worker_dir(worker) / INBOX

    def result(self, worker: str) -> Path:
        return self.worker_dir(worker) / "result.md"

    def session(self, worker: str) -> Path:
        """The worker agent's own session (`{agent, sessionId, transcriptPath, cwd, updatedAt}`),
        recorded by the stop hook; `omp team resume` resumes it."""
        return self.worker_dir(worker) / "session.json"

    def resume_inbox(self, worker: str) -> Path:
        return self.worker_dir(worker) / RESUME_INBOX

    def outbox(self, worker: str) -> Path:
        return self.worker_dir(worker) / "outbox.jsonl"

    def heartbeat(self, worker: str) -> Path:
        return self.worker_dir(worker) / "heartbeat.json"

    def run_files(self, worker: str) -> tuple[Path, ...]:
        """What one run of a team leaves per worker; a relaunch under the same name starts
        without them (they move to the run's archive)."""
        wdir = self.worker_dir(worker)
        return (
            self.result(worker),
            self.outbox(worker),
            wdir / ".outbox-offset",
            self.heartbeat(worker),
            # a relaunch under the same name starts new conversations, never the last run's
            self.session(worker),
            self.resume_inbox(worker),
        )

    def task(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}{_JSON}"

    def task_lock(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}{_LOCK}"

    def verify_dir(self, task_id: str) -> Path:
        """The check of a completion (`--verify`): its state, log and lock, beside the task."""
        return self.tasks_dir / f"{task_id}.verify"

    @property
    def merges_dir(self) -> Path:
        """The logs of `omp team merge`'s checks of merged results."""
        return self.dir / "merges"

    @property
    def tasks_guard(self) -> Path:
        """The flock serialising every change of the team's tasks."""
        return self.tasks_dir / ".guard"
