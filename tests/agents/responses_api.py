"""The OpenAI Responses wire format (`POST /v1/responses`), mapped onto the chat-shaped policy.

Codex CLI 0.171 speaks only this API to a custom provider (`wire_api = "responses"`; "chat" is
refused). The request's `input` items become chat messages, so one policy serves both wires:
`message` -> its role's message (`developer` as `system`), `function_call` -> an assistant
message with one tool call, `function_call_output` -> a `tool` message. The reply streams as the
API's typed server-sent events.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from tests.agents.scripted_model import Reply


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body holding the same conversation and tools."""
    items = body.get("input")
    items = (
        [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items
    )
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    for item in items or []:
        kind = item.get("type", "message")
        if kind == "message":
            role = "system" if item.get("role") == "developer" else item.get("role", "user")
            messages.append({"role": role, "content": _text(item.get("content"))})
        elif kind == "function_call":
            fn = {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}
            call = {"id": item.get("call_id"), "type": "function", "function": fn}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            out = item.get("output")
            text = out if isinstance(out, str) else _text(out) or json.dumps(out)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    tools = [
        {"type": "function", "function": {k: t.get(k) for k in ("name", "parameters")}}
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    return {
        "model": body.get("model"),
        "stream": bool(body.get("stream")),
        "messages": messages,
        "tools": tools,
        "wire": "responses",
    }


def events(rid: str, model: str, reply: Reply, call_id: str) -> Iterator[dict[str, Any]]:
    """The typed events of one streamed response."""
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
    yield {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}
    output: list[dict[str, Any]] = []
    if reply.text:
        item = {"type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed"}
        yield {
            "type": "response.output_item.added",
            "output_index": len(output),
            "item": {**item, "status": "in_progress", "content": []},
        }
        yield {
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": len(output),
            "content_index": 0,
            "delta": reply.text,
        }
        done = {**item, "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}
        yield {"type": "response.output_item.done", "output_index": len(output), "item": done}
        output.append(done)
    if reply.tool_call is not None:
        args = json.dumps(reply.tool_call.arguments)
        item = {
            "type": "function_call",
            "id": f"fc_{rid}",
            "call_id": call_id,
            "name": reply.tool_call.name,
        }
        yield {
            "type": "response.output_item.added",
            "output_index": len(output),
            "item": {**item, "arguments": "", "status": "in_progress"},
        }
        yield {
            "type": "response.function_call_arguments.delta",
            "item_id": item["id"],
            "output_index": len(output),
            "delta": args,
        }
        done = {**item, "arguments": args, "status": "completed"}
        yield {"type": "response.output_item.done", "output_index": len(output), "item": done}
        output.append(done)
    usage = {
        "input_tokens": 10,
        "output_tokens": 10,
        "total_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    yield {
        "type": "response.completed",
        "response": {**base, "status": "completed", "output": output, "usage": usage},
    }
