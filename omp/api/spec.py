"""The declared shape of `omp team api`: each operation's input fields (kind, required) and reply.

One declaration per operation (`Operation`, listed in `omp.api.operations.OPERATIONS`) gives:
- the input checks, run in the declared order before the operation touches anything
  (`Operation.read`), each kind by one checker (`KINDS`);
- the reply type, a TypedDict of `omp.api.doc` named by the declaration (its keys, and
  which are optional, are the documented output);
- the one-line summaries of `omp team api --help` and the table in docs/commands.md, built by
  `omp.api.doc` (tests/api/test_api_spec.py compares the table with that page).

This module is on the per-call layer (CONTRIBUTING.md): plain classes with `__slots__`, the
team as strings (`omp.store.layout`); what only documents lives in `omp.api.doc`, imported for
`--help` and tests.
"""

from __future__ import annotations

from omp.errors import OmpError
from omp.store import names
from omp.store.layout import ProjectFiles, TeamFiles, find_root

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Generic, TypeVar

    R = TypeVar("R")

    class _Generic(Generic[R]):
        pass
else:

    class _Generic:  # `Reply[X]` is for mypy: at run time a plain class, no `typing`
        __slots__ = ()

        def __class_getitem__(cls, item: object) -> type:
            return cls


MAX_BODY = 32 * 1024
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000

Result = dict[str, "Any"]
# An operation's checked input: each declared field's value (None for an absent optional one),
# `team_name` resolved to the team's paths.
Args = dict[str, "Any"]


class Reply(_Generic["R"]):
    """An operation's result, plus work to do only after the result was printed."""

    __slots__ = ("after", "result")

    def __init__(self, result: R, after: list[Callable[[], None]] | None = None) -> None:
        self.result = result
        self.after = after if after is not None else []


# ---- input kinds: one checker each ----------------------------------------------------------


def text_field(inp: Result, key: str, *, required: bool = True) -> str | None:
    val = inp.get(key)
    if val is None:
        if required:
            raise OmpError("invalid_input", f"missing field {key!r}", field=key)
        return None
    if val == "" and required:
        raise OmpError("invalid_input", f"empty {key}: {key!r} must not be empty", field=key)
    if not isinstance(val, str):
        raise OmpError(
            "invalid_input", f"field {key!r} must be a string, got {type(val).__name__}", field=key
        )
    return val


def task_id_field(inp: Result, key: str = "task_id", required: bool = True) -> str:
    """`task_id` as a string; an integral JSON number (`3`, `3.0`) is the same id (`"3"`)."""
    val = inp.get(key)
    if isinstance(val, int) and not isinstance(val, bool) and val >= 0:
        inp = {**inp, key: str(val)}
    elif isinstance(val, float) and val.is_integer() and val >= 0:
        inp = {**inp, key: str(int(val))}
    return names.task_id(text_field(inp, key))


def team_field(inp: Result, key: str = "team_name", required: bool = True) -> TeamFiles:
    """The team named by `team_name`, in the project found from `cwd` (or the working directory)."""
    name = names.team_name(text_field(inp, key))
    cwd = text_field(inp, "cwd", required=False)
    return ProjectFiles(find_root(cwd)).team(name)


def recipient_field(inp: Result, key: str, required: bool = True) -> str | None:
    """A worker's or the leader's name (its shape; membership is the operation's check)."""
    val = text_field(inp, key, required=required)
    if val is not None:
        names.recipient_name(val)
    return val


def body_field(inp: Result, key: str = "body", required: bool = True) -> str:
    body = text_field(inp, key)
    assert body is not None
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY:
        raise OmpError(
            "body_too_large",
            f"body is {size} bytes of UTF-8, over the {MAX_BODY}-byte limit; write the content "
            "to a file in the project and send its path instead",
            size=size,
            limit=MAX_BODY,
        )
    return body


def limit_field(inp: Result, key: str = "limit", required: bool = False) -> int:
    val = inp.get(key, DEFAULT_LIMIT)
    if isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= MAX_LIMIT:
        raise OmpError("invalid_input", f"limit must be an integer from 0 to {MAX_LIMIT}")
    return val


def flag_field(inp: Result, key: str, required: bool = False) -> bool:
    val = inp.get(key, False)
    if not isinstance(val, bool):
        raise OmpError("invalid_input", f"field {key!r} must be true or false", field=key)
    return val


def raw_field(inp: Result, key: str, required: bool = False) -> Any:
    """Passed on as given: checked by the operation (event fields: `omp.conversations.events`)."""
    return inp.get(key)


def _text(inp: Result, key: str, required: bool = True) -> str | None:
    return text_field(inp, key, required=required)


KINDS: dict[str, Callable[[Result, str, bool], Any]] = {
    "team": team_field,
    "text": _text,
    "recipient": recipient_field,
    "body": body_field,
    "task_id": task_id_field,
    "limit": limit_field,
    "flag": flag_field,
    "raw": raw_field,
    # a string the operation checks itself (`text_field`) once the team is loaded, so that a
    # missing team is reported before it, as it always was
    "late_text": raw_field,
}


# ---- operations -----------------------------------------------------------------------------


class Field:
    """One input field: its name, its kind (a key of `KINDS`), whether it must be given."""

    __slots__ = ("kind", "name", "required")

    def __init__(self, name: str, kind: str = "text", required: bool = True) -> None:
        assert kind in KINDS, kind
        self.name = name
        self.kind = kind
        self.required = required


TEAM = Field("team_name", "team")


class Operation:
    """One `omp team api` subcommand, declared once: called with the raw JSON input, it checks
    every declared field in order, then runs. `run` sees only checked values (`Args`)."""

    __slots__ = ("fields", "name", "note", "read_only", "reply", "run")

    def __init__(
        self,
        name: str,
        run: Callable[[Args], Reply[Any]],
        fields: tuple[Field, ...],
        reply: str,
        note: str = "",
        *,
        read_only: bool = False,
    ) -> None:
        self.name = name
        self.run = run
        self.fields = fields
        self.reply = reply
        self.note = note
        self.read_only = read_only

    def read(self, inp: Result) -> Args:
        return {f.name: KINDS[f.kind](inp, f.name, f.required) for f in self.fields}

    def __call__(self, inp: Result) -> Reply[Any]:
        return self.run(self.read(inp))
