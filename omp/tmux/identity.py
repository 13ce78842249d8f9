"""Which tmux server, session and window a team lives on, and which pane a recorded id still names.

A tmux pane id (`%3`) is unique only within one server's life: a restarted server hands the same
ids to other panes. So omp pins the server incarnation (socket file, pid and start time) beside
the session and window, and compares them here, in one place:

- `ServerInfo`: what `Tmux.server_identity()` reads of a live server;
- `TmuxIdentity`: a team's place, as config.json's `tmuxIdentity` records it (the field names of
  the TypeScript tool's file format: socketPath, serverPid, serverStartedAt, sessionId, windowId);
- `PaneIdentity`: one pane of it, which typing into an agent checks before every keystroke.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict


class ServerInfo(TypedDict):
    socket_path: str
    server_pid: int
    server_started_at: int


class _InWindow(Protocol):
    @property
    def session_id(self) -> str: ...
    @property
    def window_id(self) -> str: ...


def _int(value: object) -> int | None:
    """An int as recorded in JSON (number or digit string); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class TmuxIdentity:
    """A team's place in tmux: its server incarnation, session and window.

    Any part may be unknown (None) in a config another tool wrote: checks then skip that part,
    as they always did.
    """

    socket_path: str | None
    server_pid: int | None
    server_started_at: int | None
    session_id: str | None
    window_id: str | None

    @classmethod
    def of(cls, server: ServerInfo | None, session_id: str, window_id: str) -> TmuxIdentity:
        """The identity launch records: the server as read now, the session and window used."""
        if server is None:
            return cls(None, None, None, session_id, window_id)
        return cls(
            server["socket_path"],
            server["server_pid"],
            server["server_started_at"],
            session_id,
            window_id,
        )

    @classmethod
    def from_config(cls, obj: object) -> TmuxIdentity | None:
        """Parse config.json's `tmuxIdentity`; None if there is none (a headless team)."""
        if not isinstance(obj, Mapping):
            return None
        return cls(
            _str(obj.get("socketPath")),
            _int(obj.get("serverPid")),
            _int(obj.get("serverStartedAt")),
            _str(obj.get("sessionId")),
            _str(obj.get("windowId")),
        )

    def to_config(self) -> dict[str, Any]:
        """config.json's `tmuxIdentity` (the TypeScript-compatible field names)."""
        return {
            "socketPath": self.socket_path,
            "serverPid": self.server_pid,
            "serverStartedAt": self.server_started_at,
            "sessionId": self.session_id,
            "windowId": self.window_id,
        }

    def same_server(self, server: Mapping[str, Any] | None) -> bool:
        """Is `server` (from `Tmux.server_identity`, None when none answers) the incarnation
        recorded here? A restarted server reuses pane ids for other panes."""
        if server is None:
            return False
        return (self.server_pid, self.server_started_at) == (
            _int(server.get("server_pid")),
            _int(server.get("server_started_at")),
        )

    def holds(self, pane: _InWindow, *, session: bool = False) -> bool:
        """Is a live pane (a `PaneState`) in the recorded window (and session, if asked)? A part
        the record does not name is not checked."""
        if self.window_id and pane.window_id != self.window_id:
            return False
        return not (session and self.session_id and pane.session_id != self.session_id)

    def pane(self, pane_id: str) -> PaneIdentity | None:
        """The identity of one pane of this place; None if the record lacks a part of it."""
        return PaneIdentity.from_json({**self.to_config(), "paneId": pane_id})


@dataclass(frozen=True)
class PaneIdentity:
    """A pane id is only unique within one server's life: pin the server too."""

    socket_path: str
    server_pid: int
    server_started_at: int
    session_id: str
    window_id: str
    pane_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "socketPath": self.socket_path,
            "serverPid": self.server_pid,
            "serverStartedAt": self.server_started_at,
            "sessionId": self.session_id,
            "windowId": self.window_id,
            "paneId": self.pane_id,
        }

    @classmethod
    def from_json(cls, obj: object) -> PaneIdentity | None:
        """Parse `to_json()` output; None if anything is missing or malformed."""
        if not isinstance(obj, dict):
            return None
        try:
            strs = [obj[k] for k in ("socketPath", "sessionId", "windowId", "paneId")]
            pid, started = int(obj["serverPid"]), int(obj["serverStartedAt"])
        except (KeyError, TypeError, ValueError):
            return None
        if not all(isinstance(s, str) and s for s in strs):
            return None
        return cls(strs[0], pid, started, strs[1], strs[2], strs[3])
