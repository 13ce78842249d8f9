"""One writer per CLI: the stdout that makes it take another turn, or lets it stop.

All four obey `{"decision":"block","reason":...}` on stdout with exit 0 (Copilot ignores exit 2,
so omp never relies on it). A block without a non-empty reason is ignored by Copilot and is a
hook failure for Codex, so `block` refuses an empty reason. To let the agent stop: `{}` for
Copilot, Claude Code and Gemini, and empty stdout for Codex (its documented allow; its output
schema takes `decision` only as "block").

pi's extension (omp.stophook.pi_extension) reads the same shapes. When a loop ends, Claude Code,
Codex, Gemini and pi also get a `systemMessage` (shown to the person,
not to the model) saying why; Copilot gets `{}` (its hook output has no such field).
"""

from __future__ import annotations

import json


def block(cli: str, reason: str) -> str:
    if not reason.strip():
        raise ValueError("a block needs a non-empty reason")
    return json.dumps({"decision": "block", "reason": reason}, ensure_ascii=False)


def allow(cli: str, note: str | None = None) -> str:
    if note and cli in ("claude", "codex", "gemini", "pi"):
        return json.dumps({"systemMessage": note}, ensure_ascii=False)
    return "" if cli == "codex" else "{}"


def render(cli: str, action: str, reason: str | None, note: str | None = None) -> str:
    if action == "block" and reason:
        return block(cli, reason)
    return allow(cli, note)
