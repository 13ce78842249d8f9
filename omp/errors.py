"""One error type and one exit-code table for the whole CLI.

Exit codes: 0 ok, 1 the operation was refused or failed, 2 bad input or usage, 3 internal error.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

# Codes meaning "the input itself is wrong" (exit 2); every other code is a refusal (exit 1).
USAGE_CODES = frozenset(
    {
        "usage",
        "invalid_input",
        "invalid_json",
        "unknown_command",
        "invalid_team_name",
        "invalid_recipient_name",
        "invalid_worker_name",
        "invalid_task_id",
        "body_too_large",
        "self_send",
        "invalid_event",
        "reserved_event",
        "invalid_detail",
        "input_not_found",
        "input_unreadable",
        "invalid_cursor",
    }
)


class OmpError(Exception):
    """A foreseeable failure: a stable code, one line for a person, optional detail fields."""

    def __init__(self, code: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail

    @property
    def exit_code(self) -> int:
        return EXIT_USAGE if self.code in USAGE_CODES else EXIT_REFUSED

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "error": self.code, "message": self.message}
        out.update(self.detail)
        return out
