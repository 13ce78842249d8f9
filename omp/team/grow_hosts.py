"""`omp team add-worker TEAM --host NAME[:N]`: new workers on another host, and what every host
of a team must hear when the team grows.

The newcomers are placed as launch places its remote workers (`omp.team.hosts`: the host probed
first, then `place_all`: a checkout and a pane there each), recorded per the contract
(`omp.record.placement`), their inboxes written on their host and they are triggered there. A
host the team already records is reached as recorded (its `hosts` entry), so every worker on it
is reached the same way.

The team's config is mirrored again on EVERY host the team uses after any add-worker (local
newcomers too): the omp on a host fences identities and checks recipients against its mirror,
so a teammate it does not list could not be written to from there. The newcomers' own hosts
must take it (else the add fails and is undone); another host that does not answer is reported
(`hostsNotUpdated`), the add stands, and the next change mirrored there brings it up to date.

Imported only when a remote worker is involved: a local team's add-worker loads nothing of ssh.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.record.placement import hosts_of, remote_workers
from omp.team import remote
from omp.team.hosts import RemotePlan
from omp.tmux import ssh

Progress = Callable[[str], None]


def plan(
    cfg: TeamConfig,
    given: Sequence[tuple[str, int]],
    new: list[str],
    *,
    worktree: bool,
    backlog: bool,
    progress: Progress,
) -> RemotePlan:
    """Which newcomers go to which host (the last ones, as launch places them), every host
    checked (ssh, tmux, git, omp; a store they all reach); touches nothing."""
    from omp.team import hosts

    total = sum(n for _, n in given)
    if total > len(new):
        raise OmpError(
            "invalid_input",
            f"{total} new worker(s) placed on other hosts, but only {len(new)} added: give N of "
            f"at least {total}, or no N",
            field="host",
        )
    found = hosts.plan(
        cfg.paths.project,
        given,
        new,
        worktree=worktree,
        backlog=backlog,
        progress=progress,
        known=hosts_of(cfg.raw),
    )
    assert found is not None  # `given` is not empty
    return found


def record(rp: RemotePlan, raw: dict[str, Any], entries: list[dict[str, Any]], base: str) -> None:
    """The newcomers' placements into their entries, and their hosts into the team's `hosts`
    (added to those it records, never replacing one)."""
    recorded = raw.get("hosts")
    raw["hosts"] = {**rp.config(), **(recorded if isinstance(recorded, dict) else {})}
    for entry in entries:
        if entry["name"] in rp.placed:
            entry.update(rp.entry(entry["name"], base))


def mirror_everywhere(
    raw: dict[str, Any], team: str, *, skip: set[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """The team's config mirrored again on every host it uses (but the (host, root) pairs in
    `skip`, mirrored already): the hosts that did not take it, with why."""
    known = hosts_of(raw)
    done = set(skip or ())
    down: dict[str, dict[str, Any]] = {}
    for placed in remote_workers(raw).values():
        key = (placed.host, placed.root)
        if key in done or placed.host in down:
            continue
        done.add(key)
        host = known.get(placed.host) or ssh.Host(placed.host)
        try:
            remote.mirror_config(host, placed.root, team, raw)
        except OmpError as exc:
            down[placed.host] = {"host": placed.host, "error": exc.code, "why": exc.message}
    return list(down.values())


def undo(rp: RemotePlan | None, before: dict[str, Any], team: str, *, mirrored: bool) -> None:
    """A failed add-worker: each newcomer placed on a host goes there (its pane, its checkout
    and branch there, its inbox), the team's mirrored state with it on a host the team did not
    use before; once the grown config was mirrored, every host the team used before gets back
    the config as it was (`before`; best effort: a host that does not answer keeps one naming
    workers that are gone, which lets nobody in)."""
    used = {(p.host, p.root) for p in remote_workers(before).values()}
    for worker, placed in list(rp.placed.items()) if rp is not None else []:
        assert rp is not None
        host = rp.hosts[placed.host]
        with contextlib.suppress(Exception):
            remote.close(host, placed, team, worker)
        with contextlib.suppress(Exception):
            remote.remove_checkout(host, placed, team, worker)
        with contextlib.suppress(Exception):
            if (placed.host, placed.root) in used:
                mine = f"{remote.state_dir(placed.root, team)}/workers/{worker}"
                ssh.run(host, ["rm", "-rf", "--", mine])
            else:
                remote.unmirror(host, placed, team)
        rp.placed.pop(worker, None)
    if mirrored:
        mirror_everywhere(before, team)
