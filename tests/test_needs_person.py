"""What a screen that needs a person shows (`omp.agents.person_lines`), on real captures.

Which screens need a person is `omp.agents.screen_state`, pinned on every capture by
tests/test_agents.py; here: the 3 lines "needs you" shows of them (status, wait, the leader's
message, a notification), and the cases the monitor leans on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.agents import BUILTIN_PROFILES, person_lines, screen_state

SCREENS = Path(__file__).parent / "fixtures" / "screens"
RULES = set("─━═╌╍┄┈-—_╭╮╰╯┌┐└┘ │┃║")


def lines_of(stem: str) -> list[str]:
    return (SCREENS / f"{stem}.txt").read_text(encoding="utf-8").splitlines()


def profile_of(stem: str) -> str:
    return stem.split("-", 1)[0]


def test_claudes_permission_prompt_shows_the_question_and_its_first_answers() -> None:
    claude = BUILTIN_PROFILES["claude"]
    lines = lines_of("claude-16-permission-prompt")
    assert screen_state(claude, lines) == ("needs_person", "permission prompt")
    assert person_lines(claude, lines) == [
        "Do you want to proceed?",
        "❯ 1. Yes",
        "2. Yes, and always allow access to /home/me/scratch from this project",
    ]


@pytest.mark.parametrize(
    ("stem", "first"),
    [
        ("claude-21-error-429-rate-limit", "● API Error: Request rejected (429)"),
        ("claude-25-error-credit-balance", "⎿ \xa0Credit balance too low"),
        ("codex-40-error-429-retry-limit", "■ exceeded retry limit, last status: 429"),
        ("copilot-50-error-429", "✗ 429 Rate limit reached"),
        ("gemini-40-error-401", '✕ [API Error: {"type":"error"'),
        ("pi-09-error-429-retry-failed", "Error: Retry failed after 3 attempts: 429"),
        ("gemini-06-auth-dialog", "How would you like to authenticate"),
        ("codex-05-signin-other-way", "Sign in another way"),
    ],
)
def test_a_notice_or_dialog_is_shown_from_its_own_line(stem: str, first: str) -> None:
    """The line that says what is wrong comes first, not whatever sits at the bottom."""
    profile = BUILTIN_PROFILES[profile_of(stem)]
    lines = lines_of(stem)
    assert screen_state(profile, lines)[0] == "needs_person"
    shown = person_lines(profile, lines)
    assert len(shown) == 3 and shown[0].startswith(first), shown


@pytest.mark.parametrize("path", sorted(SCREENS.glob("*.txt")), ids=lambda p: p.stem)
def test_what_is_shown_is_never_blank_or_a_box_border(path: Path) -> None:
    profile = BUILTIN_PROFILES[profile_of(path.stem)]
    lines = lines_of(path.stem)
    shown = person_lines(profile, lines)
    assert len(shown) <= 3
    assert all(ln and ln == ln.strip() and not set(ln) <= RULES for ln in shown), shown
    if screen_state(profile, lines)[0] == "needs_person":
        assert len(shown) == 3, shown


@pytest.mark.parametrize(
    "text",
    [
        "Added a rate limit middleware to the API (tests pass).",
        "The quota module now reads its limits from config.",
        "Do you want me to go on?",  # the agent's own question, answered by typing: not a dialog
        "Error: 429 handling is covered by test_retry.py",
    ],
)
def test_an_agents_own_words_about_limits_are_not_a_notice(text: str) -> None:
    for name in ("claude", "codex", "gemini", "copilot", "pi"):
        screen = ["● done", text, "", "› "]
        assert screen_state(BUILTIN_PROFILES[name], screen)[0] != "needs_person", name


def test_a_notice_above_a_busy_line_is_old_news() -> None:
    """The agent went on working after the error (it retried): nothing needs a person."""
    claude = BUILTIN_PROFILES["claude"]
    error = "● API Error: Request rejected (429) · Rate limit reached for requests"
    busy = "✶ Recombobulating… (3s · esc to interrupt)"
    assert screen_state(claude, [error, busy, "❯ "]) == ("busy", None)
    assert screen_state(claude, [error, "❯ "]) == ("needs_person", "rate limit")


def test_an_idle_or_busy_screen_needs_no_one() -> None:
    claude = BUILTIN_PROFILES["claude"]
    for stem in ("claude-14-idle-after-turn", "claude-10-busy-spinner"):
        assert screen_state(claude, lines_of(stem))[0] in ("ready", "busy")
