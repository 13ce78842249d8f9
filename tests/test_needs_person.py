"""Screens only a person can answer (`omp.agents.needs_person`), pinned on real captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.agents import BUILTIN_PROFILES, needs_person, person_lines

SCREENS = Path(__file__).parent / "fixtures" / "screens"
CLAUDE = Path(__file__).parent / "fixtures" / "agents"

# Every capture of tests/fixtures/screens that asks a person for something; the rest ask nothing.
NEEDS: dict[str, str] = {
    "codex-02-start-5s-signin": "sign-in",
    "codex-03-start-10s": "sign-in",
    "codex-04-start-20s": "sign-in",
    "codex-05-signin-other-way": "sign-in",
    "codex-06-apikey-entry": "sign-in",
    "copilot-11-login-account-menu": "a menu",
    "copilot-12-login-method-menu": "a menu",
    "copilot-13-login-network-error": "error",
    "gemini-06-auth-dialog": "sign-in",
    "gemini-07-apikey-entry": "sign-in",
    # Copilot not signed in: its prompt shows, but every message fails until a person signs in.
    "copilot-05-trust-enter-ready": "sign-in",
    "copilot-06-typed": "sign-in",
    "copilot-07-enter-0.2s": "sign-in",
    "copilot-10-slash-completion": "sign-in",
    "copilot-21-allow-all-tools-trust-1-ready": "sign-in",
    "copilot-22-allow-all-tools-typed": "sign-in",
    "copilot-23-allow-all-tools-cm-0.2s": "sign-in",
    "copilot-26-burst-text+enter-2s": "sign-in",
    "copilot-30-env-COPILOT_ALLOW_ALL-5s-no-trust-dialog": "sign-in",
}


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("path", sorted(SCREENS.glob("*.txt")), ids=lambda p: p.stem)
def test_each_real_screen_needs_a_person_or_not(path: Path) -> None:
    profile = BUILTIN_PROFILES[path.stem.split("-")[0]]
    assert needs_person(profile, lines_of(path)) == NEEDS.get(path.stem)


def test_claudes_permission_prompt_needs_a_person_and_says_what_it_asks() -> None:
    lines = lines_of(CLAUDE / "claude-permission-prompt.txt")
    claude = BUILTIN_PROFILES["claude"]
    assert needs_person(claude, lines) == "permission prompt"
    assert person_lines(claude, lines) == [
        "Do you want to proceed?",
        "❯ 1. Yes",
        "2. Yes, and always allow access to /home/me/scratch from this project",
    ]
    for calm in ("claude-idle-after-turn.txt", "claude-busy.txt"):
        assert needs_person(claude, lines_of(CLAUDE / calm)) is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("API Error: 429 rate limit exceeded, retry later", "rate limit"),
        ("● Claude usage limit reached. Your limit will reset at 3pm", "rate limit"),
        ("■ You've hit your usage limit. Upgrade to Pro or try again later.", "rate limit"),
        ("✕ [API Error: Quota exceeded for quota metric 'Generate Content']", "quota"),
        ("RESOURCE_EXHAUSTED: retry in 30s", "quota"),
        ("Too Many Requests", "rate limit"),
        ("Would you like to run the following command?", "permission prompt"),
        ("Allow execution of 'rm -rf build'?", "permission prompt"),
    ],
)
def test_rate_limits_quotas_and_approvals_of_any_agent(text: str, what: str) -> None:
    for name in ("claude", "codex", "gemini", "copilot"):
        screen = ["some output", text, "", "› "]
        assert needs_person(BUILTIN_PROFILES[name], screen) == what, name


@pytest.mark.parametrize(
    "text",
    [
        "Added a rate limit middleware to the API (tests pass).",
        "The quota module now reads its limits from config.",
        "Do you want me to go on?",  # the agent's own question, answered by typing: not a dialog
    ],
)
def test_an_agents_own_words_about_limits_are_not_a_limit(text: str) -> None:
    for name in ("claude", "codex", "gemini", "copilot"):
        assert needs_person(BUILTIN_PROFILES[name], ["● done", text, "", "› "]) is None, name


def test_text_above_a_busy_line_is_old_news() -> None:
    """A busy line below a rate-limit message: the agent moved on (it retried)."""
    screen = ["API Error: 429 rate limit exceeded", "✶ Working… (esc to interrupt)", "❯ "]
    assert needs_person(BUILTIN_PROFILES["claude"], screen) is None
    assert needs_person(BUILTIN_PROFILES["claude"], list(reversed(screen))) == "rate limit"
