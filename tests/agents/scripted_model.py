"""A stdlib-only OpenAI-compatible chat server whose answers come from a scripted policy.

Real agent CLIs (GitHub Copilot CLI with `COPILOT_PROVIDER_BASE_URL`, and anything else that
speaks chat completions) run against it on loopback, offline, with no sign-in. A policy sees the
whole conversation the CLI sent and returns the next assistant move: a text, or one tool call.

    with ScriptedModel(policy) as model:        # or the `scripted_model` pytest fixture
        env["COPILOT_PROVIDER_BASE_URL"] = model.base_url
        ...
        model.requests                          # every request, with the reply it got

Endpoints: `GET /v1/models`, `POST /v1/chat/completions` (streaming SSE or one JSON body), and
`POST /v1/responses` (the Responses API, streamed; see responses_api.py) for Codex CLI,
`POST /v1beta/models/<m>:streamGenerateContent` (gemini_api.py) for Gemini CLI, and
`POST /v1/messages` (the Anthropic Messages API, streamed; anthropic_api.py, with
`/v1/messages/count_tokens`) for Claude Code. pi speaks chat completions. Side requests a CLI
makes for itself (a session title) are answered without the policy and kept in `side`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

MODEL_NAME = "scripted-model"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """The next assistant move: `text`, or one `tool_call` (with optional `text` before it).

    `delay`: seconds the model "thinks" (a streamed reply opens at once and its first token
    comes that much later; a plain one answers that much later): the CLI stays busy.
    `status`: an HTTP error instead (429 a rate limit, 401 a bad key, 500 a server error), with
    `text` as its message and `x-should-retry: false` (the vendors' SDKs then do not retry).
    """

    text: str = ""
    tool_call: ToolCall | None = None
    delay: float = 0.0
    status: int = 200


@dataclass
class Chat:
    """One chat-completions request as the CLI sent it."""

    body: dict[str, Any]
    received: float  # time.time()

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return msgs if isinstance(msgs, list) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return tools if isinstance(tools, list) else []

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


class Policy(Protocol):
    """Plays one role: the conversation in, the next move out. Called from server threads."""

    def reply(self, chat: Chat) -> Reply: ...


@dataclass
class Exchange:
    """A recorded request and the reply it got (None while the policy runs, or if it failed)."""

    chat: Chat
    reply: Reply | None = None
    error: str | None = None


def message_text(msg: dict[str, Any]) -> str:
    """The text of a chat message: a string, or the text parts of a content list."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


class ScriptedModel:
    """The server; `policy` may be swapped while it runs. `requests` grows with every chat."""

    def __init__(self, policy: Policy, *, model: str = MODEL_NAME) -> None:
        self.policy = policy
        self.model = model
        self.requests: list[Exchange] = []
        self.unrouted: list[tuple[str, bytes]] = []  # requests to paths it does not serve
        self.side: list[tuple[dict[str, Any], str]] = []  # (body, answer) of side requests
        self._lock = threading.Lock()
        self._seq = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        # polled every 50 ms for `shutdown` (the default 0.5 s is what every close would wait)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`, what `COPILOT_PROVIDER_BASE_URL` takes."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def tool_calls(self) -> list[tuple[float, ToolCall]]:
        """Every tool call served so far, with the time its request arrived."""
        with self._lock:
            done = list(self.requests)
        return [(x.chat.received, x.reply.tool_call) for x in done if x.reply and x.reply.tool_call]

    def dump(self) -> str:
        """The recorded traffic, short, for a failing test's message."""
        with self._lock:
            done = list(self.requests)
        out = []
        for i, x in enumerate(done):
            last = x.chat.messages[-1] if x.chat.messages else {}
            said = message_text(last)[-200:].replace("\n", "\\n")
            got = x.error or (repr(x.reply) if x.reply else "(pending)")
            out.append(f"#{i} {last.get('role')}: {said!r}\n    -> {got[:300]}")
        return "\n".join(out)

    # ---- serving -----------------------------------------------------------------------------

    def _answer(self, chat: Chat) -> tuple[Exchange, Reply]:
        ex = Exchange(chat)
        with self._lock:
            self.requests.append(ex)
        try:
            reply = self.policy.reply(chat)
        except Exception as exc:  # the CLI gets an error reply; the test sees why in dump()
            ex.error = f"{type(exc).__name__}: {exc}"
            raise
        ex.reply = reply
        return ex, reply

    def _next_id(self) -> str:
        with self._lock:
            self._seq += 1
            return f"{self._seq:06d}"


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the recorded requests are the log

        def do_HEAD(self) -> None:  # Claude Code's connectivity probe (`HEAD /api/hello`)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                entry = {"id": model.model, "object": "model", "created": 0, "owned_by": "omp"}
                self._json(200, {"object": "list", "data": [entry]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size)
            tail = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
            route = tail.rsplit(":", 1)[-1] if ":" in tail else tail
            if route == "countTokens":
                self._json(200, {"totalTokens": 10})
                return
            if route == "count_tokens":
                self._json(200, {"input_tokens": 10})
                return
            if route not in (
                "completions",
                "responses",
                "messages",
                "generateContent",
                "streamGenerateContent",
            ):
                model.unrouted.append((self.path, raw))
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            body = body if isinstance(body, dict) else {}
            if route == "messages":
                from tests.agents import anthropic_api

                side = anthropic_api.side_answer(body)
                if side is not None:
                    with model._lock:
                        model.side.append((body, side))
                    mid = f"msg_{model._next_id()}"
                    evs = anthropic_api.events(mid, model.model, Reply(text=side), "")
                    self._sse(list(evs), 0, typed=True)
                    return
                body = anthropic_api.chat_body(body)
            elif route == "responses":
                from tests.agents import responses_api

                body = responses_api.chat_body(body)
            elif route.endswith("enerateContent"):
                from tests.agents import gemini_api

                body = gemini_api.chat_body(body, stream=route.startswith("stream"))
            chat = Chat(body, time.time())
            try:
                ex, reply = model._answer(chat)
            except Exception as exc:
                self._json(500, {"error": {"message": f"policy failed: {exc}"}})
                return
            cid = f"chatcmpl-{model._next_id()}"
            call_id = f"call_{model._next_id()}"
            try:
                if reply.status != 200:
                    time.sleep(reply.delay)
                    self._json(reply.status, _error(reply), {"x-should-retry": "false"})
                elif route == "responses":
                    from tests.agents import responses_api

                    evs = responses_api.events(cid, model.model, reply, call_id)
                    self._sse(list(evs), reply.delay, typed=True)
                elif route == "messages":
                    from tests.agents import anthropic_api

                    evs = anthropic_api.events(f"msg_{cid}", model.model, reply, call_id)
                    self._sse(list(evs), reply.delay, typed=True)
                elif route.endswith("enerateContent"):
                    from tests.agents import gemini_api

                    doc = gemini_api.response(model.model, reply)
                    time.sleep(reply.delay)
                    if chat.stream:
                        self._sse([doc], 0, typed=None)
                    else:
                        self._json(200, doc)
                elif chat.stream:
                    self._sse(list(_chunks(cid, model.model, reply, call_id)), reply.delay)
                else:
                    time.sleep(reply.delay)
                    self._json(200, _completion(cid, model.model, reply, call_id))
            except OSError:  # the CLI dropped the request (cancelled, or gave up waiting)
                with model._lock:
                    ex.error = "client disconnected"

        def _json(
            self, status: int, doc: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(
            self, chunks: list[dict[str, Any]], delay: float, typed: bool | None = False
        ) -> None:
            """`typed`: Responses events (`event:` lines); None: Gemini (no `[DONE]`)."""
            # The stream opens at once; a delayed reply then thinks before its first token.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for i, chunk in enumerate(chunks):
                if i == 1 and delay > 0:
                    self.wfile.flush()
                    time.sleep(delay)
                event = f"event: {chunk['type']}\n" if typed else ""
                self.wfile.write(f"{event}data: {json.dumps(chunk)}\n\n".encode())
            if typed is False:
                self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


# The error body every wire understands enough of: Anthropic reads `error.type`/`message`, OpenAI
# `error.message`/`code`, Gemini `error.code`/`status`.
_ERROR_KINDS = {
    400: ("invalid_request_error", "INVALID_ARGUMENT"),
    401: ("authentication_error", "UNAUTHENTICATED"),
    403: ("permission_error", "PERMISSION_DENIED"),
    429: ("rate_limit_error", "RESOURCE_EXHAUSTED"),
    529: ("overloaded_error", "UNAVAILABLE"),
}


def _error(reply: Reply) -> dict[str, Any]:
    kind, status = _ERROR_KINDS.get(reply.status, ("api_error", "INTERNAL"))
    message = reply.text or f"scripted error {reply.status}"
    err = {"type": kind, "message": message, "code": reply.status, "status": status}
    return {"type": "error", "error": err}


_USAGE = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i : i + size]


def _chunks(cid: str, model: str, reply: Reply, call_id: str) -> Iterator[dict[str, Any]]:
    """The SSE chunks of one streamed reply, split the way real servers split them."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.text, 16):
        yield chunk({"content": piece})
    call = reply.tool_call
    if call is not None:
        args = json.dumps(call.arguments)
        head = {"index": 0, "id": call_id, "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        for piece in _pieces(args, 24):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    last = chunk({}, "tool_calls" if call is not None else "stop")
    last["usage"] = _USAGE
    yield last


def _completion(cid: str, model: str, reply: Reply, call_id: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_call is not None:
        fn = {"name": reply.tool_call.name, "arguments": json.dumps(reply.tool_call.arguments)}
        msg["tool_calls"] = [{"id": call_id, "type": "function", "function": fn}]
    finish = "tool_calls" if reply.tool_call is not None else "stop"
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": _USAGE,
    }


@dataclass
class Canned:
    """A trivial policy: says `text` to everything (for smoke tests and request logging)."""

    text: str = "ok"
    seen: list[Chat] = field(default_factory=list)

    def reply(self, chat: Chat) -> Reply:
        self.seen.append(chat)
        return Reply(text=self.text)
