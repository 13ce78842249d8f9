"""Issue 21, the state-file class: a damaged file under `.omp/state` is a clear error, never a bug.

Attacked as a class. A real team is built in tmp_path with omp's own code (the API for mail,
claims and heartbeats, `ralph start` and the stop hook for loop and hook state, the monitor's
writers for its trackers, status, owner lock, attention, budget and usage index); then EVERY
JSON file omp wrote is found by walking the tree (a new kind of state file is attacked without a
line here) and damaged in each way of `DAMAGE`: `NaN`, `Infinity`, `-Infinity`, `1e999` in place
of a field, the wrong type at the top level and (`test_every_field_of_every_state_file…`) for
each field in turn, truncated, a byte that is not UTF-8, 10,000 levels of nesting. Every JSONL
file gets lines damaged the same ways. Then each command that reads state runs, with `--json`:

- never exit 3 (`internal`) and never a traceback; exactly one JSON object (the stop hook: its
  answer, exit 0: it fails open); an error carries a stable code from `omp.errors.CODES`;
- a read-only command changes nothing in the state tree (bytes, modes, mtimes), and a refusal
  changes nothing either: the damaged file is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from omp.errors import CODES, EXIT_INTERNAL
from tests.helpers import (
    REPO,
    child_env,
    make_project,
    make_team,
    run_cli,
    run_processes,
    snapshot_tree,
)
from tests.monitor.test_monitor_policy import World, world  # noqa: F401 (a fixture)

TEAM = "t"
STATE = Path(".omp") / "state"

# ---- the damage ---------------------------------------------------------------------------------

DEEP = b"[" * 10_000 + b"]" * 10_000


def _first_key(doc: Any) -> str | None:
    return next(iter(doc), None) if isinstance(doc, dict) else None


def _with(raw: bytes, literal: bytes) -> bytes:
    """The document with its first field's value replaced by `literal` (any JSON text)."""
    doc = json.loads(raw)
    key = _first_key(doc)
    if key is None:
        return b"[" + literal + b"]"
    doc[key] = "\x00MARK\x00"
    text = json.dumps(doc).encode()
    return text.replace(json.dumps("\x00MARK\x00").encode(), literal, 1)


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "nan": lambda raw: _with(raw, b"NaN"),
    "infinity": lambda raw: _with(raw, b"Infinity"),
    "-infinity": lambda raw: _with(raw, b"-Infinity"),
    "1e999": lambda raw: _with(raw, b"1e999"),
    "huge-int": lambda raw: _with(raw, b"9" * 5000),
    "deep": lambda raw: _with(raw, DEEP),
    "deep-top": lambda raw: DEEP,
    "list-top": lambda raw: b"[1, 2]",
    "string-top": lambda raw: b'"text"',
    "number-top": lambda raw: b"1e308",
    "null-top": lambda raw: b"null",
    "truncated": lambda raw: raw[: max(1, len(raw) // 2)],
    "empty": lambda raw: b"",
    "not-utf8": lambda raw: raw[:1] + b"\xff\xfe" + raw[1:],
}

# A line of a JSONL file damaged the same ways (each a complete line: the readers skip and count
# it, never fail on it)
BAD_LINES = [
    b'{"type":"message","id":"01J0000000000000000000000A","n":NaN}',
    b'{"type":"message","id":"01J0000000000000000000000B","n":Infinity}',
    b'{"type":"message","id":"01J0000000000000000000000C","n":1e999}',
    b'{"type":"message","id":"01J0000000000000000000000D","n":' + DEEP + b"}",
    b'{"type":"message","body":"\xff\xfe"}',
    b'{"type":"message","id":5,"from":[],"to":{},"body":7,"timestamp":1e308}',
    b'{"type":"delivery-receipt","messageId":[1],"deliveredAt":NaN}',
    b"[1, 2]",
    b"null",
    b'{"trunc',
]


def _wrong_values(value: Any) -> list[Any]:
    """Values of other JSON types than `value`, and numbers out of every range omp uses."""
    if isinstance(value, bool):
        return ["yes", 2]
    if isinstance(value, (int, float)):
        return ["7", -1, 2**70, 1e308, None]
    if isinstance(value, str):
        return [1e308, ["x"], None, {"a": 1}]
    if isinstance(value, list):
        return [{"a": -1}, "x", [[], {}, -1]]
    if isinstance(value, dict):
        return [[-1, "x", None], "x", None]
    return [{"a": 1}, -1, "x"]


# ---- the project --------------------------------------------------------------------------------


def _api(root: Path, sub: str, payload: dict[str, Any], env: dict[str, str]) -> Any:
    r = run_cli("team", "api", sub, "--input", json.dumps(payload), "--json", cwd=root, env=env)
    assert r.rc == 0, (sub, r)
    return r.json


def _hook_payload(root: Path) -> str:
    p = json.loads((REPO / "tests" / "fixtures" / "hooks" / "claude-Stop.json").read_text())
    p["cwd"] = str(root)
    return json.dumps(p)


def _build(base: Path) -> tuple[Path, dict[str, str]]:
    """A project whose state tree holds every kind of file omp writes, each written by omp."""
    from omp import clock
    from omp.monitor import attention, ctl, policy, trackers
    from omp.monitor import usage as usage_index
    from omp.notify import emit
    from omp.record import budget
    from omp.record import config as team_config
    from omp.store import fs, jsonl
    from omp.store.paths import StatePaths

    home = base / "home"
    home.mkdir()
    root = make_project(base / "proj")
    env = child_env(home, OMP_NO_MONITOR="1", OMP_ROOT=str(root), SHELL="/bin/sh")
    env["OMP_HOOK_BUDGET_MS"] = "3000"
    make_team(root, TEAM, 2, task="build it")
    t = {"team_name": TEAM}
    _api(root, "send-message", {**t, "from": "leader", "to": "worker-1", "body": "do 1"}, env)
    _api(root, "send-message", {**t, "from": "worker-1", "to": "leader", "body": "ok"}, env)
    _api(root, "mailbox-read", {**t, "worker": "worker-1"}, env)
    _api(root, "claim-task", {**t, "task_id": "1", "worker": "worker-1"}, env)
    req = {**t, "from": "leader", "to": "worker-2", "body": "review it", "event": "task_req"}
    _api(root, "send-message", req, env)  # a conversation record and the open summary
    make_team(root, "s", 1)
    assert run_cli("team", "shutdown", "s", "--json", cwd=root, env=env).rc == 0
    hooks = run_cli("hooks", "install", "--agent", "claude", "--json", cwd=root, env=env)
    assert hooks.rc == 0, hooks
    assert run_cli("ralph", "start", "finish it", "--json", cwd=root, env=env).rc == 0
    hook = run_cli("hook", "stop", input=_hook_payload(root), cwd=root, env=env)
    assert hook.rc == 0 and "block" in hook.stdout, hook
    # What the monitor writes, by the monitor's own writers.
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        project = StatePaths(root)
        cfg = team_config.load(project.team(TEAM))
        now = time.time()
        project.ensure(project.monitor)
        pending = {"schemaVersion": ctl.SCHEMA, "token": "tok", "phase": "pending"}
        pending["createdAt"] = clock.iso(now)
        assert ctl._create_exclusive(project.monitor_owner, pending)
        assert ctl.adopt(project, "tok", pid=os.getpid(), now=now)
        ctl.write_status(project, {"pid": os.getpid(), "scannedAt": clock.iso(now), "teams": 1})
        ctl.log_event(project, "started", now=now)
        store = trackers.Trackers(project, 600.0)
        store.ensure_dir()
        store.save(
            "runtime-t-worker-1",
            team=TEAM,
            worker="worker-1",
            generation="g1",
            pane="%1",
            tracker=policy.Tracker(idle_count=1, unread_total=2),
            doc=None,
            now=now,
        )
        attention.publish_open(cfg, "worker-2", "permission", now, ["Allow? (y/n)"], "%2")
        budget.update(
            cfg.paths,
            budget.generation(cfg.raw),
            lambda doc: doc["crossings"].append(
                {"seq": 1, "scope": "team", "who": TEAM, "percent": 50, "at": clock.iso(now)}
            ),
        )
        usage_index.refresh(cfg, {}, now=now, env={})
        fs.write_json_atomic(project.monitor_restarts, {"at": [now]})
        emit(project, {"kind": "all_done", "team": TEAM, "id": "n1"})
        jsonl.write_cursor(project.notify_delivered, 0)
        fs.write_json_atomic(
            cfg.paths.session("worker-1"),
            {"sessionId": "90dd62ff-1c2e-4a8b-9d7e-3f1a2b3c4d5e", "agent": "claude"},
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return root, env


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    return _build(tmp_path_factory.mktemp("corrupt"))


def json_files(root: Path) -> list[str]:
    """Every file under `.omp/state` whose content is one JSON value (relative paths)."""
    out = []
    for p in sorted((root / STATE).rglob("*")):
        if not p.is_file() or p.suffix == ".jsonl" or p.name.endswith(".log"):
            continue
        try:
            json.loads(p.read_bytes())
        except ValueError:
            continue
        out.append(str(p.relative_to(root)))
    return out


def jsonl_files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted((root / STATE).rglob("*.jsonl"))]


# ---- the commands -------------------------------------------------------------------------------


def _api_argv(sub: str, **fields: str) -> list[str]:
    return ["team", "api", sub, "--input", json.dumps({"team_name": TEAM, **fields}), "--json"]


READ_ONLY: list[list[str]] = [
    ["team", "status", "--json"],
    ["team", "status", TEAM, "--json"],
    ["team", "collect", TEAM, "--json"],
    ["team", "wait", TEAM, "--timeout", "0.01", "--json"],
    ["team", "events", TEAM, "--json"],
    ["team", "usage", TEAM, "--json"],
    ["team", "list", "--json"],
    ["ralph", "status", "--json"],
    _api_argv("mailbox-list", worker="leader"),
    _api_argv("mailbox-list", worker="worker-1"),
    _api_argv("list-tasks"),
    _api_argv("roster"),
]
WRITING: list[list[str]] = [
    _api_argv("claim-task", task_id="2", worker="worker-2"),
    _api_argv("send-message", **{"from": "worker-2", "to": "leader", "body": "hi"}),
    _api_argv("mailbox-read", worker="leader"),
    ["hook", "stop"],
    ["hooks", "install", "--agent", "claude", "--uninstall", "--json"],
]


def _refuse(name: str) -> None:
    raise ValueError(f"{name} in JSON output")


def _check(root: Path, env: dict[str, str], argv: list[str], what: str) -> None:
    state = root / STATE
    before = snapshot_tree(state)
    hook = argv[:2] == ["hook", "stop"]
    r = run_cli(*argv, cwd=root, env=env, input=_hook_payload(root) if hook else None)
    where = f"{what}: omp {' '.join(argv[:3])}"
    text = r.stdout + r.stderr
    assert r.rc != EXIT_INTERNAL, f"{where}: internal error: {text}"
    assert "Traceback" not in text, f"{where}: {text}"
    if hook:
        assert r.rc == 0 and isinstance(json.loads(r.stdout or "{}"), dict), f"{where}: {r}"
        return
    lines = r.stdout.splitlines() if argv[:2] == ["team", "events"] else [r.stdout]
    for line in lines:
        try:
            obj = json.loads(line, parse_constant=_refuse)
        except ValueError as exc:
            raise AssertionError(f"{where}: not JSON ({exc}): {r.stdout[:2000]!r}") from None
        assert isinstance(obj, dict), f"{where}: not a JSON object: {line[:2000]!r}"
    reply = json.loads(lines[-1]) if lines else {}
    allowed = {0, 1, 2} | ({10, 11, 12, 13} if argv[:2] == ["team", "wait"] else set())
    assert r.rc in allowed, f"{where}: exit {r.rc}: {text}"
    if r.rc != 0 and argv[:2] != ["team", "wait"]:
        assert reply.get("error") in CODES, f"{where}: {reply}"
    if argv in READ_ONLY or r.rc != 0:
        assert snapshot_tree(state) == before, f"{where}: changed the state tree ({reply})"


def _conversation(root: Path) -> list[list[str]]:
    """A worker's update on the template's conversation: reads its record and the summary."""
    convs = root / STATE / "team" / TEAM / "conversations"
    ids = [p.stem for p in convs.glob("*.json") if not p.name.startswith(".")]
    fields = {"from": "worker-2", "to": "leader", "body": "half done", "event": "task_update"}
    return [_api_argv("send-message", **fields, task_id=i) for i in ids]


def _run_all(root: Path, env: dict[str, str], what: str) -> None:
    for argv in READ_ONLY + WRITING + _conversation(root):
        _check(root, env, argv, what)


def _fresh(
    template: tuple[Path, dict[str, str]], tmp_path: Path, n: int
) -> tuple[Path, dict[str, str]]:
    src, env = template
    root = tmp_path / f"p{n}"
    shutil.copytree(src, root, symlinks=True)
    return root, {**env, "OMP_ROOT": str(root)}


# ---- the tests ----------------------------------------------------------------------------------


def test_the_template_holds_every_kind_of_state_file(
    template: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    root, _ = template
    files = json_files(root)
    for want in (
        "team/t/config.json",
        "team/t/tasks/1.json",
        "team/t/budget.json",
        "team/t/attention.json",
        "team/t/workers/worker-1/heartbeat.json",
        "team/t/workers/worker-1/session.json",
        "ralph.json",
        "team-monitor/status.json",
        "team-monitor/owner.lock",
        "team-monitor/targets/runtime-t-worker-1.json",
        "team-monitor/usage/t.json",
        "notify/delivered.json",
        "team/s/shutdown.json",
        "team-monitor/restarts.json",
        "hooks/made-hooks.json",
    ):
        assert str(STATE / want) in files, (want, files)
    assert any("/hooks/decisions-" in f for f in files) and any("/mailbox/" in f for f in files)
    assert any("/conversations/" in f for f in files), files
    _run_all(*_fresh(template, tmp_path, 0), "undamaged")  # the project answers every command


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_every_state_file_damaged_is_a_clear_error_or_read_around(
    template: tuple[Path, dict[str, str]], tmp_path: Path, damage: str
) -> None:
    src, _ = template
    for n, rel in enumerate(json_files(src)):
        root, env = _fresh(template, tmp_path, n)
        path = root / rel
        path.write_bytes(DAMAGE[damage](path.read_bytes()))
        _run_all(root, env, f"{rel} {damage}")


def test_every_field_of_every_state_file_given_the_wrong_type(
    template: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """About 870 variants, 17 commands each: the longest test of the suite, so its variants are
    shared out over this machine's cores (forked processes; a failure's traceback is in the
    captured stderr), even in the full suite's one process."""
    count = len(_wrong_type_variants(template[0]))
    assert count > 500  # every field of every file, to 3 levels
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    shards = max(1, min(cores, 4))
    if shards == 1:
        _check_variants(template, tmp_path, 0, 1)
    else:
        args = [(template, tmp_path, i, shards) for i in range(shards)]
        run_processes(_check_variants, args, timeout=1800)


def _wrong_type_variants(src: Path) -> list[tuple[str, str, str]]:
    """(file, its damaged text, what was done) for every field of every JSON object file."""
    out = []
    for rel in json_files(src):
        doc = json.loads((src / rel).read_bytes())
        if not isinstance(doc, dict):
            continue
        for where in _places(doc):
            for bad, value in _replaced(doc, where):
                out.append((rel, json.dumps(bad), f"{rel} {'.'.join(map(str, where))}={value!r}"))
    return out


def _check_variants(
    template: tuple[Path, dict[str, str]], tmp_path: Path, shard: int, shards: int
) -> None:
    """Every `shards`-th variant, from the `shard`-th on."""
    for n, (rel, text, what) in enumerate(_wrong_type_variants(template[0])):
        if n % shards != shard:
            continue
        root, env = _fresh(template, tmp_path, n)
        (root / rel).write_text(text)
        _run_all(root, env, what)
        shutil.rmtree(root)


def _places(doc: Any, depth: int = 3) -> list[tuple[str | int, ...]]:
    """Every key and index down to `depth` levels (the first item of each list stands for all)."""
    out: list[tuple[str | int, ...]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        node, at = stack.pop()
        if len(at) >= depth:
            continue
        items: list[tuple[str | int, Any]] = (
            list(node.items()) if isinstance(node, dict) else list(enumerate(node[:1]))
        )
        for k, v in items:
            out.append((*at, k))
            if isinstance(v, (dict, list)):
                stack.append((v, (*at, k)))
    return out


def _replaced(doc: Any, where: tuple[str | int, ...]) -> list[tuple[Any, Any]]:
    """Copies of `doc` with the value at `where` replaced by each of `_wrong_values`."""
    out = []
    node = doc
    for k in where:
        node = node[k]
    for value in _wrong_values(node):
        bad = json.loads(json.dumps(doc))
        parent = bad
        for k in where[:-1]:
            parent = parent[k]
        parent[where[-1]] = value
        out.append((bad, value))
    return out


# ---- the monitor fails open ---------------------------------------------------------------------

# Files the monitor does not own: it must read around their damage and leave them as they were.
NOT_THE_MONITORS = ("config.json", "/tasks/", "ralph.json", ".index.json", "session.json")


@pytest.mark.parametrize("damage", ["nan", "1e999", "deep", "list-top", "truncated", "not-utf8"])
def test_the_monitor_scans_on_over_every_damaged_state_file(
    damage: str,
    world: World,  # noqa: F811 (the fixture imported above)
) -> None:
    """A scan over a live team (fake tmux) with each state file damaged in turn: it never
    raises, says what it could not read in its diagnostics, and leaves the files it does not own
    as they were (its own, trackers and status, it may write anew)."""
    world.loop()
    world.mail("worker-1")
    mon = world.monitor()
    world.scan_for(mon, 40)  # trackers, status, attention: every file a scan writes
    files = json_files(world.root)
    assert any("targets/" in f for f in files) and any(".nudge." in f for f in files), files
    for rel in files:
        path = world.root / rel
        good = path.read_bytes()
        path.write_bytes(DAMAGE[damage](good))
        bad = path.read_bytes()
        world.clock.sleep(5)
        world.monitor().scan()  # a monitor that starts over the damage, then one that ran
        mon.scan()
        if any(part in rel for part in NOT_THE_MONITORS):
            assert path.read_bytes() == bad, f"{rel} {damage}: the monitor rewrote it"
        path.write_bytes(good)


# ---- what the person sees -----------------------------------------------------------------------


def test_the_error_names_the_damaged_file_and_hides_nothing_else(
    template: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Each code names the file (`file`) and says what is wrong; one damaged team or monitor
    file is a row of its own, the rest of the overview still shows."""
    root, env = _fresh(template, tmp_path, 0)
    state = root / STATE

    def run(*argv: str) -> dict[str, Any]:
        r = run_cli(*argv, cwd=root, env=env)
        assert r.rc in (0, 1) and isinstance(r.json, dict), r
        return dict(r.json)

    ralph = state / "ralph.json"
    ralph.write_bytes(b'{"active": true, "iteration": NaN}')
    out = run("ralph", "status", "--json")  # a status shows it, saying why
    assert out["unreadable"] is True and out["active"] is False and out["file"] == str(ralph)
    assert "holds NaN" in out["why"]
    hook = run_cli("hook", "stop", input=_hook_payload(root), cwd=root, env=env)
    assert hook.rc == 0 and "block" not in hook.stdout  # fails open: the agent may stop ...
    log = (state / "hooks" / "hook.log").read_text().splitlines()[-1]
    assert str(ralph) in log and "holds NaN" in log  # ... and the log says why
    out = run("ralph", "start", "again", "--json")  # a change refuses it, and keeps it
    assert out["error"] == "corrupt_state" and out["file"] == str(ralph)
    assert "holds NaN" in out["message"] and ralph.read_bytes().endswith(b"NaN}")
    config = state / "team" / TEAM / "config.json"
    config.write_bytes(DEEP)
    out = run("team", "status", TEAM, "--json")
    assert out["error"] == "invalid_config" and out["file"] == str(config)
    assert "nested deeper than 64 levels" in out["message"]
    shut = state / "team" / "s" / "shutdown.json"
    shut.write_bytes(b'{"shutdownAt": 1e999}')
    rows = {r["team"]: r for r in run("team", "list", "--json")["teams"]}
    assert rows["s"]["error"] == "corrupt_state" and str(shut) in rows["s"]["message"]
    assert rows[TEAM]["error"] == "invalid_config"  # each team its own row
    mon = state / "team-monitor" / "status.json"
    mon.write_bytes(b"\xff\xfe{}")
    overview = run("team", "status", "--json")
    assert overview["ok"] is True and overview["monitor"]["error"] == "corrupt_state"
    assert "is not UTF-8" in overview["monitor"]["message"]
    text = run_cli("team", "status", cwd=root, env=env).stdout
    assert "corrupt_state" in text and str(mon) in text
