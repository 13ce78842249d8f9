"""Where omp's stop hook is registered, for `omp doctor` and the warning of `omp ralph start`.

Read-only. For each agent, every file the CLI loads hooks from (project and user level) is read
and omp's stop handlers in it are counted:

- none: loops will not drive themselves with that agent;
- more than one: the CLI runs each (Copilot reads `.github/hooks/*.json` *and*
  `.claude/settings.json`), a known cause of double counting; omp replays the first answer to a
  stop, but the extra registration should go;
- Codex runs a project hook only when the project is trusted and the hook itself was reviewed
  (`/hooks`), Gemini only in a trusted folder: both are looked up in the user's config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omp.stophook.install import AGENTS, TARGETS, is_omp_handler, omp_handlers
from omp.store.strictjson import SETTINGS_DEPTH, nests_deeper

EVENTS = {
    "copilot": ("agentStop", "Stop"),
    "claude": ("Stop",),
    "codex": ("Stop",),
    "gemini": ("AfterAgent",),
}


def _home(env: Mapping[str, str], var: str, default: str) -> Path:
    value = env.get(var)
    return Path(value) if value else Path(env.get("HOME") or os.path.expanduser("~")) / default


def sources(agent: str, root: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The hook files `agent` reads, project first (only those that exist are read later)."""
    e = os.environ if env is None else env
    home = Path(e.get("HOME") or os.path.expanduser("~"))
    if agent == "copilot":
        ch = _home(e, "COPILOT_HOME", ".copilot")
        return [
            *sorted((root / ".github" / "hooks").glob("*.json")),
            root / ".github" / "copilot" / "settings.json",
            root / ".github" / "copilot" / "settings.local.json",
            root / ".claude" / "settings.json",
            root / ".claude" / "settings.local.json",
            *sorted((ch / "hooks").glob("*.json")),
            ch / "settings.json",
        ]
    if agent == "claude":
        return [
            root / ".claude" / "settings.json",
            root / ".claude" / "settings.local.json",
            home / ".claude" / "settings.json",
        ]
    if agent == "codex":
        return [root / ".codex" / "hooks.json", _home(e, "CODEX_HOME", ".codex") / "hooks.json"]
    return [root / ".gemini" / "settings.json", home / ".gemini" / "settings.json"]


def _load(path: Path) -> dict[str, Any] | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        raw = path.read_bytes()
        if nests_deeper(raw, SETTINGS_DEPTH):
            return None
        doc = json.loads(raw)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def registrations(
    agent: str, root: Path, env: Mapping[str, str] | None = None
) -> list[tuple[Path, str, str]]:
    """(file, event, command) of every omp stop handler `agent` would run in `root`."""
    found: list[tuple[Path, str, str]] = []
    seen: set[Path] = set()
    for path in sources(agent, root, env):
        if path in seen:
            continue
        seen.add(path)
        doc = _load(path)
        hooks = doc.get("hooks") if doc else None
        if not isinstance(hooks, dict):
            continue
        for event in EVENTS[agent]:
            items = hooks.get(event)
            if isinstance(items, list):
                for h in omp_handlers(items):
                    cmd = h.get("command") if isinstance(h.get("command"), str) else h.get("bash")
                    found.append((path, event, str(cmd)))
    return found


def installed(agent: str, root: Path, env: Mapping[str, str] | None = None) -> bool:
    return bool(registrations(agent, root, env))


def likely_agent(env: Mapping[str, str] | None = None) -> str | None:
    """The agent CLI this process runs under, from the variables each sets for its tools."""
    e = os.environ if env is None else env
    if e.get("COPILOT_CLI") or e.get("COPILOT_CLI_BINARY_VERSION"):
        return "copilot"
    if e.get("CLAUDECODE") or e.get("CLAUDE_CODE_ENTRYPOINT"):
        return "claude"
    if e.get("GEMINI_CLI") or e.get("GEMINI_SESSION_ID"):
        return "gemini"
    if e.get("CODEX_SANDBOX") or e.get("CODEX_THREAD_ID") or e.get("CODEX_HOME"):
        return "codex"
    return None


def start_warning(root: Path, env: Mapping[str, str] | None = None) -> str | None:
    """One line when the agent likely to run a new loop has no omp stop hook; else None."""
    agent = likely_agent(env)
    if agent is None:
        if any(installed(a, root, env) for a in AGENTS):
            return None
        agent = "copilot"
    if installed(agent, root, env):
        return None
    from omp.invocation import omp_command

    return (
        f"no omp stop hook for {agent} in {root}: the loop is recorded but the agent will not "
        f"be held at its stops; install it with: {omp_command()} hooks install --agent {agent}"
    )


# ---- trust ----------------------------------------------------------------------------------


def _codex_trust(root: Path, env: Mapping[str, str]) -> list[str]:
    """What keeps Codex from running the project hook: [] when both gates look open."""
    import tomllib

    cfg = _home(env, "CODEX_HOME", ".codex") / "config.toml"
    try:
        doc = tomllib.loads(cfg.read_text())
    except (OSError, ValueError):
        doc = {}
    missing: list[str] = []
    projects = doc.get("projects")
    trusted = False
    if isinstance(projects, dict):
        for key in (str(root), str(root.resolve())):
            entry = projects.get(key)
            if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
                trusted = True
    if not trusted:
        missing.append("the project is not trusted")
    state = doc.get("hooks", {}).get("state") if isinstance(doc.get("hooks"), dict) else None
    hook_path = str(root / TARGETS["codex"].rel)
    reviewed = isinstance(state, dict) and any(
        hook_path in str(k) and ":Stop:" in str(k) and isinstance(v, dict) and v.get("trusted_hash")
        for k, v in state.items()
    )
    if not reviewed:
        missing.append("the hook has not been reviewed and trusted")
    return missing


def _copilot_trusted(root: Path, env: Mapping[str, str]) -> bool:
    """The folder (or a parent) is in Copilot's `trustedFolders` (`~/.copilot/config.json`, JSON
    with `//` comment lines: seen on 1.0.102), or COPILOT_ALLOW_ALL=true trusts every folder."""
    if env.get("COPILOT_ALLOW_ALL", "").lower() == "true":
        return True
    path = _home(env, "COPILOT_HOME", ".copilot") / "config.json"
    try:
        lines = path.read_text().splitlines()
        text = "\n".join(ln for ln in lines if not ln.lstrip().startswith("//"))
        if nests_deeper(text, SETTINGS_DEPTH):
            return False
        doc = json.loads(text)
    except (OSError, ValueError):
        return False
    folders = doc.get("trustedFolders") if isinstance(doc, dict) else None
    if not isinstance(folders, list):
        return False
    return any(isinstance(f, str) and (Path(f) == root or Path(f) in root.parents) for f in folders)


def _gemini_trusted(root: Path, env: Mapping[str, str]) -> bool:
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    doc = _load(home / ".gemini" / "trustedFolders.json") or {}
    for folder, level in doc.items():
        p = Path(folder)
        if level == "TRUST_FOLDER" and p == root:
            return True
        if level in ("TRUST_FOLDER", "TRUST_PARENT") and (p == root.parent or p in root.parents):
            return True
    return False


# ---- doctor ---------------------------------------------------------------------------------


def doctor_checks(
    root: Path, default_agent: str = "copilot", env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """`{name, status, message, fix}` per agent: the doctor's agent always, the others only
    where omp's hook is registered (to report a double registration or a trust gate)."""
    e = os.environ if env is None else env
    from omp.invocation import omp_command

    omp = omp_command()
    out: list[dict[str, Any]] = []
    for agent in AGENTS:
        regs = registrations(agent, root, e)
        name = f"stop hook {agent}"
        if not regs:
            if agent == default_agent:
                out.append(
                    _check(
                        name,
                        "warn",
                        f"no omp stop hook for {agent}: ralph/ultrawork/ultraqa loops will not "
                        "hold the agent at its stops",
                        f"{omp} hooks install --agent {agent}",
                    )
                )
            continue
        where = ", ".join(f"{_rel(root, p)} ({ev})" for p, ev, _ in regs)
        if agent == "claude":  # Claude Code runs identical commands once
            distinct = {c for _, _, c in regs}
            twice = len(distinct) > 1
        else:
            twice = len(regs) > 1
        if twice:
            out.append(
                _check(
                    name,
                    "warn",
                    f"omp's stop hook is registered {len(regs)} times for {agent}: {where}; the "
                    "CLI runs each; omp answers a stop once and replays that answer to the others "
                    "(expected when Claude Code is used here too; otherwise a stale copy)",
                    f"keep one: remove the others (`{omp} hooks install --agent claude "
                    "--uninstall` removes the .claude/settings.json one, which Copilot also reads)"
                    if agent == "copilot"
                    else "keep one: remove the others by hand",
                )
            )
        else:
            out.append(_check(name, "ok", f"omp stop hook for {agent}: {where}"))
        in_project = [p for p, _, _ in regs if root in p.parents]
        if agent == "copilot" and in_project and not _copilot_trusted(root, e):
            out.append(
                _check(
                    "stop hook copilot trust",
                    "warn",
                    "Copilot loads this project's hooks only in a trusted folder, and this one is "
                    "not in ~/.copilot/config.json's trustedFolders (the TUI asks once; `-p` runs "
                    "skip the hooks silently)",
                    "start `copilot` here and answer 2 (Yes, and remember this folder), or run it "
                    "with COPILOT_ALLOW_ALL=true",
                )
            )
        if agent == "codex" and any(p == root / TARGETS["codex"].rel for p, _, _ in regs):
            gates = _codex_trust(root, e)
            if gates:
                out.append(
                    _check(
                        "stop hook codex trust",
                        "warn",
                        f"Codex will skip the project hook: {' and '.join(gates)}",
                        "run `codex` in the project, trust it, then review and trust omp's Stop "
                        "hook in /hooks (or run codex with --dangerously-bypass-hook-trust)",
                    )
                )
        if (
            agent == "gemini"
            and any(p == root / TARGETS["gemini"].rel for p, _, _ in regs)
            and not _gemini_trusted(root, e)
        ):
            out.append(
                _check(
                    "stop hook gemini trust",
                    "warn",
                    "Gemini runs project hooks only in a trusted folder, and this one is not "
                    "listed in ~/.gemini/trustedFolders.json",
                    "run `gemini` in the project and trust the folder (headless runs: "
                    "GEMINI_CLI_TRUST_WORKSPACE=true)",
                )
            )
    return out


def _check(name: str, status: str, message: str, fix: str | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "message": message, "fix": fix}


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path).replace(str(Path.home()), "~", 1)


__all__ = ["doctor_checks", "installed", "is_omp_handler", "registrations", "start_warning"]
