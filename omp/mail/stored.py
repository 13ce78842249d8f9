"""A mailbox kept in the project's store (`OMP_STORE`, `[store] url`: `omp.store.select`), behind
the same methods as the file's `omp.mail.mailbox.Mailbox`, which hands over to this when a store
is selected. Every omp process of the project (the leader, the monitor, each worker, on any host)
then reads and writes one mailbox: the store's (`omp.store.backend`).

What the file mailbox keeps beside it (its index, the byte-offset cursor) the store keeps itself
(an undelivered set per mailbox); receipts are records appended after the message, never a
rewrite, as in the files. A send's limits see the mailbox where no other send slips in (WATCH on
Redis), as under the file's flock.
"""

from __future__ import annotations

from omp.store import select

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

    from omp.store.backend import Check, Store
    from omp.store.layout import TeamFiles


class StoredMailbox:
    """One recipient's mailbox in the store."""

    def __init__(self, team: TeamFiles, recipient: str) -> None:
        store = select.current(team.project)
        assert store is not None  # only made when a store is selected
        self.store: Store = store
        self.team = team.name
        self.recipient = recipient

    def undelivered(self) -> tuple[list[dict[str, Any]], int]:
        return self.store.undelivered(self.team, self.recipient), 0

    def unread_count(self) -> int:
        return self.store.unread(self.team, self.recipient)

    def listing(
        self, *, undelivered_only: bool, limit: int
    ) -> tuple[list[dict[str, Any]], int, int]:
        """As `Mailbox.listing`: (newest `limit` oldest first, how many left out, bad lines)."""
        if undelivered_only:
            msgs = self.store.undelivered(self.team, self.recipient)
            shown = msgs[-limit:] if limit > 0 else []
            return shown, len(msgs) - len(shown), 0
        shown, total = self.store.newest(self.team, self.recipient, limit)
        return shown, max(0, total - len(shown)), 0

    def append_messages(self, records: list[dict[str, Any]], check: Check | None) -> int:
        self.store.send(self.team, self.recipient, records, check=check)
        return self.store.unread(self.team, self.recipient)

    def mark(self, message_ids: list[str]) -> dict[str, str | None]:
        return self.store.mark_delivered(self.team, self.recipient, message_ids)
