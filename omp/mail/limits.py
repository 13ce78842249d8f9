"""Loop breaking, counted in the files.

Each `omp team api` call is a fresh process, so nothing is remembered in memory: the limits are
checked against what the recipient's mailbox already holds, under its lock. Two agents that answer
each other forever hit `duplicate`, `rate_limited` or `mailbox_full` instead of flooding panes.

Per project, `.omp/config.toml` may set any of:

    [limits]
    duplicate_window_seconds = 10
    rate_window_seconds = 30
    rate_max_messages = 8
    mailbox_max_unread = 50
"""

from __future__ import annotations

import time

from omp import clock
from omp.errors import OmpError
from omp.mail import mailbox
from omp.store import project_config

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from omp.store.layout import ProjectFiles
    from omp.store.paths import StatePaths

# Answers that always fit a full mailbox: refusing them would leave a requester waiting forever.
ANSWER_EVENTS = frozenset({"task_done", "task_fail", "task_clarify_res", "task_cancel_ack"})


class Limits:
    """The `[limits]` table (a plain class: `typing` stays off a send's way); `_field_defaults`
    gives each field's default and type, as a NamedTuple's does (`project_config`)."""

    __slots__ = (
        "duplicate_window_seconds",
        "mailbox_max_unread",
        "rate_max_messages",
        "rate_window_seconds",
    )
    _field_defaults: ClassVar[dict[str, float]] = {
        "duplicate_window_seconds": 10.0,
        "rate_window_seconds": 30.0,
        "rate_max_messages": 8,
        "mailbox_max_unread": 50,
    }

    def __init__(
        self,
        duplicate_window_seconds: float = 10.0,
        rate_window_seconds: float = 30.0,
        rate_max_messages: int = 8,
        mailbox_max_unread: int = 50,
    ) -> None:
        self.duplicate_window_seconds = duplicate_window_seconds
        self.rate_window_seconds = rate_window_seconds
        self.rate_max_messages = rate_max_messages
        self.mailbox_max_unread = mailbox_max_unread

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limits) and all(
            getattr(self, k) == getattr(other, k) for k in self._field_defaults
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._field_defaults)
        return f"Limits({fields})"


def load(project: StatePaths | ProjectFiles) -> Limits:
    return project_config.load_section(project, "limits", Limits, "limit")


def checker(
    limits: Limits, sender: str, recipient: str, record: dict[str, Any], *, is_answer: bool
) -> mailbox.Check:
    """A check for `Mailbox.append_messages` enforcing the limits for one new message."""

    def check(view: mailbox.View) -> None:
        if not is_answer and view.unread >= limits.mailbox_max_unread:
            raise OmpError(
                "mailbox_full",
                f"{recipient} has {view.unread} unread messages (limit "
                f"{limits.mailbox_max_unread}); wait until they read their mail",
                limit=limits.mailbox_max_unread,
                unread=view.unread,
            )
        # A window of 0 s turns its check off (stamps are whole milliseconds: compared, it would
        # still catch a message of the same millisecond).
        dup_window, rate_window = limits.duplicate_window_seconds, limits.rate_window_seconds
        if dup_window <= 0 and rate_window <= 0:
            return
        now = time.time()
        recent = [
            m for m in view.recent(now - max(dup_window, rate_window)) if m.get("from") == sender
        ]
        for m in recent if dup_window > 0 else ():
            if m.get("body") == record["body"] and _since(m, now - dup_window):
                raise OmpError(
                    "duplicate",
                    f"the same message went to {recipient} {now - _stamp(m):.0f}s ago "
                    f"(identical messages are refused for {dup_window:g}s)",
                    limit_seconds=dup_window,
                    messageId=m.get("id"),
                )
        in_window = [m for m in recent if _since(m, now - rate_window)] if rate_window > 0 else []
        if len(in_window) >= limits.rate_max_messages:
            stamps = sorted(_stamp(m) for m in in_window)  # parsed only for the refusal
            oldest = stamps[-limits.rate_max_messages]
            wait = max(1, int(oldest + rate_window - now) + 1)
            raise OmpError(
                "rate_limited",
                f"{sender} sent {len(in_window)} messages to {recipient} in the last "
                f"{rate_window:g}s (limit {limits.rate_max_messages}); wait {wait}s",
                limit=limits.rate_max_messages,
                window_seconds=rate_window,
                retry_after_seconds=wait,
            )

    return check


def _since(m: dict[str, Any], since: float) -> bool:
    """Was `m` stamped at or after `since`? (A stamp that is no time counts as long ago.)"""
    return bool(clock.at_or_after(m.get("timestamp", ""), since))


def _stamp(m: dict[str, Any]) -> float:
    return clock.parse_iso(str(m.get("timestamp", ""))) or 0.0
