"""A backlog run by demo agents on real tmux (a private server per test), with no model: six tasks
with dependencies, three workers taking task after task; in a shared checkout, and with a
worktree and branch per task merged as each one passes its check."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.team.launch import LaunchRequest, launch
from omp.tmux import Tmux
from omp.views import status as team_status
from omp.workspace import repo as gitrepo
from tests.helpers import assert_reply, poll
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

# Six tasks, three workers: 4 waits for 1; 6 waits for 4 and 5; 3 goes first (priority).
BACKLOG = """
[[task]]
title = "Write the tokenizer"

[[task]]
title = "Write the CLI skeleton"

[[task]]
title = "Fix the README"
priority = 5

[[task]]
title = "Parse numbers"
description = "Uses the tokenizer."
blocked_by = [1]

[[task]]
title = "Add a --version flag"

[[task]]
title = "Document the parser"
blocked_by = [4, 5]
"""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tmux]:
    if shutil.which("tmux") is None or shutil.which("git") is None:
        pytest.skip("tmux and git are needed")
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.3")
    monkeypatch.setenv("OMP_MONITOR_SCAN_SECONDS", "0.5")
    for var in ("TMUX", "TMUX_PANE"):
        monkeypatch.delenv(var, raising=False)
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "proj", {"README.md": "# demo\n", "work/.keep": ""})
    (root / ".git" / "info" / "exclude").write_text(".omp/\ntasks.toml\n")
    (root / "tasks.toml").write_text(BACKLOG)
    monkeypatch.chdir(root)
    return root


def _launch(server: Tmux, root: Path, **kw: Any) -> dict[str, Any]:
    assert server.socket_name is not None
    return launch(
        LaunchRequest(
            workers=3,
            task="",
            agent="demo",
            name="bl",
            socket=server.socket_name,
            cwd=root,
            tasks_file=root / "tasks.toml",
            **kw,
        )
    )


def _snap(root: Path) -> dict[str, Any]:
    found: dict[str, Any] = team_status.status(StatePaths(root), "bl")["teams"][0]
    return found


def _events(root: Path) -> list[dict[str, Any]]:
    path = root / ".omp/state/team/bl/events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_order(root: Path, merged: bool) -> None:
    """No task started before every task it is blocked by was done (merged, with branches);
    no worker held two tasks at once; every task handed over exactly once."""
    done: set[str] = set()
    held: dict[str, str | None] = {}
    handed: list[str] = []
    blockers = {"4": {"1"}, "6": {"4", "5"}}
    for ev in _events(root):
        tid = str(ev.get("taskId"))
        if ev.get("type") == "task" and ev.get("to") == "in_progress" and ev.get("from") in (
            None, "pending"
        ):  # fmt: skip
            assert blockers.get(tid, set()) <= done, f"task {tid} started before {blockers[tid]}"
            assert held.get(ev["owner"]) is None, f"{ev['owner']} held two tasks"
            held[ev["owner"]] = tid
        if ev.get("type") == "handover":
            handed.append(tid)
        if ev.get("type") == "task" and ev.get("to") in ("completed", "verifying"):
            held[ev["owner"]] = None
            if ev["to"] == "completed" and not merged:
                done.add(tid)
        if merged and ev.get("type") == "merge" and ev.get("status") in (
            "fast_forward", "merged"
        ):  # fmt: skip
            done.add(tid)
    assert sorted(handed) == ["1", "2", "3", "4", "5", "6"], handed


def test_six_tasks_three_demo_workers_in_a_shared_checkout(server: Tmux, repo: Path) -> None:
    res = _launch(server, repo, workspace="shared")
    assert_reply(res, replies.LaunchReply)
    bl = res["backlog"]
    assert (bl["tasks"], bl["worktrees"], bl["merge"]) == (6, False, "manual")
    # priority, then file order; 4 and 6 wait: the three workers start with 3, 1, 2
    assert bl["first"] == {"worker-1": "3", "worker-2": "1", "worker-3": "2"}
    inbox = StatePaths(repo).team("bl").inbox("worker-1").read_text()
    assert "Claim token: worker-1-" in inbox and "claim-task" not in inbox
    assert len(inbox.encode()) < 2048
    snap = poll(lambda: (s := _snap(repo))["allDone"] and s, 90, "six completed tasks")
    assert [t["state"] for t in snap["tasks"]] == ["done"] * 6
    assert snap["backlog"]["finished"] is True
    owners = {t["owner"] for t in snap["tasks"]}
    assert len(owners) >= 2  # the work was shared out
    _check_order(repo, merged=False)


def test_a_task_per_worktree_merged_as_each_passes_its_check(server: Tmux, repo: Path) -> None:
    res = _launch(server, repo, merge="auto", verify="ls work/*.md")
    bl = res["backlog"]
    assert (bl["worktrees"], bl["merge"], bl["target"]) == (True, "auto", "main")
    cfg = team_config.load(StatePaths(repo).team("bl"))
    home = Path(str(bl["dir"]))
    states = server.pane_states([w["paneId"] for w in res["workers"]])
    for w in res["workers"]:
        st = states[w["paneId"]]
        assert st is not None and st.current_path == str(home)  # beside every task's worktree
    assert cfg.raw["backlog"]["merge"] == "auto"

    def landed() -> dict[str, Any] | None:
        snap = _snap(repo)
        return snap if all(t.get("mergedAt") for t in snap["tasks"]) else None

    snap = poll(landed, 120, "six tasks merged into main")
    assert [t["state"] for t in snap["tasks"]] == ["done"] * 6
    files = sorted(p.name for p in (repo / "work").glob("*.md"))
    assert len(files) == 6 and all(f"-task-{i}.md" in " ".join(files) for i in range(1, 7))
    assert g(repo, "status", "--porcelain") == ""  # the leader's checkout moved cleanly
    tasks = {t["id"]: t for t in snap["tasks"]}
    raw = {t["id"]: t for t in _raw_tasks(repo)}
    # task 4 started from main with task 1 merged in; 6 from main with 4 and 5
    for tid, before in (("4", ["1"]), ("6", ["4", "5"])):
        base = raw[tid]["workspace"]["base"]
        for b in before:
            assert gitrepo.is_ancestor(repo, raw[b]["mergedCommit"], base), (tid, b)
    for t in tasks.values():
        assert t["verify"]["status"] == "passed"
        # removed once landed: the landing records mergedAt first, then removes the checkout
        tree = Path(raw[t["id"]]["workspace"]["path"])
        poll(lambda: not tree.exists(), 30, f"task {t['id']}'s worktree removed")  # noqa: B023
    _check_order(repo, merged=True)
    told = [ev for ev in _events(repo) if ev.get("type") == "message" and ev.get("to") != "leader"]
    assert told  # hand-overs (and base-moved notes) went out as mail


def _raw_tasks(root: Path) -> list[dict[str, Any]]:
    tdir = root / ".omp/state/team/bl/tasks"
    return [json.loads(p.read_text()) for p in sorted(tdir.glob("*.json"))]


def test_omp_demo_backlog_runs_six_tasks_to_their_merge(server: Tmux, tmp_path: Path) -> None:
    import os

    from tests.helpers import child_env, run_omp

    cwd = tmp_path / "mine"
    cwd.mkdir()
    env = child_env(
        Path(os.environ["HOME"]),
        TMPDIR=str(tmp_path),
        OMP_DEMO_WORK_SECONDS="0.3",
        OMP_MONITOR_SCAN_SECONDS="0.5",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
    )
    for key in list(env):
        if key.startswith(("GIT_AUTHOR", "GIT_COMMITTER", "TMUX")):
            del env[key]
    assert server.socket_name is not None
    out = run_omp("demo", "--backlog", "--socket", server.socket_name, "--json", cwd=cwd,
                  env=env, timeout=240)  # fmt: skip
    assert out.rc == 0, out.stdout + out.stderr
    r = out.json
    assert_reply(r, replies.DemoReply)
    assert r["allDone"] and r["merge"] is None, r
    assert [(t["id"], t["state"]) for t in r["tasks"]] == [(str(i), "done") for i in range(1, 7)]
    repo = Path(r["repo"])
    assert len(list((repo / "work").glob("*.md"))) == 6
    assert g(repo, "status", "--porcelain") == ""  # nothing of the backlog in the repository
