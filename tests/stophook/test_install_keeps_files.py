"""Issue 21, class 5: `omp hooks install` keeps the user's file as it was.

Attacked broadly: installs (and uninstalls) over files of each mode, over each odd JSON value,
and over each broken target. Every refusal leaves the whole project byte for byte as it was
(`--agent all`: the files planned before the bad one are not written either); everything written
is read back by node's `JSON.parse` (or, without node, by a parser as strict).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.stophook.install import TARGETS, install, is_omp_entry
from tests.helpers import child_env, is_root, run_omp, snapshot_tree, umask

CMD = "/opt/omp/bin/omp hook stop"
CLAUDE = ".claude/settings.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / ".git").mkdir(parents=True)
    return r


def _write(root: Path, rel: str, data: bytes, mode: int = 0o644) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


# One node process per module reads every file it is sent (a start costs 0.3 s here, and the
# round trips below would start it 20 times): a line of JSON paths in, "ok" or the error out.
NODE_PARSER = r"""
const fs = require('fs');
require('readline').createInterface({input: process.stdin}).on('line', (line) => {
  let out = 'ok';
  try {
    for (const p of JSON.parse(line)) {
      JSON.parse(fs.readFileSync(p, 'utf8').replace(/^\uFEFF/, ''));
    }
  } catch (e) {
    out = 'error: ' + String(e && e.message).replace(/\n/g, ' ');
  }
  process.stdout.write(out + '\n');
});
"""


@pytest.fixture(scope="module")
def node() -> Iterator[subprocess.Popen[str] | None]:
    exe = shutil.which("node")
    if exe is None:  # pragma: no cover - CI has node
        yield None
        return
    proc = subprocess.Popen(
        [exe, "-e", NODE_PARSER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)


def _parse_like_node(node: subprocess.Popen[str] | None, paths: list[Path]) -> None:
    """Each file parses with node's JSON.parse (a BOM the user's file had is skipped first)."""
    if node is None:  # pragma: no cover - CI has node; this is as strict as JSON.parse
        for p in paths:
            text = p.read_bytes().decode("utf-8").removeprefix("\ufeff")

            def refuse(name: str) -> None:
                raise ValueError(name)

            json.loads(text, parse_constant=refuse)
        return
    assert node.stdin is not None and node.stdout is not None
    node.stdin.write(json.dumps([str(p) for p in paths]) + "\n")
    node.stdin.flush()
    assert node.stdout.readline() == "ok\n"


def _refused(root: Path, code: str, **kw: Any) -> OmpError:
    """`install(root, "all")` is refused with `code` and the project is exactly as it was."""
    before = snapshot_tree(root)
    with pytest.raises(OmpError) as exc:
        install(root, "all", command=CMD, **kw)
    assert exc.value.code == code, exc.value.message
    assert snapshot_tree(root) == before
    return exc.value


# ---- modes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o660, 0o664, 0o666, 0o700, 0o755])
def test_an_install_and_an_uninstall_keep_the_files_mode(root: Path, mode: int) -> None:
    for t in TARGETS.values():
        _write(root, t.rel, b'{"hooks": {}, "mine": 1}\n', mode)
    install(root, "all", command=CMD)
    for t in TARGETS.values():
        assert stat.S_IMODE(os.stat(root / t.rel).st_mode) == mode, t.rel
        assert json.loads((root / t.rel).read_text())["mine"] == 1
    install(root, "all", uninstall=True)
    for t in TARGETS.values():
        assert stat.S_IMODE(os.stat(root / t.rel).st_mode) == mode, t.rel
        assert json.loads((root / t.rel).read_text()) == {"hooks": {}, "mine": 1}


@pytest.mark.parametrize(("mask", "mode"), [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_a_new_file_takes_the_usual_mode_of_the_umask(root: Path, mask: int, mode: int) -> None:
    with umask(mask):
        install(root, "all", command=CMD)
    for t in TARGETS.values():
        assert stat.S_IMODE(os.stat(root / t.rel).st_mode) == mode, t.rel


# ---- odd JSON ---------------------------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000
REFUSED_JSON: dict[str, tuple[bytes, str]] = {
    "NaN": (b'{"a": NaN}', "holds NaN"),
    "Infinity": (b'{"a": Infinity}', "holds Infinity"),
    "-Infinity": (b'{"a": [-Infinity]}', "holds -Infinity"),
    "1e400": (b'{"a": 1e400}', "holds the number 1e400"),
    "-1e400": (b'{"a": {"b": -1e400}}', "holds the number -1e400"),
    "huge-int": (b'{"a": ' + b"9" * 5000 + b"}", "is not valid JSON"),
    "deep": (b'{"a": ' + DEEP + b"}", "is nested too deeply"),
    "duplicate-key": (b'{"hooks": {}, "hooks": {"Stop": []}}', "holds the key 'hooks' twice"),
    "nested-duplicate": (b'{"a": {"x": 1, "x": 2}}', "holds the key 'x' twice"),
    "utf-16": ('{"a": 1}'.encode("utf-16"), "is not UTF-8 text"),
    "latin-1": ('{"a": "café"}'.encode("latin-1"), "is not UTF-8 text"),
    "array": (b"[]", "is not a JSON object"),
    "string": (b'"text"', "is not a JSON object"),
    "number": (b"3", "is not a JSON object"),
    "null": (b"null", "is not a JSON object"),
    "true": (b"true", "is not a JSON object"),
    "not-json": (b"{not json", "is not valid JSON"),
    "hooks-a-list": (b'{"hooks": []}', '"hooks" that is not an object'),
    "hooks-null": (b'{"hooks": null}', '"hooks" that is not an object'),
    "event-not-a-list": (b'{"hooks": {"Stop": {"x": 1}}}', '"hooks.Stop" that is not a list'),
}


@pytest.mark.parametrize("name", sorted(REFUSED_JSON))
@pytest.mark.parametrize("uninstall", [False, True], ids=["install", "uninstall"])
def test_json_omp_cannot_keep_is_refused_and_nothing_is_written(
    root: Path, name: str, uninstall: bool
) -> None:
    data, why = REFUSED_JSON[name]
    path = _write(root, CLAUDE, data, 0o600)
    err = _refused(root, "invalid_hook_config", uninstall=uninstall)
    assert why in err.message and str(path) in err.message and "nothing was written" in err.message


KEPT_JSON: dict[str, tuple[bytes, Any]] = {
    "big-int": (b'{"n": 18446744073709551617}', 18446744073709551617),
    "float": (b'{"n": 1.5e300}', 1.5e300),
    "negative-zero": (b'{"n": -0.0}', -0.0),
    "unicode": ('{"n": "ünïcødé ✓ 🎉"}'.encode(), "ünïcødé ✓ 🎉"),
    "lone-surrogate": (b'{"n": "\\ud800"}', "\ud800"),
    "escapes": (b'{"n": "a\\u0000b\\u001b[31m\\u2028"}', "a\x00b\x1b[31m\u2028"),
    "bom": (b'\xef\xbb\xbf{"n": 1}', 1),
    "empty-file": (b"", None),
    "whitespace": (b"  \n\t", None),
    "nested-600": (b'{"n": ' + b"[" * 600 + b"]" * 600 + b"}", "nested"),
}


@pytest.mark.parametrize("name", sorted(KEPT_JSON))
def test_json_omp_can_keep_round_trips_for_node(
    root: Path, name: str, node: subprocess.Popen[str] | None
) -> None:
    data, value = KEPT_JSON[name]
    path = _write(root, CLAUDE, data, 0o640)
    install(root, "claude", command=CMD)
    _parse_like_node(node, [path])
    written = path.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf") == (name == "bom")
    assert b"NaN" not in written and b"Infinity" not in written
    doc = json.loads(written.decode("utf-8-sig"))
    if value is None:
        assert set(doc) == {"hooks"}
    elif value == "nested":
        assert isinstance(doc["n"], list)
    else:
        assert doc["n"] == value and repr(doc["n"]) == repr(value)
    install(root, "claude", uninstall=True)
    _parse_like_node(node, [path])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


# ---- broken targets ---------------------------------------------------------------------------


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """`path` unwritable for omp: mode bits, and for root (who ignores them) the immutable flag."""
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    os.chmod(path, mode & ~0o222)
    flagged = False
    if is_root():
        flagged = subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
        if not flagged:
            os.chmod(path, mode)
            pytest.skip("root ignores modes and chattr +i is not available here")
    try:
        yield
    finally:
        if flagged:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        os.chmod(path, mode)


BROKEN = [
    "directory",
    "symlink-to-file",
    "dangling-symlink",
    "symlink-to-directory",
    "fifo",
    "parent-is-a-file",
    "parent-is-a-symlink",
    "read-only-file",
    "read-only-directory",
]


@pytest.mark.parametrize("kind", BROKEN)
@pytest.mark.parametrize("uninstall", [False, True], ids=["install", "uninstall"])
def test_a_broken_target_is_refused_before_any_file_is_written(
    root: Path, tmp_path: Path, kind: str, uninstall: bool
) -> None:
    # The claude target is broken; copilot's comes before it, codex's and gemini's after.
    if uninstall:
        install(root, "all", command=CMD)
    target = root / CLAUDE
    target.parent.mkdir(exist_ok=True)
    target.unlink(missing_ok=True)
    outside = tmp_path / "outside.json"
    outside.write_text('{"hooks": {}}')
    code = "unsafe_path"
    ctx: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink-to-file":
        target.symlink_to(outside)
    elif kind == "dangling-symlink":
        target.symlink_to(tmp_path / "nowhere.json")
    elif kind == "symlink-to-directory":
        target.symlink_to(tmp_path)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "parent-is-a-file":
        shutil.rmtree(target.parent)
        target.parent.write_text("a file where .claude/ belongs")
    elif kind == "parent-is-a-symlink":
        shutil.rmtree(target.parent)
        (tmp_path / "elsewhere").mkdir()
        target.parent.symlink_to(tmp_path / "elsewhere")
    elif kind in ("read-only-file", "read-only-directory"):
        if uninstall:  # a file holding omp's entry: uninstall must rewrite it
            install(root, "claude", command=CMD)
        elif kind == "read-only-file":
            target.write_text('{"hooks": {}}')
        code = "storage_error"
        ctx = _read_only(target if kind == "read-only-file" else target.parent)
    with ctx:
        err = _refused(root, code, uninstall=uninstall)
    assert "nothing was written" in err.message or err.code == "unsafe_path"
    assert outside.read_text() == '{"hooks": {}}'


def test_a_failure_while_renaming_puts_back_every_file_already_replaced(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for t in TARGETS.values():
        _write(root, t.rel, b'{"hooks": {}, "keep": "me"}', 0o600)
    before = snapshot_tree(root)
    real = os.replace
    calls: list[str] = []

    def third_fails(src: Any, dst: Any) -> None:
        calls.append(str(dst))
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", third_fails)
    with pytest.raises(OmpError) as exc:
        install(root, "all", command=CMD)
    monkeypatch.setattr(os, "replace", real)
    assert exc.value.code == "storage_error" and "nothing was changed" in exc.value.message
    after = snapshot_tree(root)
    assert {k: v[:2] for k, v in after.items()} == {k: v[:2] for k, v in before.items()}


def test_a_failure_on_a_new_file_removes_the_directories_omp_made(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.replace

    def last_fails(src: Any, dst: Any) -> None:
        if str(dst).endswith(TARGETS["gemini"].rel):
            raise OSError(5, "Input/output error", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", last_fails)
    with pytest.raises(OmpError) as exc:
        install(root, "all", command=CMD)
    assert exc.value.code == "storage_error"
    assert sorted(p.name for p in root.iterdir()) == [".git"]


# ---- uninstall removes omp's entries only -------------------------------------------------

USER_COMMANDS = [
    "echo hi; omp hook stop",
    "cd /somewhere && /opt/omp/bin/omp hook stop",
    "OMP_DEBUG=1 omp hook stop",
    "bash -c 'omp hook stop'",
    "notify-send done && omp hook stop",
    "/home/me/bin/wrap omp hook stop",
]


def test_omps_entry_is_an_omp_and_hook_stop_and_nothing_else() -> None:
    for cmd in [CMD, "omp hook stop", "'/a b/omp' hook stop", "/usr/bin/python3 -m omp hook stop"]:
        assert is_omp_entry({"type": "command", "command": cmd}), cmd
        assert is_omp_entry({"type": "command", "bash": cmd}), cmd
    for cmd in [*USER_COMMANDS, "omp hook stop --x", "'unbalanced omp hook stop", "nomp hook stop"]:
        assert not is_omp_entry({"type": "command", "command": cmd}), cmd


@pytest.mark.parametrize("agent", sorted(TARGETS))
def test_a_users_own_command_calling_omp_hook_stop_stays(root: Path, agent: str) -> None:
    t = TARGETS[agent]
    mine: list[Any] = (
        [{"hooks": [{"type": "command", "command": c} for c in USER_COMMANDS]}]
        if t.nested
        else [{"type": "command", "bash": c} for c in USER_COMMANDS]
    )
    mixed = {"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}
    user = {"hooks": {t.event: [*mine, mixed]}, "x": 1}
    path = _write(root, t.rel, json.dumps(user).encode())
    # Not omp's: install adds its own entry beside the user's, no conflict.
    assert install(root, agent, command=CMD)["hooks"][0]["action"] == "added"
    # Someone put omp's handler into the user's group too: only the handler goes from there.
    doc = json.loads(path.read_text())
    doc["hooks"][t.event][len(mine)]["hooks"].append({"type": "command", "command": CMD})
    path.write_text(json.dumps(doc))
    assert install(root, agent, uninstall=True)["hooks"][0]["action"] == "removed"
    assert json.loads(path.read_text()) == user


@pytest.mark.parametrize("agent", sorted(TARGETS))
def test_an_empty_hooks_object_the_user_wrote_stays(root: Path, agent: str) -> None:
    t = TARGETS[agent]
    user: dict[str, Any] = {"hooks": {}} if agent != "copilot" else {"version": 1, "hooks": {}}
    path = _write(root, t.rel, json.dumps(user).encode())
    install(root, agent, command=CMD)
    install(root, agent, uninstall=True)
    if agent == "copilot":  # omp's own file (.github/hooks/omp.json): omp removes it when empty
        assert not path.exists()
    else:
        assert json.loads(path.read_text()) == user


def test_the_cli_refuses_cleanly_with_one_json_object(root: Path, tmp_path: Path) -> None:
    _write(root, CLAUDE, b'{"a": 1e400}')
    before = snapshot_tree(root)
    r = run_omp("hooks", "install", "--agent", "all", "--json", cwd=root, env=child_env(tmp_path))
    assert r.rc == 1 and r.json["error"] == "invalid_hook_config", r
    assert "Traceback" not in r.stderr and snapshot_tree(root) == before


# ---- a `hooks` object omp made goes with omp's last entry --------------------------------------

NESTED = sorted(a for a, t in TARGETS.items() if t.nested)
MADE = ".omp/state/hooks/made-hooks.json"


@pytest.mark.parametrize("bom", [False, True], ids=["utf8", "bom"])
@pytest.mark.parametrize("agent", NESTED)
def test_a_hooks_object_omp_made_goes_with_its_last_entry(
    root: Path, agent: str, bom: bool, node: subprocess.Popen[str] | None
) -> None:
    t = TARGETS[agent]
    before = (b"\xef\xbb\xbf" if bom else b"") + b'{"mine": 1}\n'
    path = _write(root, t.rel, before, 0o600)
    assert install(root, agent, command=CMD)["hooks"][0]["action"] == "added"
    assert "hooks" in json.loads(path.read_bytes().decode("utf-8-sig"))
    assert json.loads((root / MADE).read_text()) == {"files": [t.rel]}
    assert install(root, agent, uninstall=True)["hooks"][0]["action"] == "removed"
    after = path.read_bytes()
    assert after.startswith(b"\xef\xbb\xbf") == bom
    assert json.loads(after.decode("utf-8-sig")) == {"mine": 1}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads((root / MADE).read_text()) == {"files": []}
    _parse_like_node(node, [path])


@pytest.mark.parametrize("agent", NESTED)
def test_a_file_omp_created_is_left_without_a_hooks_object(root: Path, agent: str) -> None:
    t = TARGETS[agent]
    assert install(root, agent, command=CMD)["hooks"][0]["action"] == "created"
    install(root, agent, uninstall=True)
    assert json.loads((root / t.rel).read_text()) == {}


@pytest.mark.parametrize("agent", NESTED)
def test_a_hooks_object_omp_made_stays_while_the_user_has_entries_in_it(
    root: Path, agent: str
) -> None:
    t = TARGETS[agent]
    path = _write(root, t.rel, b'{"mine": 1}')
    install(root, agent, command=CMD)
    doc = json.loads(path.read_text())
    doc["hooks"]["Other"] = [{"hooks": [{"type": "command", "command": "lint"}]}]
    path.write_text(json.dumps(doc))
    install(root, agent, uninstall=True)
    assert json.loads(path.read_text())["hooks"] == {"Other": doc["hooks"]["Other"]}


@pytest.mark.parametrize("record", [None, b'{"files": [NaN]}', b"{trunc", b'{"files": "x"}'])
def test_without_a_trustworthy_record_an_empty_hooks_object_stays(
    root: Path, record: bytes | None
) -> None:
    """Not knowing is the user's side: a record lost or damaged keeps `hooks`, and the damaged
    record is not a reason to refuse the uninstall."""
    path = _write(root, CLAUDE, b'{"mine": 1}')
    install(root, "claude", command=CMD)
    if record is None:
        (root / MADE).unlink()
    else:
        (root / MADE).write_bytes(record)
    assert install(root, "claude", uninstall=True)["hooks"][0]["action"] == "removed"
    assert json.loads(path.read_text()) == {"hooks": {}, "mine": 1}


def test_installing_again_over_a_hooks_object_omp_made_keeps_knowing_it(root: Path) -> None:
    path = _write(root, CLAUDE, b'{"mine": 1}')
    install(root, "claude", command=CMD)
    assert install(root, "claude", command=CMD)["hooks"][0]["action"] == "unchanged"
    install(root, "claude", command=CMD, force=True)
    install(root, "claude", uninstall=True)
    assert json.loads(path.read_text()) == {"mine": 1}
