"""The Gemini API wire format (`POST /v1beta/models/<m>:streamGenerateContent?alt=sse`, also
`:generateContent` and `:countTokens`), mapped onto the chat-shaped policy.

Gemini CLI talks to it with `GOOGLE_GEMINI_BASE_URL` and any `GEMINI_API_KEY`. `contents` become
chat messages: `user` text parts a user message, `model` parts an assistant message (its
`functionCall`s as tool calls), `functionResponse` parts tool messages. Calls and responses carry
no ids on this wire: the n-th call pairs with the n-th response.
"""

from __future__ import annotations

import json
from typing import Any

from tests.agents.scripted_model import Reply


def _output(resp: Any) -> str:
    if isinstance(resp, dict):
        for key in ("output", "llmContent", "error"):
            if isinstance(resp.get(key), str):
                return str(resp[key])
    return json.dumps(resp)


def chat_body(body: dict[str, Any], stream: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or {}
    sys_text = "".join(p.get("text", "") for p in system.get("parts") or [])
    if sys_text:
        messages.append({"role": "system", "content": sys_text})
    calls = answers = 0
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        if content.get("role") == "model":
            tool_calls = []
            for p in parts:
                if "functionCall" in p:
                    fc = p["functionCall"]
                    fn = {"name": fc.get("name"), "arguments": json.dumps(fc.get("args") or {})}
                    tool_calls.append({"id": f"gcall-{calls}", "type": "function", "function": fn})
                    calls += 1
            messages.append({"role": "assistant", "content": text, "tool_calls": tool_calls})
            continue
        for p in parts:
            if "functionResponse" in p:
                out = _output(p["functionResponse"].get("response"))
                messages.append(
                    {"role": "tool", "tool_call_id": f"gcall-{answers}", "content": out}
                )
                answers += 1
        if text:
            messages.append({"role": "user", "content": text})
    tools = [
        {
            "type": "function",
            "function": {
                "name": f.get("name"),
                "parameters": f.get("parametersJsonSchema") or f.get("parameters") or {},
            },
        }
        for t in body.get("tools") or []
        for f in t.get("functionDeclarations") or []
    ]
    return {"stream": stream, "messages": messages, "tools": tools, "wire": "gemini"}


def response(model: str, reply: Reply) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    if reply.tool_call is not None:
        parts.append(
            {"functionCall": {"name": reply.tool_call.name, "args": reply.tool_call.arguments}}
        )
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": 10,
            "candidatesTokenCount": 10,
            "totalTokenCount": 20,
        },
        "modelVersion": model,
    }
