"""A newcomer's trial of worktrees and resume with real agent CLIs on the scripted model.

- Two Claude Code 2.1.328 workers in their own worktrees of a project whose path holds a space
  and a non-ASCII letter, with commits before the launch and the leader's uncommitted edit
  carried (`--carry-changes`): each commits a file of its own; `omp team merge` is refused while
  the leader's edit is uncommitted, then brings both branches onto the leader's branch, which
  really moves, every line there.
- Codex 0.171 and Gemini CLI 0.61 resumed with a session id: their profiles' `resume_args` (a
  `resume <id>` subcommand, `--resume <id>`) bring the worker back into its conversation. omp
  learns no id for them in a worktree (their hooks cannot be handed over), so the id is taken
  from the CLI's own session file here, as a hook installed and trusted would give it.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import AgentTeam, find_cli, omp_argv, poll
from tests.agents.scripted_model import ScriptedModel, message_text
from tests.agents.worker_policy import WorkerPolicy
from tests.workspace.gitrepo import IDENTITY

pytestmark = [pytest.mark.agent_cli, pytest.mark.slow, pytest.mark.tmux]

LINES = "".join(f"line {i}\n" for i in range(1, 11))


def _cli(agent: str) -> Path:
    path, why = find_cli(agent)
    if path is None:
        pytest.skip(why)
    return path


def _git(team: AgentTeam, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=team.root, env=team.env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _git_project(team: AgentTeam) -> None:
    """The team's project becomes a repository with two commits; git isolated."""
    team.env.update(
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(team.home / ".local" / "state"),
        **IDENTITY,
    )
    shutil.rmtree(team.root / ".git")
    (team.root / "a.txt").write_text(LINES)
    _git(team, "init", "-q", "-b", "main")
    _git(team, "add", "a.txt")
    _git(team, "commit", "-qm", "one")
    (team.root / "b.txt").write_text("b\n")
    _git(team, "add", "b.txt")
    _git(team, "commit", "-qm", "two")


def _omp(team: AgentTeam, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*omp_argv(), *args], cwd=team.root, env=team.env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_claude_workers_in_worktrees_of_a_path_with_a_space_commit_and_are_merged(
    tmp_path: Path,
) -> None:
    binary = _cli("claude")
    policy = WorkerPolicy(work_file="work-{worktree}.txt")  # a file of its own each
    with ScriptedModel(policy) as model:
        team = AgentTeam(tmp_path / "my projects ü", binary, model, agent="claude")
        try:
            _git_project(team)
            (team.root / "a.txt").write_text("LEADER\n" + LINES.split("\n", 1)[1])
            launched = _omp(
                team, "team", "launch", "2", "write a haiku", "--agent", "claude",
                "--name", team.name, "--carry-changes", "--json",
            )  # fmt: skip
            assert launched.returncode == 0, launched.stderr
            team.launch_result = json.loads(launched.stdout)
            try:
                poll(lambda: team.status()["allDone"], "allDone", timeout=300)
            except AssertionError:
                print(team.debug())
                raise
            st = team.status()
            for t in st["tasks"]:
                assert t["status"] == "completed" and t["work"]["commitsAhead"] == 1, t
            for w in st["workers"]:
                path = Path(w["workspace"]["path"])
                assert (path / "a.txt").read_text().startswith("LEADER\n")  # carried
                assert (path / f"work-{w['name']}.txt").is_file()
            main_before = _git(team, "rev-parse", "main")
            refused = _omp(team, "team", "merge", team.name, "--json")
            assert refused.returncode == 1 and json.loads(refused.stdout)["error"] == "leader_dirty"
            assert _git(team, "rev-parse", "main") == main_before
            _git(team, "commit", "-qam", "the leader's edit")
            merged = _omp(team, "team", "merge", team.name, "--json")
            assert merged.returncode == 0, merged.stdout + merged.stderr
            assert sorted(json.loads(merged.stdout)["merged"]) == ["worker-1", "worker-2"]
            head = _git(team, "rev-parse", "main")
            for w in st["workers"]:  # the leader's branch really moved past both
                tip = _git(team, "rev-parse", w["workspace"]["branch"])
                _git(team, "merge-base", "--is-ancestor", tip, head)
            assert (team.root / "a.txt").read_text() == "LEADER\n" + LINES.split("\n", 1)[1]
            for w in ("worker-1", "worker-2"):
                assert (team.root / f"work-{w}.txt").read_text() == policy.result_text + "\n"
            assert _git(team, "status", "--porcelain") == ""
        finally:
            left = team.close()
        assert not left, left


def _session_id(team: AgentTeam) -> str:
    """The CLI's own id for the worker's session, from its session file."""
    if team.agent == "codex":
        [rollout] = glob.glob(str(team.home / ".codex/sessions/**/rollout-*.jsonl"), recursive=True)
        with open(rollout, encoding="utf-8") as f:
            return str(json.loads(f.readline())["payload"]["id"])
    [chat] = glob.glob(str(team.home / ".gemini/tmp/**/chats/session-*.json*"), recursive=True)
    text = Path(chat).read_text(encoding="utf-8")
    try:
        return str(json.loads(text)["sessionId"])
    except ValueError:  # JSON lines: the first holds the session's metadata
        return str(json.loads(text.splitlines()[0])["sessionId"])


@pytest.fixture(params=["codex", "gemini"])
def resumable_team(request: pytest.FixtureRequest) -> Callable[..., AgentTeam]:
    factory: Callable[..., AgentTeam] = request.getfixturevalue(f"{request.param}_team")
    return factory


def test_codex_and_gemini_come_back_into_their_conversation_given_its_id(
    resumable_team: Callable[..., AgentTeam],
) -> None:
    team = resumable_team()
    team.launch(1, "write a haiku")
    poll(lambda: team.status()["allDone"], "the task done", timeout=240)
    sid = _session_id(team)
    record = team.root / ".omp" / "state" / "team" / team.name / "workers" / "worker-1"
    (record / "session.json").write_text(json.dumps({"agent": team.agent, "sessionId": sid}))
    before = len(team.model.requests)
    subprocess.run(["tmux", "-L", team.socket, "kill-server"], env=team.env, check=False)
    r = team.omp("team", "resume", team.name, "--json")
    (w,) = r["resumed"]
    assert w["conversation"] == "resumed" and w["sessionId"] == sid, r

    def resumed() -> list[str] | None:
        for ex in list(team.model.requests)[before:]:
            users = [message_text(m) for m in ex.chat.messages if m.get("role") == "user"]
            if any("resume.md and follow it." in u for u in users):
                return users
        return None

    try:
        users: Any = poll(resumed, "the resumed worker's first request", timeout=120)
    except AssertionError:
        print(team.debug())
        raise
    # the launch's trigger is in the same conversation, before the resume's
    first = next(i for i, u in enumerate(users) if "inbox.md and follow it." in u)
    assert first < next(i for i, u in enumerate(users) if "resume.md and follow it." in u)
