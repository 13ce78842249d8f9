"""`omp team shutdown`: kill the team's worker panes (never the leader's), keep every file."""

from __future__ import annotations

from typing import Any

from omp import clock
from omp.store import fs
from omp.team import history, tasks
from omp.team.config import TeamConfig
from omp.team.panes import same_server, tmux_for


def shutdown(cfg: TeamConfig) -> dict[str, Any]:
    team = cfg.paths
    killed: list[str] = []
    skipped: list[dict[str, str]] = []
    killed_session = False
    ident = cfg.tmux
    leader = cfg.raw.get("leaderPaneId")
    panes = [(w, cfg.pane_of(w)) for w in cfg.worker_names]
    if ident and any(p for _, p in panes):
        try:
            tmux = tmux_for(cfg)
            server = tmux.server_identity()
        except Exception:
            server = None
        if server is None or not same_server(ident, server):
            skipped = [{"pane": p, "why": "tmux server gone or restarted"} for _, p in panes if p]
        else:
            states = tmux.pane_states([p for _, p in panes if p])
            for _w, p in panes:
                if not p:
                    continue
                st = states.get(p)
                if p == leader:
                    skipped.append({"pane": p, "why": "the leader's pane"})
                elif st is None:
                    skipped.append({"pane": p, "why": "already gone"})
                elif st.window_id != ident.get("windowId"):
                    skipped.append({"pane": p, "why": "pane id now belongs to another window"})
                else:
                    tmux.kill_pane(p)
                    killed.append(p)
            sess = cfg.raw.get("tmuxSession")
            if cfg.raw.get("createdSession") and isinstance(sess, str) and tmux.has_session(sess):
                tmux.kill_session(sess)
                killed_session = True
    cleared = tasks.clear_locks(team)
    record = {
        "shutdownAt": clock.iso(),
        "killedPanes": killed,
        "killedSession": killed_session,
        "clearedLocks": cleared,
    }
    fs.write_json_atomic(team.shutdown, record)
    for w in cfg.worker_names:
        history.member(team, w, "left", "team shut down")
    return {"ok": True, "team": cfg.name, **record, "skipped": skipped}
