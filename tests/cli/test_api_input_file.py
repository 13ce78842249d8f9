"""`omp team api ... --input @path`: the JSON read from a file, with clear refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    OmpRun,
    child_env,
    is_root,
    isolate,
    mailbox_file,
    make_project,
    make_team,
    records,
    run_omp,
    snapshot_tree,
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    r = make_project(tmp_path / "proj")
    make_team(r, "demo", 2)
    return r


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def test_at_path_reads_the_input_from_a_file(root: Path, env: dict[str, str]) -> None:
    body = 'line one\nit\'s "quoted", $HOME and `backticks` stay as written\n' + "x" * 5000
    (root / "msg.json").write_text(
        json.dumps({"team_name": "demo", "from": "worker-1", "to": "worker-2", "body": body})
    )
    # relative to the working directory, like curl's @file
    r = run_omp("team", "api", "send-message", "--input", "@msg.json", "--json", cwd=root, env=env)
    assert r.rc == 0, r
    assert records(mailbox_file(root, "worker-2"))[0]["body"] == body
    # the --input=@path spelling and an absolute path work too
    (root / "list.json").write_text(json.dumps({"team_name": "demo", "worker": "worker-2"}))
    r = run_omp(
        "team", "api", "mailbox-list", f"--input=@{root / 'list.json'}", "--json", cwd=root, env=env
    )
    assert r.rc == 0, r
    assert [m["body"] for m in r.json["messages"]] == [body]


@pytest.mark.parametrize(
    ("make", "code", "rc"),
    [
        pytest.param(None, "input_not_found", 2, id="missing"),
        pytest.param("dir", "input_unreadable", 2, id="directory"),
        pytest.param("fifo", "input_unreadable", 2, id="fifo"),
        pytest.param("latin1", "invalid_json", 2, id="not-utf8"),
        pytest.param("garbage", "invalid_json", 2, id="not-json"),
        pytest.param("huge", "invalid_input", 2, id="too-large"),
        pytest.param("empty-name", "invalid_input", 2, id="bare-at"),
    ],
)
def test_a_bad_input_file_is_refused_with_its_own_code(
    root: Path, env: dict[str, str], make: str | None, code: str, rc: int
) -> None:
    target = root / "in.json"
    arg = f"@{target}"
    if make == "dir":
        target.mkdir()
    elif make == "fifo":
        os.mkfifo(target)
    elif make == "latin1":
        target.write_bytes(b'{"team_name":"demo","from":"worker-1","to":"worker-2","body":"\xe9"}')
    elif make == "garbage":
        target.write_text("{not json")
    elif make == "huge":
        target.write_text(json.dumps({"team_name": "demo", "body": "x" * (1024 * 1024 + 10)}))
    elif make == "empty-name":
        arg = "@"
    before = snapshot_tree(root / ".omp")
    r = run_omp("team", "api", "send-message", "--input", arg, "--json", cwd=root, env=env)
    assert r.rc == rc, r
    assert r.json["ok"] is False and r.json["error"] == code, r.json
    assert "Traceback" not in r.stderr
    assert snapshot_tree(root / ".omp") == before
    # the human form names the code on stderr, nothing on stdout
    r = run_omp("team", "api", "send-message", "--input", arg, cwd=root, env=env)
    assert r.rc == rc and r.stdout == "" and f"[{code}]" in r.stderr


@pytest.mark.skipif(is_root(), reason="root reads any file")
def test_an_unreadable_input_file_is_refused(root: Path, env: dict[str, str]) -> None:
    target = root / "secret.json"
    target.write_text("{}")
    target.chmod(0)
    r = run_omp("team", "api", "list-tasks", "--input", f"@{target}", "--json", cwd=root, env=env)
    assert r.rc == 2 and r.json["error"] == "input_unreadable", r
    assert "Permission denied" in r.json["message"]


# ---- issue 21, class 10: `--input -` has the cap and the checks of `--input @FILE` ----------

DEEP = "[" * 100_000
INPUTS: dict[str, tuple[bytes, str | None]] = {
    "ok": (json.dumps({"team_name": "demo", "worker": "worker-1"}).encode(), None),
    "too-large": (  # a valid input, but for its size
        json.dumps({"team_name": "demo", "worker": "worker-1"}).encode() + b" " * (1 << 20),
        "invalid_input",
    ),
    "not-utf8": (b'{"team_name":"demo","worker":"\xe9"}', "invalid_json"),
    "not-json": (b"{not json", "invalid_json"),
    "too-deep-to-parse": (DEEP.encode(), "invalid_input"),
    "deeper-than-any-operation-reads": (
        json.dumps({"team_name": "demo", "x": json.loads("[" * 80 + "]" * 80)}).encode(),
        "invalid_input",
    ),
}


def _run_bytes(root: Path, env: dict[str, str], arg: str, stdin: Any) -> OmpRun:
    import resource
    import subprocess
    import sys

    def cap() -> None:  # a reader without a bound must fail here, not take the machine's memory
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    proc = subprocess.run(
        [sys.executable, "-m", "omp", "team", "api", "mailbox-list", "--input", arg, "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        timeout=60,
        preexec_fn=cap,
        **({"input": stdin} if isinstance(stdin, bytes) else {"stdin": stdin}),
    )
    out = proc.stdout.decode()
    return OmpRun(proc.returncode, out, proc.stderr.decode(), json.loads(out) if out else None)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_stdin_and_a_file_are_read_alike(root: Path, env: dict[str, str], name: str) -> None:
    data, code = INPUTS[name]
    (root / "in.json").write_bytes(data)
    before = snapshot_tree(root / ".omp")
    by_file = _run_bytes(root, env, "@in.json", b"")
    by_stdin = _run_bytes(root, env, "-", data)
    for r in (by_file, by_stdin):
        assert "Traceback" not in r.stderr
        assert r.json is not None and r.json["ok"] is (code is None), r
        if code is not None:
            assert r.rc == 2 and r.json["error"] == code, r
        if "deep" in name:
            assert r.json["message"] == "the input is nested deeper than 64 levels"
    if code is None:
        assert by_file.json == by_stdin.json
    else:
        assert snapshot_tree(root / ".omp") == before


def test_stdin_that_never_ends_is_cut_at_the_cap(root: Path, env: dict[str, str]) -> None:
    with open("/dev/zero", "rb") as zero:
        r = _run_bytes(root, env, "-", zero)
    assert r.rc == 2 and r.json["error"] == "invalid_input", r
    assert "over 1048576 bytes" in r.json["message"]
