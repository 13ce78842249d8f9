"""Placing a worker on another host (`omp team launch --host NAME:N`, `omp.team.launch`).

On the host, under `<dir>/<project>/` (`[hosts.<name>] dir`):

    repo.git, worktrees/<team>/<worker>   the worker's checkout (`omp.workspace.remote`)
    root/.omp/state/team/<team>/          the team's config and the worker's inbox, mirrored:
                                          the omp there reads them (OMP_ROOT=root)
    store-url                             the store's URL, 0600 (OMP_STORE_FILE)

The agent runs in a pane of the host's tmux server (`omp.tmux.remote`), with the identity launch
gives every worker (OMP_TEAM, OMP_WORKER, OMP_LAUNCH_TOKEN): the omp on that host fences it
against the mirrored config exactly as the leader's would (`omp.api.authorize`), and its mail
and tasks go through the store every host reaches. The store's address and credentials reach
the host through ssh's standard input into the 0600 file: never a command line, an environment
typed into a pane, an inbox or a message.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from omp.mail import bootstrap
from omp.record.placement import Placed, mirror_of, session_of
from omp.store.paths import INBOX
from omp.tmux import ssh
from omp.tmux.remote import RemoteTmux
from omp.workspace import remote as checkout


def state_dir(root: str, team: str) -> str:
    return f"{root}/.omp/state/team/{team}"


def inbox_path(root: str, team: str, worker: str) -> str:
    return f"{state_dir(root, team)}/workers/{worker}/{INBOX}"


def mirror_config(host: ssh.Host, root: str, team: str, config: dict[str, Any]) -> None:
    """The team's config on the host (after every change of it: launch, grow, removal)."""
    text = json.dumps(mirror_of(config), indent=2, ensure_ascii=False) + "\n"
    ssh.put_file(host, f"{state_dir(root, team)}/config.json", text)


def project_key(root: Path) -> str:
    """The name of a project's directory on a host: readable, and unique per leader checkout
    (two projects called `app` on one laptop never share a clone there)."""
    import hashlib
    import re

    real = os.path.realpath(root)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", os.path.basename(real)).strip("-")[:40] or "project"
    return f"{stem}-{hashlib.sha256(real.encode()).hexdigest()[:8]}"


def identity_env(
    host: ssh.Host, team: str, worker: str, token: str, root: str, url_file: str
) -> dict[str, str]:
    """What a remote agent's pane is started with: the identity launch gives every worker, the
    mirrored state (OMP_ROOT), the store's URL file, the host's omp, and the host's name as the
    team knows it (its heartbeats say where they come from: `omp.tasks.presence`)."""
    return {
        "OMP_TEAM": team,
        "OMP_WORKER": worker,
        "OMP_TEAM_WORKER": "1",
        "OMP_LAUNCH_TOKEN": token,
        "OMP_ROOT": root,
        "OMP_STORE_FILE": url_file,
        "OMP_COMMAND": host.settings.omp,
        "OMP_HOST": host.name,
    }


def open_worker(
    host: ssh.Host,
    *,
    leader_repo: Path,
    project: str,
    team: str,
    worker: str,
    token: str,
    start: str,
    store_url: str,
    agent_command: list[str],
    env: dict[str, str] | None = None,
) -> Placed:
    """The worker's checkout and its agent's pane on `host` (the agent waits for its trigger:
    `publish` then writes what it reads); `env`: more of the agent's environment (omp's own
    knobs, never a credential: those are the host's own)."""
    branch = f"omp/{team}/{worker}"
    worktree = checkout.provision(
        host, leader_repo, project, branch=branch, start=start, worktree=f"{team}/{worker}"
    )
    base = checkout.prepare(host, project)
    root = f"{base}/root"
    url_file = f"{base}/store-url"
    ssh.put_file(host, url_file, store_url + "\n")
    env = {**(env or {}), **identity_env(host, team, worker, token, root, url_file)}
    socket = f"omp-{project}"
    tmux = RemoteTmux(host, socket)
    _, _, pane = tmux.new_session(
        session_of(team, worker), cwd=worktree, command=agent_command, env=env
    )
    tmux.set_pane_option(pane, "remain-on-exit", "on")
    return Placed(host.name, root, worktree, branch, socket, pane)


def worker_inbox(
    host: ssh.Host,
    placed: Placed,
    *,
    team: str,
    worker: str,
    task_id: str | None,
    description: str,
    teammates: list[str],
    verify: str | None = None,
) -> str:
    """The inbox of a worker on `host`: its paths and omp command are the host's."""
    return bootstrap.inbox_markdown(
        team=team,
        worker=worker,
        task_id=task_id,
        description=description,
        teammates=teammates,
        result_path=Path(f"{state_dir(placed.root, team)}/workers/{worker}/result.md"),
        omp=host.settings.omp,
        worktree=(placed.worktree, placed.branch),
        verify=verify,
    )


def publish(
    host: ssh.Host, placed: Placed, *, team: str, worker: str, config: dict[str, Any], inbox: str
) -> None:
    """The team's config and the worker's inbox on its host (what the omp there reads)."""
    mirror_config(host, placed.root, team, config)
    ssh.put_file(host, inbox_path(placed.root, team, worker), inbox)


def place(
    host: ssh.Host,
    *,
    leader_repo: Path,
    project: str,
    team: str,
    worker: str,
    task_id: str | None,
    description: str,
    teammates: list[str],
    config: dict[str, Any],
    token: str,
    start: str,
    store_url: str,
    agent_command: list[str],
) -> Placed:
    """One worker on `host`, start to finish short of its trigger (see the module docstring)."""
    placed = open_worker(
        host,
        leader_repo=leader_repo,
        project=project,
        team=team,
        worker=worker,
        token=token,
        start=start,
        store_url=store_url,
        agent_command=agent_command,
    )
    inbox = worker_inbox(
        host,
        placed,
        team=team,
        worker=worker,
        task_id=task_id,
        description=description,
        teammates=teammates,
    )
    publish(host, placed, team=team, worker=worker, config=config, inbox=inbox)
    return placed


def trigger(host: ssh.Host, placed: Placed, team: str, worker: str) -> str:
    """The line that starts the worker on its task (`omp.mail.bootstrap.trigger_line`)."""
    line = bootstrap.trigger_line(Path(inbox_path(placed.root, team, worker)))
    tmux = RemoteTmux(host, placed.socket)
    tmux.send_literal(placed.pane, line)
    tmux.send_key(placed.pane, "Enter")
    return line


def bring_back(host: ssh.Host, leader_repo: Path, project: str, placed: Placed) -> str:
    """The worker's branch into the leader's repository (fast-forward only): its commit."""
    return checkout.fetch_back(host, leader_repo, project, branch=placed.branch)


def remove(host: ssh.Host, project: str, team: str, worker: str, placed: Placed) -> None:
    """The worker's pane, checkout and mirrored state go (its branch is kept at the leader's)."""
    tmux = RemoteTmux(host, placed.socket)
    tmux.kill_session(session_of(team, worker))
    checkout.remove(host, project, worktree=f"{team}/{worker}")


# ---- a remote worker's later life: merge, shutdown, removal, resume (omp.team.remote_life) ----


def project_of(placed: Placed) -> str:
    """The project key of the worker's clone on its host (`root` is `<dir>/<project>/root`)."""
    return PurePosixPath(placed.root).parent.name


def fetch_branch(host: ssh.Host, leader_repo: Path, placed: Placed) -> str:
    """`bring_back` for a recorded worker: its branch into the leader's repository
    (fast-forward only; a branch that moved on both sides is `git_failed`, never overwritten)."""
    return bring_back(host, leader_repo, project_of(placed), placed)


def uncommitted(host: ssh.Host, placed: Placed) -> list[str] | None:
    """What the worker's checkout on its host holds uncommitted (`git status --porcelain`
    there, nothing opened here); None when the checkout is not there (or git cannot tell)."""
    res = ssh.run(
        host,
        ["git", "-C", placed.worktree, "status", "--porcelain", "--untracked-files=all"],
        check=False,
    )
    if res.code != 0:
        return None
    return [line[3:] for line in res.out.splitlines() if len(line) > 3]


def close(host: ssh.Host, placed: Placed, team: str, worker: str) -> bool:
    """The worker's session on its host goes (its agent with it); False if it was gone."""
    return RemoteTmux(host, placed.socket).kill_session(session_of(team, worker))


def remove_checkout(host: ssh.Host, placed: Placed, team: str, worker: str) -> None:
    """The worker's checkout on its host goes (its branch there too): the leader's copy of the
    branch is what is kept. Call it only once `fetch_branch` brought the branch back."""
    checkout.remove(host, project_of(placed), worktree=f"{team}/{worker}", branch=placed.branch)


_UNMIRROR = """rm -rf -- "$1"
rmdir -- "$2" 2>/dev/null
if [ ! -d "$2" ]; then rm -f -- "$3"; fi
exit 0
"""


def unmirror(host: ssh.Host, placed: Placed, team: str) -> None:
    """The team's mirrored state on the host goes (its config, the workers' inboxes), and the
    store's address file with it once no other team of the project is mirrored there."""
    teams = f"{placed.root}/.omp/state/team"
    url_file = f"{PurePosixPath(placed.root).parent}/store-url"
    ssh.run(host, ["sh", "-c", _UNMIRROR, "sh", state_dir(placed.root, team), teams, url_file])


def resume_inbox_path(root: str, team: str, worker: str) -> str:
    return f"{state_dir(root, team)}/workers/{worker}/resume.md"


def reopen(
    host: ssh.Host,
    placed: Placed,
    *,
    team: str,
    worker: str,
    config: dict[str, Any],
    token: str,
    store_url: str,
    agent_command: list[str],
    resume_text: str,
) -> Placed:
    """The worker's pane again on its host, in the checkout kept there (`omp team resume`): the
    team's config mirrored again (the new token fences the earlier generation there too), its
    resume inbox written, a new session of the worker's name (a dead one closed first) with the
    same identity variables as `place` gives. The new placement (another pane id)."""
    root = placed.root
    base = str(PurePosixPath(root).parent)
    mirror_config(host, root, team, config)
    ssh.put_file(host, resume_inbox_path(root, team, worker), resume_text)
    url_file = f"{base}/store-url"
    if store_url:  # else the one `place` wrote stays
        ssh.put_file(host, url_file, store_url + "\n")
    env = identity_env(host, team, worker, token, root, url_file)
    tmux = RemoteTmux(host, placed.socket)
    tmux.kill_session(session_of(team, worker))  # its dead pane, kept by remain-on-exit
    _, _, pane = tmux.new_session(
        session_of(team, worker), cwd=placed.worktree, command=agent_command, env=env
    )
    tmux.set_pane_option(pane, "remain-on-exit", "on")
    return placed._replace(pane=pane)


def push_target(host: ssh.Host, leader_repo: Path, placed: Placed, target: str) -> None:
    """The leader's branch `target` onto the worker's host: what it rebases onto after a
    merge conflict (the conflict mail names it, as for a local worker)."""
    checkout.push_branch(host, leader_repo, project_of(placed), branch=target)
