"""One thin reader per CLI's stop-hook stdin, and which CLI sent it.

Shapes (see the research note on stop hooks):
- Copilot `agentStop`: camelCase `sessionId`, `timestamp` (epoch ms), `transcriptPath`,
  `stopReason`, and snake_case `stop_hook_active`; no reply text.
- Copilot `Stop` (its VS Code-compatible form, also what a Claude hook in `.claude/settings.json`
  gets under Copilot): `hook_event_name:"Stop"`, `session_id`, `timestamp` (ISO), `stop_reason`,
  `transcript_path`; no reply text.
- Claude Code `Stop`: `session_id`, `transcript_path`, `permission_mode`, `last_assistant_message`.
- Codex `Stop`: as Claude plus `turn_id` and `model`.
- Gemini `AfterAgent`: `session_id`, `timestamp` (ISO), `prompt`, `prompt_response` (grows across
  retries of one prompt).
- pi (omp's extension, `omp.stophook.pi_extension`): `hook_event_name:"agent_end"`, then as
  Claude: `session_id`, `cwd`, `last_assistant_message`, `stop_hook_active`.

The stop's identity (`stop_id`) is what two fires of the hook for the same stop share: Copilot's
and Gemini's `timestamp` (Copilot's two spellings normalised to epoch ms, so an `agentStop` and a
`Stop` entry for one stop agree), Codex's `turn_id` plus the reply, Claude's reply alone. `exact`
says whether that identity is unique per stop (a timestamp) or only likely (a reply's digest).
"""

from __future__ import annotations

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

CLIS = ("copilot", "claude", "codex", "gemini", "pi")


class StopInput:
    """One stop as the hook reads it. The stop's identity (`stop_id`, `exact`, `stop_ms`) is
    worked out when first asked for: only a stop under an active loop needs it, and a digest
    (`hashlib`) or an ISO time (`datetime`) is not worth its imports on every stop."""

    __slots__ = (
        "_ms",
        "_parts",
        "_stamp",
        "cli",
        "cwd",
        "hook_active",
        "reply",
        "session_id",
        "transcript_path",
    )

    def __init__(
        self,
        cli: str,  # copilot | claude | codex | gemini | pi
        session_id: str | None,  # None when the payload has no usable one: never deduped
        cwd: str | None,
        transcript_path: str | None,
        reply: str | None,  # the reply text the payload carries (not Copilot's)
        hook_active: bool,
        *,
        stamp: Any = None,  # the stop's timestamp as given (Copilot, Gemini): its identity
        parts: tuple[str | None, ...] | None = None,  # else what its digest is made of
    ) -> None:
        self.cli, self.session_id, self.cwd = cli, session_id, cwd
        self.transcript_path, self.reply, self.hook_active = transcript_path, reply, hook_active
        self._stamp, self._parts = stamp, parts
        self._ms: tuple[int | None] | None = None

    @property
    def stop_ms(self) -> int | None:
        """Copilot: this stop's timestamp in epoch ms, to find it in the transcript."""
        if self._ms is None:
            self._ms = (None if self._parts is not None else epoch_ms(self._stamp),)
        return self._ms[0]

    @property
    def exact(self) -> bool:
        """`stop_id` is unique per stop (a timestamp), not a digest of the reply."""
        return self._parts is None and self.stop_ms is not None

    @property
    def stop_id(self) -> str | None:
        if self._parts is not None:
            return "r" + _digest(*self._parts)
        ms = self.stop_ms
        return None if ms is None else f"t{ms}"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def epoch_ms(value: Any) -> int | None:
    """Epoch milliseconds from an int/float or an ISO-8601 string; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if value == value and abs(value) < 1e15 else None
    if isinstance(value, str) and value.strip():
        text = value.strip()
        if text.isascii() and text.isdigit() and len(text) <= 18:
            return int(text)
        from datetime import datetime

        try:
            return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return None
    return None


def _digest(*parts: str | None) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in parts:
        h.update((p or "").encode("utf-8", "replace") + b"\0")
    return h.hexdigest()[:24]


def detect(payload: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Which CLI wrote this payload: by its shape first, by the hook's environment second."""
    event = payload.get("hook_event_name")
    if event == "agent_end":
        return "pi"
    if event == "AfterAgent" or "prompt_response" in payload:
        return "gemini"
    if "sessionId" in payload or "transcriptPath" in payload or "stopReason" in payload:
        return "copilot"
    if "turn_id" in payload:
        return "codex"
    if "last_assistant_message" in payload or "permission_mode" in payload:
        # Claude, or Codex without turn_id: Codex sets CODEX_HOME for its hooks.
        return "codex" if env.get("CODEX_HOME") else "claude"
    if "stop_reason" in payload or "timestamp" in payload or env.get("COPILOT_CLI") == "1":
        return "copilot"  # the snake_case `Stop` form Copilot sends
    if env.get("GEMINI_SESSION_ID") or env.get("GEMINI_PROJECT_DIR"):
        return "gemini"
    if env.get("CODEX_HOME"):
        return "codex"
    return "claude"


def read(payload: Mapping[str, Any], env: Mapping[str, str]) -> StopInput:
    cli = detect(payload, env)
    return _READERS[cli](payload)


def _active(payload: Mapping[str, Any]) -> bool:
    return payload.get("stop_hook_active") is True or payload.get("stopHookActive") is True


def _copilot(p: Mapping[str, Any]) -> StopInput:
    session = _str(p.get("sessionId")) or _str(p.get("session_id"))
    return StopInput(
        cli="copilot",
        session_id=session,
        cwd=_str(p.get("cwd")),
        transcript_path=_str(p.get("transcriptPath")) or _str(p.get("transcript_path")),
        reply=None,
        hook_active=_active(p),
        stamp=p.get("timestamp"),
    )


def _claude(p: Mapping[str, Any], cli: str = "claude") -> StopInput:
    reply = p.get("last_assistant_message")
    text = reply if isinstance(reply, str) else None
    return StopInput(
        cli=cli,
        session_id=_str(p.get("session_id")),
        cwd=_str(p.get("cwd")),
        transcript_path=_str(p.get("transcript_path")),
        reply=text,
        hook_active=_active(p),
        parts=(text, str(_active(p))),
    )


def _codex(p: Mapping[str, Any]) -> StopInput:
    reply = p.get("last_assistant_message")
    text = reply if isinstance(reply, str) else None
    # turn_id stays the same across the continuations of one turn: the reply tells them apart.
    return StopInput(
        cli="codex",
        session_id=_str(p.get("session_id")),
        cwd=_str(p.get("cwd")),
        transcript_path=_str(p.get("transcript_path")),
        reply=text,
        hook_active=_active(p),
        parts=(_str(p.get("turn_id")), text, str(_active(p))),
    )


def _gemini(p: Mapping[str, Any]) -> StopInput:
    reply = p.get("prompt_response")
    return StopInput(
        cli="gemini",
        session_id=_str(p.get("session_id")),
        cwd=_str(p.get("cwd")),
        transcript_path=_str(p.get("transcript_path")),
        reply=reply if isinstance(reply, str) else None,
        hook_active=_active(p),
        stamp=p.get("timestamp"),
    )


def _pi(p: Mapping[str, Any]) -> StopInput:
    return _claude(p, "pi")


_READERS = {
    "copilot": _copilot,
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "pi": _pi,
}
