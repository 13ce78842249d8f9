"""The panes of a team's workers on other hosts, as `status`, `collect`, `wait` and the removal
checks see them: read over ssh (`omp.tmux.remote`), one tmux call per host and tmux server.

A remote worker's pane is identified by its id and by its session, which is the worker's own
(`omp.record.placement.session_of`): a pane id that a restarted server on the host gave to
another pane reads as `gone`, never `alive`. A host that does not answer is `unreachable`, never
`gone` on the spot: the link may be down while the worker works on (its mail and tasks go through
the store, not through ssh). Imported only for a team that has remote workers: a local team's
`status` loads nothing of ssh.
"""

from __future__ import annotations

from typing import NamedTuple

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.record.placement import by_server, host_of, remote_workers, session_of
from omp.tmux.remote import RemotePane as Listed
from omp.tmux.remote import RemoteTmux

UNREACHABLE = "unreachable"  # a PaneView.state: the worker's host did not answer
TIMEOUT = 10.0  # seconds one host is given to answer (ssh's own connect timeout is 5)


class RemotePane(NamedTuple):
    """A remote worker's pane: the fields of `omp.mail.panes.PaneView`, which is made of it
    (this module is below that one: `panes` imports it only for a team with remote workers)."""

    state: str  # alive | dead | gone | unknown | unreachable
    dead_status: int | None = None
    pid: int | None = None
    host: str | None = None
    note: str | None = None


PaneView = RemotePane


def view_of(row: Listed | None, team: str, worker: str, host: str) -> PaneView:
    """A worker's pane from its host's listing (None: not there)."""
    if row is None or row.session_name != session_of(team, worker):
        return PaneView("gone", host=host)
    if row.dead:
        return PaneView("dead", row.dead_status, host=host)
    return PaneView("alive", pid=row.pid, host=host)


def remote_views(cfg: TeamConfig, names: list[str] | None = None) -> dict[str, PaneView]:
    """Each remote worker's pane (of `names`, default all), read over ssh; a host that does not
    answer gives its workers `unreachable` with ssh's words in `note`."""
    placed = remote_workers(cfg.raw)
    if names is not None:
        placed = {w: p for w, p in placed.items() if w in names}
    groups = by_server(placed)
    out: dict[str, PaneView] = {}
    down: dict[str, str] = {}  # host -> why: its other servers are not asked again
    for (host_name, socket), members in groups.items():
        if host_name in down:
            rows = None
        else:
            host = host_of(cfg.raw, cfg.worker(next(iter(members))))
            assert host is not None
            try:
                rows = RemoteTmux(host, socket, timeout=TIMEOUT).remote_panes() or {}
            except OmpError as exc:
                if exc.code != "host_unreachable":
                    # tmux answered with an error of its own: nothing proven either way
                    out.update({w: PaneView("unknown", host=host_name) for w in members})
                    continue
                down[host_name] = exc.message
                rows = None
        for w, p in members.items():
            if rows is None:
                out[w] = PaneView(UNREACHABLE, host=host_name, note=down[host_name])
            else:
                out[w] = view_of(rows.get(p.pane), cfg.name, w, host_name)
    return out
