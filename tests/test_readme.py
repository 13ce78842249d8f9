"""The README opens with the two commands a newcomer pastes, CI runs the same tests, and the
reference does not drift from the code (commands, options, error codes)."""

from __future__ import annotations

import ast
import re
from typing import Any

import typer.main

from tests.helpers import REPO

README = REPO / "README.md"
CI = REPO / ".ci" / "run"
RUN = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/omp demo"
TEST = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
    "&& .venv/bin/python -m pytest -q"
)
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```\n", re.M | re.S)


def _text() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands() -> None:
    text = _text()
    title, _, rest = text.partition("\n")
    assert title.startswith("# ") and len(title) > 2
    blocks: list[str] = []
    pos = 0
    for _ in range(2):
        gap = rest[pos:]
        stripped = gap.lstrip("\n")
        m = FENCE.match(stripped)
        assert m, f"expected a code block right after {'the title' if not blocks else 'it'}"
        assert stripped.startswith("```sh\n"), "shell blocks"
        blocks.append(m.group(1))
        pos += len(gap) - len(stripped) + m.end()
    assert blocks == [RUN + "\n", TEST + "\n"]


def test_ci_runs_the_readme_test_command() -> None:
    ci = CI.read_text(encoding="utf-8").splitlines()
    extra = "-e '.[test]'"  # the same install: the project, editable, with the test extra
    assert any("pip install" in line and extra in line for line in ci), extra
    pytest_cmd = TEST.rsplit(" && ", 1)[1]  # .venv/bin/python -m pytest -q
    bare = pytest_cmd.removeprefix(".venv/bin/")
    at = next((i for i, line in enumerate(ci) if line.strip() in (pytest_cmd, bare)), None)
    assert at is not None, f".ci/run must run {pytest_cmd!r}"
    if ci[at].strip() == bare:  # then the venv must come first on PATH before it
        assert any(re.search(r'PATH="?\$PWD/\.venv/bin:\$PATH', line) for line in ci[:at]), (
            ".ci/run runs `python` without the venv first on PATH"
        )


def _codes() -> set[str]:
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
    return out


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
    """The README's error table: code -> exit code as written."""
    out: dict[str, str] = {}
    for ln in _text().splitlines():
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1].isdigit():
            for code in re.findall(r"`([a-z_]+)`", cells[0]):
                out[code] = cells[1]
    return out


def test_every_error_code_is_in_the_table() -> None:
    codes = _codes()
    assert {"unknown_recipient", "body_too_large", "unknown_team"} <= codes  # the scan works
    rows = [ln for ln in _text().splitlines() if ln.startswith("| `")]
    documented = {c for ln in rows for c in re.findall(r"`([a-z_]+)`", ln.split("|")[1])}
    missing = sorted(codes - documented)
    assert not missing, f"README's error table lacks {missing}"


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

    for ln in _text().splitlines():
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if len(cells) == 3 and cells[1] in ("1", "2") and cells[0].startswith("`"):
            for code in re.findall(r"`([a-z_]+)`", cells[0]):
                want = "2" if code in USAGE_CODES else "1"
                assert cells[1] == want, f"{code}: README says exit {cells[1]}, code says {want}"


def _console_commands() -> list[list[str]]:
    out = []
    for block in FENCE.findall(_text()):
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
            assert sub is not None, f"README shows a command omp lacks: {' '.join(words)}"
            cmd = sub
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for w in words:
            if w.startswith("--"):
                assert w in opts, f"README shows an option omp lacks: {' '.join(words)}"


def test_readme_points_at_the_example_and_benchmarks() -> None:
    text = _text()
    assert "`.omp-example/`" in text and (REPO / ".omp-example" / "README.md").is_file()
    assert "## Benchmarks" in text and "`benchmarks/`" in text
    for script in re.findall(r"benchmarks/(\w+\.py)", text):
        assert (REPO / "benchmarks" / script).is_file(), script


def test_readme_paths_exist() -> None:
    for rel in re.findall(r"`((?:tests|omp|skills|scripts|benchmarks)/[\w./-]+)`", _text()):
        assert (REPO / rel.rstrip("/")).exists(), rel


def test_no_machine_specific_paths() -> None:
    text = _text()
    for leak in ("/tmp/cap", "/work/main", "/root/"):
        assert leak not in text, leak
    assert not re.search(r"omp-(?:cap|try|test)-\d+", text)
