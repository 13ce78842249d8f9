"""CI tests the Pythons the project promises, and says so in one voice: `.ci/run`'s list, the
package's classifiers and `requires-python`, the README and CONTRIBUTING.md. Every pytest run
in CI fails on pytest's exit code 5 (no test collected)."""

from __future__ import annotations

import re
import subprocess
import tomllib

from tests.helpers import REPO

CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
DEFAULT = "3.11"  # the machine's python3, which runs the full suite


def _others() -> list[str]:
    m = re.search(r'^OTHER_PYTHONS="([\d. ]+)"$', CI, re.M)
    assert m, ".ci/run names the other Pythons in OTHER_PYTHONS"
    return m.group(1).split()


def test_the_classifiers_are_the_pythons_ci_runs() -> None:
    classified = [
        c.rsplit(" :: ", 1)[1]
        for c in PYPROJECT["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert classified == [DEFAULT, *_others()]
    assert PYPROJECT["project"]["requires-python"] == f">={DEFAULT}"


def test_readme_and_contributing_say_what_is_tested() -> None:
    for page in ("README.md", "CONTRIBUTING.md"):
        text = " ".join((REPO / page).read_text(encoding="utf-8").split())
        assert f"full suite on Python {DEFAULT}" in text or f"({DEFAULT})" in text, page
        others = " and ".join(_others())
        assert others in text and "quick loop" in text and "per-call benchmark" in text, page


def test_every_pytest_run_in_ci_fails_on_no_tests() -> None:
    lines = CI.splitlines()
    runs = [i for i, ln in enumerate(lines) if re.search(r"-m pytest\b", ln)]
    assert len(runs) >= 2  # the full suite, and the quick loop of the other Pythons
    for i in runs:
        assert lines[i + 1].strip().startswith("pytest_rc "), lines[i]
    body = CI[CI.index("pytest_rc() {") :]
    assert '[ "$2" = 5 ]' in body.split("}", 1)[0]


def test_ci_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(REPO / ".ci" / "run")], check=True)
