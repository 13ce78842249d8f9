"""`omp hooks install`: omp's stop hook in each agent CLI's project hook file.

- copilot: `.github/hooks/omp.json`, event `agentStop`, a flat handler
  `{"type":"command","bash":CMD,"timeoutSec":30}`;
- claude: `.claude/settings.json`, event `Stop`, a group
  `{"hooks":[{"type":"command","command":CMD,"timeout":30}]}`;
- codex: `.codex/hooks.json`, event `Stop`, the same group (timeout in seconds);
- gemini: `.gemini/settings.json`, event `AfterAgent`, a group
  `{"matcher":"*","hooks":[{"name":"omp-stop","type":"command","command":CMD,"timeout":30000}]}`
  (its timeout is in milliseconds).

- pi: no hook file; an extension `.pi/extensions/omp-stop.ts` that runs CMD at each
  `agent_end` (`omp.stophook.pi_extension`).

CMD is the installing omp by absolute path plus ` hook stop` (`omp.invocation.omp_command`).
An omp entry is a handler whose command ends in `omp hook stop` (or `-m omp hook stop`). Files
are merged: every other key, event and handler is kept as it was. Installing again is a no-op; an
omp entry that differs from what this omp would write (edited by hand, or written by another omp)
is refused with `hook_changed` unless `force`. `uninstall` removes omp's entries only (and a file
or key left empty by that). Every file is read and planned first: a file that does not parse, or
whose `hooks` is not an object, is refused with `invalid_hook_config` and nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError

AGENTS = ("copilot", "claude", "codex", "gemini")
TIMEOUT_S = 30


class Target(NamedTuple):
    agent: str
    rel: str  # relative to the project root
    event: str
    nested: bool  # handlers sit in groups: {"hooks":[handler]}


TARGETS = {
    "copilot": Target("copilot", ".github/hooks/omp.json", "agentStop", False),
    "claude": Target("claude", ".claude/settings.json", "Stop", True),
    "codex": Target("codex", ".codex/hooks.json", "Stop", True),
    "gemini": Target("gemini", ".gemini/settings.json", "AfterAgent", True),
}

_OMP_CMD = re.compile(r"(?:^|[/\s'\"])omp['\"]?\s+hook\s+stop\s*$")


def hook_command() -> str:
    from omp.invocation import omp_command

    return omp_command() + " hook stop"


def handler(agent: str, command: str) -> dict[str, Any]:
    """The handler omp writes for `agent`."""
    if agent == "copilot":
        return {"type": "command", "bash": command, "timeoutSec": TIMEOUT_S}
    if agent == "gemini":
        return {
            "name": "omp-stop",
            "type": "command",
            "command": command,
            "timeout": 1000 * TIMEOUT_S,
        }
    return {"type": "command", "command": command, "timeout": TIMEOUT_S}


def group(agent: str, command: str) -> dict[str, Any]:
    g: dict[str, Any] = {"hooks": [handler(agent, command)]}
    return {"matcher": "*", **g} if agent == "gemini" else g


def is_omp_handler(h: Any) -> bool:
    if not isinstance(h, dict):
        return False
    for key in ("command", "bash"):
        cmd = h.get(key)
        if isinstance(cmd, str) and _OMP_CMD.search(cmd):
            return True
    return False


def omp_handlers(items: list[Any]) -> list[dict[str, Any]]:
    """omp's handlers in an event's list, flat (Copilot) or in groups (everyone's nested form)."""
    found: list[dict[str, Any]] = []
    for item in items:
        if is_omp_handler(item):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("hooks"), list):
            found += [h for h in item["hooks"] if is_omp_handler(h)]
    return found


def _without_omp(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if is_omp_handler(item):
            continue
        if isinstance(item, dict) and isinstance(item.get("hooks"), list):
            kept = [h for h in item["hooks"] if not is_omp_handler(h)]
            if not kept and item["hooks"]:
                continue  # a group that held only omp's handler goes with it
            item = {**item, "hooks": kept}
        out.append(item)
    return out


# ---- reading --------------------------------------------------------------------------------


def read_doc(path: Path) -> dict[str, Any] | None:
    """The file as a JSON object; None if it does not exist. `invalid_hook_config` otherwise."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise OmpError("unsafe_path", f"refusing {path}: it is {kind}", path=str(path))
    try:
        doc = json.loads(path.read_bytes() or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise OmpError(
            "invalid_hook_config",
            f"{path} is not valid JSON ({exc}); fix it by hand, nothing was written",
            path=str(path),
        ) from None
    except OSError as exc:
        raise OmpError("storage_error", f"cannot read {path}: {exc.strerror or exc}") from exc
    if not isinstance(doc, dict):
        raise OmpError(
            "invalid_hook_config",
            f"{path} is not a JSON object; nothing was written",
            path=str(path),
        )
    return doc


def event_list(doc: dict[str, Any], event: str, path: Path) -> list[Any]:
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise OmpError(
            "invalid_hook_config",
            f'{path}: "hooks" is not an object; nothing was written',
            path=str(path),
        )
    items = hooks.get(event, [])
    if not isinstance(items, list):
        raise OmpError(
            "invalid_hook_config",
            f'{path}: "hooks.{event}" is not a list; nothing was written',
            path=str(path),
        )
    return items


# ---- planning and writing -------------------------------------------------------------------


class Plan(NamedTuple):
    agent: str
    path: Path
    action: str  # created | added | unchanged | updated | conflict | removed | absent
    doc: dict[str, Any] | None  # what to write; None: nothing to write (or delete, see action)
    delete: bool = False
    text: str | None = None  # a file that is not JSON (pi's extension): written as is


def _plan_install(t: Target, path: Path, command: str, force: bool) -> Plan:
    doc = read_doc(path)
    items = event_list(doc or {}, t.event, path)
    found = omp_handlers(items)
    want = handler(t.agent, command)
    if len(found) == 1 and found[0] == want:
        return Plan(t.agent, path, "unchanged", None)
    if found and not force:
        return Plan(t.agent, path, "conflict", None)
    new: dict[str, Any] = dict(doc) if doc is not None else {}
    if doc is None and t.agent == "copilot":
        new["version"] = 1
    hooks: dict[str, Any] = dict(new.get("hooks") or {})
    kept = _without_omp(items)
    kept.append(group(t.agent, command) if t.nested else want)
    hooks[t.event] = kept
    new["hooks"] = hooks
    action = "updated" if found else ("created" if doc is None else "added")
    return Plan(t.agent, path, action, new)


def _plan_uninstall(t: Target, path: Path) -> Plan:
    doc = read_doc(path)
    if doc is None:
        return Plan(t.agent, path, "absent", None)
    items = event_list(doc, t.event, path)
    if not omp_handlers(items):
        return Plan(t.agent, path, "absent", None)
    new = dict(doc)
    hooks = dict(new["hooks"])
    kept = _without_omp(items)
    if kept:
        hooks[t.event] = kept
    else:
        del hooks[t.event]
    if hooks:
        new["hooks"] = hooks
    else:
        del new["hooks"]
    # omp's own Copilot file, left with nothing but its version, goes.
    empty = t.agent == "copilot" and not {k: v for k, v in new.items() if k != "version"}
    return Plan(t.agent, path, "removed", None if empty else new, delete=empty)


# The agents `install` serves: the four hook files ("all"), and pi's extension (not a hook
# file, so only when asked for by name).
INSTALLABLE = (*AGENTS, "pi")


def agents_of(agent: str) -> list[str]:
    if agent == "all":
        return list(AGENTS)
    if agent not in INSTALLABLE:
        raise OmpError(
            "usage", f"unknown agent {agent!r}; expected one of {', '.join(INSTALLABLE)} or all"
        )
    return [agent]


def install(
    root: Path,
    agent: str = "all",
    *,
    uninstall: bool = False,
    force: bool = False,
    command: str | None = None,
) -> dict[str, Any]:
    cmd = command or hook_command()
    plans: list[Plan] = []
    for a in agents_of(agent):
        if a == "pi":
            from omp.stophook import pi_extension

            path = root / pi_extension.REL
            _check_parents(root, path)
            pp = pi_extension.plan(root, cmd, uninstall=uninstall, force=force)
            plans.append(Plan(a, pp.path, pp.action, None, pp.delete, pp.text))
            continue
        t = TARGETS[a]
        path = root / t.rel
        _check_parents(root, path)
        plans.append(_plan_uninstall(t, path) if uninstall else _plan_install(t, path, cmd, force))
    conflicts = [p for p in plans if p.action == "conflict"]
    if conflicts:
        shown = ", ".join(f"{p.agent} ({p.path})" for p in conflicts)
        raise OmpError(
            "hook_changed",
            f"omp's stop hook was changed by hand or by another omp in: {shown}; nothing was "
            f"written. Keep it, or replace it with --force",
            files=[str(p.path) for p in conflicts],
        )
    from omp.skills import _write as write_project_file

    try:
        for p in plans:
            if p.delete:
                p.path.unlink()
            elif p.text is not None:
                write_project_file(p.path, p.text.encode())
            elif p.doc is not None:
                text = json.dumps(p.doc, indent=2, ensure_ascii=False) + "\n"
                write_project_file(p.path, text.encode())
    except OSError as exc:
        raise OmpError(
            "storage_error", f"cannot write {exc.filename or root}: {exc.strerror or exc}"
        ) from exc
    counts: dict[str, int] = {}
    for p in plans:
        counts[p.action] = counts.get(p.action, 0) + 1
    return {
        "ok": True,
        "root": str(root),
        "command": cmd,
        "uninstall": uninstall,
        "hooks": [{"agent": p.agent, "path": str(p.path), "action": p.action} for p in plans],
        "counts": counts,
    }


def _check_parents(root: Path, path: Path) -> None:
    cur = root
    for part in path.relative_to(root).parent.parts:
        cur = cur / part
        if os.path.islink(cur) or (os.path.lexists(cur) and not cur.is_dir()):
            raise OmpError(
                "unsafe_path", f"refusing {cur}: it is not a plain directory", path=str(cur)
            )
