"""Every `.omp/config.toml` setting the docs show is one omp accepts, all at once in one file.

Each feature reads its own table, and `[team]` is shared by several (needs-you's `stuck_after`,
the budgets, the worktrees' `workspace`/`verify`/`verify_timeout`): a key one reader did not know
was "unknown team setting", so `[team] verify = "pytest -q"` as docs/worktrees.md shows it
failed every launch with `invalid_config`. Here the docs' TOML blocks are merged into one file
and every reader of the file reads it.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from omp import notify
from omp.mail import limits
from omp.monitor import sweep
from omp.record import settings
from omp.record import workspace as ws
from omp.store import select
from omp.store.paths import StatePaths
from omp.tmux import ssh
from omp.usage import prices
from tests.helpers import REPO

TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```\n", re.M | re.S)
# other files than config.toml: `.omp/agents.toml` (omp.agents), a backlog's tasks file
AGENT_FILES = ("agents", "task")


def _merge(into: dict[str, Any], doc: dict[str, Any]) -> None:
    for k, v in doc.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def _value(v: Any) -> str:
    return json.dumps(v)  # strings, numbers and lists of strings: JSON is TOML here


def _toml(doc: dict[str, Any]) -> str:
    lines: list[str] = []
    for table, body in doc.items():
        flat = {k: v for k, v in body.items() if not isinstance(v, dict)}
        lines.append(f"[{table}]")
        lines += [f"{k} = {_value(v)}" for k, v in flat.items()]
        for sub, sub_body in body.items():
            if isinstance(sub_body, dict):
                lines.append(f"[{table}.{json.dumps(sub)}]")
                lines += [f"{k} = {_value(v)}" for k, v in sub_body.items()]
    return "\n".join(lines) + "\n"


def documented_config() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in TOML_BLOCK.findall(page.read_text(encoding="utf-8")):
            doc = tomllib.loads(block)
            if any(k in AGENT_FILES for k in doc):
                continue
            _merge(merged, doc)
    return merged


def test_the_docs_show_settings_of_several_features_in_team() -> None:
    team = documented_config()["team"]
    assert {"stuck_after", "budget_tokens", "workspace", "verify"} <= set(team)


def test_every_documented_setting_is_accepted_by_every_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "proj"
    (root / ".omp").mkdir(parents=True)
    doc = documented_config()
    (root / ".omp" / "config.toml").write_text(_toml(doc), encoding="utf-8")
    project = StatePaths(root)
    team = settings.team_settings(project)
    assert team.stuck_after == doc["team"]["stuck_after"]
    assert team.budget_tokens == doc["team"]["budget_tokens"]
    got = ws.load_settings(project)
    assert got.verify == doc["team"]["verify"] and got.workspace == doc["team"]["workspace"]
    assert list(got.copy) == doc["worktree"]["copy"]
    assert notify.settings(project).command == doc["notify"]["command"]
    assert set(prices.load_prices(project)) == set(doc["prices"])
    from omp.backlog import settings as backlog

    assert backlog.merge_mode(None, project) == doc["team"]["merge"]
    got_limit = backlog.limits(project).max_tasks_per_worker
    assert got_limit == doc["backlog"]["max_tasks_per_worker"]
    assert select.settings(project).url == doc["store"]["url"]
    assert set(ssh.load_hosts(project)) == set(doc["hosts"])
    limits.load(project)  # the tables the docs do not show read their defaults
    sweep.load_settings(project)
