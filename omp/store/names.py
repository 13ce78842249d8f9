"""Names that become path components, checked before any file is touched; and the words of a
task's record (its statuses, the moves a claimant may make, the claimant's check), said once for
the files (`omp.tasks.tasks`) and every store (`omp.store.backend`)."""

from __future__ import annotations

from omp.errors import OmpError

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import TypeGuard

# Checked with str methods, not regular expressions: a name is checked on every `omp team api`
# call, and compiling the two patterns cost ~0.3 ms a process. The patterns they stand for,
# pinned by tests/store/test_names_paths.py: a name `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, a task id
# `[A-Za-z0-9_-]{1,64}`.
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
NAME_CHARS = _NAME_CHARS = ALNUM + "._-"
_TASK_ID_CHARS = ALNUM + "_-"
MAX_NAME = 64
LEADER = "leader"


def is_word(value: object, chars: str, max_len: int) -> TypeGuard[str]:
    """`[A-Za-z0-9][<chars>]{0,max_len-1}` (`chars` holding ALNUM), checked with str methods."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= max_len
        and value[0] in ALNUM
        and not value.strip(chars)  # nothing left: every character is one of them
    )


def is_valid_name(name: object) -> bool:
    return is_word(name, _NAME_CHARS, MAX_NAME)


def is_task_id(value: object) -> TypeGuard[str]:
    """A task id: 1-64 letters, digits, '_' or '-' (ASCII)."""
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and not value.strip(_TASK_ID_CHARS)


def _shown(name: object) -> str:
    text = repr(name) if not isinstance(name, str) else name
    return text if len(text) <= 80 else text[:77] + "..."


def check_name(name: object, code: str, what: str) -> str:
    if not is_valid_name(name):
        raise OmpError(
            code,
            f"invalid {what} {_shown(name)!r}: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            name=name if isinstance(name, str) else None,
        )
    assert isinstance(name, str)
    return name


def team_name(name: object) -> str:
    return check_name(name, "invalid_team_name", "team name")


def recipient_name(name: object) -> str:
    return check_name(name, "invalid_recipient_name", "recipient name")


def worker_name(name: object) -> str:
    return check_name(name, "invalid_worker_name", "worker name")


def task_id(value: object) -> str:
    if not is_task_id(value):
        raise OmpError(
            "invalid_task_id",
            f"invalid task id {_shown(value)!r}: use 1-64 letters, digits, '_' or '-'",
        )
    return value


# ---- a task's statuses and its claimant ------------------------------------------------------

STATUSES = (
    "pending", "in_progress", "verifying", "completed", "failed", "interrupted", "cancelled"
)  # fmt: skip
# `cancelled`: a backlog task the leader took off (`omp.tasks.queue.cancel`)
TERMINAL = frozenset({"completed", "failed", "interrupted", "cancelled"})
# What a claimant's move may do; pending -> in_progress happens only through a claim, which
# hands out the token.
MOVES = {"in_progress": frozenset({"completed", "failed", "interrupted"})}


def check_statuses(*statuses: str) -> None:
    for s in statuses:
        if s not in STATUSES:
            raise OmpError(
                "invalid_input", f"unknown status {s!r}; statuses: {', '.join(STATUSES)}"
            )


def check_move(expect: str, to: str) -> None:
    if to not in MOVES.get(expect, ()):
        allowed = ", ".join(f"{a} -> {b}" for a, bs in MOVES.items() for b in sorted(bs))
        raise OmpError(
            "invalid_transition", f"cannot move a task from {expect} to {to}; allowed: {allowed}"
        )


def check_claimant(
    task: dict[str, object], tid: str, worker: str | None, token: str | None
) -> None:
    """Only its claimant moves a task (`worker` None: the leader), and only with the claim
    token claim-task handed out."""
    owner = task.get("owner")
    if worker is not None and isinstance(owner, str) and owner and owner != worker:
        raise OmpError(
            "not_task_owner",
            f"task {tid} was claimed by {owner}, not {worker}; only its claimant moves it",
            task_id=tid,
            owner=owner,
        )
    held = task.get("claimToken")
    if held and held != token:
        raise OmpError(
            "claim_token_mismatch",
            f"task {tid}: claim_token does not match; pass the claimToken that claim-task "
            "returned to you",
        )
