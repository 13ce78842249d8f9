"""A worker's checkout on another host: a clone of the leader's repository there, a worktree per
worker, and the worker's branch brought back to the leader's repository.

On the host, under its `dir` (`[hosts.<name>]`, default `~/.omp-remote`):

    <dir>/<project>/repo.git                    a bare repository, one per project
    <dir>/<project>/worktrees/<team>/<worker>   the worker's checkout of its branch
    <dir>/<project>/root                        a detached checkout: the omp there runs with
                                                OMP_ROOT=root (the team's mirrored state is in
                                                its .omp/, and a completion's commits are
                                                counted in its repository)

The leader pushes (over the host's ssh master, `GIT_SSH_COMMAND`): the host never needs a way
back to the leader. The worker's branch starts at the commit the leader's worktree workers start
at, and is fetched back fast-forward only, into the same branch name in the leader's repository,
so `omp team diff`, `verify` and `merge` see it as a local worker's branch. A branch that moved
on the leader's side as well is refused (`git_failed`), never overwritten.
"""

from __future__ import annotations

from pathlib import Path

from omp.errors import OmpError
from omp.store.names import is_valid_name
from omp.tmux import ssh
from omp.workspace.git import git

_PREPARE = """set -e
mkdir -p "$1"
cd "$1"
[ -d repo.git ] || git init -q --bare repo.git
pwd
"""
_WORKTREE = """set -e
cd "$1"
if [ -e "$2/.git" ]; then exit 0; fi
mkdir -p "$(dirname "$2")"
git -C repo.git worktree add -q "$2" "$3"
"""

_ROOT = """set -e
cd "$1"
if [ -e root/.git ]; then exit 0; fi
if [ -d root ] && [ -n "$(ls -A root)" ]; then exit 0; fi
rmdir root 2>/dev/null || true
git -C repo.git worktree add -q --detach ../root "$2"
"""

_REMOVE = """cd "$1" || exit 0
git -C repo.git worktree remove --force "$2" 2>/dev/null
rm -rf "$2"
git -C repo.git worktree prune
if [ -n "$3" ]; then git -C repo.git branch -q -D "$3" 2>/dev/null; fi
exit 0
"""


_DISCARD = """cd "$1" || exit 0
tip=$(git -C repo.git rev-parse -q --verify "refs/heads/$3")
if [ -n "$tip" ] && [ "$tip" != "$4" ]; then exit 3; fi
if [ -d "$2" ] && [ -n "$(git -C "$2" status --porcelain 2>/dev/null)" ]; then exit 3; fi
git -C repo.git worktree remove --force "$2" 2>/dev/null
rm -rf "$2"
git -C repo.git worktree prune
if [ -n "$tip" ]; then git -C repo.git branch -q -D "$3"; fi
exit 0
"""


def project_dir(host: ssh.Host, project: str) -> str:
    if not is_valid_name(project):
        raise OmpError("invalid_input", f"invalid project key {project!r}")
    return f"{host.settings.dir.rstrip('/')}/{project}"


def prepare(host: ssh.Host, project: str) -> str:
    """The project's bare repository on `host` (made if missing); its directory, absolute."""
    out = ssh.run(host, ["sh", "-c", _PREPARE, "sh", project_dir(host, project)]).out
    base = out.strip().splitlines()[-1] if out.strip() else ""
    if not base.startswith("/"):
        raise OmpError(
            "remote_failed", f"on {host.name}: could not make {project_dir(host, project)}"
        )
    return base


def _url(host: ssh.Host, base: str) -> str:
    # scp-like syntax would take the port from nowhere; the ssh options carry it (`-p`)
    return f"ssh://{host.destination}{base}/repo.git"


def _env(host: ssh.Host) -> dict[str, str]:
    return {"GIT_SSH_COMMAND": ssh.git_ssh_command(host)}


def provision(
    host: ssh.Host, leader_repo: Path, project: str, *, branch: str, start: str, worktree: str
) -> str:
    """The worker's checkout on `host`: `branch` pushed there at `start` (a commit of the
    leader's repository) unless it is there already (a resume keeps the worker's commits), and
    a worktree of it at `worktrees/<worktree>`. Its absolute path on the host."""
    base = prepare(host, project)
    ref = f"refs/heads/{branch}"
    have = ssh.run(
        host, ["git", "-C", f"{base}/repo.git", "rev-parse", "-q", "--verify", ref], check=False
    )
    if have.code != 0:
        git(
            leader_repo,
            "push", "-q", _url(host, base), f"{start}:refs/heads/{branch}",
            env=_env(host), timeout=600,
        )  # fmt: skip
    path = f"{base}/worktrees/{worktree}"
    ssh.run(host, ["sh", "-c", _WORKTREE, "sh", base, path, branch], timeout=300)
    ssh.run(host, ["sh", "-c", _ROOT, "sh", base, start], timeout=300)
    return path


def push_new(
    host: ssh.Host, leader_repo: Path, project: str, branches: list[str], start: str
) -> None:
    """`branches` onto `host` at `start` in one push, those not there yet (a resume keeps the
    worker's commits): done before the workers' checkouts are made side by side, since a push
    that lands while another checkout is being added there reads its half-made HEAD."""
    base = prepare(host, project)
    have = ssh.run(
        host,
        ["git", "-C", f"{base}/repo.git", "for-each-ref", "--format=%(refname)", "refs/heads/"],
    ).out.split()
    refspecs = [f"{start}:refs/heads/{b}" for b in branches if f"refs/heads/{b}" not in have]
    if refspecs:
        git(leader_repo, "push", "-q", _url(host, base), *refspecs, env=_env(host), timeout=600)


def fetch_back(host: ssh.Host, leader_repo: Path, project: str, *, branch: str) -> str:
    """Bring `branch` from `host` into the leader's repository (fast-forward only); its commit."""
    base = prepare(host, project)
    git(
        leader_repo,
        "fetch", "-q", _url(host, base), f"refs/heads/{branch}:refs/heads/{branch}",
        env=_env(host), timeout=600,
    )  # fmt: skip
    return git(leader_repo, "rev-parse", f"refs/heads/{branch}").text


def remove(host: ssh.Host, project: str, *, worktree: str, branch: str | None = None) -> None:
    """Remove the worker's checkout on `host` (and its branch there, if named): the leader's
    copy of the branch is what is kept."""
    base = prepare(host, project)
    path = f"{base}/worktrees/{worktree}"
    ssh.run(host, ["sh", "-c", _REMOVE, "sh", base, path, branch or ""])


def discard(host: ssh.Host, project: str, *, worktree: str, branch: str, start: str) -> bool:
    """Undo a checkout made for a launch that failed: it and its branch go only while nothing
    was done in them (the branch still at `start`, the checkout clean); False: kept."""
    base = prepare(host, project)
    path = f"{base}/worktrees/{worktree}"
    res = ssh.run(host, ["sh", "-c", _DISCARD, "sh", base, path, branch, start], check=False)
    if res.code not in (0, 3):
        raise OmpError("remote_failed", f"on {host.name}: could not remove {path}: {res.err}")
    return res.code == 0


def push_branch(host: ssh.Host, leader_repo: Path, project: str, *, branch: str) -> None:
    """The leader's `branch` onto `host` under the same name, replacing what was there (the
    host's copy of a leader's branch is only a mirror): what a worker rebases onto there after
    a merge conflict (`omp team merge` mails it `git rebase <target>`)."""
    base = prepare(host, project)
    git(
        leader_repo,
        "push", "-q", "--force", _url(host, base), f"refs/heads/{branch}:refs/heads/{branch}",
        env=_env(host), timeout=600,
    )  # fmt: skip
