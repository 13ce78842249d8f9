"""The docs do not drift from the code or from each other: the error table of docs/errors.md is the
registry in omp/errors.py, every command shown exists with the options shown, every path and
relative link points at something that exists. (`omp team api`'s table in docs/commands.md is
checked by tests/api/test_api_spec.py.)"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

import typer.main

from tests.helpers import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"
ERRORS = DOCS / "errors.md"  # the exit-code and error-code tables
BENCHMARKS = DOCS / "benchmarks.md"
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```\n", re.M | re.S)
# [text](target): the text may hold code spans and wrap lines; the target has no space
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _read(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _all_text() -> str:
    return "\n".join(_read(p) for p in _pages())


# ---- error codes: docs/errors.md is omp.errors.CODES ----


@functools.cache  # two tests read every module of omp for it: once per process
def _codes() -> frozenset[str]:
    out: set[str] = set()
    for path in (REPO / "omp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "OmpError"
                and node.args
            ):
                # every code the first argument can be, also one chosen at run time
                # (`exc.code if ... else "launch_failed"`)
                out |= _values(node.args[0])
    return frozenset(out)


def _values(expr: ast.expr) -> set[str]:
    """The strings an expression can evaluate to, as far as its text says."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.IfExp):
        return _values(expr.body) | _values(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return set().union(*(_values(v) for v in expr.values))
    return set()


def _table() -> dict[str, str]:
    """docs/errors.md's error table: code -> exit code as written."""
    out: dict[str, str] = {}
    for ln in _read(ERRORS).splitlines():
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1].isdigit():
            for code in re.findall(r"`([a-z_]+)`", cells[0]):
                out[code] = cells[1]
    return out


def test_every_error_code_is_in_the_table() -> None:
    codes = _codes()
    assert {"unknown_recipient", "body_too_large", "unknown_team"} <= codes  # the scan works
    rows = [ln for ln in _read(ERRORS).splitlines() if ln.startswith("| `")]
    documented = {c for ln in rows for c in re.findall(r"`([a-z_]+)`", ln.split("|")[1])}
    missing = sorted(codes - documented)
    assert not missing, f"docs/errors.md's error table lacks {missing}"


def test_every_error_code_raised_is_registered() -> None:
    from omp.errors import CODES

    codes = _codes()
    assert "launch_failed" in codes  # built at run time: the scan reads the whole expression
    assert not sorted(codes - set(CODES)), "raised but not in omp.errors.CODES"


def test_the_error_table_is_the_registry() -> None:
    from omp.errors import CODES

    table = _table()
    assert table == {code: str(rc) for code, rc in CODES.items()}


def test_error_table_exit_codes_match_the_code() -> None:
    from omp.errors import USAGE_CODES

    for ln in _read(ERRORS).splitlines():
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if len(cells) == 3 and cells[1] in ("1", "2") and cells[0].startswith("`"):
            for code in re.findall(r"`([a-z_]+)`", cells[0]):
                want = "2" if code in USAGE_CODES else "1"
                assert cells[1] == want, f"{code}: docs say exit {cells[1]}, code says {want}"


def test_the_error_table_lives_in_one_page() -> None:
    """A second copy would drift: only docs/errors.md holds error-table rows."""
    for page in _pages():
        if page != ERRORS:
            row = re.compile(r"\| `[a-z_]+` \| \d+ \|")
            rows = [ln for ln in _read(page).splitlines() if row.match(ln)]
            assert not rows, f"{page.name} repeats error-table rows: {rows[:2]}"


# ---- commands shown exist ----


def _console_commands() -> list[list[str]]:
    out = []
    for block in FENCE.findall(_all_text()):
        for line in block.splitlines():
            m = re.match(r"\$ (?:\.venv/bin/)?(omp .*?)(?:;.*)?$", line)
            if m:
                out.append(re.findall(r"'[^']*'|\"[^\"]*\"|\S+", m.group(1)))
    return out


def test_every_command_shown_exists() -> None:
    from omp.api.operations import OPERATIONS
    from omp.cli.app import app

    root: Any = typer.main.get_command(app)
    shown = _console_commands()
    assert len(shown) > 20
    for words in shown:
        if words[1:3] == ["team", "api"]:
            assert words[3] in OPERATIONS, words
            continue
        cmd = root
        for w in words[1:]:
            if w.startswith("-") or not hasattr(cmd, "commands"):
                break
            sub = cmd.commands.get(w)
            assert sub is not None, f"the docs show a command omp lacks: {' '.join(words)}"
            cmd = sub
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for w in words:
            if w.startswith("--"):
                assert w in opts, f"the docs show an option omp lacks: {' '.join(words)}"


# ---- paths, links and leftovers ----


def test_benchmarks_page_names_scripts_that_exist() -> None:
    text = _read(BENCHMARKS)
    assert "`benchmarks/`" in text and "| measure | omp | target |" in text
    scripts = re.findall(r"benchmarks/(\w+\.py)", text)
    assert scripts
    for script in scripts:
        assert (REPO / "benchmarks" / script).is_file(), script


def test_paths_named_in_the_docs_exist() -> None:
    for page in _pages():
        for rel in re.findall(r"`((?:tests|omp|skills|scripts|benchmarks)/[\w./-]+)`", _read(page)):
            assert (REPO / rel.rstrip("/")).exists(), f"{page.name}: {rel}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    in_fence = False
    for ln in _read(page).splitlines():
        if ln.startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"#{1,6} (.+)", ln)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")  # GitHub numbers repeats
    return out


def _links(page: Path) -> list[str]:
    prose = FENCE.sub("", _read(page))
    return LINK.findall(prose)


def test_the_link_checker_sees_links_and_anchors() -> None:
    assert "how-an-agent-finds-omp" in _anchors(DOCS / "agents.md")
    assert "omp-team-launch" in _anchors(DOCS / "commands.md")
    assert "a-demo-team-step-by-step" in _anchors(README)
    assert "docs/commands.md" in _links(README)
    assert _slug("`omp team list` and `omp team create`") == "omp-team-list-and-omp-team-create"


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in [*_pages(), REPO / "CONTRIBUTING.md"]:
        for target in _links(page):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            rel, _, anchor = target.partition("#")
            dest = (page.parent / rel).resolve() if rel else page
            if not dest.exists() or not dest.is_relative_to(REPO):
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and (dest.suffix != ".md" or anchor not in _anchors(dest)):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_no_machine_specific_paths_or_placeholders() -> None:
    for page in _pages():
        text = _read(page)
        for leak in ("/tmp/cap", "/work/main", "/root/"):
            assert leak not in text, f"{page.name}: {leak}"
        assert not re.search(r"omp-(?:cap|try|test)-\d+", text), page.name
        assert not re.search(r"\b(?:TODO|TBD|FIXME|XXX)\b", text), f"{page.name}: a placeholder"
