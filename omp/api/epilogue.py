"""What a writing call does after its answer: a worker's heartbeat, and a monitor that runs.

Both are fail-open: the call already succeeded, and a lost heartbeat or an unstarted monitor only
delays a nudge. Neither is imported by the read-only operations.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable

    from omp.record.config import TeamConfig


def beat(cfg: TeamConfig, who: str | None) -> None:
    """A writing call by a worker is a sign of life: refresh its heartbeat (best-effort)."""
    if who is None or who not in cfg.worker_names:
        return  # the leader, or a name that is no worker: no heartbeat to refresh
    from omp.tasks import presence  # imported for a worker's calls only

    try:
        presence.touch(cfg, who)
    except Exception:
        pass  # presence never fails a call that already succeeded


def keep_monitor(cfg: TeamConfig, deferred: bool = False) -> Callable[[], None]:
    """A writing call's epilogue (after its answer is printed): make sure the project's monitor
    runs while this team still has panes to watch. A nudge left to the monitor (`deferred`)
    starts one if none runs; otherwise only a monitor that died is restarted. Cheap when it runs
    (two small reads); fail-open and bounded (`omp.monitor.ctl`, imported only when needed)."""

    def run() -> None:
        try:
            if cfg.tmux is None or os.path.lexists(cfg.files.shutdown):
                return
            if not any(cfg.pane_of(w) for w in cfg.worker_names) and not deferred:
                return
            from omp.monitor import alive

            state = alive.judge(cfg.files.project)["state"]
            if state in ("running", "starting") or (state != "dead" and not deferred):
                return
            from omp.monitor import ctl

            if deferred:
                ctl.ensure_monitor(cfg.paths.project.root)
            else:
                ctl.revive(cfg.paths.project)
        except Exception:
            pass  # the call already succeeded; a monitor is best effort

    return run
