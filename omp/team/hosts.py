"""Workers on other hosts in a launch (`omp team launch N --host NAME:N`, or `[hosts.<name>]
workers = N` in `.omp/config.toml`): which workers go where, checked before anything is touched,
then placed (`omp.team.remote`) and recorded (`omp.record.placement`).

What a launch checks before it makes a pane: every host answers over ssh without a password and
has tmux, git and omp; the team's mail and tasks are in a store every host reaches (files under
`.omp/state/` are not shared between hosts); the workers work in worktrees (a remote worker's
work comes back as its branch). The local workers come first (`worker-1`...), then each host's
in the order given.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp.errors import OmpError
from omp.record.placement import Placed, hosts_json
from omp.record.workspace import Worktree
from omp.store.names import is_valid_name
from omp.store.paths import StatePaths
from omp.tmux import ssh

if TYPE_CHECKING:
    from omp.agents import AgentProfile

Progress = Callable[[str], None]

_PROBE = """command -v tmux >/dev/null 2>&1 || exit 3
command -v git >/dev/null 2>&1 || exit 4
exec $1 --version
"""


def parse_host(spec: str) -> tuple[str, int]:
    """`build1:2` (or `build1`: one worker) -> (name, count)."""
    name, sep, count = spec.strip().partition(":")
    if not is_valid_name(name):
        raise OmpError(
            "invalid_input",
            f"--host takes NAME:N (a host of [hosts.<name>] in .omp/config.toml, or an ssh "
            f"destination's name), got {spec!r}",
            field="host",
        )
    if not sep:
        return name, 1
    if not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= 256:
        raise OmpError(
            "invalid_input", f"--host {spec!r}: the worker count must be 1-256", field="host"
        )
    return name, int(count)


@dataclass
class RemotePlan:
    """The launch's workers on other hosts: checked, then placed one by one."""

    hosts: dict[str, ssh.Host]  # the hosts used, by name
    where: dict[str, str]  # worker -> host name
    store_url: str  # the store, its namespace named (never shown: it may hold a password)
    project: str  # the project's directory name on every host
    placed: dict[str, Placed] = field(default_factory=dict)

    def host(self, worker: str) -> ssh.Host:
        return self.hosts[self.where[worker]]

    def config(self) -> dict[str, Any]:
        return hosts_json(self.hosts)

    def entry(self, worker: str, base: str) -> dict[str, Any]:
        """What a remote worker's config entry gets (`omp.record.placement`)."""
        p = self.placed[worker]
        workspace = Worktree(p.worktree, p.branch, base, p.host).to_json()
        return {"paneId": None, "remote": p.to_config(), "workspace": workspace}


def requested_hosts(
    project: StatePaths, given: Sequence[tuple[str, int]]
) -> tuple[list[tuple[str, int]], dict[str, ssh.Host]]:
    """(name, count) pairs of `--host`, else of `[hosts.<name>] workers`; the configured hosts."""
    configured = ssh.load_hosts(project)
    pairs = list(given) or [
        (name, h.settings.workers) for name, h in configured.items() if h.settings.workers > 0
    ]
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise OmpError("invalid_input", f"host {name} is given twice", field="host")
        seen.add(name)
    return pairs, configured


def plan(
    project: StatePaths,
    given: Sequence[tuple[str, int]],
    workers: list[str],
    *,
    worktree: bool,
    backlog: bool,
    progress: Progress,
    known: Mapping[str, ssh.Host] | None = None,
) -> RemotePlan | None:
    """Which of `workers` run where (None: all here), every host checked; touches nothing.
    `known`: hosts a team already records (`omp team add-worker --host`), reached as recorded."""
    pairs, configured = requested_hosts(project, given)
    if not pairs:
        return None
    total = sum(n for _, n in pairs)
    if total > len(workers):
        raise OmpError(
            "invalid_input",
            f"{total} worker(s) placed on other hosts, but the team has {len(workers)}: "
            f"launch at least {total}",
            field="host",
        )
    if backlog:
        raise OmpError(
            "invalid_input",
            "a backlog (--tasks) is not handed to workers on other hosts yet: launch the "
            "backlog's team on this host",
            field="host",
        )
    if not worktree:
        raise OmpError(
            "invalid_input",
            "workers on other hosts work in their own checkout there and hand their work back "
            "as a branch: launch from a git repository with a commit, with the worktree "
            "workspace",
            field="host",
        )
    from omp.store import project_config, select

    url = select.configured_url(project) if project_config.store_selected(project) else ""
    if not url:
        raise OmpError(
            "store_required",
            "workers on other hosts need the team's mail and tasks in a store every host "
            "reaches (files here are not shared): set OMP_STORE=redis://... or [store] url in "
            ".omp/config.toml (docs/remote.md)",
        )
    url = select.with_namespace(url, select.namespace(project, url))
    recorded = known or {}
    hosts = {
        name: recorded.get(name) or configured.get(name) or ssh.Host(name) for name, _ in pairs
    }
    for name, host in hosts.items():
        probe(host)
        if _loopback_store(url) and not _loopback(host.destination):
            progress(
                f"warning: the store is on this machine's loopback address; workers on {name} "
                "reach it only through a tunnel (ssh -R) of their own"
            )
    remote = workers[len(workers) - total :]
    where: dict[str, str] = {}
    it = iter(remote)
    for name, n in pairs:
        for _ in range(n):
            where[next(it)] = name
    from omp.team.remote import project_key

    return RemotePlan(hosts, where, url, project_key(project.root))


def probe(host: ssh.Host) -> str:
    """The host answers, and has tmux, git and the omp its settings name: that omp's version
    line."""
    omp = host.settings.omp
    res = ssh.run(host, ["sh", "-c", _PROBE, "sh", omp], timeout=60, check=False)
    if res.code == 3:
        raise OmpError("tmux_not_found", f"tmux is not installed on host {host.name}")
    if res.code == 4:
        raise OmpError("remote_failed", f"git is not installed on host {host.name}")
    if res.code != 0:
        raise OmpError(
            "remote_failed",
            f"omp does not run on host {host.name} (`{omp} --version` exited {res.code}: "
            f"{res.err[-300:] or res.out[-300:]}); install it there, or name it with "
            f'[hosts.{host.name}] omp = "/path/to/omp" in .omp/config.toml',
            host=host.name,
        )
    return res.out.strip()


def _loopback(host: str) -> bool:
    name = host.rpartition("@")[2]
    return name in ("localhost", "127.0.0.1", "::1") or name.startswith("127.")


def _loopback_store(url: str) -> bool:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme == "unix" or _loopback(parts.hostname or "")


def agent_command(profile: AgentProfile, host: ssh.Host, root: str) -> list[str]:
    """The agent's command line on `host`: the profile's, its omp the host's, granted the
    directory of that omp and the mirrored state (`root`) where the CLI takes such a flag.
    omp's stop hook is not handed to a remote agent (its files are this host's)."""
    words = shlex.split(host.settings.omp)
    command = list(profile.command)
    if command[:3] == [sys.executable, "-m", "omp"]:  # omp's own demo agent
        return [*words, *command[3:]]
    if profile.add_dir_flag:
        grant = [d for d in (_dirname(words[0]) if words else "", root) if d]
        for d in grant:
            command += [profile.add_dir_flag, d]
    return command


def _dirname(path: str) -> str:
    return path.rpartition("/")[0] if path.startswith("/") else ""


PARALLEL = 4  # workers placed at once per host: sshd's MaxSessions is 10 by default


def place_all(
    rp: RemotePlan,
    *,
    leader_repo: Path,
    team: str,
    token: str,
    start: str,
    profile: AgentProfile,
    progress: Progress,
    env: dict[str, str] | None = None,
) -> None:
    """Every remote worker's checkout and pane, recorded in `rp.placed` as each is made (a
    failure later removes what was made). Per host, every worker's branch is pushed at once and
    the first worker placed alone (its clone, root checkout and tmux server are made then), the
    others `PARALLEL` at a time over the host's one connection: a round trip each, not one after
    another, and no push while checkouts are being added there."""
    from omp.team import remote
    from omp.workspace.remote import discard, prepare, push_new

    by_host: dict[str, list[str]] = {}
    for worker, name in rp.where.items():
        by_host.setdefault(name, []).append(worker)
    roots: dict[str, str] = {}

    def one(worker: str) -> None:
        name = rp.where[worker]
        host = rp.hosts[name]
        rp.placed[worker] = remote.open_worker(
            host,
            leader_repo=leader_repo,
            project=rp.project,
            team=team,
            worker=worker,
            token=token,
            start=start,
            store_url=rp.store_url,
            agent_command=agent_command(profile, host, roots[name]),
            env=env,
        )
        progress(f"{worker}: started on {name}")

    def first(name: str) -> None:
        host = rp.hosts[name]
        roots[name] = f"{prepare(host, rp.project)}/root"
        branches = [f"omp/{team}/{w}" for w in by_host[name]]
        push_new(host, leader_repo, rp.project, branches, start)
        one(by_host[name][0])

    try:
        on_each(rp, [ws[0] for ws in by_host.values()], lambda w: first(rp.where[w]))
        on_each(rp, [w for ws in by_host.values() for w in ws[1:]], one)
    except BaseException:
        # a worker not placed may have its branch pushed, even its checkout made, but no pane:
        # those go here (`undo` knows only the placed)
        def forget(worker: str) -> None:
            branch = f"omp/{team}/{worker}"
            with contextlib.suppress(Exception):
                discard(
                    rp.hosts[rp.where[worker]], rp.project, worktree=f"{team}/{worker}",
                    branch=branch, start=start,
                )  # fmt: skip

        with contextlib.suppress(Exception):
            on_each(rp, [w for w in rp.where if w not in rp.placed], forget)
        raise


def on_each(rp: RemotePlan, workers: list[str], act: Callable[[str], None]) -> None:
    """`act(worker)` for each of `workers`, at most `PARALLEL` at a time per host; once all are
    done, the first failure raised (what succeeded is in place for the caller to undo)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    hosts = {rp.where[w] for w in workers}
    gates = {name: threading.Semaphore(PARALLEL) for name in hosts}

    def gated(worker: str) -> None:
        with gates[rp.where[worker]]:
            act(worker)

    if not workers:
        return
    with ThreadPoolExecutor(max_workers=min(PARALLEL * len(hosts), 32)) as pool:
        futures = [pool.submit(gated, w) for w in workers]
    errors = [e for f in futures if (e := f.exception()) is not None]
    if errors:
        raise errors[0]


def publish(
    rp: RemotePlan,
    team: str,
    raw: dict[str, Any],
    *,
    descriptions: dict[str, str],
    verify: str | None,
) -> tuple[dict[str, Path], set[tuple[str, str]]]:
    """The team's config mirrored on each placed worker's host (once per host and root), then
    its inbox there (launch and add-worker): (each worker's inbox path on its host, the
    (host, root) pairs mirrored)."""
    from omp.team import remote

    names = [w["name"] for w in raw["workers"]]
    inboxes: dict[str, Path] = {}
    mirrored: set[tuple[str, str]] = set()
    for w in raw["workers"]:
        name = w["name"]
        placed = rp.placed.get(name)
        if placed is None:
            continue
        host = rp.hosts[placed.host]
        if (placed.host, placed.root) not in mirrored:
            remote.mirror_config(host, placed.root, team, raw)
            mirrored.add((placed.host, placed.root))
        text = remote.worker_inbox(
            host,
            placed,
            team=team,
            worker=name,
            task_id=w.get("taskId"),
            description=descriptions.get(name, ""),
            teammates=[x for x in names if x != name],
            verify=verify,
        )
        path = remote.inbox_path(placed.root, team, name)
        ssh.put_file(host, path, text)
        inboxes[name] = Path(path)
    return inboxes, mirrored


def knobs(profile: AgentProfile, env: Mapping[str, str]) -> dict[str, str]:
    """What of the leader's environment a remote agent is given: only omp's own variables among
    those its profile forwards (the demo agent's `OMP_DEMO_*`); an agent's credentials and
    settings are the host's own, never copied to another machine."""
    from omp.agents import forwarded_env

    return {k: v for k, v in forwarded_env(profile, env).items() if k.startswith("OMP_")}


def undo(rp: RemotePlan, team: str, start: str) -> list[str]:
    """A failed launch: every remote worker it placed goes (its session, and its checkout and
    branch there while nothing was done in them: an agent triggered before the failure may have
    started). What was kept, as `host:path` lines."""
    from omp.record.placement import session_of
    from omp.tmux.remote import RemoteTmux
    from omp.workspace import remote as checkout

    kept: list[str] = []
    for worker, placed in list(rp.placed.items()):
        host = rp.hosts[placed.host]
        with contextlib.suppress(Exception):
            RemoteTmux(host, placed.socket).kill_session(session_of(team, worker))
        try:
            gone = checkout.discard(
                host, rp.project, worktree=f"{team}/{worker}", branch=placed.branch, start=start
            )
        except OmpError:
            gone = False
        if not gone:
            kept.append(f"{placed.host}:{placed.worktree}")
        rp.placed.pop(worker, None)
    for host in rp.hosts.values():
        with contextlib.suppress(Exception):
            ssh.stop_master(host)
    return kept


def attach_lines(rp: RemotePlan, team: str) -> list[str]:
    """How a person looks at each remote worker's pane."""
    from omp.record.placement import session_of

    out = []
    for worker, p in rp.placed.items():
        host = rp.hosts[p.host]
        port = f"-p {host.settings.port} " if host.settings.port else ""
        out.append(
            f"ssh -t {port}{host.destination} tmux -L {p.socket} attach -t "
            f"{shlex.quote(session_of(team, worker))}"
        )
    return out
