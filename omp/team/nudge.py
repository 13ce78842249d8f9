"""The unread-count nudge typed into a recipient's pane after a message is persisted.

The line carries a count and a fixed command, never the body: peer text never reaches a terminal.
"""

from __future__ import annotations

from omp.invocation import team_command
from omp.store.names import LEADER
from omp.team.bootstrap import api_command
from omp.team.config import TeamConfig


def read_command(omp: str, team: str, recipient: str) -> str:
    """The shell line that reads (and marks) `recipient`'s unread mail, as an agent runs it."""
    return api_command(omp, "mailbox-read", team_name=team, worker=recipient)


def nudge_text(team: str, recipient: str, unread: int, omp: str) -> str:
    return f"You have {unread} new message(s). Read them: {read_command(omp, team, recipient)}"


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

    text = nudge_text(cfg.name, recipient, unread, team_command(cfg.raw))
    return deliver_line(cfg, recipient, pane, text)
