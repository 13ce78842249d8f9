"""Notifications queued outside the monitor's scan: a check's verdict (`verifying`) and a merge
conflict (`omp.team.merging`). Queued like the monitor's own (`omp.notify.emit`, keyed once), and
delivered by the monitor's next scan, or at once when no monitor is running to deliver them
(a team shut down, `OMP_NO_MONITOR`): a person relying on `--notify` hears of it either way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omp.store.paths import StatePaths


def queue(project: StatePaths, event: Mapping[str, Any], key: str) -> bool:
    """Queue `event` once per `key`, and deliver what is queued when no monitor runs. Never
    raises: a notification never changes what the caller did. True when it was queued now."""
    from omp import notify
    from omp.monitor.alive import judge

    try:
        queued = notify.emit(project, event, key=key)
        if judge(project)["state"] != "running":
            notify.deliver(project)
        return queued
    except Exception:
        return False
