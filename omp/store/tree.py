"""The two names that mark omp's state tree (`.omp/state`), and the test for being inside it.

Below both `fs` (which holds the private part of the tree to stricter checks) and `layout` (the
map of the tree), so neither imports the other for it. Paths here are strings or `os.PathLike`:
this floor is on every per-call command's way and imports no `pathlib`.
"""

from __future__ import annotations

import itertools
import os

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    StrPath = str | os.PathLike[str]

OMP_DIR, STATE_DIR = ".omp", "state"
GITIGNORE = ".gitignore"  # `.omp/.gitignore`: `*`, so git never sees omp's files


def in_state_tree(path: StrPath) -> bool:
    """True for `<root>/.omp/state` and everything below it: the private part of the tree."""
    parts = [p for p in os.fspath(path).split(os.sep) if p not in ("", ".")]
    return any(a == OMP_DIR and b == STATE_DIR for a, b in itertools.pairwise(parts))


def _parts(path: str) -> tuple[bool, list[str]]:
    return path.startswith(os.sep), [p for p in path.split(os.sep) if p not in ("", ".")]


def below(path: StrPath, base: StrPath) -> list[str]:
    """The components of `path` below `base`, as `PurePath(path).relative_to(base).parts` gives
    them (lexical: `.` and doubled separators dropped, `..` kept); ValueError when `path` is not
    under `base`."""
    p_abs, p = _parts(os.fspath(path))
    b_abs, b = _parts(os.fspath(base))
    if p_abs != b_abs or p[: len(b)] != b:
        raise ValueError(f"{os.fspath(path)!r} is not under {os.fspath(base)!r}")
    return p[len(b) :]
