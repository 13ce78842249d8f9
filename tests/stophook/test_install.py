"""`omp hooks install`: merge, idempotence, edited entries, uninstall, bad files; doctor's view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.errors import OmpError
from omp.stophook import checks
from omp.stophook.install import TARGETS, install
from tests.helpers import child_env, run_cli

CMD = "/opt/omp/bin/omp hook stop"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / ".git").mkdir(parents=True)
    return r


def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"HOME": str(home)}


def read(root: Path, agent: str) -> dict[str, Any]:
    data = json.loads((root / TARGETS[agent].rel).read_text())
    assert isinstance(data, dict)
    return data


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_fresh_install_writes_each_clis_own_shape(root: Path) -> None:
    r = install(root, "all", command=CMD)
    assert [h["action"] for h in r["hooks"]] == ["created"] * 4
    assert read(root, "copilot") == {
        "version": 1,
        "hooks": {"agentStop": [{"type": "command", "bash": CMD, "timeoutSec": 30}]},
    }
    assert read(root, "claude") == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": CMD, "timeout": 30}]}]}
    }
    assert read(root, "codex") == read(root, "claude")
    gem = read(root, "gemini")["hooks"]["AfterAgent"][0]
    assert gem["matcher"] == "*" and gem["hooks"][0]["timeout"] == 30000  # milliseconds


def test_merging_keeps_every_user_key_and_hook(root: Path) -> None:
    settings = root / ".claude" / "settings.json"
    settings.parent.mkdir()
    user: dict[str, Any] = {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-me"}]}],
        },
    }
    settings.write_text(json.dumps(user))
    assert install(root, "claude", command=CMD)["hooks"][0]["action"] == "added"
    doc = read(root, "claude")
    assert doc["model"] == "opus" and doc["permissions"] == user["permissions"]
    assert doc["hooks"]["PreToolUse"] == user["hooks"]["PreToolUse"]
    assert doc["hooks"]["Stop"][0] == user["hooks"]["Stop"][0]
    assert doc["hooks"]["Stop"][1]["hooks"][0]["command"] == CMD
    # Uninstall gives back exactly what the user had.
    install(root, "claude", uninstall=True)
    assert read(root, "claude") == user


def test_installing_again_changes_nothing(root: Path) -> None:
    install(root, "all", command=CMD)
    before = snapshot(root)
    mtimes = {p: p.stat().st_mtime_ns for p in root.rglob("*.json")}
    r = install(root, "all", command=CMD)
    assert r["counts"] == {"unchanged": 4}
    assert snapshot(root) == before
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.json")} == mtimes


@pytest.mark.parametrize("agent", ["copilot", "claude", "codex", "gemini"])
def test_an_edited_omp_entry_is_refused_without_force(root: Path, agent: str) -> None:
    install(root, agent, command=CMD)
    path = root / TARGETS[agent].rel
    path.write_text(path.read_text().replace("30", "99"))
    edited = path.read_bytes()
    with pytest.raises(OmpError) as exc:
        install(root, agent, command=CMD)
    assert exc.value.code == "hook_changed" and str(path) in exc.value.message
    assert path.read_bytes() == edited
    # Another omp (a different path) is a change too.
    with pytest.raises(OmpError):
        install(root, agent, command="/elsewhere/omp hook stop")
    r = install(root, agent, force=True, command=CMD)
    assert r["hooks"][0]["action"] == "updated"
    assert len(checks.registrations(agent, root, {"HOME": str(root / "nohome")})) == 1
    assert install(root, agent, command=CMD)["counts"] == {"unchanged": 1}


def test_a_refusal_in_one_file_writes_no_other(root: Path) -> None:
    install(root, "claude", command=CMD)
    p = root / TARGETS["claude"].rel
    p.write_text(p.read_text().replace("30", "31"))
    before = snapshot(root)
    with pytest.raises(OmpError):
        install(root, "all", command=CMD)
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"hooks": []}', '{"hooks": {"Stop": {"x": 1}}}', '"text"'],
)
def test_a_bad_file_is_refused_and_nothing_is_written(root: Path, content: str) -> None:
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(content)
    before = snapshot(root)
    with pytest.raises(OmpError) as exc:
        install(root, "all", command=CMD)
    assert exc.value.code == "invalid_hook_config"
    assert snapshot(root) == before
    with pytest.raises(OmpError):
        install(root, "claude", uninstall=True)


def test_uninstall_removes_only_omps_entries(root: Path) -> None:
    gh = root / ".github" / "hooks"
    gh.mkdir(parents=True)
    (gh / "other.json").write_text('{"version":1,"hooks":{"agentStop":[{"bash":"mine"}]}}')
    install(root, "all", command=CMD)
    gem = root / ".gemini" / "settings.json"
    doc = read(root, "gemini")
    doc["theme"] = "dark"
    gem.write_text(json.dumps(doc))
    r = install(root, "all", uninstall=True)
    assert [h["action"] for h in r["hooks"]] == ["removed"] * 4
    assert not (gh / "omp.json").exists()  # omp's own file goes when empty
    assert (gh / "other.json").read_text().count("mine") == 1
    # omp made these files and their `hooks` objects (it keeps a record): both objects go.
    assert read(root, "gemini") == {"theme": "dark"}
    assert read(root, "claude") == {} and read(root, "codex") == {}
    assert install(root, "all", uninstall=True)["counts"] == {"absent": 4}


def test_unknown_agent_is_a_usage_error(root: Path) -> None:
    with pytest.raises(OmpError) as exc:
        install(root, "vim", command=CMD)
    assert exc.value.code == "usage"


def test_the_cli_installs_the_running_omp_by_absolute_path(tmp_path: Path, root: Path) -> None:
    e = child_env(tmp_path / "home")
    r = run_cli("hooks", "install", "--json", cwd=root, env=e)
    assert r.rc == 0, r.stderr
    cmd = r.json["command"]
    assert cmd.endswith(" hook stop") and cmd.startswith("/")
    assert [h["agent"] for h in r.json["hooks"]] == ["copilot"]  # omp's default agent
    assert read(root, "copilot")["hooks"]["agentStop"][0]["bash"] == cmd
    (root / ".codex").mkdir()
    (root / ".codex" / "hooks.json").write_text("{oops")
    bad = run_cli("hooks", "install", "--agent", "all", "--json", cwd=root, env=e)
    assert bad.rc == 1 and bad.json["error"] == "invalid_hook_config"
    assert not (root / ".claude").exists()
    human = run_cli("hooks", "install", "--agent", "codex", cwd=root, env=e)
    assert human.rc == 1 and "[invalid_hook_config]" in human.stderr and human.stdout == ""


# ---- what doctor and `ralph start` see ---------------------------------------------------


def test_doctor_reports_missing_installed_and_twice(tmp_path: Path, root: Path) -> None:
    e = env(tmp_path)
    got = checks.doctor_checks(root, "copilot", e)
    assert [(c["name"], c["status"]) for c in got] == [("stop hook copilot", "warn")]
    assert "hooks install --agent copilot" in (got[0]["fix"] or "")
    install(root, "copilot", command=CMD)
    got = checks.doctor_checks(root, "copilot", e)
    assert [(c["name"], c["status"]) for c in got] == [
        ("stop hook copilot", "ok"),
        ("stop hook copilot trust", "warn"),  # a new folder: Copilot has not been told to trust it
    ]
    # As Copilot 1.0.102 records "Yes, and remember this folder" (JSON with comment lines).
    cfg = Path(e["HOME"]) / ".copilot" / "config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(
        "// User settings belong in settings.json.\n// This file is managed automatically.\n"
        + json.dumps({"firstLaunchAt": "x", "trustedFolders": [str(root.parent)]})
    )
    got = checks.doctor_checks(root, "copilot", e)
    assert [(c["name"], c["status"]) for c in got] == [("stop hook copilot", "ok")]
    assert checks.doctor_checks(root, "copilot", {**e, "HOME": "/nonexistent"})[1]["status"] == (
        "warn"
    )
    # Copilot also runs the Claude entry in .claude/settings.json: registered twice.
    install(root, "claude", command=CMD)
    named = {c["name"]: c for c in checks.doctor_checks(root, "copilot", e)}
    assert named["stop hook copilot"]["status"] == "warn"
    assert "2 times" in named["stop hook copilot"]["message"]
    assert named["stop hook claude"]["status"] == "ok"
    # A user-level copy (a stale plugin or an old install) counts too.
    user = Path(e["HOME"]) / ".copilot" / "hooks"
    user.mkdir(parents=True)
    (user / "old.json").write_text(
        json.dumps({"hooks": {"agentStop": [{"bash": "omp hook stop"}]}})
    )
    assert "3 times" in checks.doctor_checks(root, "copilot", e)[0]["message"]


def test_doctor_names_the_codex_and_gemini_trust_gates(tmp_path: Path, root: Path) -> None:
    e = env(tmp_path)
    install(root, "all", command=CMD)
    names = {c["name"]: c for c in checks.doctor_checks(root, "codex", e)}
    assert names["stop hook codex trust"]["status"] == "warn"
    assert "not trusted" in names["stop hook codex trust"]["message"]
    assert names["stop hook gemini trust"]["status"] == "warn"
    codex = Path(e["HOME"]) / ".codex"
    codex.mkdir()
    hook = root / ".codex" / "hooks.json"
    (codex / "config.toml").write_text(
        f'[projects."{root}"]\ntrust_level = "trusted"\n\n'
        f'[hooks.state."{hook}:Stop:0:0"]\ntrusted_hash = "sha256:abc"\n'
    )
    gem = Path(e["HOME"]) / ".gemini"
    gem.mkdir()
    (gem / "trustedFolders.json").write_text(json.dumps({str(root): "TRUST_FOLDER"}))
    names = {c["name"]: c for c in checks.doctor_checks(root, "codex", e)}
    assert "stop hook codex trust" not in names and "stop hook gemini trust" not in names


def test_start_warning_names_the_likely_agent(tmp_path: Path, root: Path) -> None:
    e = env(tmp_path)
    text = checks.start_warning(root, e)
    assert text is not None and "copilot" in text and "hooks install --agent copilot" in text
    install(root, "copilot", command=CMD)
    assert checks.start_warning(root, e) is None
    under_claude = {**e, "CLAUDECODE": "1"}
    assert "--agent claude" in (checks.start_warning(root, under_claude) or "")


def test_ralph_start_warns_on_stderr_and_still_starts(tmp_path: Path, root: Path) -> None:
    e = child_env(tmp_path / "home")
    for k in ("COPILOT_CLI", "CLAUDECODE", "GEMINI_CLI", "CODEX_HOME", "CODEX_SANDBOX"):
        e.pop(k, None)
    r = run_cli("ralph", "start", "x", "--json", cwd=root, env=e)
    assert r.rc == 0 and r.json["active"] is True
    assert "warning: no omp stop hook for copilot" in r.stderr
    run_cli("hooks", "install", cwd=root, env=e)
    r = run_cli("ralph", "start", "x", "--json", cwd=root, env=e)
    assert r.rc == 0 and "stop hook" not in r.stderr
