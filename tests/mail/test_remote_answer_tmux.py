"""`omp team answer` for a worker on another host (a real sshd on 127.0.0.1 with a second user as
the host, a Redis store, a fake agent drawing Claude Code's permission prompt in a pane of the
host's tmux server): the prompt is read over ssh and the answer typed there, with the local
pane's checks: the pane must sit in the worker's own session (`pane_mismatch` else), not be
scrolled (copy mode), not be typed into by anyone else (the pane's lock, the monitor's), and a
host that does not answer is `host_unreachable` with nothing typed."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import NamedTuple

import pytest

from omp.errors import OmpError
from omp.mail.answer import Timing, answer
from omp.mail.typein import pane_lock
from omp.record import config as team_config
from omp.record.config import TeamConfig
from omp.record.placement import Placed, hosts_json
from omp.store.paths import StatePaths
from omp.team import remote
from omp.team.setup import create_team
from omp.tmux import ssh
from omp.tmux.remote import RemoteTmux
from tests.helpers import FIXTURES, child_env, poll, run_omp
from tests.remote_parts import MARKS, redis, sshd
from tests.store.redis_server import RedisServer
from tests.tmux.sshd_server import REMOTE_PYTHON, SshServer
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = MARKS
__all__ = ["redis", "sshd"]  # the shared fixtures

SCREEN = FIXTURES / "screens" / "claude-16-permission-prompt.txt"
AGENT = FIXTURES / "agents" / "prompt_agent.py"


class PromptTeam(NamedTuple):
    repo: Path
    host: ssh.Host
    placed: Placed
    keys: str  # the file on the host the agent appends every key it gets to
    url: str

    def cfg(self) -> TeamConfig:
        return team_config.load(StatePaths(self.repo).team("t"))

    def tmux(self) -> RemoteTmux:
        return RemoteTmux(self.host, self.placed.socket)

    def typed(self) -> str:
        return ssh.run(self.host, ["cat", self.keys]).out

    def env(self) -> dict[str, str]:
        return child_env(OMP_STORE=self.url, OMP_NO_MONITOR="1")


def prompt_team(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> PromptTeam:
    """Team `t` whose worker-1 runs on host build1 (recorded as launch records it), its agent
    showing Claude Code's permission prompt there."""
    isolate_git(monkeypatch, tmp_path)
    url = f"{redis.url}?ns=a{secrets.token_hex(4)}"
    monkeypatch.setenv("OMP_STORE", url)
    monkeypatch.setenv("OMP_NO_MONITOR", "1")
    repo = make_repo(tmp_path / "proj")
    create_team(repo, "t", 1, task="answer a prompt")
    team = StatePaths(repo).team("t")
    token = secrets.token_hex(8)
    raw = dict(team_config.load(team).raw, launchToken=token, agent="claude")
    sub = f".omp-remote-{secrets.token_hex(3)}"
    host = sshd.host(dir=sub)
    home = sshd.user.pw_dir
    ssh.put_file(host, f"{sub}/agent/prompt_agent.py", AGENT.read_text(encoding="utf-8"))
    ssh.put_file(host, f"{sub}/agent/screen.txt", SCREEN.read_text(encoding="utf-8"))
    there = f"{home}/{sub}/agent"
    keys = f"{there}/keys"
    command = [REMOTE_PYTHON, f"{there}/prompt_agent.py", f"{there}/screen.txt", keys]
    start = g(repo, "rev-parse", "HEAD")
    placed = remote.place(
        host, leader_repo=repo, project="p1", team="t", worker="worker-1", task_id="1",
        description="answer a prompt", teammates=[], config=raw, token=token, start=start,
        store_url=url, agent_command=command,
    )  # fmt: skip
    raw["workers"][0].update(
        paneId=None,
        agent="claude",
        command=command,
        remote=placed.to_config(),
        workspace={"kind": "worktree", "path": placed.worktree, "branch": placed.branch,
                   "base": start, "host": host.name},
    )  # fmt: skip
    raw["hosts"] = hosts_json({host.name: host})
    team_config.write(team, raw)
    t = PromptTeam(repo, host, placed, keys, url)
    poll(lambda: any("Do you want to proceed?" in ln for ln in t.tmux().capture(placed.pane)))
    return t


def cleanup(t: PromptTeam) -> None:
    try:
        t.tmux().kill_server()
        ssh.run(t.host, ["rm", "-rf", t.host.settings.dir], check=False)
    except Exception:
        pass
    ssh.stop_master(t.host)


def test_answering_a_remote_workers_prompt_reads_and_types_over_ssh_with_every_check(
    sshd: SshServer, redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = prompt_team(sshd, redis, tmp_path, monkeypatch)
    try:
        shown = run_omp("team", "answer", "t", "worker-1", "--json", cwd=t.repo, env=t.env())
        assert shown.rc == 0, shown
        prompt = shown.json["prompt"]
        assert prompt is not None and [o["label"] for o in prompt["options"]][-1] == "No"
        pid = prompt["promptId"]

        wrong = run_omp(
            "team", "answer", "t", "worker-1", "4", "--prompt", "0" * 16, "--json",
            cwd=t.repo, env=t.env(),
        )  # fmt: skip
        assert wrong.json["error"] == "prompt_changed", wrong

        # scrolled by someone: refused
        t.tmux().cmd("copy-mode", "-t", t.placed.pane)
        scrolled = run_omp(
            "team", "answer", "t", "worker-1", "No", "--json", cwd=t.repo, env=t.env()
        )  # fmt: skip
        assert scrolled.json["error"] == "not_answered", scrolled
        assert "copy mode" in scrolled.json["message"]
        t.tmux().cmd("send-keys", "-t", t.placed.pane, "-X", "cancel")

        # someone else types into it (the monitor's nudge holds the same lock): refused
        lock_dir = StatePaths(t.repo).tmux_locks
        with pane_lock(t.tmux(), lock_dir, t.placed.pane, 5.0) as held:
            assert held
            with pytest.raises(OmpError) as busy:
                answer(t.cfg(), "worker-1", "No", timing=Timing(lock=0.3))
        assert busy.value.code == "not_answered" and "busy" in busy.value.message

        # the recorded pane id now names another session's pane on the host: refused
        _, _, other = t.tmux().new_session("stranger", cwd="/", command=["sleep", "600"], env={})
        team = StatePaths(t.repo).team("t")
        raw = t.cfg().raw
        raw["workers"][0]["remote"]["pane"] = other
        team_config.write(team, raw)
        stranger = run_omp(
            "team", "answer", "t", "worker-1", "No", "--json", cwd=t.repo, env=t.env()
        )  # fmt: skip
        assert stranger.json["error"] == "pane_mismatch", stranger
        assert "stranger" in stranger.json["message"]
        raw["workers"][0]["remote"]["pane"] = t.placed.pane
        team_config.write(team, raw)

        # the host stops answering: said, nothing typed
        sshd.stop()
        for args in (["No"], []):
            down = run_omp(
                "team", "answer", "t", "worker-1", *args, "--json", cwd=t.repo, env=t.env(),
                timeout=60,
            )  # fmt: skip
            assert down.rc == 1 and down.json["error"] == "host_unreachable", down
            assert "build1" in down.json["message"] and "worker-1" in down.json["message"]
        sshd.start()
        assert t.typed() == ""  # not one key reached the agent so far

        done = run_omp(
            "team", "answer", "t", "worker-1", "No", "--prompt", pid, "--json",
            cwd=t.repo, env=t.env(),
        )  # fmt: skip
        assert done.rc == 0, done
        assert done.json["keys"] == ["Down", "Down", "Down", "Enter"]
        assert done.json["choice"] == {"number": 4, "label": "No"}
        assert ssh.run(t.host, ["cat", f"{t.keys}.chosen"]).out == "4"
        # three Downs and one Enter (ssh's text read turns its \r into \n)
        assert t.typed().replace("\r", "\n") == "\x1b[B" * 3 + "\n"
        again = run_omp("team", "answer", "t", "worker-1", "1", "--json", cwd=t.repo, env=t.env())
        assert again.json["error"] == "no_prompt", again
    finally:
        cleanup(t)
