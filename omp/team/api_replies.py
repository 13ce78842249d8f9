"""The replies of `omp team api` operations, as TypedDicts: the documented output of each.

Imported for type checking, and at run time only to document (`omp team api --help`, the
README's table): creating these classes costs about 2 ms, too much for every call. No
`from __future__ import annotations` here: Python 3.11 sees `NotRequired` only in evaluated
annotations.
"""

from typing import Any, NotRequired, TypedDict


class NudgeFields(TypedDict):
    nudged: bool
    nudge: str  # typed | deferred | not_needed | no_pane | unreachable
    nudgeReason: NotRequired[str]


class SendReply(TypedDict):
    ok: bool
    messageId: str
    nudged: bool
    nudge: str
    nudgeReason: NotRequired[str]
    # a message carrying an event (omp.team.events)
    event: NotRequired[str]
    taskId: NotRequired[str]
    status: NotRequired[str]
    reason: NotRequired[str]
    delivered: NotRequired[bool]
    message: NotRequired[str]
    autoReplies: NotRequired[list[dict[str, str]]]
    ackError: NotRequired[str]
    pong: NotRequired[dict[str, str]]


class BroadcastReply(TypedDict):
    ok: bool
    recipients: list[str]
    messageIds: list[str]
    nudged: list[str]
    nudges: dict[str, str]
    errors: NotRequired[list[str]]


class MailReply(TypedDict):
    ok: bool
    messages: list[dict[str, Any]]
    omitted: int
    badLines: int
    notice: NotRequired[str]  # added by the CLI when `messages` is not empty


class MarkReply(TypedDict):
    ok: bool
    messageId: str
    alreadyDelivered: bool


class ClaimReply(TypedDict):
    ok: bool
    task: dict[str, Any]
    claimToken: str
    claim_token: str


class TaskReply(TypedDict):
    ok: bool
    task: dict[str, Any]


class TasksReply(TypedDict):
    ok: bool
    tasks: list[dict[str, Any]]
    broken: NotRequired[list[dict[str, Any]]]


class Member(TypedDict):
    name: str
    role: str
    status: str
    presence: str
    description: str
    busyWith: NotRequired[list[str]]
    inactiveReason: NotRequired[str]


class RosterReply(TypedDict):
    ok: bool
    team: str
    you: str | None
    members: list[Member]
