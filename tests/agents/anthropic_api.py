"""The Anthropic Messages wire format (`POST /v1/messages`, streamed), mapped onto the chat-shaped
policy.

Claude Code 2.1.328 talks to it with `ANTHROPIC_BASE_URL=http://127.0.0.1:<port>` (no `/v1`) and
any `ANTHROPIC_AUTH_TOKEN` or `ANTHROPIC_API_KEY`; pi does too with `"api": "anthropic-messages"`.
Its requests, as captured (../shared/fixtures/agent-clis-offline/requests/):

- `system` is a string or a list of text blocks; `messages` alternate `user` and `assistant`,
  each content a string or a list of blocks: `text`, `tool_use` {id, name, input} (assistant),
  `tool_result` {tool_use_id, content} (user), `thinking`, `image`;
- the list may hold `role: "system"` messages too (Claude Code's environment notes, and after a
  Stop-hook block the note naming the hook), sometimes as the last message: a trailing one is
  dropped, so a policy still finds the user's message or the tool's result last;
- tools are `{name, description, input_schema}` (Claude Code's shell tool is `Bash` with
  `{command, description}`).

Side requests that are not the conversation get answers here, never from the policy: a session
title (`output_config.format` with a JSON schema: a JSON object that fits it), and a permission
classifier's question (only in Claude Code's "auto" mode: a small `max_tokens`, expecting
`<block>...</block>`).

The reply streams as the API's typed events: `message_start`, per block `content_block_start`,
`content_block_delta` (`text_delta`, or `input_json_delta` for a tool's input),
`content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.agents.scripted_model import Reply

TITLE = "omp worker"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type", "text") == "text"
        )
    return ""


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body holding the same conversation and tools."""
    messages: list[dict[str, Any]] = []
    system = _text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role, content = msg.get("role"), msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role == "assistant":
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input"))},
                }
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_use"
            ]
            out: dict[str, Any] = {"role": "assistant", "content": _text(blocks)}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
            continue
        if role == "system":
            messages.append({"role": "system", "content": _text(blocks)})
            continue
        # A user message: tool results first (they answer the previous assistant message),
        # then its text, if any.
        for b in blocks:
            if isinstance(b, dict) and b.get("type") == "tool_result":
                result = b.get("content")
                text = result if isinstance(result, str) else _text(result)
                messages.append(
                    {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": text}
                )
        text = _text([b for b in blocks if isinstance(b, dict) and b.get("type") != "tool_result"])
        if text:
            messages.append({"role": "user", "content": text})
    while len(messages) > 1 and messages[-1]["role"] == "system":
        messages.pop()  # Claude Code's trailing notes: the policy must see the real last turn
    tools = [
        {
            "type": "function",
            "function": {"name": t.get("name"), "parameters": t.get("input_schema") or {}},
        }
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("name")
    ]
    return {
        "model": body.get("model"),
        "stream": bool(body.get("stream")),
        "messages": messages,
        "tools": tools,
        "wire": "anthropic",
    }


def _fill(schema: Any) -> Any:
    """A value that fits a JSON schema (the few shapes a title or summary request uses)."""
    if not isinstance(schema, dict):
        return TITLE
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: _fill(v) for k, v in props.items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    return TITLE


def side_answer(body: dict[str, Any]) -> str | None:
    """The text that answers a side request (not the conversation), or None for a real turn."""
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return json.dumps(_fill(fmt.get("schema")))
    if not body.get("tools") and "<block>" in json.dumps(body.get("system") or ""):
        return "<block>no</block>"  # an auto-mode classifier: nothing is risky here
    return None


def events(mid: str, model: str, reply: Reply, call_id: str) -> Iterator[dict[str, Any]]:
    """The typed events of one streamed message."""
    usage = {"input_tokens": 10, "output_tokens": 1}
    yield {
        "type": "message_start",
        "message": {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }
    index = 0
    if reply.text:
        yield {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }
        for i in range(0, len(reply.text), 16):
            delta = {"type": "text_delta", "text": reply.text[i : i + 16]}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
        index += 1
    call = reply.tool_call
    if call is not None:
        block = {"type": "tool_use", "id": f"toolu_{call_id}", "name": call.name, "input": {}}
        yield {"type": "content_block_start", "index": index, "content_block": block}
        args = json.dumps(call.arguments)
        for i in range(0, len(args), 24):
            delta = {"type": "input_json_delta", "partial_json": args[i : i + 24]}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 10},
    }
    yield {"type": "message_stop"}
