"""The documented side of `omp team api`: each operation's reply as a TypedDict, and the
summaries (`omp team api --help`) and docs/commands.md table built from the declarations
(`omp.api.spec.Operation`).

Imported for type checking, and at run time only to document: creating these classes costs
about 2 ms, too much for every call. No `from __future__ import annotations` here: Python 3.11
sees `NotRequired` only in evaluated annotations.
"""

import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from omp.api.spec import Operation


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
    # a message carrying an event (omp.conversations.events)
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
    next: NotRequired[dict[str, Any]]  # a backlog's next task, handed to the caller at once


class CreateTaskReply(TypedDict):
    ok: bool
    team: str
    task: dict[str, Any]  # the new task's record
    handedOver: list[dict[str, Any]]  # hand-overs it made at once (a free worker took it)


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


# ---- summaries, from the declarations --------------------------------------------------------


def inputs(op: "Operation") -> str:
    """The fields as documented: `team_name` first, then the required ones, then the optional
    ones, each group in declared order (`cwd`, which every input may carry, is said once)."""
    shown = [f for f in op.fields if f.name != "cwd"]
    shown.sort(key=lambda f: (f.kind != "team", not f.required))
    return ", ".join(f.name if f.required else f"{f.name}?" for f in shown)


def outputs(op: "Operation") -> str:
    return _keys(globals()[op.reply])


def notes(op: "Operation") -> str:
    parts = [op.note] if op.note else []
    if op.read_only:
        parts.append("read-only")
    return "; ".join(parts)


def summary(op: "Operation") -> str:
    """`{inputs} -> {outputs}: notes`, one line of `omp team api --help`."""
    said = notes(op)
    return f"{{{inputs(op)}}} -> {outputs(op)}" + (f": {said}" if said else "")


def _keys(td: type) -> str:
    """`{a, b?, c:[{...}]}` for a TypedDict: its keys in order, `?` on the optional ones, and a
    list of TypedDicts spelled out."""
    hints = typing.get_type_hints(td)
    optional: frozenset[str] = getattr(td, "__optional_keys__", frozenset())
    shown = []
    for key, hint in hints.items():
        item = f"{key}?" if key in optional else key
        args = typing.get_args(hint)
        if typing.get_origin(hint) is list and args and typing.is_typeddict(args[0]):
            item += f":[{_keys(args[0])}]"
        shown.append(item)
    return "{" + ", ".join(shown) + "}"


def readme_table(ops: Iterable["Operation"]) -> str:
    """The `omp team api` table of docs/commands.md, from the declarations."""
    rows = ["| sub | input | output | notes |", "|---|---|---|---|"]
    for op in ops:
        rows.append(f"| `{op.name}` | `{inputs(op)}` | `{outputs(op)}` | {notes(op) or '-'} |")
    return "\n".join(rows) + "\n"
