"""A worker's checkout on another host (`omp.workspace.remote`), against a real sshd with a
second user as that host: pushed there, worked on there, fetched back fast-forward only."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.tmux import ssh
from omp.workspace import remote
from omp.workspace.git import git
from tests.tmux.sshd_server import SshServer, missing_reason, running

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))

BRANCH = "omp/demo/worker-1"
PROJECT = "p1"


@pytest.fixture
def sshd(monkeypatch: pytest.MonkeyPatch) -> Iterator[SshServer]:
    with running(monkeypatch) as server:
        yield server


def remote_commit(host: ssh.Host, path: str, name: str, text: str) -> None:
    script = (
        'cd "$1" && printf %s "$3" > "$2" && git add "$2" && '
        'git -c user.name=w -c user.email=w@example.invalid commit -q -m "$2"'
    )
    ssh.run(host, ["sh", "-c", script, "sh", path, name, text])


def test_a_worker_branch_goes_out_and_comes_back(sshd: SshServer, repo: Path) -> None:
    host = sshd.host(dir=f".omp-remote-{id(repo)}")
    start = git(repo, "rev-parse", "HEAD").text
    path = remote.provision(
        host, repo, PROJECT, branch=BRANCH, start=start, worktree="demo/worker-1"
    )
    assert path.startswith(sshd.user.pw_dir) and path.endswith("/worktrees/demo/worker-1")
    head = ssh.run(host, ["git", "-C", path, "rev-parse", "HEAD"]).out.strip()
    assert head == start
    remote_commit(host, path, "made-there.txt", "from the build box\n")
    new = remote.fetch_back(host, repo, PROJECT, branch=BRANCH)
    assert new != start
    assert git(repo, "show", f"{new}:made-there.txt").text == "from the build box"
    assert git(repo, "rev-parse", "HEAD").text == start  # the leader's checkout is untouched
    # a resume keeps the worker's commits: the branch there is not pushed over
    again = remote.provision(
        host, repo, PROJECT, branch=BRANCH, start=start, worktree="demo/worker-1"
    )
    assert again == path
    assert ssh.run(host, ["git", "-C", path, "rev-parse", "HEAD"]).out.strip() == new
    remote.remove(host, PROJECT, worktree="demo/worker-1", branch=BRANCH)
    assert ssh.run(host, ["test", "-e", path], check=False).code == 1
    assert git(repo, "rev-parse", BRANCH).text == new  # the leader's copy stays


def test_a_branch_that_moved_on_both_sides_is_not_overwritten(sshd: SshServer, repo: Path) -> None:
    host = sshd.host(dir=f".omp-remote-{id(repo)}")
    start = git(repo, "rev-parse", "HEAD").text
    path = remote.provision(host, repo, PROJECT, branch=BRANCH, start=start, worktree="w1")
    remote_commit(host, path, "there.txt", "there")
    git(repo, "branch", BRANCH, start)
    git(repo, "commit", "-q", "--allow-empty", "-m", "here")  # on main: unrelated
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", BRANCH], check=True)
    git(repo, "commit", "-q", "--allow-empty", "-m", "leader moved the branch")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    moved = git(repo, "rev-parse", BRANCH).text
    with pytest.raises(OmpError) as err:
        remote.fetch_back(host, repo, PROJECT, branch=BRANCH)
    assert err.value.code == "git_failed"
    assert git(repo, "rev-parse", BRANCH).text == moved
