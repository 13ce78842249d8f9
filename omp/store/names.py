"""Names that become path components. Checked before any file is touched."""

from __future__ import annotations

import re

from omp.errors import OmpError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TASK_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
LEADER = "leader"


def is_valid_name(name: object) -> bool:
    return isinstance(name, str) and name not in (".", "..") and NAME_RE.fullmatch(name) is not None


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
    if not isinstance(value, str) or TASK_ID_RE.fullmatch(value) is None:
        raise OmpError(
            "invalid_task_id",
            f"invalid task id {_shown(value)!r}: use 1-64 letters, digits, '_' or '-'",
        )
    return value
