"""`omp doctor`: each check, its verdict and fix, the exit code, and that it writes nothing."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omp import __version__, clock
from omp.doctor import checks as doctor
from omp.invocation import omp_command
from omp.store import fs
from omp.store.paths import StatePaths
from tests.helpers import child_env, make_project, make_team, poll, run_cli, snapshot_tree


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for key in list(os.environ):
        if key.startswith("OMP_"):
            monkeypatch.delenv(key)
    return make_project(tmp_path / "proj")


def _bin(tmp_path: Path, *programs: str) -> Path:
    """A PATH directory holding the real tmux (if any) and fake agent programs."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    real = shutil.which("tmux")
    if real and not (d / "tmux").exists():
        (d / "tmux").symlink_to(real)
    for prog in programs:
        p = d / prog
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    return d


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"]}


# ---- tmux -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("found", "status"),
    [("3.3a", "ok"), ("3.2", "ok"), ("next-3.5", "ok"), ("3.1c", "fail"), ("2.9", "fail")],
)
def test_tmux_version(found: str, status: str) -> None:
    assert doctor.check_tmux(lambda: found).status == status


def test_tmux_missing_fails_with_the_install_command() -> None:
    c = doctor.check_tmux(lambda: None)
    assert (c.status, c.message) == (
        "fail",
        "tmux not found on PATH (every team runs in tmux panes)",
    )
    assert c.fix is not None and "apt-get install tmux" in c.fix


def test_tmux_unparseable_version_warns() -> None:
    assert doctor.check_tmux(lambda: "master").status == "warn"


# ---- agents ---------------------------------------------------------------------------------


def test_missing_default_agent_fails_others_warn(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path, "codex")))
    checks = {c.name: c for c in doctor.check_agents(proj, "copilot")}
    assert checks["agent copilot"].status == "fail"
    assert checks["agent copilot"].message == (
        "default agent copilot: program 'copilot' not on PATH"
    )
    assert "npm install -g @github/copilot" in (checks["agent copilot"].fix or "")
    assert checks["agent claude"].status == "warn"
    assert checks["agent codex"].status == "ok"
    assert checks["agent demo"].status == "ok"  # the demo agent is omp's own Python
    assert next(iter(checks)) == "agent copilot"  # the one that matters comes first


def test_a_model_provider_means_no_sign_in(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path)))
    monkeypatch.delenv("COPILOT_PROVIDER_BASE_URL", raising=False)
    signed = {c.name: c for c in doctor.check_agents(proj, "copilot")}["agent copilot"]
    assert "once to sign in" in (signed.fix or "")
    monkeypatch.setenv("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:11434/v1")
    local = {c.name: c for c in doctor.check_agents(proj, "copilot")}["agent copilot"]
    assert local.status == "fail"  # still not installed
    assert local.fix is not None and "sign in" not in local.fix
    assert "no sign-in needed: COPILOT_PROVIDER_BASE_URL is set" in local.fix
    (tmp_path / "b2").mkdir()
    monkeypatch.setenv("PATH", str(_bin(tmp_path / "b2", "copilot")))
    ok = {c.name: c for c in doctor.check_agents(proj, "copilot")}["agent copilot"]
    assert ok.status == "ok"
    assert ok.message.endswith("; model provider http://127.0.0.1:11434/v1 (no sign-in needed)")


def test_other_agent_as_default(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path)))
    checks = {c.name: c for c in doctor.check_agents(proj, "demo")}
    assert checks["agent demo"].status == "ok"
    assert checks["agent copilot"].status == "warn"
    unknown = {c.name: c for c in doctor.check_agents(proj, "nope")}
    assert unknown["agent nope"].status == "fail"
    assert "profiles: claude, codex, copilot, demo, gemini" in unknown["agent nope"].message


def test_project_profile_is_checked(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path)))
    (proj / ".omp").mkdir()
    (proj / ".omp" / "agents.toml").write_text('[agents.mycli]\ncommand = ["mycli", "--tui"]\n')
    c = {c.name: c for c in doctor.check_agents(proj, "copilot")}["agent mycli"]
    assert c.status == "warn"
    assert c.fix == "install mycli, or fix agents.mycli.command in .omp/agents.toml"
    (proj / ".omp" / "agents.toml").write_text("[agents.BAD]\n")
    [broken] = doctor.check_agents(proj, "copilot")
    assert (broken.name, broken.status) == ("agents", "fail")


# ---- the state tree -------------------------------------------------------------------------


def test_state_ok_then_open_mode_then_symlink(proj: Path, tmp_path: Path) -> None:
    paths = StatePaths(proj)
    assert doctor.check_state(paths).message.startswith("no state yet")
    make_team(proj, "t1", 2)
    (proj / ".omp").chmod(0o755)  # .omp itself is a person's directory: not checked for mode
    assert doctor.check_state(paths).status == "ok"
    config = proj / ".omp/state/team/t1/config.json"
    config.chmod(0o644)
    c = doctor.check_state(paths)
    assert (c.status, c.message) == (
        "fail",
        ".omp/state: .omp/state/team/t1/config.json is 0644, open to other users "
        "(omp keeps 0600); omp refuses to use it",
    )
    assert c.fix == "find out who changed it, then: chmod -R go-rwx .omp/state"
    config.chmod(0o600)
    (tmp_path / "outside").mkdir()
    (proj / ".omp/state/team/t1/planted").symlink_to(tmp_path / "outside")
    c = doctor.check_state(paths)
    assert c.status == "fail"
    assert c.message == (
        ".omp/state: .omp/state/team/t1/planted is a symlink; omp refuses to use it"
    )


# ---- the monitor lock -----------------------------------------------------------------------


def _lock(proj: Path, **fields: Any) -> None:
    paths = StatePaths(proj)
    paths.ensure(paths.monitor)
    obj = {"schemaVersion": 1, "token": "t" * 32, "parentPid": 1} | fields
    fs.write_json_atomic(paths.monitor / "owner.lock", obj)


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process whose command line carries the lock's token, as a real monitor's does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "t" * 32])
    # Popen returns once exec began; /proc/<pid>/cmdline is empty until the kernel has set up
    # the new program's arguments (seen on a loaded machine): wait for the token to show.
    poll(lambda: b"t" * 32 in Path(f"/proc/{proc.pid}/cmdline").read_bytes())
    yield proc
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_monitor_lock_states(proj: Path, holder: subprocess.Popen[bytes]) -> None:
    paths = StatePaths(proj)
    now = clock.now()
    assert doctor.check_monitor(paths).status == "ok"  # no lock at all
    _lock(proj, phase="pending", createdAt=clock.iso(now - 2))
    assert doctor.check_monitor(paths, now).status == "ok"
    _lock(proj, phase="pending", createdAt=clock.iso(now - 300))
    c = doctor.check_monitor(paths, now)
    assert (c.status, c.message) == (
        "warn",
        "stale monitor lock: taken 5 min ago by a monitor that never started",
    )
    run = {"phase": "running", "createdAt": clock.iso(now - 60)}
    _lock(proj, **run, pid=holder.pid, updatedAt=clock.iso(now - 1))
    c = doctor.check_monitor(paths, now)
    assert (c.status, c.message) == ("ok", f"monitor running: pid {holder.pid}, heartbeat 1 s ago")
    _lock(proj, **run, pid=holder.pid, updatedAt=clock.iso(now - 90))
    assert doctor.check_monitor(paths, now).message == (
        f"stale monitor lock: pid {holder.pid} last beat 90 s ago"
    )
    dead = _dead_pid()
    _lock(proj, **run, pid=dead, updatedAt=clock.iso(now - 1))
    c = doctor.check_monitor(paths, now)
    assert (c.status, c.message) == ("warn", f"stale monitor lock: pid {dead} is gone")
    assert c.fix is not None and "team-monitor/owner.lock" in c.fix
    fs.write_atomic(proj / ".omp/state/team-monitor/owner.lock", b"{not json")
    assert doctor.check_monitor(paths, now).status == "warn"


# ---- teams ----------------------------------------------------------------------------------


def test_headless_and_shut_down_teams(proj: Path) -> None:
    make_team(proj, "headless", 2)
    make_team(proj, "old", 1)
    fs.write_atomic(proj / ".omp/state/team/old/shutdown.json", b"{}")
    [c] = doctor.check_teams(StatePaths(proj))
    assert (c.name, c.status) == ("team headless", "ok")


@pytest.mark.tmux
@pytest.mark.slow
def test_team_with_a_gone_pane_warns(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    from omp.record import config as team_config
    from omp.team.launch import LaunchRequest, launch
    from omp.team.shutdown import shutdown
    from omp.tmux import Tmux

    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("OMP_DEMO_WORK_SECONDS", "0.2")
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.delenv("TMUX_PANE", raising=False)
    monkeypatch.chdir(proj)
    sock = f"omp-test-{secrets.token_hex(4)}"
    tmux = Tmux(socket_name=sock)
    try:
        launch(LaunchRequest(workers=2, task="t", agent="demo", name="t1", socket=sock, cwd=proj))
        paths = StatePaths(proj)
        [c] = doctor.check_teams(paths)
        assert (c.status, c.message) == ("ok", "team t1: 2 worker panes alive")
        pane = team_config.load(paths.team("t1")).pane_of("worker-2")
        assert pane is not None
        tmux.cmd("kill-pane", "-t", pane)
        c = poll(
            lambda: (c := doctor.check_teams(paths)[0]).status != "ok" and c, 10, "the gone pane"
        )
        assert c.status == "warn"
        assert c.message == "team t1: worker-2 gone (1 of 2 worker panes)"
        shutdown_cmd = f"{omp_command()} team shutdown t1"
        assert c.fix == f"{shutdown_cmd} (mail and results are kept), then launch again"
        shutdown(team_config.load(paths.team("t1")))
        assert doctor.check_teams(paths) == []
    finally:
        tmux.kill_server()


# ---- the command ----------------------------------------------------------------------------


def test_cli_exit_code_follows_the_default_agent(proj: Path, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    env = child_env(tmp_path / "home", PATH=str(_bin(tmp_path)))
    out = run_cli("doctor", "--json", cwd=proj, env=env)
    assert out.rc == 1, out
    assert out.json["ok"] is False and out.json["error"] == "doctor_failed"
    assert _by_name(out.json)["agent copilot"]["status"] == "fail"
    # 4 missing agent programs, and no omp stop hook for copilot
    assert out.json["message"] == "1 failed, 5 warning(s): not ready for --agent copilot"
    assert _by_name(out.json)["stop hook copilot"]["status"] == "warn"
    demo = run_cli("doctor", "--agent", "demo", cwd=proj, env=env)
    assert demo.rc == 0, demo
    assert demo.stdout.splitlines()[-1] == "0 failed, 5 warning(s): ready for --agent demo"
    _bin(tmp_path, "copilot")
    assert run_cli("doctor", cwd=proj, env=env).rc == 0


def test_cli_human_output_gives_a_fix_per_miss(proj: Path, tmp_path: Path) -> None:
    env = child_env(tmp_path / "home", PATH=str(tmp_path / "empty"))
    out = run_cli("doctor", cwd=proj, env=env)
    assert out.rc == 1
    lines = out.stdout.splitlines()
    assert lines[0] == f"ok    project root {proj}"
    assert "fail  tmux not found on PATH (every team runs in tmux panes)" in lines
    for i, line in enumerate(lines[:-1]):
        if line.startswith(("fail", "warn")):
            assert lines[i + 1].startswith("      fix: "), line


def test_doctor_writes_nothing(proj: Path, tmp_path: Path) -> None:
    make_team(proj, "t1", 2)
    _lock(proj, phase="pending", createdAt=clock.iso(clock.now() - 300))
    before = snapshot_tree(proj)
    out = run_cli("doctor", "--json", cwd=proj, env=child_env(tmp_path / "home"))
    assert out.json is not None and out.json["checks"]
    assert snapshot_tree(proj) == before


# ---- the worker pane reaches this omp ------------------------------------------------------


def test_pane_check_runs_this_omp_in_a_login_shell(proj: Path, tmp_path: Path) -> None:
    """A login shell whose profile drops PATH still runs the omp every text names."""
    if shutil.which("tmux") is None or shutil.which("bash") is None:
        pytest.skip("tmux and bash are needed")
    from omp.agents import BUILTIN_PROFILES
    from omp.doctor import pane as doctor_pane

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".bash_profile").write_text("export PATH=/usr/bin:/bin\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("SHELL", shutil.which("bash") or "/bin/bash")
        seen = doctor_pane.probe(proj, BUILTIN_PROFILES["demo"])
        assert seen["version"] == f"omp {__version__}"
        c = doctor_pane.check(proj, BUILTIN_PROFILES["demo"])
        assert c.status == "ok" and omp_command() in c.message, c
        # An omp that a pane cannot run (moved, its venv removed) fails, with the way out.
        mp.setattr("omp.invocation.omp_command", lambda *a: "/nonexistent/bin/omp")
        bad = doctor_pane.check(proj, BUILTIN_PROFILES["demo"])
        assert bad.status == "fail" and "/nonexistent/bin/omp" in bad.message, bad
        assert bad.fix is not None and "reinstall" in bad.fix
