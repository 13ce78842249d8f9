"""Workers in worktrees on real tmux (a private server per test) with the demo agent: launch,
commit, verify, merge; `omp demo` end to end; a launch that fails after making worktrees."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.cli import replies
from omp.errors import OmpError
from omp.record import config as team_config
from omp.record.workspace import worktree_of
from omp.store.paths import StatePaths
from omp.team.launch import LaunchRequest, launch
from omp.team.merging import merge_team
from omp.tmux import Tmux
from omp.views import status as team_status
from omp.workspace import repo as gitrepo
from tests.helpers import assert_reply, child_env, poll, run_omp
from tests.workspace.gitrepo import g, isolate_git, make_repo, write

pytestmark = [pytest.mark.tmux, pytest.mark.slow]  # real launches


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tmux]:
    if shutil.which("tmux") is None or shutil.which("git") is None:
        pytest.skip("tmux and git are needed")
    isolate_git(monkeypatch, tmp_path)
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.3")
    for var in ("TMUX", "TMUX_PANE"):
        monkeypatch.delenv(var, raising=False)
    tmux = Tmux(socket_name=f"omp-test-{secrets.token_hex(4)}", config_file="/dev/null")
    yield tmux
    tmux.kill_server()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path / "proj")
    monkeypatch.chdir(root)
    return root


def _launch(server: Tmux, root: Path, n: int = 3, **kw: Any) -> dict[str, Any]:
    assert server.socket_name is not None
    return launch(
        LaunchRequest(
            workers=n,
            task=kw.pop("task", "write a haiku"),
            agent="demo",
            name=kw.pop("name", "t1"),
            socket=server.socket_name,
            cwd=kw.pop("cwd", root),
            **kw,
        )
    )


def _all_done(root: Path, team: str = "t1") -> dict[str, Any] | None:
    snap: dict[str, Any] = team_status.status(StatePaths(root), team)["teams"][0]
    return snap if snap["allDone"] else None


def test_three_demo_workers_commit_in_their_worktrees_are_verified_and_merged(
    server: Tmux, repo: Path
) -> None:
    (repo / "src" / "deep").mkdir(parents=True)
    write(repo / "README.md", "# demo, being edited\n")  # the leader's uncommitted change
    res = _launch(server, repo, verify="ls work/*.md", cwd=repo / "src")
    ws = res["workspace"]
    assert_reply(res, replies.LaunchReply)
    assert_reply(ws, replies.LaunchWorkspace)
    assert ws["kind"] == "worktree" and ws["uncommitted"] == {"tracked": 1, "untracked": 0}
    assert ws["verify"] == {"command": "ls work/*.md", "timeout": 900.0}
    cfg = team_config.load(StatePaths(repo).team("t1"))
    trees = {w: worktree_of(cfg.worker(w)) for w in cfg.worker_names}
    states = server.pane_states([w["paneId"] for w in res["workers"]])
    for w in res["workers"]:
        tree = trees[w["name"]]
        assert tree is not None
        # the pane starts in the worktree, in the subdirectory the leader launched from
        st = states[w["paneId"]]
        assert st is not None and st.current_path == str(Path(tree.path) / "src")
        inbox = StatePaths(repo).team("t1").inbox(w["name"]).read_text()
        assert f"You work in {tree.path}, your own git worktree on branch {tree.branch}" in inbox
    snap = poll(lambda: _all_done(repo), 90, "three verified completions")
    for t in snap["tasks"]:
        assert t["status"] == "completed" and t["verify"]["status"] == "passed", t
        assert t["work"]["commitsAhead"] == 1
    for w in snap["workers"]:
        assert w["workspace"]["commitsAhead"] == 1 and w["workspace"]["merged"] is False
    # the leader's README edit is in the way of nothing: merge refuses until it is committed
    with pytest.raises(OmpError) as err:
        merge_team(cfg)
    assert err.value.code == "leader_dirty"
    g(repo, "commit", "-qam", "the leader's own edit")
    report = merge_team(cfg)
    assert sorted(report["merged"]) == ["worker-1", "worker-2", "worker-3"]
    files = sorted(p.name for p in (repo / "work").glob("*.md"))
    assert files == [f"worker-{i}-task-{i}.md" for i in (1, 2, 3)]
    assert (repo / "README.md").read_text() == "# demo, being edited\n"
    assert g(repo, "status", "--porcelain") == ""


def test_a_demo_worker_whose_check_fails_is_in_progress_in_every_view(
    server: Tmux, repo: Path
) -> None:
    """`omp team launch 1 "write a note" --agent demo --name gate --verify false` (issue 28,
    finding 7): the demo agent commits, writes result.md and completes; the check fails, so the
    task is in progress again, and collect says so as status does (it used to count the
    result.md as done), while the worker's worktree holds only what it committed."""
    _launch(server, repo, 1, task="write a note", name="gate", verify="false")
    cfg = team_config.load(StatePaths(repo).team("gate"))

    def failed_once() -> dict[str, Any] | None:
        [t] = team_status.status(StatePaths(repo), "gate")["teams"][0]["tasks"]
        v = t.get("verify") or {}
        return t if t["status"] == "in_progress" and v.get("status") == "failed" else None

    task = poll(failed_once, 60, "the check to fail and give the task back")
    assert task["verify"]["exit"] == 1 and task.get("result") is None
    col = team_status.collect(cfg)
    [row] = col["workers"]
    assert row["outcome"] == "working" and row["taskStatus"] == "in_progress"
    assert row["resultMarkdown"]  # it wrote its notes, which are no verdict
    assert col["doneCount"] == 0 and col["allDone"] is False
    out = run_omp("team", "collect", "gate", cwd=repo)
    assert "0/1 done" in out.stdout, out.stdout
    wt = worktree_of(cfg.worker("worker-1"))
    assert wt is not None
    assert g(Path(wt.path), "status", "--porcelain", "--untracked-files=all") == ""


def test_carry_changes_brings_the_leaders_edit_into_each_worktree(server: Tmux, repo: Path) -> None:
    write(repo / "src" / "app.py", "x = 2  # the leader's edit\n")
    res = _launch(server, repo, n=1, carry_changes=True, task="")
    assert res["workspace"]["carried"] is True
    cfg = team_config.load(StatePaths(repo).team("t1"))
    tree = worktree_of(cfg.worker("worker-1"))
    assert tree is not None
    assert (Path(tree.path) / "src" / "app.py").read_text() == "x = 2  # the leader's edit\n"


def test_a_launch_that_fails_after_making_worktrees_leaves_none(
    server: Tmux, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.team import setup

    def broken(*_a: object, **_k: object) -> None:
        raise OmpError("storage_error", "the disk is full")

    monkeypatch.setattr(setup, "write_state", broken)
    with pytest.raises(OmpError) as err:
        _launch(server, repo, n=2)
    assert err.value.code == "launch_failed" and "nothing was left behind" in err.value.message
    assert [e.path for e in gitrepo.worktrees(repo)] == [repo]
    assert g(repo, "branch", "--list", "omp/*") == ""
    assert not StatePaths(repo).team("t1").dir.exists()


def test_a_launch_that_fails_after_recording_its_worktrees_removes_them(
    server: Tmux, repo: Path
) -> None:
    import sys

    write(
        repo / ".omp" / "agents.toml",
        f'[agents.quitter]\ncommand = ["{sys.executable}", "-c", "print(1)"]\n'
        f'program = "{sys.executable}"\nstartup_timeout = 5\n',
    )
    with pytest.raises(OmpError) as err:
        launch(
            LaunchRequest(
                workers=2, task="x", agent="quitter", name="t1", socket=server.socket_name, cwd=repo
            )
        )
    assert err.value.code == "launch_worker_exited"
    assert [e.path for e in gitrepo.worktrees(repo)] == [repo]
    assert g(repo, "branch", "--list", "omp/*") == ""
    assert not StatePaths(repo).team("t1").dir.exists()


def test_add_worker_records_its_own_base(server: Tmux, repo: Path) -> None:
    from omp.team.grow import add_workers

    _launch(server, repo, n=1, task="")
    base = g(repo, "rev-parse", "HEAD")
    write(repo / "later.txt", "after the launch\n")
    g(repo, "add", "later.txt")
    g(repo, "commit", "-qm", "later")
    cfg = team_config.load(StatePaths(repo).team("t1"))
    out = add_workers(cfg, 1)
    assert out["workspace"]["kind"] == "worktree"
    cfg = team_config.load(StatePaths(repo).team("t1"))
    first, second = (worktree_of(cfg.worker(w)) for w in ("worker-1", "worker-2"))
    assert first is not None and second is not None
    assert first.base == base and second.base == g(repo, "rev-parse", "HEAD") != base
    assert (Path(second.path) / "later.txt").exists()


def test_omp_demo_runs_in_a_throwaway_repository_and_merges_every_branch(
    server: Tmux, tmp_path: Path
) -> None:
    cwd = tmp_path / "mine"
    cwd.mkdir()
    env = child_env(
        Path(os.environ["HOME"]),
        TMPDIR=str(tmp_path),
        OMP_DEMO_WORK_SECONDS="0.3",
        GIT_CONFIG_GLOBAL="/dev/null",  # no identity anywhere: the demo brings its own
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    for key in list(env):
        if key.startswith(("GIT_AUTHOR", "GIT_COMMITTER", "TMUX")):
            del env[key]
    assert server.socket_name is not None
    out = run_omp("demo", "--socket", server.socket_name, "--json", cwd=cwd, env=env, timeout=180)
    assert out.rc == 0, out.stdout + out.stderr
    r = out.json
    assert_reply(r, replies.DemoReply)
    assert_reply(r["merge"], replies.MergeReply)
    assert_reply(r["collect"], replies.CollectReply)
    for row in r["collect"]["workers"]:
        assert_reply(row, replies.CollectRow)
    repo = Path(r["repo"])
    assert repo.is_relative_to(tmp_path) and not repo.is_relative_to(cwd)
    assert list(cwd.iterdir()) == []  # the working directory got nothing
    assert not (tmp_path / "state").exists()  # nor the user's state directory
    assert r["allDone"] and sorted(r["merge"]["merged"]) == ["worker-1", "worker-2", "worker-3"]
    files = sorted(p.name for p in (repo / "work").glob("*.md"))
    assert files == [f"worker-{i}-task-{i}.md" for i in (1, 2, 3)]
    assert all(w["verify"]["status"] == "passed" for w in r["collect"]["workers"])
    human = run_omp("team", "status", r["team"], cwd=repo, env=env)
    assert human.rc == 0 and "merged into main" in human.stdout
    text = run_omp("demo", "--socket", server.socket_name, cwd=cwd, env=env, timeout=180)
    assert text.rc == 0, text.stderr
    nxt = text.stdout.split("Next", 1)[1]
    assert " team diff " in nxt and " team merge " in nxt
    json.dumps(r)  # plain JSON throughout


LAUNCH_1_SHELL = ("team", "launch", "1:shell", "write a haiku", "--name", "t")


def test_every_printed_command_runs_from_a_worktree_pane(tmp_path: Path) -> None:
    """tests/tmux/test_pane_commands.py's check, for a worker whose pane is in its worktree:
    identity, inbox, the refusal's commit commands and the leader's nudge all work there."""
    import re
    import subprocess

    from tests.tmux.test_pane_commands import BARE_PATH, PRINTED, VENV_OMP, run_in_pane
    from tests.workspace.gitrepo import IDENTITY

    if shutil.which("tmux") is None or shutil.which("git") is None:
        pytest.skip("tmux and git are needed")
    if not VENV_OMP.is_file():
        pytest.skip(f"no console script at {VENV_OMP}: omp is not installed in a venv")
    home = tmp_path / "home"
    home.mkdir()
    env = child_env(
        home,
        PATH=BARE_PATH,
        SHELL="/bin/sh",
        ENV="",
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(tmp_path / "state"),
        **IDENTITY,
    )
    for key in ("TMUX", "TMUX_PANE"):
        env.pop(key, None)
    proj = tmp_path / "proj"
    proj.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *args], cwd=proj, env=env, check=True)
    (proj / ".omp").mkdir()
    (proj / ".omp" / "agents.toml").write_text(
        "[agents.shell]\n"
        'command = ["sh", "-i"]\n'
        "ready_patterns = ['^[$#] ?$']\n"
        "prompt_pattern = '^[$#] '\n"
        "busy_patterns = ['^omp-never-busy$']\n"
        "startup_timeout = 60\n"
    )
    socket = f"omp-test-{secrets.token_hex(4)}"
    launched = subprocess.run(
        [str(VENV_OMP), *LAUNCH_1_SHELL, "--socket", socket, "--nudge-leader", "--json"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    tmux = Tmux(socket_name=socket, config_file="/dev/null")
    try:
        assert launched.returncode == 0, launched.stdout + launched.stderr
        out = json.loads(launched.stdout)
        pane = out["workers"][0]["paneId"]
        cfg = team_config.load(StatePaths(proj).team("t"))
        tree = worktree_of(cfg.worker("worker-1"))
        assert tree is not None
        where = run_in_pane(
            tmux, pane, 'printf \'{"pwd":"%s","root":"%s"}\' "$PWD" "$OMP_ROOT"', tmp_path / "w"
        )
        assert where == {"pwd": tree.path, "root": str(proj)}
        inbox = StatePaths(proj).team("t").inbox("worker-1").read_text()
        printed = PRINTED.findall(inbox)
        token = None
        for i, cmd in enumerate(printed[:4]):
            cmd = cmd.replace("<text>", "started").replace("<one-line summary>", "a haiku")
            if "<claimToken>" in cmd:
                assert token is not None
                cmd = cmd.replace("<claimToken>", token)
                tmux.send_literal(pane, "echo 'a haiku' > haiku.txt")  # work, not committed
                tmux.send_key(pane, "Enter")
                refused = run_in_pane(tmux, pane, cmd, tmp_path / f"refused-{i}.json")
                assert refused["error"] == "uncommitted_changes", refused
                for j, line in enumerate(refused["commands"]):
                    run_in_pane(tmux, pane, f"{line}; echo '{{}}'", tmp_path / f"git-{j}.json")
            reply = run_in_pane(tmux, pane, cmd, tmp_path / f"out-{i}.json")
            assert reply.get("ok") is True, (cmd, reply)
            if "claim-task" in cmd:
                token = reply["claimToken"]
        task = json.loads(StatePaths(proj).team("t").task("1").read_text())
        assert task["status"] == "completed" and task["work"]["filesChanged"] == ["haiku.txt"]
        # typed by the worker's send-message, or by the monitor if the send found the leader's
        # pane busy and deferred: waited for, not read once
        nudge = poll(
            lambda: re.search(
                r"Read them: (.*? --json)", "\n".join(tmux.capture(out["leaderPaneId"], 200))
            ),
            30,
            "the leader's nudge on its screen",
        )
        read = run_in_pane(tmux, out["leaderPaneId"], nudge.group(1), tmp_path / "leader.json")
        assert read["ok"] is True and [m["body"] for m in read["messages"]] == ["started"]
    finally:
        tmux.kill_server()
