"""Reaching a team member's pane: the right server, the recorded pane, the agent's profile."""

from __future__ import annotations

from typing import NamedTuple

from omp.record.config import TeamConfig

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable

    from omp.agents import AgentProfile
    from omp.mail.typein import Delivery
    from omp.tmux import PaneIdentity, PaneState, Tmux, TmuxIdentity


def tmux_identity(cfg: TeamConfig) -> TmuxIdentity | None:
    """The team's recorded place in tmux (config.json's `tmuxIdentity`); None if headless (no
    identity, or an empty one)."""
    if not cfg.tmux:
        return None
    from omp.tmux import TmuxIdentity

    return TmuxIdentity.from_config(cfg.tmux)


def tmux_for(cfg: TeamConfig) -> Tmux:
    from omp.tmux import Tmux

    ident = tmux_identity(cfg)
    sock = ident.socket_path if ident else None
    return Tmux(socket_path=sock) if sock else Tmux()


def expected_identity(cfg: TeamConfig, pane: str) -> PaneIdentity | None:
    """The identity recorded at launch for `pane`, or None if the config has none."""
    ident = tmux_identity(cfg)
    return ident.pane(pane) if ident else None


def profile_for(cfg: TeamConfig, member: str) -> AgentProfile:
    from omp.agents import load_profiles

    profiles = load_profiles(cfg.paths.project.root)
    key = "leaderAgent" if member == "leader" else "agent"
    own = (cfg.worker(member) or {}).get("agent")  # a worker added with its own --agent
    name = own or cfg.raw.get(key) or cfg.raw.get("agent") or "copilot"
    return profiles.get(str(name)) or profiles["copilot"]


def deliver_line(
    cfg: TeamConfig,
    member: str,
    pane: str,
    text: str,
    *,
    settle: float = 1.5,
    only_idle: bool = False,
    guard: Callable[[], str | None] | None = None,
    on_submitted: Callable[[], None] | None = None,
) -> Delivery:
    """Type one fixed line into a member's pane, judged by that member's agent profile, and
    verify it was submitted (`omp.mail.typein.type_line`; `only_idle` types only at an idle
    prompt).

    Refuses (reason `pane_mismatch`) when the pane id no longer names the pane recorded at
    launch: a restarted server hands old ids to new panes, and a nudge must never land in a
    stranger's. A screen caught mid-redraw (neither ready nor busy) is given up to `settle`
    seconds. `guard` and `on_submitted`: see `type_line`.
    """
    import time

    from omp.errors import OmpError
    from omp.mail.typein import Delivery, type_line

    expected = expected_identity(cfg, pane)
    if expected is None:
        return Delivery(False, "no_identity")
    lock_dir = cfg.paths.project.tmux_locks
    tmux = tmux_for(cfg)
    profile = profile_for(cfg, member)
    deadline = time.monotonic() + settle
    try:
        while True:
            res = type_line(
                tmux,
                pane,
                text,
                profile,
                lock_dir=lock_dir,
                expected=expected,
                only_idle=only_idle,
                guard=guard,
                on_submitted=on_submitted,
            )
            if res.ok or res.reason != "not_ready" or time.monotonic() >= deadline:
                return res
            time.sleep(0.1)
    except OmpError as err:
        if err.code == "pane_mismatch":
            return Delivery(False, "pane_mismatch")
        if err.code == "tmux_error" and tmux.server_identity() is None:
            return Delivery(False, "server_gone")
        return Delivery(False, err.code)


def why_unreachable(cfg: TeamConfig) -> str | None:
    """Why none of the team's worker panes can be reached any more, or None when one still can
    (or when tmux did not answer clearly, or the team is headless: nothing to judge by tmux).

    For `omp team wait` (return at once instead of waiting out a timeout), status, and a send
    path that must say why it could not nudge. One `server_identity` and one `pane_states` call;
    never starts a server.
    """
    if has_remote(cfg):
        return _why_unreachable_across_hosts(cfg)
    panes = [p for p in (cfg.pane_of(w) for w in cfg.worker_names) if p]
    ident = tmux_identity(cfg) if panes else None
    if ident is None:
        return None
    try:
        tmux = tmux_for(cfg)
        server = tmux.server_identity()
        if server is None:
            sock = ident.socket_path or "the default socket"
            return f"its tmux server is gone (no server answers on {sock})"
        if not ident.same_server(server):
            return "its tmux server was restarted since launch: the team's panes are gone"
        states = tmux.pane_states(panes)
    except Exception:
        return None
    mine = [st for st in states.values() if st is not None and ident.holds(st)]
    if any(not st.dead for st in mine):
        return None
    dead, gone = len(mine), len(panes) - len(mine)
    if dead and gone:
        return f"every worker pane is dead or gone ({dead} dead, {gone} gone)"
    if dead:
        return "every worker pane is dead (its agent exited)"
    return "every worker pane is gone (closed or killed)"


def _why_unreachable_across_hosts(cfg: TeamConfig) -> str | None:
    """`why_unreachable` for a team with workers on other hosts: a host that does not answer
    proves nothing (its workers may work on), so only panes seen dead or gone count."""
    views = pane_views(cfg)
    states = [v.state for w, v in views.items() if cfg.pane_of(w) or v.host]
    if not states or any(s not in ("dead", "gone") for s in states):
        return None
    dead, gone = states.count("dead"), states.count("gone")
    if dead and gone:
        return f"every worker pane is dead or gone ({dead} dead, {gone} gone)"
    if dead:
        return "every worker pane is dead (its agent exited)"
    return "every worker pane is gone (closed or killed)"


class PaneView(NamedTuple):
    """A pane as `status` sees it: a NamedTuple, since `dataclasses` (with `inspect`, ~8 ms)
    would be the costliest import of `omp team status`."""

    state: str  # alive | dead | gone | unknown | none (a headless worker: no pane at all)
    # | unreachable (a worker on another host that did not answer: `omp.mail.remote_panes`)
    dead_status: int | None = None
    pid: int | None = None  # the pane's process (tmux's pane_pid), when alive (on its host)
    host: str | None = None  # the worker's host, for a worker on another host
    note: str | None = None  # why its host is unreachable (ssh's words)


def has_remote(cfg: TeamConfig) -> bool:
    """Does the team record a worker on another host? (No ssh, nothing imported: a local team
    never loads the remote machinery.)"""
    return any(isinstance(w.get("remote"), dict) for w in cfg.workers)


def pane_views(cfg: TeamConfig, *, leader: bool = False) -> dict[str, PaneView]:
    """Each worker's pane (and the leader's, under `leader`, when the team records one) as tmux
    sees it now, checked against the identity in the config.

    A pane id that a restarted server handed to someone else reads as `gone`, never `alive`.
    One tmux call for all panes (and, for workers on other hosts, one over ssh per host and
    server: `omp.mail.remote_panes`); no server is started.
    """
    out = _local_views(cfg, leader=leader)
    if has_remote(cfg):
        from omp.mail.remote_panes import remote_views

        out.update({w: PaneView(*v) for w, v in remote_views(cfg).items()})
    return out


def _local_views(cfg: TeamConfig, *, leader: bool) -> dict[str, PaneView]:
    panes = {w: cfg.pane_of(w) for w in cfg.worker_names}
    if leader and cfg.pane_of("leader"):
        panes["leader"] = cfg.pane_of("leader")
    # "none": a headless worker never had a pane (not one that went away); a `lostPaneId` is
    # a pane that went with an earlier tmux server (`omp team resume` moved it aside)
    out = {
        w: PaneView("unknown" if p else "gone" if _lost(cfg, w) else "none")
        for w, p in panes.items()
    }
    wanted = [p for p in panes.values() if p]
    if not wanted or not cfg.tmux:
        return out
    try:
        ident = tmux_identity(cfg)
        if ident is None:
            return out
        tmux = tmux_for(cfg)
        server = tmux.server_identity()
        if not ident.same_server(server):
            return {w: PaneView("gone" if p or _lost(cfg, w) else "none") for w, p in panes.items()}
        states = tmux.pane_states(wanted)
    except Exception:
        return out
    for w, p in panes.items():
        if p:
            out[w] = _view(states.get(p), ident)
    return out


def _lost(cfg: TeamConfig, worker: str) -> bool:
    return bool((cfg.worker(worker) or {}).get("lostPaneId"))


def _view(st: PaneState | None, ident: TmuxIdentity) -> PaneView:
    if st is None or not ident.holds(st):  # not in the team's window: someone else's pane
        return PaneView("gone")
    if st.dead:
        return PaneView("dead", st.dead_status)
    return PaneView("alive", pid=st.pid)
