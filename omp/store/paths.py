"""Where state lives: `<root>/.omp/state/`, the root found from the working directory.

The one map of the tree, as pathlib Paths: every file and directory name of it is spelled here
or, for the files the per-call commands touch, in `omp.store.layout` (the same map as strings,
which this one hands out as `files` and builds those paths from), and nowhere else.
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

from omp.store import layout
from omp.store.layout import PROJECT_MARK, ROOT_MARKERS, task_id_of_lock, task_id_of_record
from omp.store.names import team_name
from omp.store.tree import in_state_tree

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.errors import OmpError

__all__ = [  # the test for the private part of the tree, and the names of `layout`, with the map
    "PROJECT_MARK",
    "ROOT_MARKERS",
    "in_state_tree",
    "task_id_of_lock",
    "task_id_of_record",
]

TOMB_PREFIX = ".tomb-"
_LOCK, _JSON, _JSONL = ".lock", ".json", ".jsonl"


def _stem(name: str, suffix: str) -> str | None:
    return name[: -len(suffix)] if name.endswith(suffix) else None


def recipient_of_mailbox(name: str) -> str | None:
    """The recipient a `mailbox/` entry named `name` holds mail for (unvalidated), or None."""
    return _stem(name, _JSONL)


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
    """`OMP_ROOT`, else the nearest ancestor of `cwd` holding `.omp/` or `.git` (a worker's git
    worktree: the project it serves), else `cwd` (`omp.store.layout.find_root`)."""
    return Path(layout.find_root(cwd))


class StatePaths(NamedTuple):
    """Paths of one project's state tree. Nothing here touches the disk but `check` and
    `ensure`. (Not on the per-call way: that takes `files`, the same tree as strings.)"""

    root: Path

    @property
    def files(self) -> layout.ProjectFiles:
        """The same tree as strings (`omp.store.layout`): what the per-call layer takes."""
        return layout.ProjectFiles(self.root)

    @property
    def omp_dir(self) -> Path:
        return Path(self.files.omp_dir)

    @property
    def state(self) -> Path:
        return Path(self.files.state)

    @property
    def teams(self) -> Path:
        return Path(self.files.teams)

    @property
    def config_toml(self) -> Path:
        return Path(self.files.config_toml)

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
        return Path(self.files.monitor)

    @property
    def monitor_owner(self) -> Path:
        return Path(self.files.monitor_owner)

    @property
    def monitor_status(self) -> Path:
        return Path(self.files.monitor_status)

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
        return Path(self.files.mode_file(mode))

    def tombstone(self, kind: str, team: str, tag: str) -> Path:
        """`.tomb-<kind>~<team>~<tag>`: `~` is in no team name, so the team is recoverable."""
        return self.teams / f"{TOMB_PREFIX}{kind}~{team}~{tag}"

    def team(self, name: str) -> TeamPaths:
        return TeamPaths(self, self.teams / team_name(name))

    def ensure(self, path: Path) -> Path:
        """Create a directory under the root, fail-closed (see `fs.ensure_dir`)."""
        self.files.ensure(path)
        return path

    def check(self, path: Path) -> bool:
        """Check every existing directory from the root down to `path` (inclusive)."""
        return self.files.check(path)


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

    @property
    def files(self) -> layout.TeamFiles:
        """The same directory as strings (`omp.store.layout`): what the per-call layer takes."""
        return layout.TeamFiles(self.project.files, self.dir, self.ident)

    def pinned(self) -> TeamPaths:
        """These paths, pinned to the directory that is there now (see `ident`)."""
        return self._replace(ident=self.files.pinned().ident)

    def gone(self) -> OmpError:
        return self.files.gone()

    def verify(self) -> None:
        """`unknown_team` unless the team's directory is still there and, when pinned, is still
        the directory the config was loaded from. Writers call it holding their file's lock."""
        self.files.verify()

    def ensure_in(self, path: Path) -> Path:
        """Create a directory inside this team's directory, which must exist: a team deleted
        meanwhile stays deleted (`unknown_team`), its directory is never made again here."""
        self.files.ensure_in(path)
        return path

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def config(self) -> Path:
        return Path(self.files.config)

    @property
    def events(self) -> Path:
        return Path(self.files.events)

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
        return Path(self.files.conversations_dir)

    def conversation(self, task_id: str) -> Path:
        return self.conversations_dir / f"{task_id}{_JSON}"

    @property
    def open_conversations(self) -> Path:
        """The summary of the open conversations."""
        return self.conversations_dir / ".open.json"

    @property
    def shutdown(self) -> Path:
        return Path(self.files.shutdown)

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
        return Path(self.files.mailbox_dir)

    @property
    def tasks_dir(self) -> Path:
        return Path(self.files.tasks_dir)

    @property
    def workers_dir(self) -> Path:
        return Path(self.files.workers_dir)

    def mailbox(self, recipient: str) -> Path:
        return Path(self.files.mailbox(recipient))

    def mailbox_index(self, recipient: str) -> Path:
        return Path(self.files.mailbox_index(recipient))

    def nudge_record(self, recipient: str) -> Path:
        """The last nudge typed into the recipient's pane and the unread ids it covered."""
        return Path(self.files.nudge_record(recipient))

    def worker_dir(self, worker: str) -> Path:
        return Path(self.files.worker_dir(worker))

    def inbox(self, worker: str) -> Path:
        return self.worker_dir(worker) / INBOX

    def result(self, worker: str) -> Path:
        return self.worker_dir(worker) / "result.md"

    def session(self, worker: str) -> Path:
        """The worker agent's own session (`omp.store.layout.TeamFiles.session`)."""
        return Path(self.files.session(worker))

    def resume_inbox(self, worker: str) -> Path:
        return self.worker_dir(worker) / RESUME_INBOX

    def outbox(self, worker: str) -> Path:
        return Path(self.files.outbox(worker))

    def heartbeat(self, worker: str) -> Path:
        return Path(self.files.heartbeat(worker))

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
        return Path(self.files.task(task_id))

    def task_lock(self, task_id: str) -> Path:
        return Path(self.files.task_lock(task_id))

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
        return Path(self.files.tasks_guard)
