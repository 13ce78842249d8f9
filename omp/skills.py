"""`omp skills install`: copy the skills omp ships into a project, never clobbering an edit.

The skills live in the repository's `skills/` directory. A wheel carries them as the package data
directory `omp/_skills` (pyproject: `[tool.hatch.build.targets.wheel.force-include]`); an editable
install has no such directory, so the repository's own `skills/` is used. Either way the source
is one directory holding `<skill>/SKILL.md` (and any files beside it).

Every destination file is compared first: missing files are created, identical ones are left
alone (`unchanged`), and a file that differs is refused unless `force` is given, in which case it
is overwritten (`updated`). Nothing is written unless the whole install can proceed.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from omp.errors import OmpError
from omp.invocation import omp_command

DEFAULT_TARGET = Path(".github") / "skills"
_SKIP = {"__pycache__", ".DS_Store"}


def source_dir() -> Traversable:
    """The packaged skills: `omp/_skills` in a wheel, else the repository's `skills/`."""
    try:
        packaged = resources.files("omp").joinpath("_skills")
        if packaged.is_dir() and _has_skill(packaged):
            return packaged
    except (ModuleNotFoundError, OSError):  # pragma: no cover - omp itself is importable
        pass
    repo = Path(__file__).resolve().parent.parent / "skills"
    if repo.is_dir() and _has_skill(repo):
        return repo
    raise OmpError(
        "skills_missing",
        f"no packaged skills found (looked in omp/_skills and {repo}); reinstall omp",
    )


def _has_skill(root: Traversable) -> bool:
    return any(d.is_dir() and d.joinpath("SKILL.md").is_file() for d in root.iterdir())


def _files(root: Traversable, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bytes]]:
    """(relative parts, content) of every file under the skill directories, sorted."""
    out: list[tuple[tuple[str, ...], bytes]] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIP or entry.name.startswith("."):
            continue
        parts = (*prefix, entry.name)
        if entry.is_dir():
            out += _files(entry, parts)
        elif prefix:  # only files inside a skill directory, not loose files at the top
            out.append((parts, entry.read_bytes()))
    return out


# `omp <command>` in a skill's text, where an agent would copy it from (not in a heading).
_COMMAND = re.compile(
    r"(?<![\w/.-])omp(?= (?:team|ralph|ultrawork|ultraqa|skills|doctor|hooks?|demo)\b)"
)


def render(content: bytes, omp: str) -> bytes:
    """A skill's Markdown with every `omp <command>` naming `omp` (this install's absolute
    command): the agent reading it may have no `omp` on its PATH (`omp.invocation`)."""
    if omp == "omp":
        return content
    lines = content.decode("utf-8").split("\n")
    out = [ln if ln.startswith("#") else _COMMAND.sub(lambda _: omp, ln) for ln in lines]
    return "\n".join(out).encode("utf-8")


def skill_names(root: Traversable | None = None) -> list[str]:
    src = root if root is not None else source_dir()
    return sorted(d.name for d in src.iterdir() if d.is_dir() and d.joinpath("SKILL.md").is_file())


@dataclass(frozen=True)
class Planned:
    rel: Path  # relative to the target directory
    dest: Path
    content: bytes
    action: str  # created | unchanged | updated | conflict


def _plan_one(dest: Path, content: bytes, force: bool) -> str:
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return "created"
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise OmpError(
            "unsafe_path", f"refusing {dest}: it is {kind}; remove it first", path=str(dest)
        )
    if dest.read_bytes() == content:
        return "unchanged"
    return "updated" if force else "conflict"


def _check_dirs(target: Path, rel: Path) -> None:
    """Refuse a non-directory where a destination's directory must be, before writing anything."""
    cur = target
    for part in ("", *rel.parent.parts):
        cur = cur / part if part else cur
        if os.path.lexists(cur) and not cur.is_dir():
            raise OmpError("unsafe_path", f"refusing {cur}: it is not a directory", path=str(cur))


def _write(dest: Path, content: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        # Project files meant to be committed: the usual umask-derived mode, not omp's 0600.
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(root: Path, target: Path | None = None, *, force: bool = False) -> dict[str, Any]:
    """Copy every packaged skill into `root/target` (default `.github/skills`)."""
    tgt = target if target is not None else DEFAULT_TARGET
    tdir = tgt if tgt.is_absolute() else root / tgt
    src = source_dir()
    omp = omp_command()
    plan: list[Planned] = []
    for parts, raw in _files(src):
        rel = Path(*parts)
        content = render(raw, omp) if rel.suffix == ".md" else raw
        _check_dirs(tdir, rel)
        dest = tdir / rel
        plan.append(Planned(rel, dest, content, _plan_one(dest, content, force)))
    conflicts = [p for p in plan if p.action == "conflict"]
    if conflicts:
        shown = ", ".join(str(p.dest) for p in conflicts)
        raise OmpError(
            "skill_changed",
            f"{len(conflicts)} file(s) differ from omp's copy: {shown}; nothing was written. "
            "Keep your edits, or overwrite them with --force",
            files=[str(p.dest) for p in conflicts],
        )
    try:
        for p in plan:
            if p.action in ("created", "updated"):
                _write(p.dest, p.content)
    except OSError as exc:
        raise OmpError(
            "storage_error", f"cannot write {exc.filename or tdir}: {exc.strerror or exc}"
        ) from exc
    counts = {a: sum(1 for p in plan if p.action == a) for a in ("created", "updated", "unchanged")}
    return {
        "ok": True,
        "target": str(tdir),
        "skills": skill_names(src),
        "files": [{"path": str(p.dest), "action": p.action} for p in plan],
        **counts,
    }
