"""`.omp/config.toml`: per-project settings, one table per concern (`[limits]`, `[timeouts]`,
`[team]`, `[notify]`, `[prices."<model>"]`).

A flat table maps onto a NamedTuple (`load_section`) whose defaults give each field's type:
numbers, or strings (`[notify] command`); a missing file or table gives the defaults. A nested one
(`[prices]`) is handed over raw (`load_table`) for its owner to check. A key the table does not
know, a number that is not >= 0, or a string field given anything but a string is refused with
`invalid_config` naming the file, so a typo never silently falls back to a default. Parsed
tables are cached per process by the file's (inode, size, mtime): the monitor asks every scan.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from omp.errors import OmpError
from omp.store import fs
from omp.store.paths import StatePaths

T = TypeVar("T")
_CACHE: dict[tuple[str, str], tuple[tuple[int, int, int], Any]] = {}
_DOCS: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _doc(project: StatePaths) -> tuple[tuple[int, int, int], dict[str, Any]] | None:
    """The parsed file and its (inode, size, mtime) key; None if the project has none."""
    path = project.config_toml
    try:
        if not project.check(project.omp_dir):
            return None
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _DOCS.get(str(path))
    if cached is not None and cached[0] == key:
        return cached
    data = fs.read_bytes(path) or b""
    import tomllib  # only when the project has a config file

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OmpError("invalid_config", f"{path}: {exc}") from None
    _DOCS[str(path)] = (key, doc)
    return key, doc


def load_table(project: StatePaths, section: str) -> dict[str, Any]:
    """The raw `[section]` table (nested tables as dicts; empty when absent). The caller checks
    its keys and values, as `load_section` does for flat tables of numbers."""
    got = _doc(project)
    table = got[1].get(section, {}) if got is not None else {}
    if not isinstance(table, dict):
        raise OmpError("invalid_config", f"{project.config_toml}: [{section}] must be a table")
    return table


def load_section(project: StatePaths, section: str, cls: type[T], what: str) -> T:
    """The `[section]` table as a `cls` instance; `what` names one key in messages."""
    got = _doc(project)
    if got is None:
        return cls()
    key, _ = got
    path = project.config_toml
    cached = _CACHE.get((str(path), section))
    if cached is not None and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    table = load_table(project, section)
    # A NamedTuple with a default for every field: the default's type is the field's type.
    kinds: dict[str, Any] = dict(getattr(cls, "_field_defaults", {}))
    values: dict[str, Any] = {}
    for k, v in table.items():
        if k not in kinds:
            raise OmpError(
                "invalid_config", f"{path}: unknown {what} {k!r}; known: {', '.join(kinds)}"
            )
        if isinstance(kinds[k], str):
            if not isinstance(v, str):
                raise OmpError("invalid_config", f"{path}: [{section}] {k} must be a string")
            values[k] = v
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise OmpError("invalid_config", f"{path}: [{section}] {k} must be a number >= 0")
        values[k] = int(v) if isinstance(kinds[k], int) else float(v)
    result = cls(**values)
    _CACHE[(str(path), section)] = (key, result)
    return result
