"""Reaching a team member's pane: the right server, the recorded pane, the agent's profile."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from omp.team.config import TeamConfig

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.tmux import PaneIdentity, Tmux


def tmux_for(cfg: TeamConfig) -> Tmux:
    from omp.tmux import Tmux

    sock = (cfg.tmux or {}).get("socketPath")
    return Tmux(socket_path=sock) if isinstance(sock, str) and sock else Tmux()


def same_server(ident: Mapping[str, Any], server: Mapping[str, Any]) -> bool:
    """Is `server` (from `Tmux.server_identity`) the incarnation recorded in a config's
    `tmuxIdentity`? A restarted server reuses pane ids for other panes."""
    return str(ident.get("serverPid")) == str(server.get("server_pid")) and str(
        ident.get("serverStartedAt")
    ) == str(server.get("server_started_at"))


def expected_identity(cfg: TeamConfig, pane: str) -> PaneIdentity | None:
    """The identity recorded at launch for `pane`, or None if the config has none."""
    from omp.tmux import PaneIdentity

    ident = cfg.tmux
    if not ident:
        return None
    return PaneIdentity.from_json({**ident, "paneId": pane})


def profile_for(cfg: TeamConfig, member: str) -> AgentProfile:
    from omp.agents import load_profiles

    profiles = load_profiles(cfg.paths.project.root)
    key = "leaderAgent" if member == "leader" else "agent"
    own = (cfg.worker(member) or {}).get("agent")  # a worker added with its own --agent
    name = own or cfg.raw.get(key) or cfg.raw.get("agent") or "copilot"
    return profiles.get(str(name)) or profiles["copilot"]


def deliver_line(
    cfg: TeamConfig, member: str, pane: str, text: str, *, settle: float = 1.5
) -> bool:
    """Type one fixed line into a member's pane and verify it was submitted.

    Refuses (returns False) when the pane id no longer names the pane recorded at launch: a
    restarted server hands old ids to new panes, and a nudge must never land in a stranger's.
    A screen caught mid-redraw (neither ready nor busy) is given up to `settle` seconds.
    """
    import time

    from omp.errors import OmpError

    expected = expected_identity(cfg, pane)
    if expected is None:
        return False
    lock_dir = cfg.paths.project.state / "tmux-locks"
    tmux = tmux_for(cfg)
    profile = profile_for(cfg, member)
    deadline = time.monotonic() + settle
    try:
        while True:
            res = tmux.deliver_result(pane, text, profile, lock_dir=lock_dir, expected=expected)
            if res.ok or res.reason != "not_ready" or time.monotonic() >= deadline:
                return res.ok
            time.sleep(0.1)
    except OmpError:
        return False
