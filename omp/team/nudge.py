"""The unread-count nudge typed into a recipient's pane after a message is persisted.

The line carries a count and a fixed command, never the body: peer text never reaches a terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omp.invocation import team_command
from omp.team.bootstrap import api_command
from omp.team.config import TeamConfig

if TYPE_CHECKING:
    from omp.team.delivery import Outcome


def read_command(omp: str, team: str, recipient: str) -> str:
    """The shell line that reads (and marks) `recipient`'s unread mail, as an agent runs it."""
    return api_command(omp, "mailbox-read", team_name=team, worker=recipient)


def nudge_text(team: str, recipient: str, unread: int, omp: str) -> str:
    return f"You have {unread} new message(s). Read them: {read_command(omp, team, recipient)}"


def nudge(cfg: TeamConfig, recipient: str) -> Outcome:
    """After a message is stored: type the unread-count line if the recipient's pane is idle,
    else leave it to the monitor (`omp.team.delivery`). Never raises."""
    from omp.team.delivery import nudge_now

    return nudge_now(cfg, recipient, team_command(cfg.raw))
