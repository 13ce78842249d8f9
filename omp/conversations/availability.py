"""Who may take a request now: each member's status (`available`, `busy`, `inactive`), from the
files, as a `task_req` (auto-rejected unless its worker is available), a `ping`'s pong, `roster`
and `omp team status` see it.

- busy: an open task conversation (its record in `omp.conversations.record`), or a claimed
  `in_progress` task (`omp.tasks.tasks`);
- inactive: `offline` presence (`omp.tasks.presence`), or a worker the sweep marked inactive (no
  `task_cancel_ack` in time) until its next own API call;
- available: otherwise.

Read-only. A team without conversations (one the TypeScript tool ran) skips loading their
machinery (`dataclasses` and `inspect`, ~8 ms of a `status`): without the directory there are none.
"""

from __future__ import annotations

import os

from omp import clock
from omp.store import project_config
from omp.store.names import LEADER
from omp.tasks import presence, tasks

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from omp.record.config import TeamConfig

STATUSES = ("available", "busy", "inactive")


class MemberState:
    __slots__ = ("busy_with", "inactive_reason", "last_seen", "name", "presence", "status")

    def __init__(
        self,
        name: str,
        presence: str,
        status: str,
        busy_with: list[str] | None = None,  # conversation ids, "task:<id>" for claims
        inactive_reason: str | None = None,
        last_seen: float | None = None,
    ) -> None:
        self.name = name
        self.presence = presence
        self.status = status
        self.busy_with = busy_with if busy_with is not None else []
        self.inactive_reason = inactive_reason
        self.last_seen = last_seen

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "presence": self.presence,
            "busyWith": self.busy_with,
            "lastSeen": clock.iso(self.last_seen) if self.last_seen is not None else None,
        }
        if self.inactive_reason:
            out["inactiveReason"] = self.inactive_reason
        return out


def member_states(
    cfg: TeamConfig,
    now: float,
    *,
    names: Iterable[str] | None = None,
    panes: Mapping[str, str] | None = None,
    task_list: list[dict[str, Any]] | None = None,
) -> dict[str, MemberState]:
    """Presence and status of members (default: every worker and the leader). Read-only."""
    team = cfg.files
    wanted = list(cfg.recipients if names is None else names)
    busy: dict[str, list[str]] = {n: [] for n in wanted}
    # no directory: none (their machinery stays unloaded), unless the store keeps them
    if os.path.lexists(team.conversations_dir) or project_config.store_selected(team.project):
        from omp.conversations import record

        for conv in record.open_conversations(cfg.paths):
            if conv.worker in busy:
                busy[conv.worker].append(conv.task_id)
    for t in tasks.list_all(team) if task_list is None else task_list:
        owner = t.get("owner")
        if t.get("status") == "in_progress" and isinstance(owner, str) and owner in busy:
            busy[owner].append(f"task:{t.get('id')}")
    out: dict[str, MemberState] = {}
    for n in wanted:
        hb = None if n == LEADER else presence.read(team, n)
        pres = presence.classify(hb, now, (panes or {}).get(n))
        reason = None
        if pres == "offline":
            status, reason = "inactive", "offline"
        elif hb is not None and hb.inactive:
            status, reason = "inactive", str(hb.inactive.get("reason", "marked inactive"))
        elif busy[n]:
            status = "busy"
        else:
            status = "available"
        out[n] = MemberState(
            n, pres, status, busy[n], reason, hb.updated_at if hb is not None else None
        )
    return out


def describe(state: MemberState, now: float) -> str:
    """One line for a pong: `worker-2: busy with <task>; live (seen 3s ago)`."""
    text = f"{state.name}: {state.status}"
    if state.status == "busy" and state.busy_with:
        text += f" with {', '.join(state.busy_with)}"
    if state.inactive_reason and state.inactive_reason != "offline":
        text += f" ({state.inactive_reason})"
    if state.presence == "unknown":
        seen = "presence not tracked" if state.name == LEADER else "not seen yet"
    elif state.last_seen is not None:
        seen = f"{state.presence} (seen {max(0, int(now - state.last_seen))}s ago)"
    else:
        seen = state.presence
    return f"{text}; {seen}"
