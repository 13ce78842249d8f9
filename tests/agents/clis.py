"""Real agent CLI workers (GitHub Copilot CLI, Codex CLI) on a private tmux server, driven by
the scripted model.

`find_cli(agent)` locates a pinned CLI: `$OMP_TEST_COPILOT` / `$OMP_TEST_CODEX` (set by .ci/run),
else the clone's cache (`.cache/agent-clis/<program>`, where scripts/install-agent-clis.sh puts
it), else the program on PATH; any of them only at the pinned version. `AgentTeam` runs the real
`omp team launch` with the agent's built-in profile, the way a user does: the launching process
finds the agent program on its PATH, omp runs from the venv's `bin/omp` without the venv being
activated, and the agent talks to the scripted model offline: Copilot through `COPILOT_OFFLINE`,
`COPILOT_PROVIDER_BASE_URL`, `COPILOT_MODEL`, `COPILOT_ALLOW_ALL`; Codex through a custom model
provider (`wire_api = "responses"`) in `$HOME/.codex/config.toml`, the project marked trusted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from tests import helpers
from tests.agents.scripted_model import MODEL_NAME, ScriptedModel, message_text
from tests.helpers import REPO, child_env

CACHE = REPO / ".cache" / "agent-clis"
SCREENS = REPO / "tests" / "fixtures" / "screens"
T = TypeVar("T")


class Cli(NamedTuple):
    """A pinned agent CLI: its npm package, the version, and where to find its binary."""

    package: str
    version: str
    env_var: str
    program: str

    @property
    def cache_bin(self) -> Path:
        return CACHE / self.program / "node_modules" / ".bin" / self.program


# Keep in step with scripts/install-agent-clis.sh.
CLIS = {
    "copilot": Cli("@github/copilot", "1.0.102", "OMP_TEST_COPILOT", "copilot"),
    "codex": Cli("@openai/codex", "0.171.0", "OMP_TEST_CODEX", "codex"),
    "gemini": Cli("@google/gemini-cli", "0.61.0", "OMP_TEST_GEMINI", "gemini"),
    "claude": Cli("@anthropic-ai/claude-code", "2.1.328", "OMP_TEST_CLAUDE", "claude"),
    "pi": Cli("@mariozechner/pi-coding-agent", "0.73.1", "OMP_TEST_PI", "pi"),
}
# Claude Code's updater ran `npm install --global` during a test: never let it run here.
NO_UPDATES = {"DISABLE_AUTOUPDATER": "1", "COPILOT_AUTO_UPDATE": "false"}
# A team's `monitor=`: scan twice a second, re-nudge unread mail after 3 s.
FAST_MONITOR = {"OMP_MONITOR_SCAN_SECONDS": "0.5", "OMP_MONITOR_UNREAD_REPEAT_SECONDS": "3"}
COPILOT_VERSION = CLIS["copilot"].version
ENV_VAR = CLIS["copilot"].env_var
CACHE_BIN = CLIS["copilot"].cache_bin


def find_cli(agent: str, cache_bin: Path | None = None) -> tuple[Path | None, str]:
    """The pinned CLI: `$<env_var>` (.ci/run), the clone's cache, PATH; or None and why not
    (the tests' skip reason)."""
    cli = CLIS[agent]
    cache_bin = cli.cache_bin if cache_bin is None else cache_bin
    tried = []
    for cand in (os.environ.get(cli.env_var), str(cache_bin), shutil.which(cli.program)):
        if not cand:
            continue
        path = Path(cand)
        if not (path.is_file() and os.access(path, os.X_OK)):
            tried.append(f"{cand}: not an executable")
            continue
        try:
            proc = subprocess.run(
                [str(path), "--version"],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, **NO_UPDATES},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            tried.append(f"{cand}: {exc}")
            continue
        said = proc.stdout + proc.stderr  # pi prints its version on stderr
        if cli.version in said:
            return path, ""
        tried.append(f"{cand}: version {said.strip()[-60:]!r}, not {cli.version}")
    why = "; ".join(tried) or f"${cli.env_var} unset, {cache_bin} absent, none on PATH"
    name = "Copilot CLI" if agent == "copilot" else f"{agent} CLI"
    return None, (
        f'{name} {cli.version} not found: run `eval "$(bash scripts/install-agent-clis.sh)"` '
        f"to install the pinned agent CLIs (npm {cli.package}@{cli.version}) and run these tests "
        f"({why})"
    )


def find_copilot() -> tuple[Path | None, str]:
    return find_cli("copilot", CACHE_BIN)


def omp_argv() -> list[str]:
    """omp as a user with an unactivated venv runs it: the venv's `bin/omp` by path."""
    script = Path(sys.executable).parent / "omp"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "omp"]


POLL_TIMEOUT = 90.0  # seconds: the agents' default, a real CLI is slow to start under load


def poll(
    probe: Callable[[], T | Literal[False] | None], what: str, timeout: float = POLL_TIMEOUT
) -> T:
    """`tests.helpers.poll` with the agents' longer default and `what` first."""
    return helpers.poll(probe, timeout, what)


def conversation(model: ScriptedModel, part: str = "") -> list[dict[str, Any]]:
    """The messages of the latest request whose conversation mentions `part` (a worker's inbox
    path tells the workers apart: one server serves them all). A conversation only grows."""
    for ex in reversed(list(model.requests)):
        msgs = ex.chat.messages
        if any(part in message_text(m) for m in msgs if m.get("role") == "user"):
            return msgs
    return []


def user_texts(model: ScriptedModel, part: str = "") -> list[str]:
    """What was typed into one conversation, in order, without Copilot's datetime header (the
    CLI's own `<system_notification>` user messages left out)."""
    out = []
    for msg in conversation(model, part):
        text = message_text(msg)
        if msg.get("role") == "user" and not text.startswith("<system_notification>"):
            if "</current_datetime>" in text:
                text = text.split("</current_datetime>", 1)[1]
            out.append(text.strip())
    return out


def tool_commands(model: ScriptedModel) -> list[tuple[float, str]]:
    """(request time, shell command) of every tool call the model handed out."""
    calls = model.tool_calls()
    return [(t, str(c.arguments.get("command", c.arguments.get("cmd", "")))) for t, c in calls]


class AgentTeam:
    """A temp project, HOME and private tmux server for one team of real agent CLI workers."""

    def __init__(
        self,
        base: Path,
        binary: Path,
        model: ScriptedModel,
        *,
        agent: str = "copilot",
        monitor: dict[str, str] | None = None,
    ) -> None:
        self.agent = agent
        self.root = base / "proj"
        (self.root / ".git").mkdir(parents=True)
        self.home = base / "home"
        self.home.mkdir()
        self.model = model
        self.socket = f"omp-test-{secrets.token_hex(4)}"
        self.name = "t1"
        # The launching process's PATH: the CLI's directory first (launch looks the agent up
        # there), then the system's. Not the venv's bin: omp must not need an activated venv.
        venv_bin = str(Path(sys.executable).parent)
        system = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != venv_bin]
        path = [str(binary.parent), *system]
        extra = {
            "PATH": os.pathsep.join(path),
            "SHELL": "/bin/sh",
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": model.base_url,
            "COPILOT_MODEL": MODEL_NAME,
            "COPILOT_ALLOW_ALL": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "OMP_TMUX_SOCKET": self.socket,
        }
        self.env = child_env(self.home, **extra)
        for key in ("TMUX", "TMUX_PANE", "CI", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN"):
            self.env.pop(key, None)
        for key in list(self.env):  # nothing of the user's own Claude Code or pi setup
            if key.startswith(("ANTHROPIC_", "CLAUDE_", "PI_")) or key == "IS_SANDBOX":
                del self.env[key]
        self.env.update(NO_UPDATES)
        if agent == "codex":
            self._codex_config()
        if agent == "gemini":
            self._gemini_config()
        if agent == "claude":
            self._claude_config()
        if agent == "pi":
            self._pi_config()
        if monitor is None:
            self.env["OMP_NO_MONITOR"] = "1"
        else:
            self.env.update(monitor)
        self.launched_at = 0.0
        self.launch_result: dict[str, Any] = {}

    def _codex_config(self) -> None:
        """Codex reads its provider from config.toml (the Responses API only), and trusts the
        project there (else a trust dialog per worker, which launch would answer)."""
        (self.home / ".codex").mkdir()
        (self.home / ".codex" / "config.toml").write_text(
            f'model = "{MODEL_NAME}"\n'
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{self.model.base_url}"\n'
            'wire_api = "responses"\n'
            f'[projects."{self.root}"]\n'
            'trust_level = "trusted"\n'
        )

    def _gemini_config(self) -> None:
        """Gemini takes the server from `GOOGLE_GEMINI_BASE_URL` (forwarded by its profile) and
        any API key; settings.json picks API-key auth so no sign-in dialog shows."""
        (self.home / ".gemini").mkdir()
        auth = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(auth))
        self.env.update(
            GOOGLE_GEMINI_BASE_URL=self.model.base_url.removesuffix("/v1"),
            GEMINI_API_KEY="scripted",
            GEMINI_MODEL="gemini-2.5-flash",
        )

    def _claude_config(self) -> None:
        """Claude Code on the scripted model (`ANTHROPIC_BASE_URL` without `/v1`; a token, so
        no API-key question), its config in `CLAUDE_CONFIG_DIR`: onboarding marked done (offline
        it exits otherwise), nothing else. The trust screen (every new directory) and the
        bypass-permissions warning are left for launch to answer."""
        config = self.home / ".claude-config"
        config.mkdir()
        (config / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
        self.env.update(
            CLAUDE_CONFIG_DIR=str(config),
            ANTHROPIC_BASE_URL=self.model.base_url.removesuffix("/v1"),
            ANTHROPIC_AUTH_TOKEN="scripted",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        )
        if os.geteuid() == 0:  # --dangerously-skip-permissions refuses root without it
            self.env["IS_SANDBOX"] = "1"

    def _pi_config(self) -> None:
        """pi on the scripted model: a provider in models.json (chat completions), made the
        default in settings.json; `PI_OFFLINE` skips its startup downloads."""
        agent_dir = self.home / ".pi" / "agent"
        agent_dir.mkdir(parents=True)
        provider = {
            "baseUrl": self.model.base_url,
            "api": "openai-completions",
            "apiKey": "scripted",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": MODEL_NAME}],
        }
        (agent_dir / "models.json").write_text(json.dumps({"providers": {"local": provider}}))
        settings = {"defaultProvider": "local", "defaultModel": MODEL_NAME}
        (agent_dir / "settings.json").write_text(json.dumps(settings))
        self.env.update(PI_OFFLINE="1", PI_CODING_AGENT_DIR=str(agent_dir))

    # ---- omp -----------------------------------------------------------------------------

    def omp(self, *args: str, check: bool = True, timeout: float = 120) -> Any:
        proc = subprocess.run(
            [*omp_argv(), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"omp {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
        try:
            return json.loads(proc.stdout)
        except ValueError:
            return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}

    def launch(self, workers: int, task: str = "write a haiku", *extra: str) -> dict[str, Any]:
        """`omp team launch`, `extra` options added (`--verify CMD`)."""
        self.launched_at = time.time()
        self.launch_result = self.omp(
            "team",
            "launch",
            str(workers),
            task,
            "--agent",
            self.agent,
            "--name",
            self.name,
            *extra,
            "--json",
        )
        return self.launch_result

    def status(self) -> dict[str, Any]:
        st: dict[str, Any] = self.omp("team", "status", self.name, "--json")["teams"][0]
        return st

    def api(self, sub: str, payload: dict[str, Any]) -> Any:
        doc = {"team_name": self.name, **payload}
        return self.omp("team", "api", sub, "--input", json.dumps(doc), "--json")

    def mailbox(self, who: str) -> list[dict[str, Any]]:
        path = self.root / ".omp" / "state" / "team" / self.name / "mailbox" / f"{who}.jsonl"
        if not path.exists():
            return []
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]

    def pane(self, worker: str) -> str:
        return str(next(w["paneId"] for w in self.launch_result["workers"] if w["name"] == worker))

    def capture(self, worker: str) -> list[str]:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "capture-pane", "-p", "-t", self.pane(worker)],
            capture_output=True,
            text=True,
            env=self.env,
        ).stdout
        return out.splitlines()

    def close(self) -> list[str]:
        """Shut the team down, end its tmux server; returns the team's processes still left
        (each ended here, so a failing test does not leak them): none, after a shutdown."""
        if self.launch_result:
            self.omp("team", "shutdown", self.name, "--json", check=False, timeout=60)
        left = self.leftovers()
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env
        )
        self._wait_monitor_gone()
        return left

    def leftovers(self) -> list[str]:
        """Live worker processes of any team of this project (`OMP_ROOT`; a leader agent may
        have launched teams of its own), each ended now and named `pid argv`."""
        import psutil

        from omp import procs

        found = procs.collect([], procs.EnvMatch(None, str(self.root)))
        names = []
        for p in found:
            try:
                argv = " ".join(p.handle.cmdline())
            except psutil.Error:
                continue
            names.append(f"{p.pid} {argv.strip()[:200]}")
        procs.terminate(found, grace=1.0)
        return names

    def assert_none_left(self) -> None:
        """After `close`: no process of this team runs any more (agents, their helpers, the
        tmux server, the monitor)."""
        from tests.agents.leftovers import assert_none_left

        assert_none_left(self.root, self.root.parent)

    def _wait_monitor_gone(self, timeout: float = 30.0) -> None:
        """A monitor this team started stops by itself once no live team is left."""
        lock = self.root / ".omp" / "state" / "team-monitor" / "owner.lock"
        deadline = time.monotonic() + timeout
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    def debug(self) -> str:
        """What a failing test prints: the traffic and every worker's screen."""
        screens = []
        for w in self.launch_result.get("workers", []):
            screens.append(f"--- {w['name']} ---\n" + "\n".join(self.capture(w["name"])))
        return self.model.dump() + "\n" + "\n".join(screens)
