"""One team as the page sees it, kept current cheaply: a tick says which sections changed.

A section is recomputed only when what it is made of changed, judged by looking, not by
computing: the team's files by their sizes and times (`os.scandir`, ~1 ms for 24 workers), the
workers' branches by their git refs' files, the panes by one `list-panes` and one capture of
every live pane per tick (two tmux processes). What a section holds is what the views compute:

- `status`: `omp.views.status.team_status` (tasks, workers, needs-you, usage and budget), with the
  worktree workers' branch rows (`omp.views.worktrees.branch_row`) kept here and refreshed one
  worker at a time when its refs move: git is ~95% of a worktree team's status;
- `screen:<worker>`: its pane's screen (`omp.tmux.Tmux.capture_many`), each line made visible
  (`omp.textsafe.inline`), what the agent's profile reads on it (`omp.agents.screen_state`) and
  the prompt a person can answer (`omp.mail.answer.read_prompt`);
- `states`: each worker's one word (busy, idle, needs you, dead, starting);
- `mail`: the newest messages of every mailbox (`omp.mail.mailbox.Mailbox.listing`);
- `events`: the team's history (`omp.record.history`), as `omp team events` prints it;
- `usage`: each worker's tokens over time, sampled from `status` whenever they move, and the
  budgets.

A project that keeps its mail and history in a store (`OMP_STORE`: `omp.store.select`) changes
no file when a worker on another host writes: the history is read from the store on every tick
(one short read when nothing is new), the mail and status every STORE_EVERY seconds.

Read-only, as the views are: nothing here writes a byte.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.textsafe import inline, visible

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.board.remote_screens import RemoteScreens
    from omp.record.config import TeamConfig
    from omp.record.workspace import Worktree
    from omp.tmux import Tmux, TmuxIdentity

STATUS_EVERY = 15.0  # presence ages with time alone: status is recomputed at least this often
SERVER_EVERY = 10.0  # seconds between checks that the team's tmux server is still the same one
SCREEN_LINES = 60
MAIL_KEEP = 100
BODY_MAX = 4000
EVENTS_KEEP = 200
EVENTS_TAIL = 256 * 1024  # bytes of a long history read when the page first opens
STORE_EVERY = 2.0  # seconds between readings of a store's mail (no file moves when it changes)
SERIES_KEEP = 720
BRANCHES_PER_TICK = 2  # branch rows refreshed per tick (~70 ms of git each)
# Screens are read on every tick while one of them changed within ACTIVE_SECONDS, else every
# IDLE_SCREENS seconds: reading them is two tmux processes, most of an idle board's cost.
ACTIVE_SECONDS = 5.0
IDLE_SCREENS = 0.75
STATES_EVERY = 4  # screen reads per `list-panes` while nothing changes

Stat = tuple[str, int, int]


def _stat(path: Path | str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _scan(root: str, depth: int = 0, workers: bool = False) -> list[Stat]:
    """(relative path, mtime, size) of the files under a team directory that its sections are
    made of: its own files, mailbox/, tasks/, conversations/, workers/*/ (not runs/: past
    runs). Plain strings, no pathlib: this runs on every tick."""
    out: list[Stat] = []
    try:
        with os.scandir(root) as it:
            for e in it:
                name = e.name
                if name.endswith(".tmp"):
                    continue  # an atomic write in flight: its rename is what counts
                try:
                    if e.is_dir(follow_symlinks=False):
                        if (depth == 0 and name in _SCANNED) or (depth == 1 and workers):
                            for rel, t, size in _scan(e.path, depth + 1, name == "workers"):
                                out.append((name + "/" + rel, t, size))
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        out.append((name, st.st_mtime_ns, st.st_size))
                except OSError:
                    continue
    except OSError:
        pass
    return out


_SCANNED = frozenset({"mailbox", "tasks", "workers", "conversations"})


def _group(rel: str) -> str:
    if rel == "config.json":
        return "config"
    if rel == "events.jsonl":
        return "events"
    if rel.startswith("mailbox/"):
        return "mail"
    return "status"


class TeamFeed:
    """The sections of one team (see the module); `tick()` returns those that changed."""

    def __init__(
        self, project: StatePaths, name: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.project = project
        self.name = name
        self.clock = clock
        self.sections: dict[str, Any] = {}
        self._dir = str(project.teams / name)
        self._files: dict[str, int] = {}  # group -> hash of its files' stats
        self._cfg: TeamConfig | None = None
        self._profiles: dict[str, AgentProfile] = {}
        self._screens: dict[str, tuple[Any, ...]] = {}
        self._branches: dict[str, dict[str, Any]] = {}
        self._git_keys: dict[str, tuple[Any, ...]] = {}
        self._git_dirs: dict[str, list[str]] = {}
        self._common: Path | None = None
        self._target: tuple[Path | None, str | None] = (None, None)
        self._target_key: tuple[Any, ...] | None = None
        self._events_at: tuple[str | None, int] | None = None
        self._stored_at: tuple[str | None, str] | None = None  # (log, position) in the store
        self._stored = _store_selected(project)
        self._store_polled = float("-inf")
        self._events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEEP)
        self._series: deque[list[Any]] = deque(maxlen=SERIES_KEEP)
        self._status_at = float("-inf")
        self._server_at = float("-inf")
        self._server_ok = True
        self._views: dict[str, tuple[str, int | None]] = {}
        self._views_stale = True
        self._reads = 0
        self._screens_at = float("-inf")  # when they were last read
        self._screen_moved = float("-inf")  # when one last changed
        self._usage_key: Any = None
        self._far: RemoteScreens | None = None  # remote workers' screens, once there are any

    # ---- the tick ------------------------------------------------------------------------------

    def tick(self, *, force_status: bool = False) -> dict[str, Any]:
        """The sections that changed since the last tick (every section on the first)."""
        changed: dict[str, Any] = {}
        now = self.clock()
        groups = self._changed_files()
        if self._stored:  # nothing on disk moves when the store's history or mail does
            groups.add("events")
            if now - self._store_polled >= STORE_EVERY:
                self._store_polled = now
                groups |= {"mail", "status"}
        if "config" in groups or self._cfg is None:
            if not self._load(changed):
                return changed
            groups |= {"status", "mail", "events"}
        cfg = self._cfg
        assert cfg is not None
        if self._usage_changed(cfg):
            groups.add("status")
        if self._refresh_branches(cfg):
            groups.add("status")
        screens = self._tick_screens(cfg, now)
        changed.update(screens)
        if "status" in groups or force_status or now - self._status_at >= STATUS_EVERY:
            self._status_at = now
            self._put(changed, "status", self._status(cfg))
            self._sample_usage(changed)
        if screens or "status" in changed:
            self._put(changed, "states", self._states(cfg))
        if "mail" in groups:
            self._put(changed, "mail", self._mail(cfg))
        if "events" in groups:
            ev = self._read_events(cfg)
            if ev is not None:
                changed["events"] = ev
                self.sections["events"] = {"reset": True, "events": list(self._events)}
        return changed

    def snapshot(self) -> dict[str, Any]:
        """Every section as last computed: what a page that just opened is sent first."""
        return dict(self.sections)

    def _put(self, changed: dict[str, Any], key: str, value: Any) -> None:
        if self.sections.get(key) != value:
            self.sections[key] = value
            changed[key] = value

    # ---- files ---------------------------------------------------------------------------------

    def _changed_files(self) -> set[str]:
        by: dict[str, list[Stat]] = {}
        for st in _scan(self._dir):
            by.setdefault(_group(st[0]), []).append(st)
        out: set[str] = set()
        for g in ("config", "events", "mail", "status"):
            key = hash(tuple(sorted(by.get(g, []))))
            if self._files.get(g) != key:
                self._files[g] = key
                out.add(g)
        if "mail" in out:
            out.add("status")  # unread counts
        return out

    def _load(self, changed: dict[str, Any]) -> bool:
        from omp.record import config as team_config

        try:
            self._cfg = team_config.load(self.project.team(self.name))
        except OmpError as err:
            self._cfg = None
            self._files.clear()
            self._put(
                changed, "status", {"team": self.name, "error": err.code, "message": err.message}
            )
            return False
        self._profiles.clear()
        self._git_keys.clear()
        self._git_dirs.clear()
        return True

    def _usage_changed(self, cfg: TeamConfig) -> bool:
        key = _stat(self.project.monitor_usage_index(cfg.name))
        if key != self._usage_key:
            self._usage_key = key
            return True
        return False

    # ---- status --------------------------------------------------------------------------------

    def _status(self, cfg: TeamConfig) -> dict[str, Any]:
        from omp.views.status import team_status

        try:
            out = team_status(cfg, branches=self._branch_rows(cfg))
        except OmpError as err:
            return {"team": self.name, "error": err.code, "message": err.message}
        _task_links(cfg, out)
        return out

    def _branch_rows(self, cfg: TeamConfig) -> dict[str, dict[str, Any]]:
        from omp.record import workspace as ws

        out = {}
        for w, wt, _ in ws.worktrees(cfg.raw, removed=False):
            row = self._branches.get(w)
            # not computed yet: the config's own record (branch, path), its commits to come
            out[w] = (
                row
                if row is not None
                else {"worker": w, "branch": wt.branch, "path": wt.path, "pending": True}
            )
        return out

    def _refresh_branches(self, cfg: TeamConfig) -> bool:
        """Recompute the rows of up to BRANCHES_PER_TICK workers whose refs moved."""
        from omp.record import workspace as ws

        items = ws.worktrees(cfg.raw, removed=False)
        if not items:
            return False
        if self._common is None:
            self._find_git(cfg)
        top, target = self._target
        if top is None:
            return False
        tkey = (target, self._ref(target), _stat(self._common / "HEAD") if self._common else None)
        if tkey != self._target_key:
            from omp.views.worktrees import target_of

            self._target = top, target = target_of(cfg)
            self._target_key = tkey
            self._git_keys.clear()  # merged-ness of every branch may have changed
            self._git_dirs.clear()
            if top is None:
                return False
        done = 0
        for w, wt, _ in items:
            key = self._git_key(wt, target)
            if self._git_keys.get(w) == key:
                continue
            if done >= BRANCHES_PER_TICK:
                break
            from omp.views.worktrees import branch_row

            self._branches[w] = branch_row(top, w, wt, target)
            self._git_keys[w] = key
            done += 1
        return done > 0

    def _find_git(self, cfg: TeamConfig) -> None:
        from omp.views.worktrees import target_of
        from omp.workspace.git import git

        top, target = target_of(cfg)
        self._target = (top, target)
        if top is None:
            return
        try:
            common = git(top, "rev-parse", "--git-common-dir").text
        except OmpError:
            return
        path = Path(common)
        self._common = path if path.is_absolute() else top / path

    def _ref(self, branch: str | None) -> tuple[int, int] | None:
        if self._common is None or not branch:
            return None
        return _stat(os.path.join(self._common, "refs", "heads", branch))

    def _git_key(self, wt: Worktree, target: str | None) -> tuple[Any, ...]:
        """What moves when a worker's branch or worktree does: its ref, the packed refs, its
        worktree's HEAD and index, the target's ref (their paths worked out once)."""
        paths = self._git_dirs.get(wt.path)
        if paths is None:
            common = str(self._common) if self._common else None
            admin = _admin_dir(Path(wt.path))
            found = [
                os.path.join(common, "refs", "heads", wt.branch) if common else None,
                os.path.join(common, "packed-refs") if common else None,
                str(admin / "HEAD") if admin else None,
                str(admin / "index") if admin else None,
                os.path.join(common, "refs", "heads", target) if common and target else None,
            ]
            paths = self._git_dirs[wt.path] = [p for p in found if p]
        return tuple(_stat(p) for p in paths)

    def refresh_branch(self, worker: str) -> None:
        """Forget a worker's branch key: its row is recomputed next tick (after its diff was read
        or its branch merged)."""
        self._git_keys.pop(worker, None)
        self._target_key = None

    # ---- screens -------------------------------------------------------------------------------

    def _profile(self, cfg: TeamConfig, worker: str) -> AgentProfile:
        got = self._profiles.get(worker)
        if got is None:
            from omp.mail.panes import profile_for

            got = self._profiles[worker] = profile_for(cfg, worker)
        return got

    def _tick_screens(self, cfg: TeamConfig, now: float) -> dict[str, Any]:
        from omp.mail.answer import read_prompt

        active = now - self._screen_moved < ACTIVE_SECONDS
        if not active and now - self._screens_at < IDLE_SCREENS:
            return {}
        self._screens_at = now
        seen = self._local_screens(cfg, now)
        far = self._remote_screens(cfg)
        seen.update({w: (sc.state, sc.dead_status, list(sc.lines)) for w, sc in far.items()})
        out: dict[str, Any] = {}
        for w, (state, dead_status, lines) in seen.items():
            key = (state, dead_status, tuple(lines))
            if self._screens.get(w) == key:
                continue
            self._screens[w] = key
            screen: str | None = None
            what: str | None = None
            prompt = None
            if state == "alive" and lines:
                from omp.agents import screen_state

                profile = self._profile(cfg, w)
                screen, what = screen_state(profile, lines)
                found = read_prompt(profile, lines)
                prompt = found.to_json() if found is not None else None
            value = {
                "worker": w,
                "pane": state,
                "deadStatus": dead_status,
                "lines": [inline(ln) for ln in lines],
                "screen": screen,
                "what": what,
                "prompt": prompt,
            }
            self.sections[f"screen:{w}"] = value
            out[f"screen:{w}"] = value
        if out:
            self._screen_moved = now
            self._views_stale = True
        return out

    def _local_screens(
        self, cfg: TeamConfig, now: float
    ) -> dict[str, tuple[str, int | None, list[str]]]:
        """(pane state, dead status, screen lines) of each worker with a pane on this host."""
        from omp.mail.panes import tmux_for, tmux_identity

        panes = {w: p for w in cfg.worker_names if (p := cfg.pane_of(w))}
        ident = tmux_identity(cfg) if panes else None
        if ident is None:
            return {}
        tmux = tmux_for(cfg)
        views = self._views
        captured: dict[str, list[str]] = {}
        try:
            if now - self._server_at >= SERVER_EVERY:
                self._server_at = now
                self._server_ok = ident.same_server(tmux.server_identity())
            if not self._server_ok:
                views = {w: ("gone", None) for w in panes}
            else:
                # Which panes live, by one `list-panes`: on every STATES_EVERY-th read, and on
                # the read after a screen changed or a capture came back short (a pane that
                # dies changes its screen first: "dead" shows one tick later).
                self._reads += 1
                if self._views_stale or set(views) != set(panes) or self._reads % STATES_EVERY == 0:
                    views = self._pane_views(tmux, ident, panes)
                    self._views_stale = False
                wanted = [p for w, p in panes.items() if views[w][0] != "gone"]
                captured = tmux.capture_many(wanted, SCREEN_LINES)
                if len(captured) != len(wanted):
                    self._views_stale = True
        except OmpError:
            views = {w: ("unknown", None) for w in panes}
        self._views = views
        return {w: (*views[w], captured.get(p, [])) for w, p in panes.items()}

    def _remote_screens(self, cfg: TeamConfig) -> dict[str, Any]:
        """The remote workers' screens as their reader last saw them (`omp.board.
        remote_screens`, its own thread); {} for a team on this host alone (nothing loaded)."""
        if not any(isinstance(w.get("remote"), dict) for w in cfg.workers):
            return {}
        if self._far is None:
            from omp.board.remote_screens import RemoteScreens

            self._far = RemoteScreens(cfg.name, lines=SCREEN_LINES)
        return dict(self._far.latest(cfg.raw))

    def _pane_views(
        self, tmux: Tmux, ident: TmuxIdentity, panes: dict[str, str]
    ) -> dict[str, tuple[str, int | None]]:
        """Each worker's pane: alive, dead (its status), or gone (not the recorded pane)."""
        states = tmux.pane_states(list(panes.values()))
        views: dict[str, tuple[str, int | None]] = {}
        for w, p in panes.items():
            st = states.get(p)
            if st is None or not ident.holds(st):
                views[w] = ("gone", None)
            else:
                views[w] = ("dead", st.dead_status) if st.dead else ("alive", None)
        return views

    def _states(self, cfg: TeamConfig) -> dict[str, str]:
        rows = {r["name"]: r for r in (self.sections.get("status") or {}).get("workers") or []}
        return {
            w: worker_state(rows.get(w) or {}, self.sections.get(f"screen:{w}"))
            for w in cfg.worker_names
        }

    # ---- mail, events, usage -------------------------------------------------------------------

    def _mail(self, cfg: TeamConfig) -> list[dict[str, Any]]:
        from omp.mail.mailbox import Mailbox

        msgs: list[dict[str, Any]] = []
        for who in cfg.recipients:
            try:
                got, _, _ = Mailbox(cfg.paths, who).listing(undelivered_only=False, limit=MAIL_KEEP)
            except OmpError:
                continue
            msgs += got
        msgs.sort(key=lambda m: (str(m.get("timestamp") or ""), str(m.get("id") or "")))
        out = []
        for m in msgs[-MAIL_KEEP:]:
            body = str(m.get("body") or "")
            out.append(
                {
                    "id": inline(str(m.get("id") or "")),
                    "from": inline(str(m.get("from") or "")),
                    "to": inline(str(m.get("to") or "")),
                    "at": inline(str(m.get("timestamp") or "")),
                    "delivered": m.get("deliveredAt") is not None,
                    "body": visible(body[:BODY_MAX]) + ("…" if len(body) > BODY_MAX else ""),
                    "intent": inline(str(m["intent"])) if m.get("intent") else None,
                }
            )
        return out

    def _read_events(self, cfg: TeamConfig) -> dict[str, Any] | None:
        from omp.cli.events_cmd import describe
        from omp.record import history

        if self._stored:
            return self._read_stored_events(cfg)
        reset = self._events_at is None
        log, offset = self._events_at or (None, _tail_start(history.path(cfg.paths)))
        new: list[dict[str, Any]] = []
        try:
            for evs, end in history.iter_since(cfg.paths, offset, log=log):
                for ev in evs:
                    if log is None:
                        log = str(ev.get("cursor", "::")).split(":")[1] or None
                    new.append(
                        {
                            "type": inline(str(ev.get("type"))),
                            "at": inline(str(ev.get("at") or "")),
                            "text": describe(ev),
                        }
                    )
                offset = end
        except OmpError:  # the log was replaced (the team made again): from its start
            self._events_at = None
            self._events.clear()
            return self._read_events(cfg) if not reset else None
        self._events_at = (log, offset)
        if not new and not reset:
            return None
        self._events.extend(new)
        return {"reset": reset, "events": list(self._events) if reset else new}

    def _read_stored_events(self, cfg: TeamConfig) -> dict[str, Any] | None:
        """`_read_events` from the project's store (`omp.record.stored_history`)."""
        from omp.cli.events_cmd import describe
        from omp.record import stored_history

        reset = self._stored_at is None
        log, position = self._stored_at or (None, "")
        new: list[dict[str, Any]] = []
        try:
            store = stored_history.store_of(self.project)
            for evs, end, lid in stored_history.iter_since(store, cfg.name, position, log=log):
                position = end
                if evs:
                    log = lid
                new += [
                    {
                        "type": inline(str(ev.get("type"))),
                        "at": inline(str(ev.get("at") or "")),
                        "text": describe(ev),
                    }
                    for ev in evs
                ]
                del new[:-EVENTS_KEEP]  # a long history: only its tail is shown
        except OmpError as err:
            if err.code != "invalid_cursor":
                return None  # the store did not answer: next tick
            self._stored_at = None  # the log was replaced (the team made again): from its start
            self._events.clear()
            return self._read_stored_events(cfg) if not reset else None
        self._stored_at = (log, position)
        if not new and not reset:
            return None
        self._events.extend(new)
        return {"reset": reset, "events": list(self._events) if reset else new}

    def _sample_usage(self, changed: dict[str, Any]) -> None:
        status = self.sections.get("status") or {}
        totals = {}
        for row in status.get("workers") or []:
            spent = row.get("usage")
            if isinstance(spent, dict) and isinstance(spent.get("total"), int):
                totals[row["name"]] = spent["total"]
        if not self._series or self._series[-1][1] != totals:
            self._series.append([int(time.time() * 1000), totals])
        given = status.get("usage")
        team: dict[str, Any] = given if isinstance(given, dict) else {}
        self._put(
            changed,
            "usage",
            {
                "series": list(self._series),
                "total": team.get("total"),
                "budget": team.get("budget"),
                "workerBudget": team.get("workerBudget"),
                "notCounted": team.get("notCounted") or [],
            },
        )


# Fields of a task record the status view leaves out, shown when a record carries them (a task
# made by hand with dependencies, as the TypeScript tool writes them). A backlog's rows have
# them from the status view already (`omp.views.backlog.task_row`): those are kept as they are.
TASK_EXTRAS = {
    "blocked_by": "blockedBy",
    "blockedBy": "blockedBy",
    "title": "title",
    "priority": "priority",
}
DEPENDENTS_MAX = 50


def _task_links(cfg: TeamConfig, status: dict[str, Any]) -> None:
    """Fill in each task row's extras (above) and `dependents`: the tasks blocked by it, the
    other way round of their `blockedBy` (what the page links to)."""
    from omp.tasks import tasks

    rows = [r for r in status.get("tasks") or [] if isinstance(r, dict)]
    if not any("state" in r for r in rows):  # not a backlog: read what the records carry
        try:
            raw = {t.get("id"): t for t in tasks.read_all(cfg.paths)}
        except OmpError:
            raw = {}
        for row in rows:
            rec = raw.get(row.get("id")) or {}
            for key, shown in TASK_EXTRAS.items():
                val = rec.get(key)
                if shown in row:
                    continue
                if isinstance(val, list):
                    row[shown] = [inline(str(v)) for v in val][:DEPENDENTS_MAX]
                elif isinstance(val, str | int) and not isinstance(val, bool):
                    row[shown] = inline(str(val))[:200]
    waiting: dict[str, list[str]] = {}
    for row in rows:
        for b in row.get("blockedBy") or []:
            waiting.setdefault(str(b), []).append(str(row.get("id")))
    for row in rows:
        found = waiting.get(str(row.get("id")))
        if found:
            row["dependents"] = found[:DEPENDENTS_MAX]


def worker_state(row: dict[str, Any], screen: dict[str, Any] | None) -> str:
    """One word for a worker: `dead` (its pane died or went), `needs you` (its screen asks a
    person, or the monitor says so), `busy`, `idle` (at its prompt), `starting`; a headless
    worker (no pane) is `busy` while its task runs, else `idle`."""
    pane = (screen or {}).get("pane") or row.get("pane")
    if pane in ("dead", "gone"):
        return "dead"
    if (screen or {}).get("screen") == "needs_person" or row.get("needsYou"):
        return "needs you"
    shown = (screen or {}).get("screen")
    if shown == "busy":
        return "busy"
    if shown == "ready":
        return "idle"
    if shown in ("starting", "dialog"):
        return "starting"
    return "busy" if row.get("status") == "busy" else "idle"


def _admin_dir(worktree: Path) -> Path | None:
    """A linked worktree's own git directory (its `.git` file says `gitdir: <path>`)."""
    try:
        text = (worktree / ".git").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    path = Path(text[len("gitdir:") :].strip())
    return path if path.is_absolute() else worktree / path


def _store_selected(project: StatePaths) -> bool:
    from omp.store import project_config

    try:
        return project_config.store_selected(project)
    except OmpError:  # a damaged `.omp/config.toml`: the files, as the rest of the board reads
        return False


def _tail_start(path: str | Path) -> int:
    """Where to start reading a long history: the first line boundary in its last
    EVENTS_TAIL bytes (0 for a short one)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= EVENTS_TAIL:
                return 0
            f.seek(size - EVENTS_TAIL)
            data = f.read(EVENTS_TAIL)
    except OSError:
        return 0
    cut = data.find(b"\n")
    return 0 if cut < 0 else size - EVENTS_TAIL + cut + 1
