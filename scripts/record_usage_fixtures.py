#!/usr/bin/env python3
"""Record real agent CLI session files for the usage readers' tests (tests/fixtures/usage/).

    .venv/bin/python scripts/record_usage_fixtures.py [--cli copilot,claude,codex,gemini,pi]

Each CLI runs once in its non-interactive mode, in a scratch HOME and project under one temp
directory (the user's files are never touched), against a local model server that plays a fixed
script: two shell tool calls, then a final text. Every reply carries a different, known token
usage (with cache reads, cache writes and reasoning tokens where the wire has them), so a test
can tell a per-call sum from a running total and a cached token from a fresh one. A stop hook
appends each payload it receives, so the locators can be tested on what a hook really sees.
Nothing goes out: the CLIs' own network is switched off by their offline settings.

What is kept, per CLI, in tests/fixtures/usage/<cli>/:
- `home/...`: the session record at its real place under HOME (one file);
- `served.json`: every request the server answered, with the usage it reported;
- `stops.jsonl`: the stop-hook payloads (none for pi, which has no stop hook);
- `open-files.json`: the files under HOME that the CLI's processes held open while it ran
  (sampled from /proc), to learn whether a pane's process tells which record it writes.

The temp directory's path is replaced by `/home/me` everywhere (file contents and names,
including the CLIs' encoded forms of it), so the files do not depend on where they were made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.agents import gemini_api, responses_api  # noqa: E402
from tests.agents.scripted_model import Reply, ToolCall, _chunks  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "usage"
PROMPT = "Write the word usage into note.txt, then say done."
SHELL_NAMES = ("bash", "Bash", "shell", "run_shell_command", "shell_command", "exec_command")
STEPS = ("echo usage > note.txt", "cat note.txt")
SUBTASK = "SUBTASK: write the word usage into note.txt, then say done."
DELEGATES = ("Agent", "Task", "task")
FAKE_HOME = "/home/me"
NOISE = {".cache", "skills", "backups", "plugins"}  # left out of the file listings
ELIDE = 1000  # longer string values are elided from the kept records


@dataclass
class Served:
    """One answered request: the wire, whether it was a step of the script, the usage sent."""

    wire: str
    main: bool
    model: str
    usage: dict[str, int]
    reply: str


@dataclass
class Server:
    """The model: a ThreadingHTTPServer speaking chat completions, Responses, Gemini and
    Anthropic Messages. The n-th answered request reports usage n (see `usage`)."""

    sub: bool = False
    served: list[Served] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def usage(self) -> dict[str, int]:
        """Distinct per request: fresh input 1000n+11, cache read 100n, cache write 20n,
        output 10n+3 (of which reasoning n)."""
        with self.lock:
            n = len(self.served) + 1
        return {
            "input": 1000 * n + 11,
            "cache_read": 100 * n,
            "cache_write": 20 * n,
            "output": 10 * n + 3,
            "reasoning": n,
        }


class Tool(NamedTuple):
    name: str
    props: dict[str, Any]
    required: list[str]


class Turn(NamedTuple):
    """What the script needs of a request: the tools offered, the tool results so far, and the
    first user text (a subagent's conversation starts with SUBTASK)."""

    tools: list[Tool]
    results: int
    first_user: str


def _tool(name: Any, schema: Any) -> Tool:
    schema = schema if isinstance(schema, dict) else {}
    return Tool(str(name), dict(schema.get("properties") or {}), list(schema.get("required") or []))


def _shell(tools: list[Tool]) -> tuple[str, str] | None:
    for t in tools:
        if t.name in SHELL_NAMES:
            param = next((p for p in ("command", "cmd") if p in t.props), None)
            if param:
                return t.name, param
    return None


def _delegate(tools: list[Tool]) -> ToolCall | None:
    """A call of the CLI's subagent tool (Claude `Agent`/`Task`, Copilot `task`), if offered."""
    for t in tools:
        if t.name in DELEGATES and "prompt" in t.props:
            args: dict[str, Any] = {"prompt": SUBTASK}
            for name in t.required:
                if name == "prompt":
                    continue
                enum = [str(e) for e in t.props.get(name, {}).get("enum") or []]
                args[name] = (
                    ("general-purpose" if "general-purpose" in enum else enum[0]) if enum else "sub"
                )
            return ToolCall(t.name, args)
    return None


def decide(turn: Turn, sub: bool) -> Reply | None:
    """The script: STEPS as shell calls, one per turn, then "done". With `sub`, the main
    conversation hands the steps to a subagent instead (one call of its subagent tool). None:
    not the main loop (a side request without a shell tool)."""
    shell = _shell(turn.tools)
    if shell is None:
        return None
    if sub and SUBTASK not in turn.first_user:
        delegate = _delegate(turn.tools)
        if delegate is None:
            raise SystemExit(f"no subagent tool among {[t.name for t in turn.tools]}")
        if turn.results == 0:
            return Reply(text="Delegating.", tool_call=delegate)
        return Reply(text="done")
    if turn.results < len(STEPS):
        args: dict[str, Any] = {shell[1]: STEPS[turn.results]}
        if shell[0] == "Bash":
            args["description"] = "step"
        return Reply(text=f"Step {turn.results + 1}.", tool_call=ToolCall(shell[0], args))
    return Reply(text="done")


def schema_answer(schema: Any) -> Any:
    """A value fitting a JSON schema (side requests that want JSON: titles, next speaker)."""
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        enum = [str(e) for e in schema["enum"]]
        return "user" if "user" in enum else enum[0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: schema_answer(v) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return "usage fixture"


# ---- the wires ---------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def chat_turn(body: dict[str, Any]) -> Turn:
    tools = [
        _tool((t.get("function") or {}).get("name"), (t.get("function") or {}).get("parameters"))
        for t in body.get("tools") or []
    ]
    msgs = body.get("messages") or []
    results = sum(1 for m in msgs if m.get("role") == "tool")
    first = next((_text(m.get("content")) for m in msgs if m.get("role") == "user"), "")
    return Turn(tools, results, first)


def responses_turn(body: dict[str, Any]) -> Turn:
    tools = [
        _tool(t.get("name"), t.get("parameters"))
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    items = body.get("input")
    items = items if isinstance(items, list) else []
    results = sum(1 for i in items if i.get("type") == "function_call_output")
    return Turn(tools, results, "")


def gemini_turn(body: dict[str, Any]) -> Turn:
    tools = [
        _tool(f.get("name"), f.get("parametersJsonSchema") or f.get("parameters"))
        for t in body.get("tools") or []
        for f in t.get("functionDeclarations") or []
    ]
    results = sum(
        1
        for c in body.get("contents") or []
        for p in c.get("parts") or []
        if "functionResponse" in p
    )
    return Turn(tools, results, "")


def anthropic_turn(body: dict[str, Any]) -> Turn:
    tools = [_tool(t.get("name"), t.get("input_schema")) for t in body.get("tools") or []]
    results = 0
    first = ""
    for m in body.get("messages") or []:
        content = m.get("content")
        if m.get("role") == "user" and not first:
            first = _text(content)
        if isinstance(content, list):
            results += sum(
                1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            )
    return Turn(tools, results, first)


def anthropic_events(model: str, reply: Reply, u: dict[str, int], n: int) -> list[dict[str, Any]]:
    """A streamed Messages reply as the API sends it: usage in message_start (output 1 so far),
    the final output count in message_delta."""
    start_usage = {
        "input_tokens": u["input"],
        "cache_creation_input_tokens": u["cache_write"],
        "cache_read_input_tokens": u["cache_read"],
        "output_tokens": 1,
    }
    msg: dict[str, Any] = {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    evs: list[dict[str, Any]] = [{"type": "message_start", "message": msg}]
    index = 0
    if reply.text:
        evs.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        evs.append(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": reply.text},
            }
        )
        evs.append({"type": "content_block_stop", "index": index})
        index += 1
    if reply.tool_call is not None:
        block = {
            "type": "tool_use",
            "id": f"toolu_{n:04d}",
            "name": reply.tool_call.name,
            "input": {},
        }
        evs.append({"type": "content_block_start", "index": index, "content_block": block})
        evs.append(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {
                    "type": "input_json_delta",
                    "partial_json": json.dumps(reply.tool_call.arguments),
                },
            }
        )
        evs.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if reply.tool_call is not None else "end_turn"
    final = {**start_usage, "output_tokens": u["output"]}
    evs.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": final,
        }
    )
    evs.append({"type": "message_stop"})
    return evs


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_HEAD(self) -> None:
            self._json(404, {})

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(
                    200, {"object": "list", "data": [{"id": "fixture-model", "object": "model"}]}
                )
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?")[0].rstrip("/")
            try:
                body = json.loads(raw)
            except ValueError:
                body = {}
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": 10})
            elif path.endswith(":countTokens"):
                self._json(200, {"totalTokens": 10})
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif path.endswith("/responses"):
                self._responses(body)
            elif path.endswith("enerateContent"):
                self._gemini(body, stream=path.endswith(":streamGenerateContent"))
            elif path.endswith("/messages"):
                self._anthropic(body)
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def _serve(
            self, wire: str, turn: Callable[[], Turn], model: str, side_text: str
        ) -> tuple[Reply, dict[str, int], int]:
            reply = decide(turn(), server.sub)
            u = server.usage()
            with server.lock:
                server.served.append(
                    Served(wire, reply is not None, model, u, repr(reply) if reply else side_text)
                )
                n = len(server.served)
            return reply or Reply(text=side_text), u, n

        def _chat(self, body: dict[str, Any]) -> None:
            model = str(body.get("model") or "fixture-model")
            reply, u, n = self._serve("chat", lambda: chat_turn(body), model, "ok")
            usage = {
                "prompt_tokens": u["input"] + u["cache_read"],
                "completion_tokens": u["output"],
                "total_tokens": u["input"] + u["cache_read"] + u["output"],
                "prompt_tokens_details": {"cached_tokens": u["cache_read"]},
                "completion_tokens_details": {"reasoning_tokens": u["reasoning"]},
            }
            chunks = list(_chunks(f"chatcmpl-{n:04d}", model, reply, f"call_{n:04d}"))
            if body.get("stream"):
                chunks[-1]["usage"] = usage
                self._sse([json.dumps(c) for c in chunks], done=True)
            else:
                msg: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
                if reply.tool_call:
                    fn = {
                        "name": reply.tool_call.name,
                        "arguments": json.dumps(reply.tool_call.arguments),
                    }
                    msg["tool_calls"] = [
                        {"id": f"call_{n:04d}", "type": "function", "function": fn}
                    ]
                finish = "tool_calls" if reply.tool_call else "stop"
                doc = {
                    "id": f"chatcmpl-{n:04d}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    "usage": usage,
                }
                self._json(200, doc)

        def _responses(self, body: dict[str, Any]) -> None:
            model = str(body.get("model") or "fixture-model")
            reply, u, n = self._serve("responses", lambda: responses_turn(body), model, "ok")
            evs = list(responses_api.events(f"resp_{n:04d}", model, reply, f"call_{n:04d}"))
            evs[-1]["response"]["usage"] = {
                "input_tokens": u["input"] + u["cache_read"],
                "input_tokens_details": {"cached_tokens": u["cache_read"]},
                "output_tokens": u["output"],
                "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
                "total_tokens": u["input"] + u["cache_read"] + u["output"],
            }
            self._sse([json.dumps(e) for e in evs], events=[str(e["type"]) for e in evs])

        def _gemini(self, body: dict[str, Any], stream: bool) -> None:
            gen = body.get("generationConfig") or {}
            schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
            side = json.dumps(schema_answer(schema)) if schema else "ok"
            model = self.path.split("/models/")[-1].split(":")[0]
            reply, u, n = self._serve("gemini", lambda: gemini_turn(body), model, side)
            doc = gemini_api.response(model, reply)
            doc["usageMetadata"] = {
                "promptTokenCount": u["input"] + u["cache_read"],
                "cachedContentTokenCount": u["cache_read"],
                "candidatesTokenCount": u["output"] - u["reasoning"],
                "thoughtsTokenCount": u["reasoning"],
                "totalTokenCount": u["input"] + u["cache_read"] + u["output"],
            }
            doc["responseId"] = f"gresp-{n:04d}"
            if stream:
                self._sse([json.dumps(doc)])
            else:
                self._json(200, doc)

        def _anthropic(self, body: dict[str, Any]) -> None:
            model = str(body.get("model") or "fixture-model")
            fmt = (body.get("output_config") or {}).get("format") or {}
            side = json.dumps(schema_answer(fmt.get("schema"))) if fmt else "ok"
            reply, u, n = self._serve("anthropic", lambda: anthropic_turn(body), model, side)
            evs = anthropic_events(model, reply, u, n)
            if body.get("stream"):
                # A pause after the first block, as a real model's stream has: the CLI may write
                # that block's line before the final usage (message_delta) arrives.
                first_stop = next(i for i, e in enumerate(evs) if e["type"] == "content_block_stop")
                self._sse(
                    [json.dumps(e) for e in evs],
                    events=[str(e["type"]) for e in evs],
                    pause_after=first_stop,
                )
            else:
                content: list[dict[str, Any]] = []
                if reply.text:
                    content.append({"type": "text", "text": reply.text})
                msg = {**evs[0]["message"], "content": content, "stop_reason": "end_turn"}
                msg["usage"] = evs[-2]["usage"]
                self._json(200, msg)

        def _json(self, status: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(
            self,
            datas: list[str],
            events: list[str] | None = None,
            done: bool = False,
            pause_after: int = -1,
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for i, data in enumerate(datas):
                head = f"event: {events[i]}\n" if events else ""
                self.wfile.write(f"{head}data: {data}\n\n".encode())
                if i == pause_after:
                    self.wfile.flush()
                    time.sleep(0.5)
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


# ---- the CLIs ----------------------------------------------------------------------------------


@dataclass
class Run:
    """One CLI's scratch world: HOME, project, the command and its environment."""

    cli: str
    base: Path
    url: str

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def proj(self) -> Path:
        return self.base / "proj"

    @property
    def stops(self) -> Path:
        return self.base / "stops.jsonl"

    def hook_command(self) -> str:
        script = self.base / "hook.py"
        script.write_text(
            "import json, sys\n"
            f"with open({str(self.stops)!r}, 'a') as f:\n"
            "    f.write(json.dumps(json.load(sys.stdin)) + '\\n')\n"
        )
        return f"{sys.executable} {script}"


def _write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) if not isinstance(doc, str) else doc)


def setup(run: Run, binary: Path) -> tuple[list[str], dict[str, str]]:
    prog = run.cli.split("-")[0]
    run.home.mkdir(parents=True)
    run.proj.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(run.proj)], check=True, env=_base_env(run))
    env = _base_env(run)
    env["PATH"] = os.pathsep.join([str(binary.parent), env["PATH"]])
    hook = run.hook_command()
    anthropic = "anthropic" in run.cli
    if prog == "copilot":
        env.update(
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=run.url if anthropic else f"{run.url}/v1",
            COPILOT_MODEL="fixture-model",
            COPILOT_ALLOW_ALL="true",
            COPILOT_AUTO_UPDATE="false",
        )
        if anthropic:
            env["COPILOT_PROVIDER_TYPE"] = "anthropic"
            env["COPILOT_PROVIDER_API_KEY"] = "sk-ant-fixture"
        hooks = {"version": 1, "hooks": {"agentStop": [{"type": "command", "bash": hook}]}}
        _write(run.home / ".copilot" / "hooks" / "record.json", hooks)
        return ["copilot", "-p", PROMPT, "--allow-all-tools"], env
    if prog == "codex":
        _write(
            run.home / ".codex" / "config.toml",
            'model = "fixture-model"\nmodel_provider = "fixture"\n'
            '[model_providers.fixture]\nname = "fixture"\n'
            f'base_url = "{run.url}/v1"\nwire_api = "responses"\n'
            f'[projects."{run.proj}"]\ntrust_level = "trusted"\n',
        )
        hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook}]}]}}
        _write(run.home / ".codex" / "hooks.json", hooks)
        argv = [
            "codex", "exec", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust",
            PROMPT,
        ]  # fmt: skip
        return argv, env
    if prog == "gemini":
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "hooks": {
                "AfterAgent": [
                    {"matcher": "*", "hooks": [{"name": "rec", "type": "command", "command": hook}]}
                ]
            },
        }
        _write(run.home / ".gemini" / "settings.json", settings)
        env.update(
            GOOGLE_GEMINI_BASE_URL=run.url,
            GEMINI_API_KEY="fixture",
            GEMINI_MODEL="gemini-2.5-flash",
            GEMINI_CLI_TRUST_WORKSPACE="true",
        )
        return ["gemini", "-p", PROMPT, "--yolo"], env
    if prog == "claude":
        key = "sk-ant-fixture-0123456789abcdefghij"
        _write(
            run.home / ".claude.json",
            {
                "hasCompletedOnboarding": True,
                "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                "projects": {str(run.proj): {"hasTrustDialogAccepted": True}},
            },
        )
        hooks = {"Stop": [{"hooks": [{"type": "command", "command": hook}]}]}
        _write(
            run.home / ".claude" / "settings.json",
            {"skipDangerousModePermissionPrompt": True, "hooks": hooks},
        )
        env.update(
            ANTHROPIC_BASE_URL=run.url,
            ANTHROPIC_API_KEY=key,
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        )
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"
        return ["claude", "-p", PROMPT, "--dangerously-skip-permissions"], env
    if prog == "pi":
        provider = {
            "baseUrl": f"{run.url}/v1",
            "api": "openai-completions",
            "apiKey": "any",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": "fixture-model"}],
        }
        _write(run.home / ".pi" / "agent" / "models.json", {"providers": {"local": provider}})
        _write(
            run.home / ".pi" / "agent" / "settings.json",
            {"defaultProvider": "local", "defaultModel": "fixture-model"},
        )
        env["PI_OFFLINE"] = "1"
        return ["pi", "-p", PROMPT], env
    raise SystemExit(f"unknown cli {run.cli}")


def _base_env(run: Run) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("PATH", os.defpath)
    env.update(
        HOME=str(run.home),
        SHELL="/bin/sh",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        NO_COLOR="1",
    )
    return env


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def open_files(pid: int, under: Path) -> set[str]:
    seen: set[str] = set()
    for p in _tree(pid):
        try:
            fds = list(Path(f"/proc/{p}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(str(under)):
                seen.add(target)
    return seen


# Beside the records, files a locator reads: Gemini's map of project directories to the
# names of its per-project folders, Copilot's per-session workspace (it names the cwd).
KEEP = {"gemini": ".gemini/projects.json", "copilot": ".copilot/session-state/*/workspace.yaml"}


def record_files(run: Run) -> list[Path]:
    """Every session record the run left (a subagent may write its own), and KEEP's files."""
    pats = {
        "copilot": ".copilot/session-state/*/events.jsonl",
        "codex": ".codex/sessions/**/rollout-*.jsonl",
        "gemini": ".gemini/tmp/*/chats/**/*.json*",
        "claude": ".claude/projects/**/*.jsonl",
        "pi": ".pi/agent/sessions/**/*.jsonl",
    }
    found = sorted(run.home.glob(pats[run.cli.split("-")[0]]))
    if not found:
        raise SystemExit(f"{run.cli}: no session record under {run.home}")
    return found + sorted(run.home.glob(KEEP.get(run.cli.split("-")[0], "-")))


def rewrite(text: str, base: Path) -> str:
    """The scratch directory's path, and the CLIs' encodings of it, become FAKE_HOME's."""
    real, fake = str(base), FAKE_HOME.rsplit("/", 1)[0]  # base/home -> /home/me
    pairs = [
        (f"{real}/home", FAKE_HOME),
        (f"{real}/proj", f"{FAKE_HOME}/proj"),
        (real, fake),
    ]
    for a, b in list(pairs):
        pairs.append((a.replace("/", "-"), b.replace("/", "-")))  # pi's directory names
        pairs.append((re.sub("[^A-Za-z0-9]", "-", a), re.sub("[^A-Za-z0-9]", "-", b)))  # claude
    pairs.append((sys.executable, "/usr/bin/python3"))  # the stop hook's interpreter
    for a, b in pairs:
        text = text.replace(a, b)
    return text


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > ELIDE:
        return f"<elided {len(value)} chars>"
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def elide(text: str) -> str:
    """Long strings (the CLIs' system prompts, tool descriptions) become `<elided N chars>`; a
    line holding none is kept byte for byte, one holding some is written back compact (as the
    CLIs write), every key and every other value unchanged."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        try:
            doc = json.loads(body)
        except ValueError:
            out.append(line)
            continue
        short = _shorten(doc)
        if short == doc:
            out.append(line)
        else:
            dumped = json.dumps(short, ensure_ascii=False, separators=(",", ":"))
            out.append(dumped + line[len(body) :])
    return "".join(out)


def record(cli: str, binary: Path, out: Path) -> None:
    server = Server(sub="subagent" in cli)
    url = server.start()
    with tempfile.TemporaryDirectory(prefix="ompusagerec") as tmp:
        base = Path(tmp).resolve()
        run = Run(cli, base, url)
        argv, env = setup(run, binary)
        proc = subprocess.Popen(
            argv, cwd=run.proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        held: set[str] = set()
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            held |= open_files(proc.pid, run.home)
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        stdout, stderr = proc.communicate()
        server.stop()
        print(f"{cli}: exit {proc.returncode}; stdout {stdout.strip()[-200:]!r}")
        if proc.returncode != 0:
            print(stderr[-3000:], file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
        dests = []
        for rec in record_files(run):
            dest = out / rewrite(str(rec.relative_to(base)), base)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(elide(rewrite(rec.read_text(), base)))
            dests.append(str(dest.relative_to(out)))
        listing = sorted(
            rewrite(str(f.relative_to(base)), base)
            for f in run.home.rglob("*")
            if f.is_file() and not NOISE & set(f.relative_to(run.home).parts)
        )
        (out / "home-files.txt").write_text("\n".join(listing) + "\n")
        served = [s.__dict__ for s in server.served]
        (out / "served.json").write_text(json.dumps(served, indent=1) + "\n")
        if run.stops.exists():
            (out / "stops.jsonl").write_text(rewrite(run.stops.read_text(), base))
        heldrel = sorted(
            rewrite(h, base) for h in held if not NOISE & set(Path(h).relative_to(run.home).parts)
        )
        (out / "open-files.json").write_text(json.dumps(heldrel, indent=1) + "\n")
        print(f"  records {dests}; {len(served)} requests; open: {heldrel}")


def find_binary(cli: str) -> Path:
    cli = cli.split("-")[0]
    env_var = f"OMP_TEST_{cli.upper()}"
    for cand in (
        os.environ.get(env_var),
        str(REPO / ".cache" / "agent-clis" / cli / "node_modules" / ".bin" / cli),
        shutil.which(cli),
    ):
        if cand and Path(cand).is_file():
            return Path(cand)
    raise SystemExit(f"{cli}: not installed (set ${env_var})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default="copilot,claude,codex,gemini,pi")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    for cli in args.cli.split(","):
        record(cli, find_binary(cli), args.out / cli)


if __name__ == "__main__":
    main()
