"""The unread-count nudge typed into a recipient's pane after a message is persisted.

The line carries a count and a fixed command, never the body: peer text never reaches a terminal.
"""

from __future__ import annotations

import json

from omp.store.names import LEADER
from omp.team.config import TeamConfig


def nudge_text(team: str, recipient: str, unread: int) -> str:
    arg = json.dumps({"team_name": team, "worker": recipient}, separators=(",", ":"))
    return (
        f"You have {unread} new message(s). Read them: "
        f"omp team api mailbox-read --input '{arg}' --json"
    )


def nudge_target(cfg: TeamConfig, recipient: str) -> str | None:
    """The pane to nudge for `recipient`, or None (headless, shut down, or an un-nudged leader)."""
    if cfg.paths.shutdown.exists():
        return None
    if recipient == LEADER and cfg.raw.get("nudgeLeader") is not True:
        return None
    return cfg.pane_of(recipient)


def nudge(cfg: TeamConfig, recipient: str, unread: int) -> bool:
    """Type the nudge line into the recipient's pane; True only if the submit was verified."""
    pane = nudge_target(cfg, recipient)
    if pane is None or unread <= 0:
        return False
    from omp.team.panes import deliver_line  # imports tmux (and libtmux) only when there is a pane

    return deliver_line(cfg, recipient, pane, nudge_text(cfg.name, recipient, unread))
