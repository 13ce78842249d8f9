"""A worker's diff (`omp team diff`'s text, `omp.views.worktrees.diff`) cut into files and lines,
each line numbered on both sides, so the page shows one file at a time and a comment names the
file and the line as the worker's checkout numbers it."""

from __future__ import annotations

import re
from typing import Any

from omp.textsafe import visible

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")
_GIT = re.compile(r"^diff --git a/(.*) b/(.*)$")
MAX_LINES = 5000  # lines of one file shown; the rest is said, not sent


def split(text: str) -> list[dict[str, Any]]:
    """`[{path, old, status, binary, added, deleted, hunks: [{header, lines: [{kind, old, new,
    text}]}], cut}]` from a `git diff` text. `kind`: `add`, `del` or `ctx`; `old`/`new` the line's
    number on each side (None where it has none). Text is made visible (controls escaped)."""
    files: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    hunk: dict[str, Any] | None = None
    old = new = 0
    shown = 0
    for raw in text.split("\n"):
        m = _GIT.match(raw)
        if m:
            cur = {
                "path": visible(m[2]),
                "old": visible(m[1]),
                "status": "modified",
                "binary": False,
                "added": 0,
                "deleted": 0,
                "hunks": [],
                "cut": 0,
            }
            files.append(cur)
            hunk, shown = None, 0
            continue
        if cur is None:
            continue
        if hunk is None:
            if raw.startswith("new file mode"):
                cur["status"] = "added"
            elif raw.startswith("deleted file mode"):
                cur["status"] = "deleted"
            elif raw.startswith(("rename from", "similarity index")):
                cur["status"] = "renamed"
            elif raw.startswith(("Binary files", "GIT binary patch")):
                cur["binary"] = True
        h = _HUNK.match(raw)
        if h:
            old, new = int(h[1]), int(h[2])
            hunk = {"header": visible(raw), "lines": []}
            cur["hunks"].append(hunk)
            continue
        if hunk is None or cur["binary"]:
            continue
        kind = {"+": "add", "-": "del", " ": "ctx"}.get(raw[:1])
        if kind is None:
            continue  # "\ No newline at end of file", the empty line the split leaves
        line = {
            "kind": kind,
            "old": old if kind != "add" else None,
            "new": new if kind != "del" else None,
            "text": visible(raw[1:]),
        }
        if kind != "add":
            old += 1
        if kind != "del":
            new += 1
        if kind == "add":
            cur["added"] += 1
        elif kind == "del":
            cur["deleted"] += 1
        if shown < MAX_LINES:
            hunk["lines"].append(line)
            shown += 1
        else:
            cur["cut"] += 1
    return files


def line_of(files: list[dict[str, Any]], path: str, line: int) -> dict[str, Any] | None:
    """The diff line numbered `line` on the new side of `path` (a line the worker's branch has),
    or None when the diff shows no such line."""
    for f in files:
        if f["path"] != path:
            continue
        for h in f["hunks"]:
            for ln in h["lines"]:
                if ln["new"] == line:
                    return dict(ln)
    return None
