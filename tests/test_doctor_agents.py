"""`omp doctor` on what Claude Code and pi need beyond their programs (omp.doctor.agents)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from omp.agents import BUILTIN_PROFILES
from omp.doctor.agents import agent_checks
from tests.helpers import child_env, make_project, run_omp, snapshot_tree

CLAUDE = BUILTIN_PROFILES["claude"].command


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


def claude(home: Path, *, euid: int = 1000, **env: str) -> dict[str, dict[str, Any]]:
    return by_name(agent_checks("claude", CLAUDE, environ={"HOME": str(home), **env}, euid=euid))


def onboarded(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    return home


def test_root_needs_is_sandbox_and_omp_never_sets_it(tmp_path: Path) -> None:
    home = onboarded(tmp_path / "home")
    root = claude(home, euid=0)["claude root"]
    assert root["status"] == "fail"
    assert "IS_SANDBOX=1" in root["message"] and "never sets it" in root["message"]
    assert "container or VM" in root["fix"]
    assert claude(home, euid=0, IS_SANDBOX="1")["claude root"]["status"] == "ok"
    assert "claude root" not in claude(home, euid=1000)  # not root: nothing to say
    # a command without the flag is not refused as root
    plain = agent_checks("claude", ["claude"], environ={"HOME": str(home)}, euid=0)
    assert "claude root" not in by_name(plain)
    # only a warning when Claude Code is not the agent in use
    other = agent_checks("claude", CLAUDE, environ={"HOME": str(home)}, euid=0, required=False)
    assert by_name(other)["claude root"]["status"] == "warn"


@pytest.mark.parametrize(
    ("env", "status", "said"),
    [
        ({"ANTHROPIC_AUTH_TOKEN": "k"}, "ok", "no sign-in needed"),
        ({"ANTHROPIC_API_KEY": "k"}, "warn", "asks once whether to use that key"),
        ({}, "fail", "no key"),
    ],
)
def test_a_model_server_needs_a_key_and_no_sign_in(
    tmp_path: Path, env: dict[str, str], status: str, said: str
) -> None:
    home = onboarded(tmp_path / "home")
    environ = {"HOME": str(home), "ANTHROPIC_BASE_URL": "http://127.0.0.1:8000", **env}
    got = by_name(agent_checks("claude", CLAUDE, environ=environ, euid=1000))["claude model"]
    assert (got["status"], said in got["message"]) == (status, True)


def test_first_run_setup(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    got = claude(home)["claude setup"]
    assert got["status"] == "warn" and "absent" in got["message"]
    local = claude(home, ANTHROPIC_BASE_URL="http://x")["claude setup"]
    assert "hasCompletedOnboarding" in local["fix"]
    assert claude(onboarded(home))["claude setup"]["status"] == "ok"
    config = tmp_path / "config"  # CLAUDE_CONFIG_DIR moves the file
    assert claude(home, CLAUDE_CONFIG_DIR=str(config))["claude setup"]["status"] == "warn"
    onboarded(config)
    assert claude(home, CLAUDE_CONFIG_DIR=str(config))["claude setup"]["status"] == "ok"


def test_auto_update_turned_back_on_warns(tmp_path: Path) -> None:
    home = onboarded(tmp_path / "home")
    assert "claude updates" not in claude(home)
    assert claude(home, DISABLE_AUTOUPDATER="0")["claude updates"]["status"] == "warn"


def pi(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    return by_name(agent_checks("pi", ["pi"], environ=env))


def test_pi_models_json(tmp_path: Path) -> None:
    agent = tmp_path / "home" / ".pi" / "agent"
    env = {"HOME": str(tmp_path / "home")}
    assert pi(env)["pi model"]["status"] == "warn"  # none yet: a sign-in would do
    agent.mkdir(parents=True)
    (agent / "models.json").write_text("{")
    assert pi(env)["pi model"]["status"] == "fail"
    provider = {"baseUrl": "http://127.0.0.1:8000/v1", "api": "openai-completions"}
    doc = {"providers": {"local": {**provider, "models": [{"id": "m1"}]}}}
    (agent / "models.json").write_text(json.dumps(doc))
    got = pi(env)
    assert got["pi model"]["status"] == "ok" and "local/m1" in got["pi model"]["message"]
    assert got["pi default"]["status"] == "warn"
    (agent / "settings.json").write_text(json.dumps({"defaultProvider": "local"}))
    assert "pi default" not in pi(env)
    assert "pi offline" in pi(env) and "pi offline" not in pi({**env, "PI_OFFLINE": "1"})
    moved = {"HOME": "/nonexistent", "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"}
    assert pi(moved)["pi model"]["status"] == "ok"


def test_other_agents_have_nothing_more() -> None:
    assert agent_checks("codex", ["codex"], environ={}) == []


def test_doctor_agent_claude_says_it_and_writes_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    home = onboarded(tmp_path / "home")
    before = snapshot_tree(tmp_path)
    env = child_env(home, ANTHROPIC_BASE_URL="http://127.0.0.1:9", ANTHROPIC_API_KEY="k")
    env.pop("ANTHROPIC_AUTH_TOKEN", None)
    res = run_omp("doctor", "--agent", "claude", "--json", cwd=root, env=env)
    checks = {c["name"]: c for c in res.json["checks"]}
    assert checks["claude model"]["status"] == "warn"
    assert checks["claude setup"]["status"] == "ok"
    assert snapshot_tree(tmp_path) == before
