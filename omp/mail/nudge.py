"""The unread-count nudge typed into a recipient's pane after a message is persisted.

The line carries a count and a fixed command, never the body: peer text never reaches a terminal.
"""

from __future__ import annotations

from omp.mail.bootstrap import api_command


def read_command(omp: str, team: str, recipient: str) -> str:
    """The shell line that reads (and marks) `recipient`'s unread mail, as an agent runs it."""
    return api_command(omp, "mailbox-read", team_name=team, worker=recipient)


def nudge_text(team: str, recipient: str, unread: int, omp: str) -> str:
    return f"You have {unread} new message(s). Read them: {read_command(omp, team, recipient)}"
