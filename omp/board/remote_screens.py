"""The screens of a team's workers on other hosts, for its board (`omp.board.feed`).

Read in a thread of their own, never in the board's tick: a host that does not answer costs
ssh's connect timeout, and the board must not stall for it. Per host's tmux server and round,
one `list-panes` (each pane's state and its session: a pane is the worker's only in the
worker's own session, `session_of`) and one `capture_many` of the live ones, over the host's
multiplexed connection (`omp.monitor.remote.RemoteTyping`). A host that does not answer is
tried again after `BACKOFF` seconds, its workers shown `unreachable` meanwhile. The thread ends
once nobody asked for the screens for `IDLE` seconds (a board page closed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.record.placement import Placed, by_server, hosts_of, remote_workers, session_of
from omp.tmux.ssh import Host

EVERY = 1.5  # seconds between two reads of a host's screens
BACKOFF = 30.0  # seconds before a host that did not answer is tried again
IDLE = 30.0  # seconds without a reader before the thread ends
LINES = 60


class Screen(NamedTuple):
    state: str  # alive | dead | gone | unreachable | unknown
    dead_status: int | None
    lines: tuple[str, ...]


class RemoteScreens:
    """One team's remote screens, kept fresh by a daemon thread while they are asked for."""

    def __init__(self, team: str, *, every: float = EVERY, lines: int = LINES) -> None:
        self.team = team
        self.every = every
        self.lines = lines
        self._lock = threading.Lock()
        self._placed: dict[str, Placed] = {}
        self._hosts: dict[str, Host] = {}
        self._latest: dict[str, Screen] = {}
        self._asked = 0.0
        self._retry: dict[str, float] = {}  # host -> when to try it again
        self._thread: threading.Thread | None = None

    def latest(self, raw: Mapping[str, Any]) -> dict[str, Screen]:
        """The screens as last read (each remote worker `unknown` until its first read); keeps
        the reader running, with `raw` (the team's config) as what to read."""
        placed = remote_workers(dict(raw))
        with self._lock:
            self._placed, self._hosts = placed, hosts_of(dict(raw))
            self._asked = time.monotonic()
            out = {w: self._latest.get(w, Screen("unknown", None, ())) for w in placed}
            running = self._thread is not None and self._thread.is_alive()
        if placed and not running:
            self._thread = threading.Thread(
                target=self._run, name=f"omp-board-remote-{self.team}", daemon=True
            )
            self._thread.start()
        return out

    def _run(self) -> None:
        while True:
            with self._lock:
                if time.monotonic() - self._asked > IDLE or not self._placed:
                    self._thread = None
                    return
                placed, hosts = dict(self._placed), dict(self._hosts)
            self.read_once(placed, hosts)
            time.sleep(self.every)

    def read_once(self, placed: dict[str, Placed], hosts: dict[str, Host]) -> None:
        """One round over every host's server (the thread's body; tests call it directly)."""
        groups = by_server(placed)
        now = time.monotonic()
        for (name, socket), members in groups.items():
            if self._retry.get(name, 0.0) > now:
                continue
            host = hosts.get(name) or Host(name)
            try:
                found = self._read(host, socket, members)
            except OmpError as exc:
                if exc.code != "host_unreachable":
                    found = {w: Screen("unknown", None, ()) for w in members}
                else:
                    self._retry[name] = now + BACKOFF
                    found = {w: Screen("unreachable", None, ()) for w in members}
            else:
                self._retry.pop(name, None)
            with self._lock:
                self._latest.update(found)

    def _read(self, host: Host, socket: str, members: dict[str, Placed]) -> dict[str, Screen]:
        from omp.monitor.remote import RemoteTyping

        tmux = RemoteTyping(host, socket)
        panes = tmux.remote_panes()
        if panes is None:  # no server there any more
            return {w: Screen("gone", None, ()) for w in members}
        views: dict[str, tuple[str, int | None]] = {}
        for w, p in members.items():
            pane = panes.get(p.pane)
            if pane is None or pane.session_name != session_of(self.team, w):
                views[w] = ("gone", None)
            else:
                views[w] = ("dead", None) if pane.dead else ("alive", None)
        wanted = [members[w].pane for w, (state, _) in views.items() if state != "gone"]
        captured = tmux.capture_many(wanted, self.lines) if wanted else {}
        return {
            w: Screen(state, status, tuple(captured.get(members[w].pane, [])))
            for w, (state, status) in views.items()
        }
