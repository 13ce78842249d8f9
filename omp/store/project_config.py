"""`.omp/config.toml`: per-project settings, one table per concern (`[limits]`, `[timeouts]`,
`[team]`, `[notify]`, `[prices."<model>"]`).

A flat table maps onto a class with a default for every field (`_field_defaults`, as a
NamedTuple has) whose defaults give each field's type (`load_section`):
numbers, or strings (`[notify] command`); a missing file or table gives the defaults. A nested one
(`[prices]`) is handed over raw (`load_table`) for its owner to check. A key the table does not
know, a number that is not >= 0, or a string field given anything but a string is refused with
`invalid_config` naming the file, so a typo never silently falls back to a default. Parsed
tables are cached per process by the file's (inode, size, mtime): the monitor asks every scan.

On the per-call layer (a send reads `[limits]`): paths as strings, `tomllib` only for a file
beyond plain tables of numbers (`plain_toml`).
"""

from __future__ import annotations

import os

from omp.errors import OmpError
from omp.store import fs

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    from omp.store.layout import ProjectFiles
    from omp.store.paths import StatePaths

    T = TypeVar("T")

_CACHE: dict[tuple[str, str], tuple[tuple[int, int, int], Any]] = {}
_DOCS: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def _doc(
    project: StatePaths | ProjectFiles,
) -> tuple[tuple[int, int, int], dict[str, Any]] | None:
    """The parsed file and its (inode, size, mtime) key; None if the project has none."""
    files = project.files
    path = files.config_toml
    try:
        if not files.check(files.omp_dir):
            return None
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _DOCS.get(path)
    if cached is not None and cached[0] == key:
        return cached
    data = fs.read_bytes(path) or b""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OmpError("invalid_config", f"{path}: {exc}") from None
    doc = plain_toml(text)
    if doc is None:
        import tomllib  # anything beyond plain tables of numbers (~10 ms: typing, re, string)

        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise OmpError("invalid_config", f"{path}: {exc}") from None
    _DOCS[path] = (key, doc)
    return key, doc


def load_table(project: StatePaths | ProjectFiles, section: str) -> dict[str, Any]:
    """The raw `[section]` table (nested tables as dicts; empty when absent). The caller checks
    its keys and values, as `load_section` does for flat tables of numbers."""
    got = _doc(project)
    table = got[1].get(section, {}) if got is not None else {}
    if not isinstance(table, dict):
        raise OmpError(
            "invalid_config", f"{project.files.config_toml}: [{section}] must be a table"
        )
    return table


def load_section(project: StatePaths | ProjectFiles, section: str, cls: type[T], what: str) -> T:
    """The `[section]` table as a `cls` instance; `what` names one key in messages."""
    got = _doc(project)
    if got is None:
        return cls()
    key, _ = got
    path = project.files.config_toml
    cached = _CACHE.get((path, section))
    if cached is not None and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    table = load_table(project, section)
    # A default for every field (a NamedTuple's): the default's type is the field's type.
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
    _CACHE[(path, section)] = (key, result)
    return result


_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DIGITS = frozenset("0123456789")


def plain_toml(text: str) -> dict[str, Any] | None:
    """What `tomllib.loads` reads from a file of plain tables of numbers, or None for anything
    else: comments, blank lines, `[table]` headers and `key = number` lines with bare names and
    decimal numbers (`8`, `-1`, `2.5`). The config file is read on every `omp team api` call,
    and `tomllib` costs ~10 ms of imports (it brings `typing`); any other line (a string such
    as `[notify] command`, a dotted or quoted table such as `[prices."<model>"]`), a repeated
    key or table, a control character leaves the file to `tomllib`
    (tests/store/test_project_config.py compares)."""
    doc: dict[str, Any] = {}
    table = doc
    for line in text.split("\n"):
        if not line.replace("\t", " ").isprintable():
            return None  # control characters (a CR too): tomllib's rules, tomllib's messages
        code = line.partition("#")[0].strip(" \t")
        if not code:
            continue
        if code[0] == "[":
            name = code[1:-1].strip(" \t") if code[-1] == "]" else ""
            if not _bare(name) or name in doc:
                return None
            table = doc[name] = {}
            continue
        key, eq, raw = code.partition("=")
        key = key.strip(" \t")
        value = _number(raw.strip(" \t"))
        if not eq or not _bare(key) or key in table or value is None:
            return None
        table[key] = value
    return doc


def _bare(name: str) -> bool:
    return bool(name) and _BARE.issuperset(name)


def _number(raw: str) -> int | float | None:
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    whole, dot, frac = digits.partition(".")
    if not whole or not _DIGITS.issuperset(whole) or (len(whole) > 1 and whole[0] == "0"):
        return None
    if dot:
        return float(raw) if frac and _DIGITS.issuperset(frac) else None
    return int(raw)


def store_selected(project: StatePaths | ProjectFiles) -> bool:
    """Does this process keep the project's mail and tasks in a store other than the files
    (`omp.store.select`)? Asked on every per-call command, so answered from what they load
    anyway: the environment and this file's `[store]` table; the store itself is opened (and
    its client imported) only when the answer is yes."""
    env = os.environ.get("OMP_STORE", "").strip()
    if env:
        return env != "file"
    if os.environ.get("OMP_STORE_FILE"):
        return True
    url = load_table(project, "store").get("url")
    return isinstance(url, str) and url.strip() not in ("", "file")
