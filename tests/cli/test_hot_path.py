"""What an `omp team api` send loads, pinned: every module beyond what the console script's own
wrapper loads (`import re`, `from omp.cli import main`). A new import on this path fails here
until it is added to the list on purpose: each one is paid by every call an agent makes
(docs/benchmarks.md; the budget is 2.5x a bare `python -c pass`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NO_LIMITS_TOML, child_env, isolate, make_project, make_team

# Beyond `python -c "import re"`: the standard library modules a send loads (C accelerators such
# as `_json` left out: they differ between builds) ...
STDLIB = [
    "__future__",
    "errno",
    "fcntl",
    "pathlib",
]
# ... and omp's. Not: json (omp/jsonlite.py), collections.abc (its names are for mypy only),
# typing, datetime, tomllib, urllib, contextlib, shlex, dataclasses, inspect, tempfile, subprocess,
# typer, libtmux (see omp/typelite.py and omp/cli/__init__.py).
OMP = [
    "omp", "omp.api", "omp.api.authorize", "omp.api.epilogue", "omp.api.operations",
    "omp.api.send", "omp.api.spec", "omp.cli", "omp.cli.api", "omp.cli.output", "omp.clock",
    "omp.errors", "omp.identity", "omp.ids", "omp.jsonlite", "omp.mail", "omp.mail.delivery",
    "omp.mail.limits", "omp.mail.mailbox", "omp.record", "omp.record.config",
    "omp.record.history", "omp.store", "omp.store.fs", "omp.store.jsonl", "omp.store.locks",
    "omp.store.names", "omp.store.paths", "omp.store.project_config", "omp.store.strictjson",
    "omp.store.tree", "omp.textsafe", "omp.typelite",
]  # fmt: skip
WORKER_EXTRA = ["omp.tasks", "omp.tasks.presence"]  # a worker's call refreshes its heartbeat

# Where the console script does not import `re` (pip >= 25's wrapper, uv's), a send loads what
# `functools` needs (pathlib imports it) and not `re`, `enum` or `fnmatch` (omp.cli._lean_pathlib).
WITHOUT_RE = ["collections", "functools", "itertools", "keyword", "operator", "reprlib", "types"]

# The console script's wrapper, as pip writes it (before pip 25: with `import re`), with a report
# of the loaded modules at the very end (omp ends its own process with os._exit: the report hooks
# into it). The report also uses what pathlib got stand-ins for: they still work.
CHILD = """
import os, sys
real_exit = os._exit
def report(code):
    mods = sorted(sys.modules)
    import json  # only now: whether the send loaded it is part of the report
    from pathlib import Path, PureWindowsPath
    uri = Path("/a b").as_uri()  # urllib's quoting
    match = [Path("a/b.py").match("*.py"), Path("a/b.py").match("B.*"), Path("A").match("a")]
    found = sorted(p.name for p in Path(".omp").glob("*.t?ml"))  # fnmatch, re
    win = str(PureWindowsPath("c:/a", "b"))  # ntpath
    report = {"modules": mods, "uri": uri, "match": match, "glob": found, "win": win, "code": code}
    sys.stderr.write("REPORT " + json.dumps(report) + "\\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = report
sys.argv = ["omp", *sys.argv[1:]]
WRAPPER
from omp.cli import main
try:
    main()
except SystemExit as exc:
    report(exc.code)
"""


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 2)
    (root / ".omp" / "config.toml").write_text(NO_LIMITS_TOML)  # read on every send
    return root


def _loaded(
    proj: Path, *args: str, wrapper: str = "import re"
) -> tuple[list[str], dict[str, object]]:
    env = child_env(proj.parent / "home")
    floor = subprocess.run(
        [sys.executable, "-c", f"{wrapper}; import sys; print(' '.join(sys.modules))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    child = CHILD.replace("WRAPPER", wrapper)
    p = subprocess.run(
        [sys.executable, "-c", child, *args], cwd=proj, env=env, capture_output=True, text=True
    )
    line = next(x for x in p.stderr.splitlines() if x.startswith("REPORT "))
    report = json.loads(line[len("REPORT ") :])
    assert report["code"] == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["ok"] is True
    private = [m for m in report["modules"] if m.startswith("_") and not m.startswith("__")]
    extra = set(report["modules"]) - set(floor) - set(private)
    return sorted(extra), report


def _send(frm: str, to: str) -> list[str]:
    payload = {"team_name": "t", "from": frm, "to": to, "body": "hi"}
    return ["team", "api", "send-message", "--input", json.dumps(payload), "--json"]


def test_a_send_loads_exactly_these_modules(proj: Path) -> None:
    extra, report = _loaded(proj, *_send("leader", "worker-1"))
    assert extra == sorted(STDLIB + OMP)
    assert report["uri"] == "file:///a%20b"
    assert report["match"] == [True, False, False]
    assert report["glob"] == ["config.toml"]
    assert report["win"] == "c:\\a\\b"


def test_where_the_console_script_imports_nothing_a_send_loads_no_re(proj: Path) -> None:
    extra, report = _loaded(proj, *_send("leader", "worker-1"), wrapper="pass")
    assert extra == sorted(STDLIB + OMP + WITHOUT_RE)
    assert report["uri"] == "file:///a%20b"
    assert report["match"] == [True, False, False]
    assert report["glob"] == ["config.toml"]
    assert report["win"] == "c:\\a\\b"


def test_a_workers_send_adds_only_its_heartbeat(proj: Path) -> None:
    extra, _ = _loaded(proj, *_send("worker-1", "leader"))
    assert extra == sorted(STDLIB + OMP + WORKER_EXTRA)


def test_without_a_config_file_the_same(proj: Path) -> None:
    (proj / ".omp" / "config.toml").unlink()
    extra, _ = _loaded(proj, *_send("leader", "worker-2"))
    assert extra == sorted(STDLIB + OMP)


def test_a_config_beyond_plain_numbers_still_reads(proj: Path) -> None:
    (proj / ".omp" / "config.toml").write_text(NO_LIMITS_TOML + '[notes]\nwho = "me"\n')
    extra, _ = _loaded(proj, *_send("leader", "worker-2"))
    assert "tomllib" in extra  # left to tomllib, at its cost


def test_status_of_a_team_the_typescript_tool_ran_loads_no_heavy_module(proj: Path) -> None:
    """`omp team status` over a team without task conversations (the TypeScript tool's) pays
    for neither `typing` nor `dataclasses`/`inspect` (issue 23: status over a foreign history
    at least as fast as that tool's own)."""
    assert not (proj / ".omp" / "state" / "team" / "t" / "conversations").exists()
    extra, _ = _loaded(proj, "team", "status", "t", "--json")
    assert "omp.views.status" in extra
    assert not {"typing", "dataclasses", "inspect", "omp.tasks.conversations"} & set(extra)
    # no usage reader (nor the json, zlib and shlex they need) for members with no record to read
    assert not {"omp.usage.read", "omp.usage.locate", "json", "zlib", "shlex"} & set(extra)
    assert not {"datetime", "contextlib"} & set(extra)  # (used on their first call only)
