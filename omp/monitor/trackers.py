"""The monitor's tracker store: one file per target (a pane of one team generation).

`team-monitor/targets/<id>.json` holds the target's `monitor_policy.Tracker`, read and written
under the target's own flock (`<id>.lock`). The files are the truth; what this process last read
or wrote of each tracker is kept in memory (`known`) only so that a quiet pane can skip the lock
and the file for a scan. Files of targets not seen for `target_ttl` are dropped now and then.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.monitor import policy as policy
from omp.store import fs, locks
from omp.store.paths import StatePaths, target_id_of


class Trackers:
    def __init__(self, paths: StatePaths, target_ttl: float) -> None:
        self.paths = paths
        self.target_ttl = target_ttl
        self.known: dict[str, policy.Tracker] = {}  # target id -> tracker last read or written
        self._written: dict[str, float] = {}  # target id -> when this process last wrote it
        self._last_compact: float | None = None

    def ensure_dir(self) -> None:
        self.paths.ensure(self.paths.monitor_targets)

    @contextlib.contextmanager
    def lock(self, tid: str, *, wait: bool = False) -> Iterator[bool]:
        """The target's flock; yields whether it was taken (always, with `wait`)."""
        with locks.flocked(self.paths.monitor_target_lock(tid), wait) as taken:
            yield taken

    def load(
        self, tid: str, team: str, generation: str, pane: str
    ) -> tuple[policy.Tracker, dict[str, Any] | None, str | None]:
        """(the persisted tracker, its document, the file's name if it was unreadable).

        Read under the target lock every time it matters: it is the truth. An unreadable file
        counts every cap as reached rather than risk a fourth send.
        """
        path = self.paths.monitor_target(tid)
        if not fs.check_entry(path, want_dir=False):
            self.known.pop(tid, None)
            return policy.Tracker(), None, None
        try:
            obj = fs.read_json(path)
        except OmpError as exc:  # damaged (`corrupt_state`): every cap reached, the file kept
            if exc.code != "corrupt_state":
                raise
            return policy.Tracker.exhausted(), None, path.name
        try:
            if not isinstance(obj, dict) or (
                obj.get("teamName"),
                obj.get("generation"),
                obj.get("paneId"),
            ) != (team, generation, pane):
                raise ValueError("not this target")
            tr = policy.Tracker.from_json(obj["tracker"])
        except (KeyError, ValueError):
            return policy.Tracker.exhausted(), None, path.name
        self.known[tid] = tr
        return tr, obj, None

    def save(
        self,
        tid: str,
        *,
        team: str,
        worker: str,
        generation: str,
        pane: str,
        tracker: policy.Tracker,
        doc: dict[str, Any] | None,
        now: float,
    ) -> None:
        revision = doc.get("revision", 0) if doc else 0
        fs.write_json_atomic(
            self.paths.monitor_target(tid),
            {
                "schemaVersion": policy.SCHEMA,
                "targetId": tid,
                "kind": "runtime",
                "teamName": team,
                "worker": worker,
                "generation": generation,
                "paneId": pane,
                "revision": (revision if isinstance(revision, int) else 0) + 1,
                "lastSeenAt": clock.iso(now),
                "tracker": tracker.to_json(),
            },
        )
        self._written[tid] = now
        self.known[tid] = tracker

    def refresh_due(self, tid: str, now: float) -> bool:
        """`lastSeenAt` is refreshed on disk now and then, not on every scan."""
        last = self._written.get(tid)
        return last is None or now - last >= self.target_ttl / 24

    def compact(self, now: float, seen: set[str]) -> list[str]:
        """Drop tracker files of targets not seen for `target_ttl` (hourly, and at the first
        call); returns what could not be judged."""
        if self._last_compact is not None and now - self._last_compact < self.target_ttl / 24:
            return []
        self._last_compact = now
        targets = self.paths.monitor_targets
        try:
            if not self.paths.check(targets):
                return []
            names = os.listdir(targets)
        except (OSError, OmpError):
            return []
        problems: list[str] = []
        for name in names:
            tid = target_id_of(name)
            if tid is None or tid in seen:
                continue
            path = targets / name
            try:
                obj = fs.read_json(path)
                last = clock.parse_iso(str(obj.get("lastSeenAt", ""))) if obj else None
                if last is not None and now - last > self.target_ttl:
                    os.unlink(path)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.paths.monitor_target_lock(tid))
            except (OSError, OmpError, AttributeError):
                problems.append(f"cannot compact {name}")
        return problems
