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

omp's entry is a handler whose whole command is an omp (one word naming `omp`, or `PYTHON -m omp`)
followed by `hook stop` (`is_omp_entry`). A command of the user's that merely calls `omp hook
stop` among other words is the user's: install and uninstall leave it alone (doctor still counts
it, by `is_omp_handler`: it does run the hook). Files are merged: every other key, event and
handler is kept as it was. Installing again is a no-op; an omp entry that differs from what this
omp would write (edited by hand, or written by another omp) is refused with `hook_changed` unless
`force`. `uninstall` removes omp's entries, the groups omp wrote around them and an event list
they alone made up; the `hooks` object only when omp's install made it (the file had none:
recorded in `.omp/state/hooks/made-hooks.json`) and nothing else is left in it, so a user's own
`"hooks": {}` stays; never a file, except omp's own `.github/hooks/omp.json`.

The user's file is kept as it was, all or nothing:

- every target is read, checked and rendered to its final bytes before anything is written: a
  link, a directory or another special file where a hook file belongs is `unsafe_path`; a file
  that is not UTF-8 JSON, holds `NaN`/`Infinity` or a number beyond a double (`1e400`), a key
  twice in one object (a rewrite would drop one silently), is nested too deeply, or whose
  `hooks` is not an object is `invalid_hook_config`; a file or directory omp may not write is
  `storage_error`;
- what is written is JSON that node's `JSON.parse` reads (`allow_nan=False`), with the file's
  permission bits (a 0600 settings file stays 0600) and its UTF-8 byte order mark if it had one;
- every file is written to a temporary file first, then renamed into place; a failure on the way
  puts back every file already replaced and removes the directories omp made.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
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
    """A handler that runs `omp hook stop` (the last words of its command): doctor's count."""
    if not isinstance(h, dict):
        return False
    for key in ("command", "bash"):
        cmd = h.get(key)
        if isinstance(cmd, str) and _OMP_CMD.search(cmd):
            return True
    return False


def _is_omp_words(words: list[str]) -> bool:
    if len(words) == 1:
        return os.path.basename(words[0]) == "omp"
    return len(words) == 3 and words[1:] == ["-m", "omp"]


def is_omp_entry(h: Any) -> bool:
    """omp's own entry: a handler whose whole command is an omp and `hook stop`, nothing else."""
    if not isinstance(h, dict):
        return False
    for key in ("command", "bash"):
        cmd = h.get(key)
        if not isinstance(cmd, str):
            continue
        try:
            words = shlex.split(cmd)
        except ValueError:  # unbalanced quotes: not a command omp writes
            continue
        if words[-2:] == ["hook", "stop"] and _is_omp_words(words[:-2]):
            return True
    return False


def omp_handlers(items: list[Any], owned: Any = is_omp_handler) -> list[dict[str, Any]]:
    """The handlers `owned` picks in an event's list, flat (Copilot) or in groups (everyone's
    nested form): every one that runs the hook by default, omp's own with `is_omp_entry`."""
    found: list[dict[str, Any]] = []
    for item in items:
        if owned(item):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("hooks"), list):
            found += [h for h in item["hooks"] if owned(h)]
    return found


def _omp_group(item: dict[str, Any]) -> bool:
    """A group holding nothing but what omp writes around its handler (`group`)."""
    return set(item) <= {"hooks", "matcher"} and item.get("matcher", "*") == "*"


def _without_omp(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if is_omp_entry(item):
            continue
        if isinstance(item, dict) and isinstance(item.get("hooks"), list):
            kept = [h for h in item["hooks"] if not is_omp_entry(h)]
            if len(kept) < len(item["hooks"]):
                if not kept and _omp_group(item):
                    continue  # the group omp wrote around its handler goes with it
                item = {**item, "hooks": kept}
        out.append(item)
    return out


# ---- reading --------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


class Doc(NamedTuple):
    obj: dict[str, Any]
    mode: int  # the file's permission bits, kept when it is rewritten
    bom: bool  # it began with a UTF-8 byte order mark, kept too
    raw: bytes  # its bytes as read, put back if a later file fails


def _invalid(path: Path, why: str) -> OmpError:
    return OmpError(
        "invalid_hook_config", f"{path} {why}; fix it by hand, nothing was written", path=str(path)
    )


def _strict_json(text: str, path: Path) -> Any:
    """JSON that omp can write back for node's `JSON.parse` to read the same: no NaN or
    Infinity, no number beyond a double (`1e400`), no key twice in one object."""

    def constant(name: str) -> Any:
        raise _invalid(path, f"holds {name}, which is not JSON")

    def number(literal: str) -> float:
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            raise _invalid(path, f"holds the number {literal[:40]}, beyond what JSON readers hold")
        return value

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                raise _invalid(path, f"holds the key {key!r} twice in one object")
            obj[key] = value
        return obj

    from omp.store.strictjson import SETTINGS_DEPTH, nests_deeper

    if nests_deeper(text, SETTINGS_DEPTH):  # refused before the parser, which recurses
        raise _invalid(path, "is nested too deeply")
    try:
        return json.loads(
            text, parse_constant=constant, parse_float=number, object_pairs_hook=pairs
        )
    except ValueError as exc:  # not JSON, or an integer of more than 4300 digits
        raise _invalid(path, f"is not valid JSON ({exc})") from None


def read_doc(path: Path) -> Doc | None:
    """The file as a JSON object; None if it does not exist. `unsafe_path` when something other
    than a regular file is there, `invalid_hook_config` when its content cannot be kept."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OmpError("storage_error", f"cannot look at {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise OmpError("unsafe_path", f"refusing {path}: it is {kind}", path=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OmpError("unsafe_path", f"refusing {path}: it changed", path=str(path))
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OmpError("storage_error", f"cannot read {path}: {exc.strerror or exc}") from exc
    raw = b"".join(chunks)
    bom = raw.startswith(BOM)
    try:
        text = raw[len(BOM) :].decode("utf-8") if bom else raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(path, "is not UTF-8 text") from None
    doc = _strict_json(text, path) if text.strip() else {}
    if not isinstance(doc, dict):
        raise _invalid(path, "is not a JSON object")
    return Doc(doc, stat.S_IMODE(st.st_mode), bom, raw)


def event_list(doc: dict[str, Any], event: str, path: Path) -> list[Any]:
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise _invalid(path, 'has a "hooks" that is not an object')
    items = hooks.get(event, [])
    if not isinstance(items, list):
        raise _invalid(path, f'has a "hooks.{event}" that is not a list')
    return items


# ---- planning -------------------------------------------------------------------------------


class Plan(NamedTuple):
    agent: str
    path: Path
    action: str  # created | added | unchanged | updated | conflict | removed | absent
    data: bytes | None  # the file's new bytes; None: nothing to write (or delete, see action)
    doc: Doc | None  # the file as it was (None: it does not exist)
    delete: bool = False
    text: str | None = None  # a file that is not JSON (pi's extension): written as is
    made_hooks: bool = False  # install: the file had no `hooks` object; omp's write makes it
    unmade_hooks: bool = False  # uninstall: the `hooks` object omp made was removed again

    @property
    def writes(self) -> bool:
        return self.data is not None or self.delete


def render(obj: dict[str, Any], path: Path, *, bom: bool = False) -> bytes:
    """The file's bytes: JSON that `JSON.parse` reads (never NaN or Infinity), 2-space indent,
    UTF-8 (a string no UTF-8 can hold, a lone surrogate, keeps its `\\u` escape)."""
    try:
        try:
            data = (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()
        except UnicodeEncodeError:
            data = (json.dumps(obj, indent=2, allow_nan=False) + "\n").encode("ascii")
    except RecursionError:
        raise _invalid(path, "is nested too deeply to be rewritten") from None
    except ValueError as exc:  # NaN or Infinity: refused when read, so only a bug gets here
        raise _invalid(path, f"cannot be written as JSON ({exc})") from None
    return BOM + data if bom else data


def _plan(t: Target, path: Path, action: str, doc: Doc | None, new: dict[str, Any] | None) -> Plan:
    data = None if new is None else render(new, path, bom=doc is not None and doc.bom)
    return Plan(t.agent, path, action, data, doc)


def _plan_install(t: Target, path: Path, command: str, force: bool) -> Plan:
    doc = read_doc(path)
    items = event_list(doc.obj if doc else {}, t.event, path)
    found = omp_handlers(items, is_omp_entry)
    want = handler(t.agent, command)
    if len(found) == 1 and found[0] == want:
        return _plan(t, path, "unchanged", doc, None)
    if found and not force:
        return _plan(t, path, "conflict", doc, None)
    new: dict[str, Any] = dict(doc.obj) if doc is not None else {}
    if doc is None and t.agent == "copilot":
        new["version"] = 1
    hooks: dict[str, Any] = dict(new.get("hooks") or {})
    kept = _without_omp(items)
    kept.append(group(t.agent, command) if t.nested else want)
    hooks[t.event] = kept
    new["hooks"] = hooks
    action = "updated" if found else ("created" if doc is None else "added")
    made = doc is None or "hooks" not in doc.obj
    return _plan(t, path, action, doc, new)._replace(made_hooks=made)


def _plan_uninstall(t: Target, path: Path, made: bool = False) -> Plan:
    doc = read_doc(path)
    if doc is None:
        return _plan(t, path, "absent", doc, None)
    items = event_list(doc.obj, t.event, path)
    if not omp_handlers(items, is_omp_entry):
        return _plan(t, path, "absent", doc, None)
    new = dict(doc.obj)
    hooks = dict(new["hooks"])
    kept = _without_omp(items)
    if kept:
        hooks[t.event] = kept
    else:
        del hooks[t.event]  # the list held omp's entries alone; `hooks` itself always stays
    new["hooks"] = hooks
    # omp's own Copilot file, left with nothing but its version, goes.
    if t.agent == "copilot" and {k: v for k, v in new.items() if k != "version"} == {"hooks": {}}:
        return Plan(t.agent, path, "removed", None, doc, delete=True, unmade_hooks=made)
    if made and not hooks:  # the object omp's install made, left empty: it goes too
        del new["hooks"]
        return _plan(t, path, "removed", doc, new)._replace(unmade_hooks=True)
    return _plan(t, path, "removed", doc, new)


# ---- which `hooks` objects omp made ------------------------------------------------------------
# Kept in omp's own state, never in the user's file. Lost or damaged, it only means omp no longer
# knows: uninstall then leaves an empty `hooks` object, as it always did.


def _made_hooks(root: Path) -> set[str]:
    """The files (relative to `root`) whose `hooks` object omp's install made."""
    from omp.store import fs
    from omp.store.paths import StatePaths

    project = StatePaths(root)
    try:
        if not project.check(project.hooks):
            return set()
        doc = fs.read_json(project.hooks_made)
    except OmpError as exc:
        if exc.code != "corrupt_state":
            raise
        return set()
    files = doc.get("files") if isinstance(doc, dict) else None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else set()


def _record_made_hooks(root: Path, plans: list[Plan], before: set[str]) -> None:
    """After a commit: remember the `hooks` objects made, forget those removed. Best effort: the
    hook files are written already, and a record not written costs only an empty `hooks` left
    behind by a later uninstall."""
    from omp.store import fs
    from omp.store.paths import StatePaths

    after = set(before)
    for p in plans:
        rel = str(p.path.relative_to(root))
        if p.made_hooks:
            after.add(rel)
        if p.unmade_hooks:
            after.discard(rel)
    if after == before:
        return
    project = StatePaths(root)
    try:
        project.ensure(project.hooks)
        fs.write_json_atomic(project.hooks_made, {"files": sorted(after)})
    except (OmpError, OSError):
        pass


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
    made = _made_hooks(root)
    plans: list[Plan] = []
    for a in agents_of(agent):
        if a == "pi":
            from omp.stophook import pi_extension

            path = root / pi_extension.REL
            _check_parents(root, path)
            pp = pi_extension.plan(root, cmd, uninstall=uninstall, force=force)
            data = pp.text.encode() if pp.text is not None else None
            plans.append(Plan(a, pp.path, pp.action, data, None, pp.delete, pp.text))
            continue
        t = TARGETS[a]
        path = root / t.rel
        _check_parents(root, path)
        plans.append(
            _plan_uninstall(t, path, t.rel in made)
            if uninstall
            else _plan_install(t, path, cmd, force)
        )
    conflicts = [p for p in plans if p.action == "conflict"]
    if conflicts:
        shown = ", ".join(f"{p.agent} ({p.path})" for p in conflicts)
        raise OmpError(
            "hook_changed",
            f"omp's stop hook was changed by hand or by another omp in: {shown}; nothing was "
            f"written. Keep it, or replace it with --force",
            files=[str(p.path) for p in conflicts],
        )
    writes = [p for p in plans if p.writes]
    _check_writable(writes)
    _commit(writes, root)
    _record_made_hooks(root, writes, made)
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


def _check_writable(plans: list[Plan]) -> None:
    """Every file to write or delete, and the directory it goes in (or the nearest one that
    exists, where omp would make the rest), may be written: checked for all before any write."""
    for p in plans:
        if p.doc is not None and not p.delete and not os.access(p.path, os.W_OK):
            raise OmpError(
                "storage_error",
                f"cannot write {p.path}: it is read-only; nothing was written",
                path=str(p.path),
            )
        d = p.path.parent
        while not os.path.lexists(d):
            d = d.parent
        if not os.access(d, os.W_OK | os.X_OK):
            raise OmpError(
                "storage_error",
                f"cannot write in {d}: permission denied; nothing was written",
                path=str(d),
            )


def _new_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask  # a project file meant to be committed: the usual mode, not omp's 0600


def _commit(plans: list[Plan], root: Path) -> None:
    """Write every plan or none: temporary files first, then one rename each; on a failure the
    files already replaced get their old bytes back and the directories made here go."""
    made: list[Path] = []
    staged: list[tuple[Plan, str | None]] = []
    done: list[Plan] = []
    try:
        for p in plans:
            missing = []
            d = p.path.parent
            while not os.path.lexists(d):
                missing.append(d)
                d = d.parent
            for d in reversed(missing):
                os.mkdir(d)
                made.append(d)
            if p.delete:
                staged.append((p, None))
                continue
            staged.append((p, _stage(p.path, p.data or b"", p.doc.mode if p.doc else None)))
        for p, tmp in staged:
            if tmp is None:
                os.unlink(p.path)
            else:
                os.replace(tmp, p.path)
            done.append(p)
    except OSError as exc:
        failed = _undo(staged, done, made)
        why = exc.strerror or str(exc)
        where = exc.filename or root
        if failed:
            raise OmpError(
                "storage_error",
                f"cannot write {where}: {why}; and could not put back {', '.join(failed)}",
            ) from exc
        raise OmpError(
            "storage_error", f"cannot write {where}: {why}; nothing was changed"
        ) from exc


def _stage(path: Path, data: bytes, mode: int | None) -> str:
    """A temporary file beside `path` holding `data` with `mode` (a new file's usual mode)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode if mode is not None else _new_mode())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def _undo(staged: list[tuple[Plan, str | None]], done: list[Plan], made: list[Path]) -> list[str]:
    """Put back what `_commit` changed; the files it could not put back."""
    failed: list[str] = []
    for p in reversed(done):
        try:
            if p.doc is None:
                os.unlink(p.path)
            else:
                os.replace(_stage(p.path, p.doc.raw, p.doc.mode), p.path)
        except OSError:
            failed.append(str(p.path))
    for p, tmp in staged:
        if tmp is not None and p not in done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    for d in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(d)
    return failed
