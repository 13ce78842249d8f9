"""One error type and one exit-code table for the whole CLI.

Exit codes: 0 ok, 1 the operation was refused or failed, 2 bad input or usage, 3 internal error,
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_BROKEN_PIPE = 141  # the reader of its output went away (`| head`): nothing said

# Every error code omp reports, and the exit code it carries: the one registry. docs/errors.md's
# error table lists exactly these (tests/test_docs.py checks both ways), and every
# `OmpError(...)` in omp names one of them, including codes chosen at run time (`launch_failed`).
CODES: dict[str, int] = {
    "usage": EXIT_USAGE,
    "invalid_input": EXIT_USAGE,
    "invalid_json": EXIT_USAGE,
    "unknown_command": EXIT_USAGE,
    "invalid_team_name": EXIT_USAGE,
    "invalid_recipient_name": EXIT_USAGE,
    "invalid_worker_name": EXIT_USAGE,
    "invalid_task_id": EXIT_USAGE,
    "body_too_large": EXIT_USAGE,
    "self_send": EXIT_USAGE,
    "invalid_event": EXIT_USAGE,
    "reserved_event": EXIT_USAGE,
    "invalid_detail": EXIT_USAGE,
    "input_not_found": EXIT_USAGE,
    "input_unreadable": EXIT_USAGE,
    "invalid_cursor": EXIT_USAGE,
    "unknown_team": EXIT_REFUSED,
    "unknown_recipient": EXIT_REFUSED,
    "unknown_sender": EXIT_REFUSED,
    "broadcast_failed": EXIT_REFUSED,
    "unknown_worker": EXIT_REFUSED,
    "sender_mismatch": EXIT_REFUSED,
    "stale_generation": EXIT_REFUSED,
    "worker_not_allowed": EXIT_REFUSED,
    "worker_alive": EXIT_REFUSED,
    "worker_removed": EXIT_REFUSED,
    "duplicate": EXIT_REFUSED,
    "rate_limited": EXIT_REFUSED,
    "mailbox_full": EXIT_REFUSED,
    "message_not_found": EXIT_REFUSED,
    "task_not_found": EXIT_REFUSED,
    "task_not_pending": EXIT_REFUSED,
    "claim_race": EXIT_REFUSED,
    "claim_token_mismatch": EXIT_REFUSED,
    "not_task_owner": EXIT_REFUSED,
    "status_mismatch": EXIT_REFUSED,
    "invalid_transition": EXIT_REFUSED,
    "unknown_task": EXIT_REFUSED,
    "not_task_party": EXIT_REFUSED,
    "task_closed": EXIT_REFUSED,
    "stale_revision": EXIT_REFUSED,
    "corrupt_record": EXIT_REFUSED,
    "corrupt_state": EXIT_REFUSED,
    "team_exists": EXIT_REFUSED,
    "team_shut_down": EXIT_REFUSED,
    "team_gone": EXIT_REFUSED,
    "add_worker_failed": EXIT_REFUSED,
    "team_headless": EXIT_REFUSED,
    "worktree_missing": EXIT_REFUSED,
    "resume_failed": EXIT_REFUSED,
    "team_alive": EXIT_REFUSED,
    "unread_mail": EXIT_REFUSED,
    "session_exists": EXIT_REFUSED,
    "unknown_agent": EXIT_REFUSED,
    "agent_not_found": EXIT_REFUSED,
    "tmux_not_found": EXIT_REFUSED,
    "tmux_error": EXIT_REFUSED,
    "launch_blocked": EXIT_REFUSED,
    "launch_timeout": EXIT_REFUSED,
    "launch_worker_exited": EXIT_REFUSED,
    "launch_failed": EXIT_REFUSED,
    "pane_mismatch": EXIT_REFUSED,
    "invalid_text": EXIT_REFUSED,
    "text_too_long": EXIT_REFUSED,
    "invalid_key": EXIT_REFUSED,
    "no_active_loop": EXIT_REFUSED,
    "invalid_config": EXIT_REFUSED,
    "invalid_task": EXIT_REFUSED,
    "invalid_tasks": EXIT_USAGE,
    "task_blocked": EXIT_REFUSED,
    "wrong_agent": EXIT_REFUSED,
    "task_limit": EXIT_REFUSED,
    "invalid_agents_file": EXIT_REFUSED,
    "invalid_root": EXIT_REFUSED,
    "unsafe_path": EXIT_REFUSED,
    "storage_error": EXIT_REFUSED,
    "skill_changed": EXIT_REFUSED,
    "hook_changed": EXIT_REFUSED,
    "invalid_hook_config": EXIT_REFUSED,
    "skills_missing": EXIT_REFUSED,
    "doctor_failed": EXIT_REFUSED,
    "git_not_found": EXIT_REFUSED,
    "git_failed": EXIT_REFUSED,
    "git_too_old": EXIT_REFUSED,
    "not_a_git_repo": EXIT_REFUSED,
    "invalid_branch": EXIT_USAGE,
    "unknown_revision": EXIT_REFUSED,
    "worktree_exists": EXIT_REFUSED,
    "carry_failed": EXIT_REFUSED,
    "leader_dirty": EXIT_REFUSED,
    "detached_head": EXIT_REFUSED,
    "unmerged_work": EXIT_REFUSED,
    "branch_checked_out": EXIT_REFUSED,
    "uncommitted_changes": EXIT_REFUSED,
    "wrong_branch": EXIT_REFUSED,
    "merge_conflict": EXIT_REFUSED,
    "verify_failed": EXIT_REFUSED,
    "target_moved": EXIT_REFUSED,
    "no_prompt": EXIT_REFUSED,
    "prompt_changed": EXIT_REFUSED,
    "prompt_unanswerable": EXIT_REFUSED,
    "unknown_choice": EXIT_USAGE,
    "not_answered": EXIT_REFUSED,
    "board_not_installed": EXIT_REFUSED,
    "board_unavailable": EXIT_REFUSED,
    "target_busy": EXIT_REFUSED,
    "signing_failed": EXIT_REFUSED,
    "nothing_committed": EXIT_REFUSED,
    "no_task_worker": EXIT_REFUSED,
    # the store interface (omp/store/backend.py) and its Redis backend
    "invalid_store": EXIT_REFUSED,
    "store_unavailable": EXIT_REFUSED,
    "store_error": EXIT_REFUSED,
    "stale_fence": EXIT_REFUSED,
    "task_exists": EXIT_REFUSED,
    # workers on other hosts (omp/tmux/ssh.py)
    "host_unreachable": EXIT_REFUSED,
    "remote_failed": EXIT_REFUSED,
    "store_required": EXIT_REFUSED,
    "internal": EXIT_INTERNAL,
}

# Codes meaning "the input itself is wrong" (exit 2); every other code is a refusal (exit 1).
USAGE_CODES = frozenset(c for c, rc in CODES.items() if rc == EXIT_USAGE)


class OmpError(Exception):
    """A foreseeable failure: a stable code, one line for a person, optional detail fields."""

    def __init__(self, code: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail

    @property
    def exit_code(self) -> int:
        return CODES.get(self.code, EXIT_REFUSED)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "error": self.code, "message": self.message}
        out.update(self.detail)
        return out
