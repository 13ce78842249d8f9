"""Tasks files: a TOML backlog, a Markdown checklist, or a GitHub issues export, read into `Spec`s.

Formats (chosen by the file's extension; `.toml`, `.md`/`.markdown`/`.txt`, `.json`; any other
name by its first characters):

- TOML, one `[[task]]` table per task: `title` (required), `description`, `id` (default: the
  task's position, 1, 2, ...), `blocked_by` (ids), `agent`, `model`, `verify`, `priority`
  (higher first, default 0), `retries` (default 0). Any other key is refused (a typo would
  otherwise be silently ignored).
- A Markdown checklist: `- [ ] title` (or `*`), the indented lines below it its description;
  ids are the items' positions (ticked items, `- [x]`, are done: they keep their number and are
  not created). `blocked by #N` / `depends on #N` in a title or description is a dependency.
- A GitHub issues export (`gh issue list --json number,title,body,labels > issues.json`): the
  number is the id, `blocked by #N` / `depends on #N` in the body a dependency, a label
  `agent:NAME` the agent, `priority:N` the priority; an issue whose `state` is `CLOSED` is done.

Everything is checked before anything is written: a duplicate id, an id a task is blocked by
that no task has, a task blocked by itself, a cycle (named: `1 -> 3 -> 1`), a file that is not
UTF-8 or larger than `MAX_BYTES`, no task at all: `invalid_tasks`, saying where.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from omp.errors import OmpError
from omp.store import names

MAX_BYTES = 1 << 20
MAX_TASKS = 10_000
MAX_TITLE = 200
MAX_DESCRIPTION = 16 * 1024
MAX_COMMAND = 4096
MAX_RETRIES = 10
MAX_PRIORITY = 1_000_000
TOML_KEYS = ("id", "title", "description", "blocked_by", "agent", "model", "verify", "priority",
             "retries")  # fmt: skip
DONE_LABEL = "CLOSED"


class Spec(NamedTuple):
    """One task as a file gives it (checked)."""

    id: str
    title: str
    description: str = ""
    blocked_by: tuple[str, ...] = ()
    agent: str | None = None
    model: str | None = None
    verify: str | None = None
    priority: int = 0
    retries: int = 0
    where: str = ""  # where in the file (`task 3`, `line 12`, `issue #7`), for messages


def invalid(message: str, **detail: Any) -> OmpError:
    return OmpError("invalid_tasks", message, **detail)


# ---- reading the file ------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """The file's text: at most `MAX_BYTES`, UTF-8, else `invalid_tasks`."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise invalid(f"tasks file {path} does not exist", file=str(path)) from None
    except OSError as exc:
        raise invalid(f"cannot read tasks file {path}: {exc.strerror}", file=str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise invalid(f"tasks file {path} is not a regular file", file=str(path))
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise invalid(f"cannot read tasks file {path}: {exc.strerror}", file=str(path)) from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise invalid(
            f"tasks file {path} is larger than {MAX_BYTES // 1024} KiB; split it",
            file=str(path),
        )
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise invalid(
            f"tasks file {path} is not UTF-8 (byte {exc.start}, line {line})", file=str(path)
        ) from None


def kind_of(path: Path, text: str) -> str:
    """toml | checklist | github."""
    ext = path.suffix.lower()
    if ext == ".toml":
        return "toml"
    if ext == ".json":
        return "github"
    if ext in (".md", ".markdown", ".txt"):
        return "checklist"
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("[", "{") and not text.lstrip().startswith("[["):
        return "github"
    return "toml" if "[[task]]" in text else "checklist"


def load(path: Path) -> list[Spec]:
    """The tasks of the file at `path`, checked (see the module docstring)."""
    text = read_text(path)
    kind = kind_of(path, text)
    if kind == "toml":
        specs = parse_toml(text, str(path))
    elif kind == "github":
        specs, done = parse_github(text, str(path))
        specs = _drop_done(specs, done)
    else:
        specs, done = parse_checklist(text, str(path))
        specs = _drop_done(specs, done)
    return check(specs, str(path))


def _drop_done(specs: list[Spec], done: set[str]) -> list[Spec]:
    """A dependency on a task that is done already (a ticked item, a closed issue) is met."""
    if not done:
        return specs
    return [s._replace(blocked_by=tuple(b for b in s.blocked_by if b not in done)) for s in specs]


# ---- field checks ----------------------------------------------------------------------------


def task_id(value: object, where: str, source: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if not names.is_task_id(value):
        raise invalid(
            f"{source}: {where}: invalid id {value!r}: use a number or 1-64 letters, digits, "
            "'_' or '-'",
            file=source,
        )
    return value


def title(value: object, where: str, source: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{source}: {where} has no title", file=source)
    text = " ".join(value.split())
    if len(text) > MAX_TITLE:
        raise invalid(
            f"{source}: {where}: its title is longer than {MAX_TITLE} characters; put the rest "
            "in its description",
            file=source,
        )
    return text


def text_field(value: object, key: str, most: int, where: str, source: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"{source}: {where}: {key} must be a string", file=source)
    if len(value) > most:
        raise invalid(f"{source}: {where}: {key} is longer than {most} characters", file=source)
    return value


def int_field(value: object, key: str, low: int, high: int, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(
            f"{source}: {where}: {key} must be a whole number from {low} to {high}, got {value!r}",
            file=source,
        )
    return value


def agent_name(value: object, where: str, source: str) -> str | None:
    if value is None:
        return None
    if not names.is_valid_name(value):
        raise invalid(f"{source}: {where}: invalid agent {value!r}", file=source)
    assert isinstance(value, str)
    return value


def _ids(value: object, where: str, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(dict.fromkeys(task_id(v, f"{where}: blocked_by", source) for v in items))


# ---- TOML --------------------------------------------------------------------------------


def parse_toml(text: str, source: str) -> list[Spec]:
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise invalid(f"{source} is not valid TOML: {exc}", file=source) from None
    other = [k for k in doc if k != "task"]
    if other:
        raise invalid(
            f"{source}: unknown table or key {other[0]!r}; a tasks file holds [[task]] tables",
            file=source,
        )
    items = doc.get("task")
    if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
        raise invalid(f"{source}: no [[task]] tables", file=source)
    out: list[Spec] = []
    for pos, t in enumerate(items, start=1):
        where = f"task {pos}" + (f" ({t['title']!r})" if isinstance(t.get("title"), str) else "")
        unknown = [k for k in t if k not in TOML_KEYS]
        if unknown:
            raise invalid(
                f"{source}: {where}: unknown key {unknown[0]!r}; keys: {', '.join(TOML_KEYS)}",
                file=source,
            )
        desc = text_field(t.get("description"), "description", MAX_DESCRIPTION, where, source)
        low, high = -MAX_PRIORITY, MAX_PRIORITY
        prio = int_field(t.get("priority", 0), "priority", low, high, where, source)
        out.append(
            Spec(
                id=task_id(t.get("id", pos), where, source),
                title=title(t.get("title"), where, source),
                description=desc or "",
                blocked_by=_ids(t.get("blocked_by"), where, source),
                agent=agent_name(t.get("agent"), where, source),
                model=text_field(t.get("model"), "model", 200, where, source),
                verify=text_field(t.get("verify"), "verify", MAX_COMMAND, where, source),
                priority=prio,
                retries=int_field(t.get("retries", 0), "retries", 0, MAX_RETRIES, where, source),
                where=where,
            )
        )
    return out


# ---- dependencies written in prose ("blocked by #3", "depends on #1 and #2") -------------------


def prose_blockers(text: str) -> tuple[str, ...]:
    import re

    found: list[str] = []
    for m in re.finditer(
        r"(?i)\b(?:blocked\s+by|depends\s+on)\s*:?\s*((?:#\d+(?:\s*(?:,|and|&)\s*)?)+)", text
    ):
        found += re.findall(r"#(\d+)", m.group(1))
    return tuple(dict.fromkeys(found))


# ---- a Markdown checklist --------------------------------------------------------------------


def parse_checklist(text: str, source: str) -> tuple[list[Spec], set[str]]:
    """(the open items, the ids of the ticked ones)."""
    import re

    item = re.compile(r"^[-*+]\s+\[([ xX])\]\s+(.*)$")
    out: list[Spec] = []
    done: set[str] = set()
    current: dict[str, Any] | None = None
    body: list[str] = []
    pos = 0

    def close() -> None:
        if current is None:
            return
        lines = list(body)
        while lines and not lines[-1].strip():
            lines.pop()
        desc = _dedent(lines)
        if len(desc) > MAX_DESCRIPTION:
            raise invalid(
                f"{source}: {current['where']}: its description is longer than "
                f"{MAX_DESCRIPTION} characters",
                file=source,
            )
        if current["ticked"]:
            done.add(current["id"])
            return
        out.append(
            Spec(
                id=current["id"],
                title=title(current["title"], current["where"], source),
                description=desc,
                blocked_by=tuple(b for b in prose_blockers(current["title"] + "\n" + desc) if b),
                where=current["where"],
            )
        )

    for n, line in enumerate(text.splitlines(), start=1):
        m = item.match(line)
        if m:
            close()
            pos += 1
            current = {
                "id": str(pos),
                "title": m.group(2),
                "ticked": m.group(1) != " ",
                "where": f"line {n} ({' '.join(m.group(2).split())[:40]!r})",
            }
            body = []
        elif current is not None and (line[:1] in (" ", "\t") or not line.strip()):
            body.append(line)
        else:
            close()
            current, body = None, []
    close()
    return out, done


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("\n".join(ln.replace("\t", "    ") for ln in lines)).strip()


# ---- a GitHub issues export ------------------------------------------------------------------


def parse_github(text: str, source: str) -> tuple[list[Spec], set[str]]:
    """(the open issues, the numbers of closed ones)."""
    import json

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise invalid(f"{source} is not valid JSON: {exc}", file=source) from None
    if not isinstance(doc, list):
        raise invalid(
            f"{source}: expected a list of issues (gh issue list --json number,title,body,labels)",
            file=source,
        )
    out: list[Spec] = []
    done: set[str] = set()
    for pos, issue in enumerate(doc, start=1):
        if not isinstance(issue, dict):
            raise invalid(f"{source}: item {pos} is not an issue object", file=source)
        number = issue.get("number")
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise invalid(f"{source}: item {pos} has no issue number", file=source)
        where = f"issue #{number}"
        tid = str(number)
        if str(issue.get("state") or "").upper() == DONE_LABEL:
            done.add(tid)
            continue
        body = issue.get("body")
        desc = text_field(body, "body", MAX_DESCRIPTION, where, source) or ""
        agent: str | None = None
        priority = 0
        labels = issue.get("labels")
        for label in labels if isinstance(labels, list) else []:
            name = label.get("name") if isinstance(label, dict) else label
            if not isinstance(name, str):
                continue
            key, _, value = name.partition(":")
            if key.strip().lower() == "agent" and value.strip():
                agent = agent_name(value.strip(), where, source)
            elif key.strip().lower() == "priority" and value.strip().lstrip("-").isdigit():
                priority = int_field(int(value), "priority", -MAX_PRIORITY, MAX_PRIORITY, where,
                                source)  # fmt: skip
        out.append(
            Spec(
                id=tid,
                title=title(issue.get("title"), where, source),
                description=desc,
                blocked_by=prose_blockers(desc),
                agent=agent,
                priority=priority,
                where=where,
            )
        )
    return out, done


# ---- the whole -------------------------------------------------------------------------------


def check(specs: list[Spec], source: str, known: dict[str, list[str]] | None = None) -> list[Spec]:
    """Refuse what no backlog can run: no task, too many, a duplicate id, an unknown or own id
    among a task's blockers, a cycle (`omp.tasks.graph.validate`). `known`: tasks that exist
    already (id -> its blockers), which new tasks may be blocked by."""
    from omp.tasks.graph import validate

    if not specs:
        raise invalid(f"{source}: no tasks in it", file=source)
    if len(specs) > MAX_TASKS:
        raise invalid(f"{source}: {len(specs)} tasks; at most {MAX_TASKS}", file=source)
    why = validate([(s.id, s.blocked_by, s.where) for s in specs], known)
    if why is not None:
        raise invalid(f"{source}: {why}", file=source)
    return specs
