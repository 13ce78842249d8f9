"""Where a team's workers run when some run on other hosts, as the team's config records it.

A worker on another host (`omp team launch --host NAME:N`, `omp.team.remote`) has, in its entry
of the leader's `config.json` (additively; the TypeScript tool ignores both)::

    "paneId": null,            # never a pane id: the local tmux server's `%3` is another pane
    "remote": {"host": "build1", "root": "<abs>", "worktree": "<abs>",
               "branch": "omp/<team>/<worker>", "socket": "omp-<project>", "pane": "%3"},
    "workspace": {"kind": "worktree", "path": "<abs, on the host>", "branch": "...",
                  "base": "<sha>", "host": "build1"}

and the team records how each host is reached (the `[hosts.<name>]` settings the launch used),
so every later command reaches the same host the same way::

    "hosts": {"build1": {"address": "me@build1", "port": 22, ...}}

On the host, the team's config is mirrored under `root` without any pane of the leader's tmux
server (`mirror_of`): the omp there never types into a pane of its own host's server by mistake.
It says `"verifyAt": "leader"`: a completion there that needs a check is queued (`verifying`,
its check `queued`), and the leader's monitor brings the branch back and checks it
(`omp.monitor.verifying`), as it checks a local worker's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from omp.store.names import is_valid_name

TYPE_CHECKING = False  # true for mypy: ssh (and subprocess, ~50 ms) loads only to reach a host
if TYPE_CHECKING:
    from omp.tmux.ssh import Host


class Placed(NamedTuple):
    """Where a remote worker runs (its config entry's `remote`)."""

    host: str
    root: str  # OMP_ROOT on the host: the team's mirrored state is under it
    worktree: str  # the worker's checkout there
    branch: str
    socket: str  # the host's tmux server (-L)
    pane: str

    def to_config(self) -> dict[str, str]:
        return self._asdict()


def session_of(team: str, worker: str) -> str:
    """The tmux session of a worker on its host, one per worker ('.' is not allowed in it)."""
    return f"omp-{team}-{worker}".replace(".", "_")


def placed_of(entry: dict[str, Any] | None) -> Placed | None:
    """The remote placement of a worker's config entry, or None (a local worker, or a record
    that is not one)."""
    raw = entry.get("remote") if isinstance(entry, dict) else None
    if not isinstance(raw, dict):
        return None
    values = [raw.get(k) for k in Placed._fields]
    strings = [v for v in values if isinstance(v, str) and v]
    if len(strings) != len(values):
        return None
    if not is_valid_name(raw["host"]):
        return None
    return Placed(*strings)


def hosts_of(raw: dict[str, Any]) -> dict[str, Host]:
    """The hosts a team's config records (`hosts`), with their settings; a record that does not
    read as settings falls back to ssh's defaults for that name."""
    from omp.tmux.ssh import Host, HostSettings

    found = raw.get("hosts")
    out: dict[str, Host] = {}
    if not isinstance(found, dict):
        return out
    defaults = HostSettings()._asdict()
    for name, body in found.items():
        if not is_valid_name(name):
            continue
        values: dict[str, Any] = {}
        if isinstance(body, dict):
            for key, value in body.items():
                want = defaults.get(key)
                if want is not None and type(value) is type(want):
                    values[key] = value
        out[name] = Host(name, HostSettings(**values))
    return out


def host_of(raw: dict[str, Any], entry: dict[str, Any] | None) -> Host | None:
    """The host a worker runs on (None: a local worker)."""
    placed = placed_of(entry)
    if placed is None:
        return None
    from omp.tmux.ssh import Host

    return hosts_of(raw).get(placed.host) or Host(placed.host)


def remote_workers(raw: dict[str, Any]) -> dict[str, Placed]:
    """Every remote worker of a team's config, by name."""
    out: dict[str, Placed] = {}
    workers = raw.get("workers")
    for w in workers if isinstance(workers, list) else []:
        placed = placed_of(w)
        if placed is not None and isinstance(w.get("name"), str):
            out[w["name"]] = placed
    return out


def by_server(placed: dict[str, Placed]) -> dict[tuple[str, str], dict[str, Placed]]:
    """Remote workers grouped by (host, tmux server): what one listing there reads at once."""
    out: dict[tuple[str, str], dict[str, Placed]] = {}
    for w, p in placed.items():
        out.setdefault((p.host, p.socket), {})[w] = p
    return out


def hosts_json(hosts: dict[str, Host]) -> dict[str, dict[str, Any]]:
    """What a team's config records of the hosts it uses (their settings, all of them)."""
    return {name: h.settings._asdict() for name, h in hosts.items()}


def _mirrored(entry: dict[str, Any]) -> dict[str, Any]:
    """A worker entry as a host keeps it: no pane id, and its own checkout is local there (a
    workspace's `host` means "on another host than the one reading this")."""
    out = {**entry, "paneId": None}
    ws = entry.get("workspace")
    placed = placed_of(entry)
    if isinstance(ws, dict) and placed is not None and ws.get("host") == placed.host:
        out["workspace"] = {k: v for k, v in ws.items() if k != "host"}
    return out


def mirror_of(raw: dict[str, Any]) -> dict[str, Any]:
    """The team's config as a host keeps it: no pane of the leader's tmux server (its ids mean
    other panes there), no tmux identity, no hosts' settings."""
    out = {k: v for k, v in raw.items() if k not in ("tmuxIdentity", "hosts", "tmuxSession")}
    out["leaderPaneId"] = None
    # a completion there is checked here, where the branch comes back (`omp.api.completion`)
    out["verifyAt"] = "leader"
    workers = raw.get("workers")
    if isinstance(workers, list):
        out["workers"] = [_mirrored(w) if isinstance(w, dict) else w for w in workers]
    return out
