"""What the per-call commands load: a budget, not a list.

Each `omp team api` call and each `omp hook stop` is a fresh process, hundreds a session, and
what it costs is mostly what it imports (docs/benchmarks.md; the target is 2.5x a bare
`python -c pass`). So each such command has an import budget: at most so many of omp's modules,
at most so many standard-library modules beyond what the console script's own wrapper loads, and
none of the heavy modules that must stay off its way (`HEAVY`). A refactor that moves code
between modules passes; one that puts `typing`, `pathlib` or a second dozen modules on the way
fails here, run in a child process of this very interpreter (CI runs it on each Python).

`re` is no measure: `json` imports it (its decoder and scanner compile patterns), and the
console script pip < 25 writes imports it first. omp's own modules never import it on this way
(`omp.store.names` checks names with str methods).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import NO_LIMITS_TOML, REPO, child_env, isolate, make_project, make_team

# Never on a per-call command's way: each costs a noticeable part of a call, or more
# (`typing` ~0.3x the floor with what it pulls in, `pathlib` ~0.4x, typer and libtmux several
# times the whole call).
HEAVY = frozenset(
    {
        "typing", "pathlib", "dataclasses", "datetime", "inspect", "contextlib", "tomllib",
        "tempfile", "subprocess", "shlex", "hashlib", "zlib", "urllib", "uuid", "asyncio",
        "logging", "argparse", "importlib.metadata", "email", "typer", "click", "rich",
        "libtmux", "ulid", "psutil",
    }
)  # fmt: skip
# `omp team status` is polled, not per-call: it may use pathlib, typing and datetime (heartbeats'
# times), but none of the frameworks, and a team without task conversations (one the TypeScript
# tool ran) or usage records loads neither their machinery nor their readers (issue 23).
STATUS_HEAVY = frozenset(
    {
        "dataclasses", "inspect", "tomllib", "tempfile", "shlex", "hashlib", "zlib", "asyncio",
        "argparse", "importlib.metadata", "typer", "click", "rich", "libtmux", "ulid", "psutil",
        "omp.conversations.record", "omp.usage.read", "omp.usage.locate",
    }
)  # fmt: skip

# (omp's modules, other modules beyond the wrapper's): measured, plus room for a small refactor.
SEND = (33, 10)  # a send: 31 and 7 (json's four, __future__, errno, fcntl)
WORKER_SEND = (35, 10)  # a worker's adds its heartbeat (omp.tasks, omp.tasks.presence)
MAILBOX_LIST = (33, 10)
CLAIM = (36, 10)  # a worker's claim: the task store besides (34)
ROSTER = (42, 12)  # who is there: presence and tasks besides (37; datetime reads heartbeats' times)
HOOK_STOP = (19, 9)  # no loop: 17 and 7 (json's four, __future__, errno, signal)
STATUS = (48, 26)  # 44 and 21-22 (pathlib, typing, datetime and theirs)

# The console script as pip writes it (before pip 25: `import re` first; pip >= 25 and uv: not),
# with a report of the loaded modules at the very end: omp ends its own process with os._exit,
# and the report hooks into it.
CHILD = """
import os, sys
real_exit = os._exit
def report(code):
    sys.stderr.write("REPORT " + " ".join(sorted(sys.modules)) + " CODE " + str(code) + "\\n")
    sys.stderr.flush()
    real_exit(code if isinstance(code, int) else 1)
os._exit = report
sys.argv = ["omp", *sys.argv[1:]]
WRAPPER
from omp.cli import main
try:
    main()
except SystemExit as exc:
    report(exc.code or 0)
"""


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 2, task="work")
    (root / ".omp" / "config.toml").write_text(NO_LIMITS_TOML)  # read on every send
    return root


def loaded(
    proj: Path,
    *args: str,
    wrapper: str = "import re",
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
) -> tuple[list[str], list[str], str]:
    """(omp's modules, the other modules beyond the wrapper's, stdout) of one command."""
    base = child_env(proj.parent / "home", **(env or {}))
    floor = subprocess.run(
        [sys.executable, "-c", f"{wrapper}; import sys; print(' '.join(sys.modules))"],
        env=base, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    p = subprocess.run(
        [sys.executable, "-c", CHILD.replace("WRAPPER", wrapper), *args],
        cwd=proj, env=base, input=stdin, capture_output=True,
    )  # fmt: skip
    err = p.stderr.decode()
    line = next(x for x in err.splitlines() if x.startswith("REPORT "))
    mods, _, code = line[len("REPORT ") :].partition(" CODE ")
    assert code == "0", p.stdout.decode() + err
    # C accelerators (`_json`) and the interpreter's own private modules differ between builds
    new = [m for m in mods.split() if m not in floor and not m.startswith("_")]
    ours = [m for m in new if m == "omp" or m.startswith("omp.")]
    return ours, [m for m in new if m not in ours and m != "__future__"], p.stdout.decode()


def heavy(mods: list[str], banned: frozenset[str]) -> list[str]:
    return [m for m in mods if m in banned or m.split(".")[0] in banned]


def within(
    got: tuple[list[str], list[str], str], budget: tuple[int, int], banned: frozenset[str] = HEAVY
) -> None:
    ours, other, _ = got
    assert heavy(ours + other, banned) == []
    assert len(ours) <= budget[0], f"{len(ours)} of omp's modules: {ours}"
    assert len(other) <= budget[1], f"{len(other)} other modules: {other}"


def api(sub: str, **payload: object) -> list[str]:
    return ["team", "api", sub, "--input", json.dumps({"team_name": "t", **payload}), "--json"]


@pytest.mark.parametrize("wrapper", ["import re", "pass"], ids=["pip<25", "pip>=25"])
def test_a_send_stays_within_its_budget(proj: Path, wrapper: str) -> None:
    got = loaded(proj, *api("send-message", **{"from": "leader", "to": "worker-1", "body": "hi"}))
    within(got, SEND)
    assert json.loads(got[2])["ok"] is True
    if wrapper == "pass":  # without the wrapper's `re`, json brings it: nothing of omp's does
        within(loaded(proj, *api("broadcast", **{"from": "leader", "body": "all"})), SEND)


def test_a_workers_send_adds_only_its_heartbeat(proj: Path) -> None:
    got = loaded(proj, *api("send-message", **{"from": "worker-1", "to": "leader", "body": "hi"}))
    within(got, WORKER_SEND)
    assert {"omp.tasks.presence"} <= set(got[0])


def test_reading_and_marking_mail_stay_within_the_budget(proj: Path) -> None:
    sent = loaded(proj, *api("send-message", **{"from": "leader", "to": "worker-1", "body": "a"}))
    mid = json.loads(sent[2])["messageId"]
    within(loaded(proj, *api("mailbox-list", worker="worker-1")), MAILBOX_LIST)
    within(loaded(proj, *api("mailbox-mark-delivered", worker="worker-1", message_id=mid)), CLAIM)
    within(loaded(proj, *api("mailbox-read", worker="worker-1")), CLAIM)


def test_claiming_and_moving_a_task_stay_within_the_budget(proj: Path) -> None:
    got = loaded(proj, *api("claim-task", worker="worker-1", task_id="1"))
    within(got, CLAIM)
    token = json.loads(got[2])["claimToken"]
    move = {"worker": "worker-1", "task_id": "1", "claim_token": token, "result": "done"}
    move |= {"from": "in_progress", "to": "failed"}
    within(loaded(proj, *api("transition-task-status", **move)), CLAIM)


def test_the_roster_and_the_task_list_stay_within_the_budget(proj: Path) -> None:
    within(loaded(proj, *api("list-tasks")), CLAIM)
    within(loaded(proj, *api("roster", worker="worker-1")), ROSTER, HEAVY - {"datetime"})


def test_without_a_config_file_the_same(proj: Path) -> None:
    (proj / ".omp" / "config.toml").unlink()
    within(
        loaded(proj, *api("send-message", **{"from": "leader", "to": "worker-2", "body": "x"})),
        SEND,
    )


def test_a_config_beyond_plain_numbers_is_left_to_tomllib(proj: Path) -> None:
    (proj / ".omp" / "config.toml").write_text(NO_LIMITS_TOML + '[notes]\nwho = "me"\n')
    _, other, _ = loaded(
        proj, *api("send-message", **{"from": "leader", "to": "worker-2", "body": "y"})
    )
    assert "tomllib" in other  # at its cost: the plain tables every project has stay cheap


@pytest.mark.parametrize("worker", [False, True], ids=["any agent", "a worker pane"])
def test_a_stop_without_a_loop_stays_within_its_budget(proj: Path, worker: bool) -> None:
    stop = {"session_id": "s1", "cwd": str(proj), "hook_event_name": "Stop",
            "last_assistant_message": "done"}  # fmt: skip
    env = {"OMP_TEAM_WORKER": "1", "OMP_TEAM": "t", "OMP_WORKER": "worker-1"} if worker else None
    got = loaded(proj, "hook", "stop", stdin=json.dumps(stop).encode(), env=env)
    within(got, HOOK_STOP)
    assert got[2].strip() == "{}"


def test_status_of_a_team_the_typescript_tool_ran_stays_within_its_budget(proj: Path) -> None:
    """`omp team status` over a team without task conversations or usage records."""
    assert not (proj / ".omp" / "state" / "team" / "t" / "conversations").exists()
    for args in (("team", "status", "t", "--json"), ("team", "status")):
        got = loaded(proj, *args)
        within(got, STATUS, STATUS_HEAVY)
        assert "omp.views.status" in got[0]


# ---- no stand-ins for the standard library ------------------------------------------------------


def _omp_sources() -> list[tuple[str, ast.Module]]:
    return [
        (str(p.relative_to(REPO)), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted((REPO / "omp").rglob("*.py"))
    ]


def test_omp_imports_no_private_module_and_never_writes_sys_modules() -> None:
    """The per-call layer is cheap by importing little, never by standing in for the standard
    library: no private CPython module (`_json`, `_collections`), no write to `sys.modules`."""
    found = []
    for rel, tree in _omp_sources():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{rel}: import {n}" for n in names if n.startswith("_") and n != "__future__"
            ]
            targets = node.targets if isinstance(node, ast.Assign) else []
            targets += [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if ast.unparse(base) == "sys.modules":
                    found.append(f"{rel}:{t.lineno}: writes sys.modules")
            if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("sys.modules."):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node.func)}")
    assert found == []
