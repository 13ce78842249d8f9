"""A backlog run by real agent CLIs on the scripted model: two GitHub Copilot CLI workers and a
Claude Code worker take five tasks with dependencies from a tasks file, task after task, each in
its own worktree and branch, each verified and merged as soon as it passes; at the end the
leader's branch holds every task's work and passes the check.

The workers know omp only from its words: their inbox (the first task, claimed for them), omp's
hand-over mail (the next task, its worktree and the finishing command), the nudges. Needs the
pinned CLIs (scripts/install-agent-clis.sh); skipped with the reason where they are missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import FAST_MONITOR, AgentTeam, find_cli, poll
from tests.agents.scripted_model import ScriptedModel
from tests.agents.worker_policy import WorkerPolicy
from tests.workspace.gitrepo import IDENTITY

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

CHECK = "ls scripted-*.txt"  # each task adds its own file: a branch passes once it committed
TASKS = """
[[task]]
title = "Write the tokenizer"

[[task]]
title = "Write the CLI skeleton"

[[task]]
title = "Parse numbers"
blocked_by = [1]

[[task]]
title = "Review the CLI"
blocked_by = [2]
agent = "claude"

[[task]]
title = "Document both"
blocked_by = [3, 4]
"""


def _git_project(team: AgentTeam) -> None:
    team.env.update(
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(team.home / ".local" / "state"),
        **IDENTITY,
    )
    shutil.rmtree(team.root / ".git")
    (team.root / "README.md").write_text("# a project\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=team.root, env=team.env, check=True)
    (team.root / ".git" / "info" / "exclude").write_text(".omp/\ntasks.toml\n")
    (team.root / "tasks.toml").write_text(TASKS)


def _tasks(team: AgentTeam) -> dict[str, dict[str, Any]]:
    tdir = team.root / ".omp" / "state" / "team" / team.name / "tasks"
    return {p.stem: json.loads(p.read_text()) for p in tdir.glob("*.json")}


def test_copilot_and_claude_workers_run_a_backlog_to_the_end(
    copilot_team: Callable[..., AgentTeam], scripted_model: ScriptedModel
) -> None:
    claude, why = find_cli("claude")
    if claude is None:
        pytest.skip(why)
    scripted_model.policy = WorkerPolicy(work_file="scripted-{worktree}.txt")
    team = copilot_team(monitor=FAST_MONITOR)
    team._claude_config()  # the same project and HOME serve a Claude Code worker too
    team.env["PATH"] = f"{claude.parent}:{team.env['PATH']}"
    _git_project(team)
    team.launch_result = team.omp(
        "team", "launch", "2", "--agent", "copilot", "--name", team.name, "--tasks",
        str(team.root / "tasks.toml"), "--merge", "auto", "--verify", CHECK, "--json",
        timeout=300,
    )  # fmt: skip
    bl = team.launch_result["backlog"]
    assert bl["first"] == {"worker-1": "1", "worker-2": "2"} and bl["merge"] == "auto", bl
    added = team.omp("team", "add-worker", team.name, "1", "--agent", "claude", "--json",
                     timeout=300)  # fmt: skip
    team.launch_result["workers"] += added["workers"]

    def landed() -> dict[str, dict[str, Any]] | None:
        found = _tasks(team)
        return found if len(found) == 5 and all(t.get("mergedAt") for t in found.values()) else None

    try:
        tasks = poll(landed, "five tasks merged into main", timeout=480)
    except AssertionError as exc:
        state = json.dumps(_tasks(team), indent=1)
        raise AssertionError(f"{exc}\n{state}\n{team.debug()}") from None
    assert {t["id"]: t["owner"] for t in tasks.values()}["4"] == "worker-3"  # the claude worker
    for t in tasks.values():
        assert t["status"] == "completed" and t["verify"]["status"] == "passed", t
        assert t["work"]["commitsAhead"] == 1, t
    # each dependent started from main with what it waited for merged in
    for tid, before in (("3", ["1"]), ("4", ["2"]), ("5", ["3", "4"])):
        base = tasks[tid]["workspace"]["base"]
        for b in before:
            merged = tasks[b]["mergedCommit"]
            ok = subprocess.run(["git", "merge-base", "--is-ancestor", merged, base],
                                cwd=team.root, env=team.env).returncode  # fmt: skip
            assert ok == 0, (tid, b)
    files = sorted(p.name for p in team.root.glob("scripted-*.txt"))
    assert files == [f"scripted-task-{i}.txt" for i in range(1, 6)], files
    # the leader's branch passes the team's check at the end
    assert subprocess.run(CHECK, shell=True, cwd=team.root, capture_output=True).returncode == 0
    log = team.root / ".omp" / "state" / "team" / team.name / "events.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    handed = [e for e in events if e.get("type") == "handover"]
    assert sorted(e["taskId"] for e in handed) == ["1", "2", "3", "4", "5"], handed
    assert Path(team.root / "scripted-task-4.txt").read_text().strip()
