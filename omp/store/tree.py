"""The two names that mark omp's state tree (`.omp/state`), and the test for being inside it.

Below both `fs` (which holds the private part of the tree to stricter checks) and `paths` (the
map of the rest of the tree), so neither imports the other for it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

OMP_DIR, STATE_DIR = ".omp", "state"
GITIGNORE = ".gitignore"  # `.omp/.gitignore`: `*`, so git never sees omp's files


def in_state_tree(path: Path) -> bool:
    """True for `<root>/.omp/state` and everything below it: the private part of the tree."""
    return any(a == OMP_DIR and b == STATE_DIR for a, b in itertools.pairwise(path.parts))
