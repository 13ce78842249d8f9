"""`omp doctor`'s look at what one agent CLI needs beyond its program: Claude Code and pi.

Read-only: environment variables and the CLI's own config files (`~/.claude.json` or
`$CLAUDE_CONFIG_DIR/.claude.json`; pi's `~/.pi/agent/models.json` and `settings.json`, or under
`$PI_CODING_AGENT_DIR`) are read, never written. Each check is a dict for `doctor.Check(**c)`.

Claude Code (2.1.328):
- as root, `--dangerously-skip-permissions` (omp's worker command) refuses to start unless
  `IS_SANDBOX=1` says the machine is a sandbox. omp never sets it: doctor says so;
- with `ANTHROPIC_BASE_URL` (a model server of your own) no sign-in is needed, but a key is:
  `ANTHROPIC_AUTH_TOKEN` is used as is, while `ANTHROPIC_API_KEY` makes Claude Code ask once
  whether to use it (a screen omp leaves to a person);
- its first-run setup must be done (`hasCompletedOnboarding`): offline it exits instead;
- `DISABLE_AUTOUPDATER`: omp sets it to 1 for workers unless you set it yourself.

pi (0.73.1): a model, from `models.json` (a server of your own) or a sign-in (`/login`), and the
default provider in `settings.json`; `PI_OFFLINE=1` skips its startup downloads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_SKIP_PERMISSIONS = "--dangerously-skip-permissions"


def _check(name: str, status: str, message: str, fix: str | None = None) -> dict[str, Any]:
    return {"name": name, "status": status, "message": message, "fix": fix}


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(the document, None), or (None, why not)."""
    from omp.store.strictjson import SETTINGS_DEPTH, nests_deeper

    try:
        text = path.read_text(encoding="utf-8")
        if nests_deeper(text, SETTINGS_DEPTH):
            return None, "nested too deeply"
        return json.loads(text), None
    except FileNotFoundError:
        return None, "absent"
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({exc})"


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or os.path.expanduser("~"))


def claude_checks(
    command: list[str], environ: Mapping[str, str], *, euid: int, required: bool
) -> list[dict[str, Any]]:
    bad = "fail" if required else "warn"
    out: list[dict[str, Any]] = []
    if euid == 0 and _SKIP_PERMISSIONS in command:
        if environ.get("IS_SANDBOX", "").strip() == "1":
            out.append(
                _check(
                    "claude root",
                    "ok",
                    f"running as root with IS_SANDBOX=1: Claude Code accepts {_SKIP_PERMISSIONS}",
                )
            )
        else:
            out.append(
                _check(
                    "claude root",
                    bad,
                    f"running as root: Claude Code refuses {_SKIP_PERMISSIONS} (how omp starts "
                    "workers) unless IS_SANDBOX=1 says this machine is a sandbox; omp never "
                    "sets it for you",
                    "run omp as a normal user; or, only in a container or VM you can throw "
                    "away, `export IS_SANDBOX=1` before launching",
                )
            )
    base = environ.get("ANTHROPIC_BASE_URL", "").strip()
    token = environ.get("ANTHROPIC_AUTH_TOKEN", "").strip()
    key = environ.get("ANTHROPIC_API_KEY", "").strip()
    if base:
        if token:
            out.append(
                _check(
                    "claude model",
                    "ok",
                    f"model server {base} with ANTHROPIC_AUTH_TOKEN: no sign-in needed",
                )
            )
        elif key:
            out.append(
                _check(
                    "claude model",
                    "warn",
                    f"model server {base} with ANTHROPIC_API_KEY: Claude Code asks once whether "
                    "to use that key, and omp leaves that question to you (launch stops at it)",
                    "pass the key as ANTHROPIC_AUTH_TOKEN instead, or run `claude` once and "
                    "answer Yes",
                )
            )
        else:
            out.append(
                _check(
                    "claude model",
                    bad,
                    f"model server {base} but no key: Claude Code needs ANTHROPIC_AUTH_TOKEN "
                    "(or ANTHROPIC_API_KEY)",
                    "export ANTHROPIC_AUTH_TOKEN=<key> (any value if your server takes none)",
                )
            )
    config_dir = environ.get("CLAUDE_CONFIG_DIR", "").strip()
    config = Path(config_dir) / ".claude.json" if config_dir else _home(environ) / ".claude.json"
    doc, why = _read_json(config)
    if isinstance(doc, dict) and doc.get("hasCompletedOnboarding") is True:
        out.append(_check("claude setup", "ok", f"first-run setup done ({config})"))
    else:
        state = why or "not marked done"
        local = (
            'with a model server of your own, set "hasCompletedOnboarding": true in it'
            if base
            else "sign in"
        )
        out.append(
            _check(
                "claude setup",
                "warn",
                f"Claude Code's first-run setup is not done ({config}: {state}); a worker "
                "would stop at it (offline it exits)",
                f"run `claude` once and finish it ({local})",
            )
        )
    if environ.get("DISABLE_AUTOUPDATER", "1").strip() in ("0", "", "false"):
        out.append(
            _check(
                "claude updates",
                "warn",
                "DISABLE_AUTOUPDATER is off: Claude Code workers may update themselves "
                "(`npm install --global`) in the middle of a team run",
                "unset DISABLE_AUTOUPDATER (omp then sets it to 1 for workers)",
            )
        )
    return out


def pi_checks(environ: Mapping[str, str], *, required: bool) -> list[dict[str, Any]]:
    agent_dir_env = environ.get("PI_CODING_AGENT_DIR", "").strip()
    agent_dir = Path(agent_dir_env) if agent_dir_env else _home(environ) / ".pi" / "agent"
    models_path = agent_dir / "models.json"
    doc, why = _read_json(models_path)
    providers = doc.get("providers") if isinstance(doc, dict) else None
    if why == "absent":
        return [
            _check(
                "pi model",
                "warn",
                f"no {models_path}: pi needs a model of its own (a provider there) or a sign-in",
                "add a provider to models.json (docs/agents.md shows a local server), or run "
                "`pi` once and /login",
            )
        ]
    if why is not None or not isinstance(providers, dict) or not providers:
        return [
            _check(
                "pi model",
                "fail" if required else "warn",
                f"{models_path}: {why or 'no providers in it'}",
                'fix it: {"providers": {"local": {"baseUrl": ..., "api": '
                '"openai-completions", "apiKey": ..., "models": [{"id": ...}]}}}',
            )
        ]
    names = [
        f"{name}/{m.get('id')}"
        for name, prov in providers.items()
        if isinstance(prov, dict)
        for m in prov.get("models") or []
        if isinstance(m, dict)
    ]
    out = [_check("pi model", "ok", f"{models_path}: {', '.join(names) or 'no models listed'}")]
    settings, _ = _read_json(agent_dir / "settings.json")
    default = settings.get("defaultProvider") if isinstance(settings, dict) else None
    if default not in providers:
        out.append(
            _check(
                "pi default",
                "warn",
                f"pi's default provider ({default or 'unset'}) is not one of models.json's: "
                "workers may start on another model",
                f'set "defaultProvider" and "defaultModel" in {agent_dir / "settings.json"}',
            )
        )
    if environ.get("PI_OFFLINE", "").strip() not in ("1", "true"):
        out.append(
            _check(
                "pi offline",
                "ok",
                "PI_OFFLINE is unset: pi checks for updates and downloads fd/ripgrep at start "
                "(set PI_OFFLINE=1 on a machine without internet; omp forwards it)",
            )
        )
    return out


def agent_checks(
    agent: str,
    command: list[str],
    *,
    environ: Mapping[str, str] | None = None,
    euid: int | None = None,
    required: bool = True,
) -> list[dict[str, Any]]:
    """What `agent` needs beyond its program; [] for agents with nothing more to check."""
    env = os.environ if environ is None else environ
    if agent == "claude":
        uid = os.geteuid() if euid is None else euid
        return claude_checks(command, env, euid=uid, required=required)
    if agent == "pi":
        return pi_checks(env, required=required)
    return []
