"""The recorded session files of tests/fixtures/usage/ (how they were made: its README)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from omp.usage.totals import Tokens

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "usage"
FAKE_HOME = "/home/me"  # what the recording script wrote for its scratch HOME

# Where each CLI keeps its records under HOME (subagent records included).
RECORDS = {
    "copilot": ".copilot/session-state/*/events.jsonl",
    "claude": ".claude/projects/**/*.jsonl",
    "codex": ".codex/sessions/**/rollout-*.jsonl",
    "gemini": ".gemini/tmp/*/chats/**/session-*.json*",
    "pi": ".pi/agent/sessions/**/*.jsonl",
}

# What each recorded session's files say, summed: (calls, input, output, cache read, cache
# write), input without the cache. Each equals what the scripted model reported (`served`),
# but cache writes on a wire that has none (chat completions, Responses, Gemini).
EXPECTED: dict[str, Tokens] = {
    "copilot": Tokens(3, 6033, 69, 600, 0),
    "copilot-anthropic": Tokens(3, 6033, 69, 600, 120),
    "copilot-subagent": Tokens(5, 15055, 165, 1500, 0),
    "claude": Tokens(3, 6033, 69, 600, 120),
    "claude-subagent": Tokens(6, 21066, 228, 2100, 420),
    "codex": Tokens(3, 6033, 69, 600, 0),
    "gemini": Tokens(3, 6033, 69, 600, 0),
    "pi": Tokens(3, 6033, 69, 600, 0),
}
MODELS = {
    "copilot": "fixture-model",
    "claude": "claude-opus-5-5",
    "codex": "fixture-model",
    "gemini": "gemini-2.5-flash",
    "pi": "fixture-model",
}


def kind(name: str) -> str:
    return name.split("-")[0]


def home(name: str) -> Path:
    return ROOT / name / "home"


def records(name: str) -> list[Path]:
    """The fixture's session records, the main session's first."""
    found = sorted(home(name).glob(RECORDS[kind(name)]), key=lambda p: (len(p.parts), p))
    assert found, name
    return found


def served(name: str) -> Tokens:
    """The sum of the usage the scripted model reported to the CLI, on the fields its wire
    carries (only Anthropic's Messages API reports cache writes)."""
    total = Tokens()
    for s in json.loads((ROOT / name / "served.json").read_text()):
        u = s["usage"]
        write = u["cache_write"] if s["wire"] == "anthropic" else 0
        total = total.plus(Tokens(1, u["input"], u["output"], u["cache_read"], write))
    return total


def stops(name: str) -> list[dict[str, Any]]:
    path = ROOT / name / "stops.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def copy_home(name: str, dest: Path) -> Path:
    """The fixture's HOME copied to `dest` (files can be changed there)."""
    shutil.copytree(home(name), dest, symlinks=True)
    return dest
