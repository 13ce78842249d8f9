"""The scripted model on its own: the OpenAI wire format, and the worker policy driving real omp.

No agent CLI here: a tiny agent loop in the test plays the CLI's part (send the conversation,
run the shell tool call through bash, send back its output), so these run on every machine.
"""

from __future__ import annotations

import json
import shlex
import subprocess
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
    assert why.startswith("Copilot CLI could not be installed (npm @github/copilot@1.0.102")
    assert f"{tmp_path / 'nope'}: not an executable" in why
    fake = tmp_path / "copilot"
    fake.write_text("#!/bin/sh\necho 'GitHub Copilot CLI 0.0.1.'\n")
    fake.chmod(0o755)
    monkeypatch.setenv(copilot.ENV_VAR, str(fake))
    path, why = copilot.find_copilot()
    assert path is None and "not 1.0.102" in why  # only the pinned version is used
