"""Where a session's record is: from what a stop hook receives, or from the pane's process.

From a hook (`from_hook`): every CLI but pi passes the record's path itself (`transcriptPath`
or `transcript_path`), seen on Copilot CLI 1.0.102, Claude Code 2.1.328, Codex 0.171 and
Gemini 0.61. Without it, the session id (and the cwd) lead to the file by each CLI's layout:
pi's stop payload (omp's extension, `omp.stophook.pi_extension`) has only the id and the cwd.
A Copilot subagent's stop carries the subagent's id as `sessionId`, its session's as
`parentAgentId`, and the session's own `transcriptPath`: the record is the session's.

From a process (`from_process`), when no hook ran: Copilot holds
`session-state/<id>/inuse.<pid>.hold` open while a session runs, and Codex its rollout file
itself, so the open files name the record. Claude Code, Gemini CLI and pi hold nothing open
between writes: the record is the one in the cwd's session folder written since the process
started, and when several workers share the cwd, the one whose text holds `marker` (a string
only that worker's session contains, such as the path of its inbox). A team's leader has no
such text: for it, the records holding any of `exclude` (the workers' inbox paths) are left out,
and the one left is its, if only one is.

A session may own more than one file: `session_files` adds a Claude Code subagent's transcript
(`<session>/subagents/agent-*.jsonl`) and a Gemini subagent's chat (`chats/<session id>/`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from omp.store.strictjson import nests_deeper
from omp.usage.limits import MAX_WHOLE
from omp.usage.process import Process

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SCAN = 1 << 20  # bytes of a candidate's start searched for the marker
SLACK = 2.0  # seconds: a record written this long before its process's start time still counts
COPILOT_HOLD = re.compile(r"/session-state/([^/]+)/inuse\.\d+\.hold$")
CODEX_ROLLOUT = re.compile(r"/sessions/\d{4}/\d{2}/\d{2}/rollout-[^/]*\.jsonl$")
CODEX_LOCK = re.compile(r"/thread-writer-locks/([^/]+)\.lock$")


class Located(NamedTuple):
    path: Path | None
    how: str  # how it was found, or why it was not
    candidates: tuple[Path, ...] = ()  # when several records fit and none could be chosen


def data_dir(kind: str, env: Mapping[str, str]) -> Path | None:
    """The CLI's own folder under HOME, or where its variable moves it."""
    home = env.get("HOME") or ""
    dirs = {
        "copilot": env.get("COPILOT_HOME") or (home and f"{home}/.copilot"),
        "claude": env.get("CLAUDE_CONFIG_DIR") or (home and f"{home}/.claude"),
        "codex": env.get("CODEX_HOME") or (home and f"{home}/.codex"),
        "gemini": env.get("GEMINI_CLI_HOME") or (home and f"{home}/.gemini"),
        "pi": env.get("PI_CODING_AGENT_DIR") or (home and f"{home}/.pi/agent"),
    }
    found = dirs.get(kind)
    return Path(found) if found else None


def claude_project(cwd: str) -> str:
    """Claude Code's folder name for a cwd: every character but ASCII letters and digits a dash."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def pi_project(cwd: str) -> str:
    """pi's folder name for a cwd: `--` around the path, its separators as dashes."""
    return "--" + re.sub(r"[/\\:]", "-", cwd.lstrip("/\\")) + "--"


# ---- from a stop hook --------------------------------------------------------------------------


def from_hook(kind: str, payload: Mapping[str, Any], env: Mapping[str, str]) -> Located:
    """The record of the session whose stop hook received `payload` (`env`: the hook's)."""
    given = payload.get("transcriptPath") or payload.get("transcript_path")
    if isinstance(given, str) and given:
        if given.startswith("~/") and env.get("HOME"):
            given = env["HOME"] + given[1:]
        if os.path.isabs(given):
            return Located(Path(given), "the hook's transcript path")
    sid = payload.get("sessionId") or payload.get("session_id")
    if kind == "copilot" and payload.get("parentAgentId"):
        sid = payload["parentAgentId"]  # a subagent's stop: its session is the parent's
    if not isinstance(sid, str) or not SAFE_ID.fullmatch(sid):
        return Located(None, "the hook gave neither a transcript path nor a usable session id")
    base = data_dir(kind, env)
    if base is None:
        return Located(None, f"no HOME to find {kind}'s sessions in")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else ""
    return _by_id(kind, base, sid, str(cwd))


def _by_id(kind: str, base: Path, sid: str, cwd: str) -> Located:
    if kind == "copilot":
        return _exists(base / "session-state" / sid / "events.jsonl", "the session id")
    if kind == "claude":
        if cwd:
            path = base / "projects" / claude_project(cwd) / f"{sid}.jsonl"
            if path.is_file():
                return Located(path, "the session id and cwd")
        return _newest(base.glob(f"projects/*/{sid}.jsonl"), "the session id")
    if kind == "codex":
        return _newest(base.glob(f"sessions/*/*/*/rollout-*-{sid}.jsonl"), "the session id")
    if kind == "gemini":
        found = [
            p
            for p in base.glob(f"tmp/*/chats/session-*-{sid[:8]}.json*")
            if _gemini_session(p) == sid
        ]
        return _newest(found, "the session id")
    if kind == "pi":  # `<time>_<id>.jsonl`, in the cwd's folder unless pi was moved since
        if cwd:
            found = list((base / "sessions" / pi_project(cwd)).glob(f"*_{sid}.jsonl"))
            if found:
                return _newest(found, "the session id and cwd")
        return _newest(base.glob(f"sessions/*/*_{sid}.jsonl"), "the session id")
    return Located(None, f"{kind} has no stop hook payload omp knows")


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def session_id(kind: str, path: Path) -> str | None:
    """The session the record at `path` belongs to: `_by_id`'s layouts read backwards (each CLI
    names its record after its session, Gemini after the id's first 8 characters only: its id
    is the first line's, checked against the name). None when the record does not say it
    plainly; `omp team resume` then starts a fresh session, never a guessed one."""
    name = path.name
    if kind == "copilot":  # session-state/<id>/events.jsonl
        return _uuid(path.parent.name) if name == "events.jsonl" else None
    if kind == "claude":  # projects/<cwd>/<id>.jsonl
        return _uuid(path.stem)
    if kind in ("codex", "pi"):  # rollout-<time>-<id>.jsonl, <time>_<id>.jsonl
        found = UUID.findall(path.stem)
        return found[-1] if found and path.stem.endswith(found[-1]) else None
    if kind == "gemini" and path.suffix == ".jsonl":  # session-<time>-<id[:8]>.jsonl
        sid = _uuid(_gemini_session(path) or "")
        return sid if sid and path.stem.endswith(sid[:8]) else None
    return None


def _uuid(text: str) -> str | None:
    return text if UUID.fullmatch(text) else None


def _exists(path: Path, how: str) -> Located:
    return Located(path, how) if path.is_file() else Located(None, f"{path}: no such file")


def _newest(paths: Any, how: str) -> Located:
    found = sorted(paths, key=_mtime, reverse=True)
    if not found:
        return Located(None, f"no record found by {how}")
    return Located(found[0], how)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _gemini_session(path: Path) -> str | None:
    """The session id a Gemini chat file names (its first line, or the old whole document)."""
    try:
        with path.open("rb") as f:
            head = f.readline(SCAN) if path.suffix == ".jsonl" else f.read(MAX_WHOLE + 1)
        if len(head) > MAX_WHOLE or nests_deeper(head):
            return None  # not read whole, never parsed: bounded like every reader of records
        doc = json.loads(head)
    except (OSError, ValueError):
        return None
    sid = doc.get("sessionId") if isinstance(doc, dict) else None
    return sid if isinstance(sid, str) else None


# ---- from the pane's processes -----------------------------------------------------------------


def from_process(
    kind: str,
    procs: Sequence[Process],
    *,
    marker: str | None = None,
    exclude: Sequence[str] = (),
) -> Located:
    """The record the agent CLI in this process tree writes (`process.tree(pane_pid)`); by the
    cwd, only a record holding `marker` and none of `exclude`."""
    if not procs:
        return Located(None, "no such process (or no /proc to look in)")
    env: dict[str, str] = {}
    for p in procs:
        env.update(p.env)  # the CLI, deeper in the tree, has the last word
    opened = [f for p in procs for f in p.open_files]
    if kind == "copilot":
        held = {Path(f).parent / "events.jsonl" for f in opened if COPILOT_HOLD.search(f)}
        return _one(held, "the session lock Copilot holds open")
    if kind == "codex":
        rollouts = {Path(f) for f in opened if CODEX_ROLLOUT.search(f)}
        if rollouts:
            return _one(rollouts, "the rollout Codex holds open")
        base = data_dir(kind, env)
        ids = {m[1] for f in opened if (m := CODEX_LOCK.search(f))}
        if base is not None and ids:
            found = {p for i in ids for p in base.glob(f"sessions/*/*/*/rollout-*-{i}.jsonl")}
            return _one(found, "the thread lock Codex holds open")
        return Located(None, "Codex holds no rollout open (not started, or another user's)")
    cwd = procs[0].cwd
    base = data_dir(kind, env)
    if cwd is None or base is None:
        return Located(None, "the process shows no cwd or HOME")
    folder = {
        "claude": base / "projects" / claude_project(str(cwd)),
        "gemini": _gemini_folder(base, str(cwd)),
        "pi": base / "sessions" / pi_project(str(cwd)),
    }.get(kind)
    if folder is None:
        return Located(None, f"omp cannot find {kind} sessions from a process")
    started = min((p.started for p in procs if p.started is not None), default=None)
    pattern = "*.json*" if kind == "gemini" else "*.jsonl"
    return _recent(folder, pattern, started, marker, exclude)


def _gemini_folder(base: Path, cwd: str) -> Path | None:
    """`tmp/<name>/chats`, the name `projects.json` gives the cwd (0.61; older versions used a
    hash of the path, which the caller does not know: None)."""
    try:
        with (base / "projects.json").open("rb") as f:
            raw = f.read(SCAN + 1)
        if len(raw) > SCAN or nests_deeper(raw):
            return None
        projects = json.loads(raw).get("projects", {})
    except (OSError, ValueError, AttributeError):
        return None
    name = projects.get(cwd) if isinstance(projects, dict) else None
    if not isinstance(name, str) or not SAFE_ID.fullmatch(name):
        return None
    return base / "tmp" / name / "chats"


def _one(paths: set[Path], how: str) -> Located:
    if len(paths) == 1:
        return Located(next(iter(paths)), how)
    if not paths:
        return Located(None, f"not found: {how}")
    return Located(None, f"{len(paths)} records fit ({how})", tuple(sorted(paths)))


def _recent(
    folder: Path,
    pattern: str,
    started: float | None,
    marker: str | None,
    exclude: Sequence[str] = (),
) -> Located:
    try:
        files = [p for p in folder.glob(pattern) if p.is_file()]
    except OSError:
        files = []
    if started is not None:
        files = [p for p in files if _mtime(p) >= started - SLACK]
    how = f"written in {folder} since the process started"
    if marker is not None:
        files = [p for p in files if _holds(p, marker)]
        how += f" and holding {marker!r}"
    if exclude:
        files = [p for p in files if not any(_holds(p, x) for x in exclude)]
        how += f" and holding none of {len(exclude)} other sessions' texts"
    files.sort(key=_mtime, reverse=True)
    if len(files) == 1:
        return Located(files[0], how)
    if not files:
        return Located(None, f"no record {how}")
    return Located(None, f"{len(files)} records {how}", tuple(files))


def _holds(path: Path, marker: str) -> bool:
    needles = {marker.encode(), json.dumps(marker, ensure_ascii=False)[1:-1].encode()}
    try:
        with path.open("rb") as f:
            head = f.read(SCAN)
    except OSError:
        return False
    return any(n in head for n in needles)


# ---- a session's files -------------------------------------------------------------------------


def session_files(kind: str, record: Path) -> list[Path]:
    """The record and the records of the subagents its session ran, if they have their own."""
    out = [record]
    if kind == "claude":
        out += sorted((record.parent / record.stem / "subagents").glob("*.jsonl"))
    elif kind == "gemini":
        sid = _gemini_session(record)
        if sid and SAFE_ID.fullmatch(sid):
            out += sorted((record.parent / sid).glob("*.json*"))
    return out
