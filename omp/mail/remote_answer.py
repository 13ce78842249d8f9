"""Answering the prompt of a worker on another host (`omp team answer`, the board): its pane is
read and typed into over ssh (`omp.tmux.remote.RemoteTmux` on the host's tmux server, the pane
its config records: `omp.record.placement`), with the checks a local pane gets.

A pane id is the worker's only while it sits in the worker's own session there
(`placement.session_of`): the host's server is shared by every team of the project on it, and
a restarted one gives the same ids to other panes; a pane in another session is refused
(`pane_mismatch`) and nothing is typed. The pane's lock is the one the monitor types nudges
under (`RemoteTmux.lock_path`: a local lock keyed on the host and its server), so no nudge and
no answer interleave their keys. A host that does not answer is `host_unreachable`, said with
the worker's name and the host's, before anything is typed.

Imported only for a worker on another host: a local team's answer loads nothing of ssh.
"""

from __future__ import annotations

from typing import NamedTuple

from omp.errors import OmpError
from omp.record.config import TeamConfig
from omp.record.placement import Placed, host_of, placed_of, session_of
from omp.tmux.args import SEP
from omp.tmux.remote import RemoteTmux

TIMEOUT = 10.0  # seconds a host is given to answer one tmux command

_FMT = SEP.join(["#{pane_id}", "#{pane_dead}", "#{pane_in_mode}", "#{session_name}"])


class PaneSeen(NamedTuple):
    """A remote worker's pane as one `display-message` there sees it."""

    dead: bool
    in_mode: bool
    session: str  # the session it sits in: the worker's, or another's (`pane_mismatch`)


class HostPane(RemoteTmux):
    """The worker's host's tmux server, with the one look answering needs."""

    def seen(self, pane: str) -> PaneSeen | None:
        """The pane's state and session; None when it (or the server) is gone."""
        out = self._query("display-message", "-p", "-t", pane, _FMT)
        f = (out or "").rstrip("\n").split(SEP, 3)
        if len(f) != 4 or f[0] != pane:
            return None
        return PaneSeen(f[1] == "1", f[2] == "1", f[3])


def target(cfg: TeamConfig, worker: str) -> tuple[HostPane, Placed]:
    """The host's server and the worker's placement there (its record must say where)."""
    entry = cfg.worker(worker)
    placed = placed_of(entry)
    host = host_of(cfg.raw, entry)
    if placed is None or host is None:
        raise OmpError(
            "no_prompt", f"{worker}'s record does not say where on its host it runs", worker=worker
        )
    return HostPane(host, placed.socket, timeout=TIMEOUT), placed


def unreachable(worker: str, placed: Placed, exc: OmpError) -> OmpError:
    """`host_unreachable` naming the worker and its host (ssh's words kept)."""
    return OmpError(
        "host_unreachable",
        f"{worker}'s host {placed.host} did not answer (nothing was typed): {exc.message}",
        worker=worker,
        host=placed.host,
    )


def check(tmux: HostPane, placed: Placed, team: str, worker: str) -> None:
    """Refuse to type into the pane unless it is the worker's, alive and not scrolled."""
    try:
        seen = tmux.seen(placed.pane)
    except OmpError as exc:
        if exc.code == "host_unreachable":
            raise unreachable(worker, placed, exc) from None
        raise
    if seen is None:
        raise OmpError("no_prompt", f"{worker}'s pane on {placed.host} is gone", worker=worker)
    if seen.session != session_of(team, worker):
        raise OmpError(
            "pane_mismatch",
            f"pane {placed.pane} on {placed.host} is not {worker}'s any more (it is in session "
            f"{seen.session!r}); nothing was typed",
            pane_id=placed.pane,
            host=placed.host,
        )
    if seen.dead:
        raise OmpError("no_prompt", f"{worker}'s pane on {placed.host} is dead", worker=worker)
    if seen.in_mode:
        raise OmpError("not_answered", f"{worker}'s pane is in copy mode: someone is scrolling it")


def screen(cfg: TeamConfig, worker: str, lines: int) -> list[str]:
    """What the worker's pane shows (read-only: `omp team answer` without a choice): empty
    when the pane is gone, dead or not the worker's; `host_unreachable` when its host does not
    answer."""
    tmux, placed = target(cfg, worker)
    try:
        check(tmux, placed, cfg.name, worker)
    except OmpError as exc:
        if exc.code == "host_unreachable":
            raise
        return []
    try:
        return tmux.capture(placed.pane, lines)
    except OmpError as exc:
        if exc.code == "host_unreachable":
            raise unreachable(worker, placed, exc) from None
        return []
