"""The board's one background thread: it ticks the feeds of the teams someone watches and pushes
what changed to each watching page's queue.

Nobody watching, nothing runs: the thread waits on its event. While a page is open it ticks every
`TICK` seconds (an action wakes it at once, so its effect shows without waiting). The feeds do
blocking work (files, tmux, git); the web server's event loop never waits on it: changes reach a
page's asyncio queue through `loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

from omp.board.feed import TeamFeed, _stat
from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.textsafe import inline

TICK = 0.5
QUEUE_MAX = 256  # updates a page may lag behind before it is sent everything again


class Watcher:
    """One open page: the team it shows and the queue its stream reads."""

    def __init__(self, team: str | None, loop: asyncio.AbstractEventLoop) -> None:
        self.team = team
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.fresh = True  # sent nothing yet: gets every section first
        self.size = 0


class Hub:
    def __init__(self, project: StatePaths, tick: float = TICK) -> None:
        self.project = project
        self.tick_seconds = tick
        self.sections: dict[str, Any] = {}  # teams, monitor
        self.feeds: dict[str, TeamFeed] = {}
        self._watchers: dict[int, Watcher] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._keys: dict[str, Any] = {}
        self.ticks = 0

    # ---- watchers (called on the event loop) -----------------------------------------------

    def watch(self, team: str | None) -> tuple[int, Watcher]:
        w = Watcher(team, asyncio.get_running_loop())
        with self._lock:
            wid = next(self._ids)
            self._watchers[wid] = w
        self.poke()
        return wid, w

    def unwatch(self, wid: int) -> None:
        with self._lock:
            self._watchers.pop(wid, None)

    def poke(self, team: str | None = None, worker: str | None = None) -> None:
        """Tick now (after an action); forget `worker`'s branch so it is read again."""
        if team is not None and worker is not None:
            with self._lock:
                feed = self.feeds.get(team)
                if feed is not None:
                    feed.refresh_branch(worker)
        self._wake.set()

    # ---- the thread ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="omp-board-hub", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.tick_seconds)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                watchers = list(self._watchers.items())
            if not watchers:
                continue
            try:
                self.tick(watchers)
            except Exception as exc:  # a bug must not end the board: say it on every page
                for _, w in watchers:
                    self._send(w, "error", {"message": inline(f"{type(exc).__name__}: {exc}")})

    def tick(self, watchers: list[tuple[int, Watcher]]) -> None:
        self.ticks += 1
        common = self._tick_common()
        teams = {w.team for _, w in watchers if w.team}
        changed: dict[str, dict[str, Any]] = {}
        for team in teams:
            feed = self.feeds.get(team)
            if feed is None:
                with self._lock:
                    feed = self.feeds[team] = TeamFeed(self.project, team)
            changed[team] = feed.tick()
        with self._lock:  # feeds nobody watches any more stop costing anything
            for team in [t for t in self.feeds if t not in teams]:
                del self.feeds[team]
        for _, w in watchers:
            if w.fresh or w.size > QUEUE_MAX:
                w.fresh = False
                w.size = 0
                everything = dict(self.sections)
                if w.team and w.team in self.feeds:
                    everything.update(self.feeds[w.team].snapshot())
                self._send(w, "reset", everything)
                continue
            out = dict(common)
            if w.team:
                out.update(changed.get(w.team, {}))
            if out:
                self._send(w, "update", out)

    def _send(self, w: Watcher, kind: str, data: Any) -> None:
        w.size += 1

        def put() -> None:
            w.queue.put_nowait((kind, data))

        try:
            w.loop.call_soon_threadsafe(put)
        except RuntimeError:
            pass  # its loop closed: the server is stopping

    # ---- the project's sections ----------------------------------------------------------

    def _tick_common(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        key = self._teams_key()
        if key != self._keys.get("teams"):
            self._keys["teams"] = key
            out["teams"] = self.sections["teams"] = teams_list(self.project)
        mkey = (_stat(self.project.monitor_status), int(time.time() // 5))
        if mkey != self._keys.get("monitor"):
            self._keys["monitor"] = mkey
            from omp.views.status import monitor_summary

            try:
                mon = monitor_summary(self.project)
            except OmpError as err:
                mon = {"state": "unknown", "error": err.code, "message": err.message}
            if mon != self.sections.get("monitor"):
                out["monitor"] = self.sections["monitor"] = mon
        return out

    def _teams_key(self) -> tuple[Any, ...]:
        from omp.record import config as team_config

        try:
            names = team_config.team_dir_entries(self.project)
        except OmpError:
            return ()
        root = self.project.teams
        return tuple(
            (n, _stat(root / n / "config.json"), _stat(root / n / "shutdown.json")) for n in names
        )


def teams_list(project: StatePaths) -> list[dict[str, Any]]:
    """Every team of the project, one row each (as `omp team list` shows them)."""
    from omp.record import config as team_config

    rows: list[dict[str, Any]] = []
    try:
        names = team_config.list_teams(project)
    except OmpError:
        return rows
    for n in names:
        tp = project.team(n)
        try:
            cfg = team_config.load(tp)
        except OmpError as err:
            rows.append({"team": n, "error": err.code, "message": err.message})
            continue
        rows.append(
            {
                "team": n,
                "workers": len(cfg.worker_names),
                "agent": cfg.raw.get("agent") or cfg.raw.get("role"),
                "shutdown": tp.shutdown.exists(),
                "createdAt": cfg.raw.get("createdAt"),
            }
        )
    return rows
