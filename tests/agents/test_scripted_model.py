"""The scripted model on its own: the OpenAI wire format, and the worker policy driving real omp.

No agent CLI here: a tiny agent loop in the test plays the CLI's part (send the conversation,
run the shell tool call through bash, send back its output), so these run on every machine.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from omp.agents import BUILTIN_PROFILES
from omp.mail import bootstrap
from omp.mail.nudge import nudge_text
from omp.record import config as team_config
from omp.team.launch import worker_env
from tests.agents.scripted_model import Reply, ScriptedModel, ToolCall
from tests.agents.worker_policy import Inbox, WorkerPolicy, parse_api_line
from tests.helpers import child_env, mailbox_file, make_project, make_team, records, run_api

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
            "required": ["command", "description"],
        },
    },
}


def post(model: ScriptedModel, body: dict[str, Any]) -> bytes:
    req = urllib.request.Request(
        f"{model.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        data: bytes = resp.read()
        return data


def sse_message(raw: bytes) -> dict[str, Any]:
    """Reassemble a streamed reply the way a client does: content, and tool calls by index."""
    lines = [ln[6:] for ln in raw.decode().split("\n\n") if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    text, finish = "", None
    calls: dict[int, dict[str, str]] = {}
    for line in lines[:-1]:
        choice = json.loads(line)["choices"][0]
        delta = choice["delta"]
        text += delta.get("content") or ""
        for tc in delta.get("tool_calls") or []:
            slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.get("id") or slot["id"]
            fn = tc.get("function") or {}
            slot["name"] += fn.get("name") or ""
            slot["arguments"] += fn.get("arguments") or ""
        finish = choice["finish_reason"] or finish
    return {"content": text, "tool_calls": list(calls.values()), "finish_reason": finish}


class Fixed:
    def __init__(self, reply: Reply) -> None:
        self.answer = reply

    def reply(self, chat: Any) -> Reply:
        return self.answer


def test_models_list_and_both_reply_shapes() -> None:
    call = ToolCall("bash", {"command": "echo 'a \"quoted\" word'", "description": "x" * 50})
    with ScriptedModel(Fixed(Reply(text="thinking aloud", tool_call=call))) as model:
        with urllib.request.urlopen(f"{model.base_url}/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == "scripted-model"
        body = {"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}
        streamed = sse_message(post(model, {**body, "stream": True}))
        assert streamed["content"] == "thinking aloud"
        assert streamed["finish_reason"] == "tool_calls"
        [tc] = streamed["tool_calls"]
        assert tc["name"] == "bash" and tc["id"].startswith("call_")
        assert json.loads(tc["arguments"]) == call.arguments  # reassembled from fragments
        plain = json.loads(post(model, body))["choices"][0]
        assert plain["finish_reason"] == "tool_calls"
        assert json.loads(plain["message"]["tool_calls"][0]["function"]["arguments"]) == (
            call.arguments
        )
        model.policy = Fixed(Reply(text="RALPH_COMPLETE"))
        done = sse_message(post(model, {**body, "stream": True}))
        assert (done["content"], done["finish_reason"]) == ("RALPH_COMPLETE", "stop")
        assert [x.chat.stream for x in model.requests] == [True, False, True]
        assert model.requests[1].chat.messages == body["messages"]


def test_inbox_commands_are_parsed_from_the_text(tmp_path: Path) -> None:
    omp = "'/opt/my tools/bin/omp'"  # a quoted path: the words before `team api` stay as printed
    text = bootstrap.inbox_markdown(
        team="t1",
        worker="worker-1",
        task_id="1",
        description="d",
        teammates=["worker-2"],
        result_path=tmp_path / "result.md",
        omp=omp,
    )
    inbox = Inbox.parse(text)
    assert {"claim-task", "send-message", "transition-task-status", "mailbox-read"} <= set(
        inbox.commands
    )
    claim = inbox.commands["claim-task"]
    assert claim.prefix == f"{omp} team api claim-task"
    assert claim.with_arg() in text  # unchanged, it is the line as printed
    assert inbox.result_file == str(tmp_path / "result.md")
    send = inbox.commands["send-message"].with_arg(to="worker-2", body="it's done")
    words = shlex.split(send)  # what the shell hands omp: the JSON whole, quote and all
    assert words[:3] == ["/opt/my tools/bin/omp", "team", "api"]
    arg = json.loads(words[words.index("--input") + 1])
    assert arg == {"team_name": "t1", "from": "worker-1", "to": "worker-2", "body": "it's done"}
    assert parse_api_line(claim.with_arg()) == claim


def run_agent(model: ScriptedModel, messages: list[dict[str, Any]], cwd: Path) -> str:
    """Play the CLI until the model answers in words; returns those words."""
    for _ in range(30):
        body = {"model": "m", "stream": True, "messages": messages, "tools": [BASH_TOOL]}
        msg = sse_message(post(model, body))
        if not msg["tool_calls"]:
            messages.append({"role": "assistant", "content": msg["content"]})
            return str(msg["content"])
        [tc] = msg["tool_calls"]
        messages.append(
            {
                "role": "assistant",
                "content": msg["content"],
                "tool_calls": [
                    {
                        "id": tc["id"],
                        "type": "function",
                        "function": {"name": tc["name"], "arguments": tc["arguments"]},
                    }
                ],
            }
        )
        cmd = json.loads(tc["arguments"])["command"]
        proc = subprocess.run(
            ["bash", "-c", cmd], cwd=cwd, env=child_env(), capture_output=True, text=True
        )
        out = proc.stdout + proc.stderr + f"\n<exited with exit code {proc.returncode}>"
        messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
    raise AssertionError(f"no final answer in 30 turns: {model.dump()}")


def test_worker_policy_does_the_task_and_answers_mail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.setenv("HOME", str(tmp_path))
    team = make_team(root, "t1", workers=1, task="write a haiku", no_limits=True)
    inbox = team.worker_dir("worker-1") / "inbox.md"
    omp = team_config.load(team).raw["ompCommand"]
    text = bootstrap.inbox_markdown(  # what launch writes (a headless team has none)
        team="t1",
        worker="worker-1",
        task_id="1",
        description="write a haiku",
        teammates=[],
        result_path=team.worker_dir("worker-1") / "result.md",
        omp=omp,
    )
    inbox.write_text(text)
    policy = WorkerPolicy(final_text="RALPH_COMPLETE")
    with ScriptedModel(policy) as model:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a CLI."}]
        messages.append({"role": "user", "content": bootstrap.trigger_line(inbox)})
        assert run_agent(model, messages, root) == "RALPH_COMPLETE"
        task = json.loads((team.dir / "tasks" / "1.json").read_text())
        assert task["status"] == "completed" and task["result"] == policy.summary
        result = team.worker_dir("worker-1") / "result.md"
        assert result.read_text() == "The scripted worker's result.\n"
        leader = [m["body"] for m in records(mailbox_file(root, "leader", "t1"))]
        assert "worker-1: started" in leader
        # one tool call per turn, the commands exactly as the inbox printed them
        ran = [c.arguments["command"] for _, c in model.tool_calls()]
        claim = next(c for c in ran if " claim-task " in c)
        assert claim in inbox.read_text()
        # the leader writes; the nudge names the command; the worker reads and answers
        sent = run_api(
            "send-message",
            {"team_name": "t1", "from": "leader", "to": "worker-1", "body": "?"},
            cwd=root,
        )
        assert sent.rc == 0, sent.stderr
        mid = sent.json["messageId"]
        nudge = nudge_text("t1", "worker-1", 1, omp)
        messages.append({"role": "user", "content": f"<ctx>x</ctx>\n\n{nudge}"})
        assert run_agent(model, messages, root) == "Answered 1 message(s)."
        box = records(mailbox_file(root, "worker-1", "t1"))
        assert {"type": "delivery-receipt"}.items() <= next(
            r for r in box if r.get("messageId") == mid
        ).items()
        answers = [m for m in records(mailbox_file(root, "leader", "t1")) if mid in m["body"]]
        assert answers and answers[0]["from"] == "worker-1"


def test_ignored_nudge_leaves_the_mail_unread(tmp_path: Path) -> None:
    policy = WorkerPolicy(ignore_nudges=1)
    with ScriptedModel(policy) as model:
        inbox = tmp_path / "inbox.md"
        inbox.write_text("# worker-1 in omp team t\nNo task, no commands.\n")
        msgs: list[dict[str, Any]] = [
            {"role": "user", "content": f"Read {inbox} and follow it."},
        ]
        assert run_agent(model, msgs, tmp_path) == "Waiting for the leader."
        msgs.append({"role": "user", "content": "You have 1 new message(s). Read them: true"})
        assert run_agent(model, msgs, tmp_path) == "Not now."
        assert len(model.tool_calls()) == 1  # only the inbox was read


def test_launch_forwards_the_model_provider_to_every_worker(tmp_path: Path) -> None:
    env = {
        "COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:11434/v1",
        "COPILOT_PROVIDER_API_KEY": "k",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_OFFLINE": "true",
        "COPILOT_MODEL": "qwen2.5-coder",
        "OPENAI_API_KEY": "not copilot's",
        "PATH": "/usr/bin",
    }
    for worker in ("worker-1", "worker-2"):
        out = worker_env(
            env,
            BUILTIN_PROFILES["copilot"],
            team="t",
            worker=worker,
            root=tmp_path,
            token="x",
            omp="omp",
        )
        assert {k: out[k] for k in env if k.startswith("COPILOT_")} == {
            k: v for k, v in env.items() if k.startswith("COPILOT_")
        }
        assert "OPENAI_API_KEY" not in out


def test_a_missing_copilot_cli_gives_the_skip_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.agents import clis as copilot

    monkeypatch.setattr(copilot, "CACHE_BIN", tmp_path / "absent" / "copilot")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(copilot.ENV_VAR, str(tmp_path / "nope"))
    path, why = copilot.find_copilot()
    assert path is None
    assert why.startswith('Copilot CLI 1.0.102 not found: run `eval "$(bash scripts/install-agent')
    assert "(npm @github/copilot@1.0.102)" in why
    assert f"{tmp_path / 'nope'}: not an executable" in why
    fake = tmp_path / "copilot"
    fake.write_text("#!/bin/sh\necho 'GitHub Copilot CLI 0.0.1.'\n")
    fake.chmod(0o755)
    monkeypatch.setenv(copilot.ENV_VAR, str(fake))
    path, why = copilot.find_copilot()
    assert path is None and "not 1.0.102" in why  # only the pinned version is used


# ---- the Anthropic Messages wire (Claude Code) ------------------------------------------------


def post_anthropic(model: ScriptedModel, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    base = model.base_url.removesuffix("/v1")  # Claude Code's ANTHROPIC_BASE_URL has no /v1
    req = urllib.request.Request(
        f"{base}{path}", data=json.dumps(body).encode(), headers={"x-api-key": "k"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def anthropic_message(raw: bytes) -> dict[str, Any]:
    """Reassemble a streamed message as the SDK does: blocks by index, tool input from its
    `input_json_delta` fragments."""
    events = []
    for chunk in raw.decode().split("\n\n"):
        lines = chunk.split("\n")
        if len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "):
            ev = json.loads(lines[1][6:])
            assert ev["type"] == lines[0][7:]
            events.append(ev)
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stop = None
    for ev in events:
        if ev["type"] == "content_block_start":
            blocks[ev["index"]] = dict(ev["content_block"])
        elif ev["type"] == "content_block_delta":
            d = ev["delta"]
            if d["type"] == "text_delta":
                blocks[ev["index"]]["text"] += d["text"]
            else:
                partial[ev["index"]] = partial.get(ev["index"], "") + d["partial_json"]
        elif ev["type"] == "content_block_stop" and ev["index"] in partial:
            blocks[ev["index"]]["input"] = json.loads(partial[ev["index"]])
        elif ev["type"] == "message_delta":
            stop = ev["delta"]["stop_reason"]
    return {"content": [blocks[i] for i in sorted(blocks)], "stop_reason": stop}


class Recorder:
    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.chats: list[Any] = []

    def reply(self, chat: Any) -> Reply:
        self.chats.append(chat)
        return self.replies.pop(0)


def test_anthropic_messages_wire() -> None:
    call = ToolCall("Bash", {"command": "echo 'a \"b\"' > f", "description": "probe"})
    policy = Recorder(Reply(text="running it", tool_call=call), Reply(text="done"))
    with ScriptedModel(policy) as model:
        body: dict[str, Any] = {
            "model": "claude-opus-5-5",
            "stream": True,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "tools": [{"name": "Bash", "input_schema": {"properties": {"command": {}}}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "run the probe"}]},
                {"role": "system", "content": "# Environment"},  # trailing: dropped
            ],
        }
        status, raw = post_anthropic(model, "/v1/messages?beta=true", body)
        msg = anthropic_message(raw)
        assert status == 200 and msg["stop_reason"] == "tool_use"
        text, use = msg["content"]
        assert text == {"type": "text", "text": "running it"}
        assert (use["type"], use["name"], use["input"]) == ("tool_use", "Bash", call.arguments)
        first = policy.chats[0]
        assert [m["role"] for m in first.messages] == ["system", "user"]
        assert first.messages[-1]["content"] == "run the probe"
        assert first.tools[0]["function"]["name"] == "Bash"
        # the tool's result comes back inside a user message: a `tool` message for the policy
        body["messages"] = [
            body["messages"][0],
            {"role": "system", "content": "# Environment"},  # not trailing: kept
            {"role": "assistant", "content": msg["content"]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use["id"], "content": "(no output)"}
                ],
            },
        ]
        msg = anthropic_message(post_anthropic(model, "/v1/messages", body)[1])
        assert msg == {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
        second = policy.chats[1].messages
        assert [m["role"] for m in second] == ["system", "user", "system", "assistant", "tool"]
        assert second[3]["tool_calls"][0]["id"] == use["id"]
        assert json.loads(second[3]["tool_calls"][0]["function"]["arguments"]) == call.arguments
        assert second[4] == {"role": "tool", "tool_call_id": use["id"], "content": "(no output)"}
        # side requests never reach the policy: a title (JSON that fits the schema), tokens
        schema = {"type": "object", "properties": {"title": {"type": "string"}}}
        title = {**body, "output_config": {"format": {"type": "json_schema", "schema": schema}}}
        msg = anthropic_message(post_anthropic(model, "/v1/messages", title)[1])
        assert json.loads(msg["content"][0]["text"]) == {"title": "omp worker"}
        status, raw = post_anthropic(model, "/v1/messages/count_tokens?beta=true", body)
        assert (status, json.loads(raw)) == (200, {"input_tokens": 10})
        assert len(policy.chats) == 2 and len(model.side) == 1


def test_a_scripted_http_error_reaches_the_cli() -> None:
    with ScriptedModel(Fixed(Reply(status=429, text="Rate limit reached"))) as model:
        status, raw = post_anthropic(model, "/v1/messages", {"messages": []})
        err = json.loads(raw)["error"]
        assert status == 429 and err["type"] == "rate_limit_error"
        assert err["message"] == "Rate limit reached"
        with pytest.raises(urllib.error.HTTPError) as got:
            post(model, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert got.value.code == 429 and got.value.headers["x-should-retry"] == "false"


def test_launch_gives_claude_workers_no_auto_update_and_forwards_pi_offline(
    tmp_path: Path,
) -> None:
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "PI_OFFLINE": "1", "PATH": "/usr/bin"}

    def worker(agent: str, environ: dict[str, str]) -> dict[str, str]:
        return worker_env(
            environ,
            BUILTIN_PROFILES[agent],
            team="t",
            worker="worker-1",
            root=tmp_path,
            token="x",
            omp="omp",
        )

    claude = worker("claude", env)
    assert (
        claude["DISABLE_AUTOUPDATER"] == "1"
        and claude["ANTHROPIC_BASE_URL"] == env["ANTHROPIC_BASE_URL"]
    )
    assert "PI_OFFLINE" not in claude and "IS_SANDBOX" not in claude
    assert worker("claude", {**env, "DISABLE_AUTOUPDATER": "0"})["DISABLE_AUTOUPDATER"] == "0"
    assert worker("pi", env)["PI_OFFLINE"] == "1"
