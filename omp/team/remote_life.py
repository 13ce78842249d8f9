"""The later life of a team's workers on other hosts (`omp.team.remote` placed them): their
branches brought back for `diff` and `merge`, and their panes, checkouts and mirrored state
taken down by `shutdown` and `remove-worker`, with nothing lost.

What is on a host is only taken away once it is safe at the leader's:

- the pane (the worker's session there) goes first, so nothing is committed after the fetch;
- the branch is fetched into the leader's repository, fast-forward only (a branch that moved on
  both sides is refused and reported, never overwritten);
- the checkout goes only when its branch was fetched and it holds nothing uncommitted (asked
  with `git status` over ssh: its path is on the host, never opened here);
- the team's mirrored state goes with the last step of a shutdown, then the host's ssh master.

A host that does not answer is reported with what was left there (`left`): the local part of
the command completes all the same, and a later `shutdown` (or `remove-worker`) run again
finishes the host's part once it answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.record.placement import Placed, host_of, hosts_of, remote_workers
from omp.tmux import ssh


def leader_repo(cfg: TeamConfig) -> Path | None:
    """The leader's repository the workers' branches come back to (None: not in git)."""
    ws = cfg.raw.get("workspace")
    repo = ws.get("repo") if isinstance(ws, dict) else None
    if isinstance(repo, str) and repo:
        return Path(repo)
    from omp.workspace import repo as git_repo

    try:
        return git_repo.toplevel(cfg.paths.project.root)
    except OmpError:
        return None


def placements(cfg: TeamConfig, removed: bool = True) -> dict[str, Placed]:
    """Every remote worker's placement, the current roster first, then (with `removed`)
    workers taken off the team whose record still says where they ran."""
    out = dict(remote_workers(cfg.raw))
    if removed:
        gone = cfg.raw.get("removedWorkers")
        out_gone = remote_workers({"workers": gone if isinstance(gone, list) else []})
        for w, p in out_gone.items():
            out.setdefault(w, p)
    return out


def _host(cfg: TeamConfig, placed: Placed) -> ssh.Host:
    return hosts_of(cfg.raw).get(placed.host) or ssh.Host(placed.host)


def fetch(cfg: TeamConfig, worker: str, repo: Path) -> dict[str, Any]:
    """One remote worker's branch into `repo`: `{"fetched": commit}`, or what stopped it
    (`error`: host_unreachable, git_failed (a refusal), remote_failed; `message`)."""
    placed = placements(cfg).get(worker)
    if placed is None:
        return {}
    from omp.team import remote

    row: dict[str, Any] = {"host": placed.host}
    try:
        row["fetched"] = remote.fetch_branch(_host(cfg, placed), repo, placed)
    except OmpError as exc:
        row.update(fetched=None, error=exc.code, message=exc.message)
    return row


def push_target(cfg: TeamConfig, worker: str, target: str) -> bool:
    """The leader's `target` onto a remote worker's host (what it rebases onto); False when
    that failed (its host did not answer)."""
    placed = placements(cfg).get(worker)
    repo = leader_repo(cfg)
    if placed is None or repo is None:
        return False
    from omp.team import remote

    try:
        remote.push_target(_host(cfg, placed), repo, placed, target)
    except OmpError:
        return False
    return True


def uncommitted(cfg: TeamConfig, worker: str) -> list[str] | None:
    """What a remote worker's checkout holds uncommitted, asked over ssh (None: cannot tell)."""
    placed = placements(cfg).get(worker)
    if placed is None:
        return None
    from omp.team import remote

    try:
        return remote.uncommitted(_host(cfg, placed), placed)
    except OmpError:
        return None


def take_down(
    cfg: TeamConfig, worker: str, placed: Placed, repo: Path | None, *, dead_hosts: set[str]
) -> dict[str, Any]:
    """Close one remote worker's pane, fetch its branch, remove its checkout when that is safe
    (see the module docstring). Its row: what was done, and what was `left` on the host and
    why. A host found down is added to `dead_hosts` (its other workers are not tried again)."""
    from omp.team import remote

    host = _host(cfg, placed)
    row: dict[str, Any] = {
        "worker": worker,
        "host": placed.host,
        "branch": placed.branch,
        "closedPane": False,
        "fetched": None,
        "checkoutRemoved": False,
    }

    def down(exc: OmpError) -> dict[str, Any]:
        dead_hosts.add(placed.host)
        return _left(row, placed, "host_unreachable", exc.message)

    if placed.host in dead_hosts:
        return _left(row, placed, "host_unreachable", f"host {placed.host} did not answer")
    try:
        row["closedPane"] = remote.close(host, placed, cfg.name, worker)
    except OmpError as exc:
        if exc.code == "host_unreachable":
            return down(exc)
        row["paneError"] = exc.message  # tmux said something else: the fetch still goes on
    try:
        dirty = remote.uncommitted(host, placed)  # None: no checkout there (removed before)
    except OmpError as exc:
        return (
            down(exc)
            if exc.code == "host_unreachable"
            else _left(row, placed, exc.code, exc.message)
        )
    if repo is None:
        return _left(row, placed, "not_a_git_repo", "the leader's project is not in git")
    try:
        row["fetched"] = remote.fetch_branch(host, repo, placed)
    except OmpError as exc:
        if exc.code == "host_unreachable":
            return down(exc)
        if dirty is None:  # nothing of it there any more (a second run): nothing to fetch
            row["checkoutRemoved"] = row["alreadyGone"] = True
            return row
        return _left(row, placed, exc.code, f"its branch was not fetched: {exc.message}")
    if dirty:
        row["uncommitted"] = dirty[:50]
        return _left(
            row, placed, "uncommitted", f"{len(dirty)} uncommitted file(s) in its checkout"
        )
    try:
        remote.remove_checkout(host, placed, cfg.name, worker)
        row["checkoutRemoved"] = True
    except OmpError as exc:
        if exc.code == "host_unreachable":
            return down(exc)
        return _left(row, placed, exc.code, exc.message)
    return row


def _left(row: dict[str, Any], placed: Placed, code: str, why: str) -> dict[str, Any]:
    """What stays on the host, said: the pane if it was not closed, the checkout."""
    left = [] if row["closedPane"] or code != "host_unreachable" else ["its pane"]
    left.append(f"its checkout {placed.worktree}")
    return {**row, "error": code, "why": why, "left": left}


def shut_down(cfg: TeamConfig) -> dict[str, Any]:
    """`omp team shutdown`'s part on other hosts: every remote worker taken down
    (`take_down`), the team's mirrored state removed from each host that answered, each host's
    ssh master stopped. `{"remote": [rows], "hostsLeft": [{host, why, left}]}`."""
    from omp.team import remote

    placed = placements(cfg, removed=False)
    if not placed:
        return {}
    repo = leader_repo(cfg)
    dead: set[str] = set()
    rows = [take_down(cfg, w, p, repo, dead_hosts=dead) for w, p in placed.items()]
    by_host: dict[str, Placed] = {}
    for p in placed.values():
        by_host.setdefault(p.host, p)
    hosts_left: list[dict[str, Any]] = []
    for name, p in by_host.items():
        host = _host(cfg, p)
        if name not in dead:
            try:
                remote.unmirror(host, p, cfg.name)
            except OmpError as exc:
                if exc.code == "host_unreachable":
                    dead.add(name)
        if name in dead:
            mine = [r for r in rows if r["host"] == name]
            hosts_left.append(
                {
                    "host": name,
                    "why": next((r["why"] for r in mine if r.get("why")), "it did not answer"),
                    "left": [f"{r['worker']}: {', '.join(r['left'])}" for r in mine]
                    + [f"the team's mirrored state {remote.state_dir(p.root, cfg.name)}"],
                }
            )
        ssh.stop_master(host)
    return {"remote": rows, **({"hostsLeft": hosts_left} if hosts_left else {})}


def remove_one(cfg: TeamConfig, worker: str, raw_after: dict[str, Any]) -> dict[str, Any] | None:
    """`omp team remove-worker` of a remote worker (`cfg`: the config before the removal,
    `raw_after`: the one written): taken down as shutdown does it, and the team's config
    mirrored again on its host, so the omp there fences the removed identity too."""
    from omp.team import remote
    from omp.team.grow_hosts import mirror_everywhere

    placed = placements(cfg).get(worker)
    if placed is None:
        return None
    row = take_down(cfg, worker, placed, leader_repo(cfg), dead_hosts=set())
    mirrored: set[tuple[str, str]] = set()
    if row.get("error") != "host_unreachable":
        try:
            remote.mirror_config(_host(cfg, placed), placed.root, cfg.name, raw_after)
            mirrored.add((placed.host, placed.root))
        except OmpError as exc:
            row["mirrorError"] = exc.message
    else:
        mirrored.add((placed.host, placed.root))  # (it did not answer just now)
    # and every other host the team uses: its omp fences the removed identity too
    down = mirror_everywhere(raw_after, cfg.name, skip=mirrored)
    if down:
        row["hostsNotUpdated"] = down
    return row


def host_entry(cfg: TeamConfig, worker: str) -> ssh.Host | None:
    """The host a current worker runs on (None: a local worker)."""
    return host_of(cfg.raw, cfg.worker(worker))
