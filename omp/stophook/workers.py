"""How omp's stop hook reaches a worker's pane, whatever directory the pane runs in.

`omp hooks install` writes the hook into the project's own files (`.github/hooks/omp.json`,
`.claude/settings.json`, ...). A worker running in the project root finds them; a worker in a git
worktree of its own does not find a file the user never committed, and omp never commits anything
into the user's repository. So launch hands each worker's agent omp's hook through the CLI itself,
from files under `.omp/state/hooks/workers/` (inside the state tree, which no checkout contains):

- Copilot CLI 1.0.102: `--plugin-dir DIR`, a plugin of omp's own (`plugin.json` + `hooks.json`)
  with `sessionStart` (the session id is known from the first turn on, not only once a turn
  ends: a long first turn is exactly what a crash interrupts) and `agentStop`. Plugin hooks run
  beside the user's, project and plugin hooks alike.
- Claude Code 2.1.328: `--settings FILE`, a settings file of omp's own holding `SessionStart` and
  `Stop` hooks ("Settings file or JSON string to load more settings from"; merged with the
  user's and the project's).
- pi 0.73.1: `--extension FILE`, omp's pi extension (`omp.stophook.pi_extension`: at every
  `agent_end` it pipes a stop payload with pi's session id to `omp hook stop`), written here.
  Copilot, Claude Code and pi are checked live against the scripted model, each worker resumed
  into its own conversation (`tests/agents/test_agent_resume.py`).
- Codex 0.171: none used. `-c 'hooks.SessionStart=[{hooks=[{type="command",command=...}]}]'`
  reaches it (checked with `codex exec`), but Codex runs a hook only once a person trusted it
  (`/hooks`), and the one way around that, `--dangerously-bypass-hook-trust`, would also run
  every unreviewed hook of the checkout. Gemini 0.61: none used; it reads hooks from its
  settings files only (a system settings file can be moved with
  `GEMINI_CLI_SYSTEM_SETTINGS_PATH`, which would hide the machine's own). Their workers get the
  hook where it is installed and trusted (`omp hooks install`): in the project root, that is in
  a shared workspace.

What the hook does in a worker pane: record the agent's session (`omp.stophook.sessions`) and let
the agent stop; the leader's loops never hold a worker.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from omp.store import fs
from omp.store.paths import StatePaths

PLUGIN = "omp-worker-hooks"
TIMEOUT_S = 30


def _tag(command: str) -> str:
    """Files per hook command: two teams started by two omp installs never share one."""
    return hashlib.sha256(command.encode()).hexdigest()[:10]


def _write(path: Path, obj: dict[str, Any]) -> None:
    data = (json.dumps(obj, indent=2) + "\n").encode()
    try:
        if fs.read_bytes(path) == data:
            return
    except OSError:
        pass
    fs.write_atomic(path, data)


def copilot_plugin(project: StatePaths, command: str) -> Path:
    """omp's Copilot plugin (written if missing or different); its directory."""
    plugin = project.worker_hooks / f"copilot-plugin-{_tag(command)}"
    project.ensure(plugin)
    handler = {"type": "command", "bash": command, "timeoutSec": TIMEOUT_S}
    _write(
        plugin / "plugin.json",
        {
            "name": PLUGIN,
            "version": "1.0.0",
            "description": "omp: records which session each team worker runs",
            "hooks": "hooks.json",
        },
    )
    _write(
        plugin / "hooks.json",
        {"version": 1, "hooks": {"sessionStart": [handler], "agentStop": [handler]}},
    )
    return plugin


def claude_settings(project: StatePaths, command: str) -> Path:
    """omp's Claude Code settings file with the hooks (written if missing or different)."""
    project.ensure(project.worker_hooks)
    path = project.worker_hooks / f"claude-settings-{_tag(command)}.json"
    group = {"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]}
    _write(path, {"hooks": {"SessionStart": [group], "Stop": [group]}})
    return path


def hook_args(agent: str, project: StatePaths, omp: str) -> list[str]:
    """The options that bring omp's hook (`<omp> hook stop`) to a worker of `agent`; [] for a
    CLI that takes none (see the module docstring). Writes the files they name."""
    command = f"{omp} hook stop"
    if agent == "copilot":
        return ["--plugin-dir", str(copilot_plugin(project, command))]
    if agent == "claude":
        return ["--settings", str(claude_settings(project, command))]
    if agent == "pi":
        return ["--extension", str(pi_extension(project, command))]
    return []


def pi_extension(project: StatePaths, command: str) -> Path:
    """omp's pi extension (written if missing or different)."""
    from omp.stophook.pi_extension import render

    project.ensure(project.worker_hooks)
    path = project.worker_hooks / f"pi-extension-{_tag(command)}.ts"
    data = render(command).encode()
    try:
        if fs.read_bytes(path) == data:
            return path
    except OSError:
        pass
    fs.write_atomic(path, data)
    return path
