"""The README opens with the two commands a newcomer pastes, CI runs the same tests, and the README
stays short: the reference lives in docs/ (checked by tests/test_docs.py)."""

from __future__ import annotations

import re

from tests.helpers import REPO

README = REPO / "README.md"
CI = REPO / ".ci" / "run"
RUN = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/omp demo"
TEST = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
    "&& .venv/bin/python -m pytest -q"
)
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```\n", re.M | re.S)
MAX_LINES = 300  # what a newcomer needs; everything else is a page under docs/


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


def test_readme_fits_in_300_lines() -> None:
    lines = len(_text().splitlines())
    assert lines <= MAX_LINES, (
        f"README.md has {lines} lines, at most {MAX_LINES}: move reference text to a docs/ page"
    )


def test_readme_has_what_a_newcomer_needs() -> None:
    text = _text()
    for heading in ("## The ideas", "## A demo team, step by step", "## With a real agent"):
        assert f"\n{heading}\n" in text, heading
    for page in ("commands", "agents", "loops-and-hooks", "files", "errors", "troubleshooting"):
        assert f"(docs/{page}.md)" in text, f"README does not link docs/{page}.md"
    assert "`.omp-example/`" in text and (REPO / ".omp-example" / "README.md").is_file()
