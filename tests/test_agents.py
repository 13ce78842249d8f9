"""Agent profiles: the real screens in tests/fixtures/screens classified, and the profile file."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from omp.agents import (
    BUILTIN_PROFILES,
    AgentProfile,
    Dialog,
    agent_argv,
    blocked_reason,
    classify_screen,
    find_dialog,
    forwarded_env,
    input_region,
    load_profiles,
    match_dialog,
    missing_program,
    person_fix,
    screen_state,
    squash,
)
from omp.errors import OmpError

SCREENS = Path(__file__).parent / "fixtures" / "screens"

# What each capture shows, from tests/fixtures/screens/README.md: (state, dialog name).
# "Looks idle" captures (Codex right after a submit) are ready: that is what the screen says.
EXPECTED: dict[str, tuple[str, str | None]] = {
    "claude-01-onboarding-offline-exit": ("dialog", "onboarding"),
    "claude-02-trust-dialog": ("dialog", "trust-select"),
    "claude-03-trust-down-yes-selected": ("dialog", "trust"),
    "claude-04-api-key-question": ("dialog", "api-key-question"),
    "claude-05-bypass-warning": ("dialog", "bypass-permissions-select"),
    "claude-06-bypass-down-yes-selected": ("dialog", "bypass-permissions"),
    "claude-07-ready": ("ready", None),
    "claude-08-typed": ("ready", None),
    "claude-09-enter-0.3s-busy": ("busy", None),
    "claude-10-busy-spinner": ("busy", None),
    "claude-11-busy-tool-ran": ("busy", None),
    "claude-12-busy-running-command": ("busy", None),
    "claude-13-busy-model-thinking": ("busy", None),
    "claude-14-idle-after-turn": ("ready", None),
    "claude-15-idle-after-tool-focus-hint": ("ready", None),
    "claude-16-permission-prompt": ("dialog", "permission-prompt"),
    "claude-17-stop-hook-block-idle": ("ready", None),
    "claude-18-auto-mode-idle": ("ready", None),
    "claude-19-auto-mode-billing-dialog": ("dialog", "auto-mode-notice"),
    "claude-20-auto-mode-classifier-idle": ("ready", None),
    "claude-21-error-429-rate-limit": ("ready", None),
    "claude-22-error-500": ("ready", None),
    "claude-23-error-529-overloaded": ("ready", None),
    "claude-24-error-401-not-logged-in": ("ready", None),
    "claude-25-error-credit-balance": ("ready", None),
    "claude-26-error-429-then-answered": ("ready", None),
    "claude-27-onboarding-theme-picker": ("dialog", "onboarding"),
    "claude-28-onboarding-security-notes": ("dialog", "onboarding"),
    "claude-29-auto-mode-check-unreachable": ("dialog", "auto-mode-check"),
    "codex-01-start-2s-blank": ("starting", None),
    "codex-02-start-5s-signin": ("dialog", "sign-in"),
    "codex-03-start-10s": ("dialog", "sign-in"),
    "codex-04-start-20s": ("dialog", "sign-in"),
    "codex-05-signin-other-way": ("dialog", "sign-in"),
    "codex-06-apikey-entry": ("dialog", "sign-in"),
    "codex-07-trust-dialog": ("dialog", "trust"),
    "codex-09-trust-enter-ready-1s": ("ready", None),
    "codex-10-typed": ("ready", None),
    "codex-11-enter-0.2s-queued": ("busy", None),
    "codex-13-enter-3s-looks-idle": ("ready", None),
    "codex-14-reconnecting": ("busy", None),
    "codex-15-reconnecting-1m30": ("busy", None),
    "codex-16-esc-interrupted": ("ready", None),
    "codex-17-f2-warnings": ("dialog", "warnings"),
    "codex-18-after-quit": ("starting", None),
    "codex-20-cm-run-start-2s-trust": ("dialog", "trust"),
    "codex-21-cm-typed": ("ready", None),
    "codex-22-cm-0.2s-queued": ("busy", None),
    "codex-25-cm-8s-reconnecting": ("busy", None),
    "codex-26-burst-text+enter-newline-not-submitted": ("ready", None),
    "codex-27-burst-then-separate-cm-working": ("busy", None),
    "codex-28-enter-while-working-queued-after-tool-call": ("busy", None),
    "codex-29-enter-while-working-text-kept-tab-to-queue": ("busy", None),
    "codex-30-1.5s-after-submit-looks-idle": ("ready", None),
    "codex-31-no-daemon-ctrl-c-exit": ("starting", None),
    "codex-40-error-429-retry-limit": ("ready", None),
    "codex-41-error-500-high-demand": ("ready", None),
    "codex-42-error-401": ("ready", None),
    "codex-43-error-401-then-answered": ("ready", None),
    "copilot-01-start-2s": ("starting", None),
    "copilot-02-start-5s-trust-dialog": ("dialog", "trust"),
    "copilot-05-trust-enter-ready": ("ready", None),
    "copilot-06-typed": ("ready", None),
    "copilot-07-enter-0.2s": ("ready", None),
    "copilot-10-slash-completion": ("ready", None),
    "copilot-11-login-account-menu": ("dialog", "menu"),
    "copilot-12-login-method-menu": ("dialog", "menu"),
    "copilot-13-login-network-error": ("dialog", "login-error"),
    "copilot-14-after-exit": ("starting", None),
    "copilot-20-allow-all-tools-5s-trust-dialog": ("dialog", "trust"),
    "copilot-21-allow-all-tools-trust-1-ready": ("ready", None),
    "copilot-22-allow-all-tools-typed": ("ready", None),
    "copilot-23-allow-all-tools-cm-0.2s": ("ready", None),
    "copilot-26-burst-text+enter-2s": ("ready", None),
    "copilot-30-env-COPILOT_ALLOW_ALL-5s-no-trust-dialog": ("ready", None),
    "copilot-40-busy-running-shell-command": ("busy", None),
    "copilot-41-busy-model-thinking": ("busy", None),
    "copilot-42-busy-turn-start-edit-prompt": ("busy", None),
    "copilot-50-error-429": ("ready", None),
    "copilot-51-error-500": ("ready", None),
    "copilot-52-error-401-provider-auth": ("ready", None),
    "copilot-53-error-429-then-answered": ("ready", None),
    "gemini-01-start-2s-trust-dialog": ("dialog", "trust"),
    "gemini-02-start-5s": ("dialog", "trust"),
    "gemini-05-trust-enter-restarting": ("starting", None),
    "gemini-06-auth-dialog": ("dialog", "sign-in"),
    "gemini-07-apikey-entry": ("dialog", "sign-in"),
    "gemini-08-ready": ("ready", None),
    "gemini-09-typed": ("ready", None),
    "gemini-10-enter-0.2s-thinking": ("busy", None),
    "gemini-11-enter-1s": ("busy", None),
    "gemini-12-enter-3s": ("busy", None),
    "gemini-13-enter-30s-still-thinking": ("busy", None),
    "gemini-14-esc-cancelled": ("ready", None),
    "gemini-15-burst-text+enter-newline-not-submitted": ("ready", None),
    "gemini-16-next-enter-submits-two-lines": ("busy", None),
    "gemini-20-cm-run-2s-prompt-before-trust": ("ready", None),
    "gemini-21-cm-run-5s-trust-dialog": ("dialog", "trust"),
    "gemini-22-trust-digit1-restarting": ("starting", None),
    "gemini-23-cm-typed": ("ready", None),
    "gemini-24-cm-0.2s": ("busy", None),
    "gemini-26-cm-3s": ("busy", None),
    "gemini-27-cm-2m-still-thinking": ("busy", None),
    "gemini-28-ctrl-c-once": ("ready", None),
    "gemini-29-ctrl-c-twice-exit": ("starting", None),
    "gemini-30-env-GEMINI_CLI_TRUST_WORKSPACE-no-dialog": ("ready", None),
    "gemini-40-error-401": ("ready", None),
    "gemini-41-error-429-still-retrying-4min": ("busy", None),
    "gemini-42-error-401-then-answered": ("ready", None),
    "pi-01-no-models": ("ready", None),
    "pi-02-ready": ("ready", None),
    "pi-03-typed": ("ready", None),
    "pi-04-enter-0.2s-busy": ("busy", None),
    "pi-05-busy-tool-ran": ("busy", None),
    "pi-06-busy-running-command": ("busy", None),
    "pi-07-busy-model-thinking": ("busy", None),
    "pi-08-idle-after-turn": ("ready", None),
    "pi-09-error-429-retry-failed": ("ready", None),
    "pi-10-error-500-retry-failed": ("ready", None),
    "pi-11-error-401": ("ready", None),
    "pi-12-error-credit-balance": ("ready", None),
    "pi-13-error-429-then-answered": ("ready", None),
    "pi-14-error-401-then-answered": ("ready", None),
}

# What `screen_state` says where it is not the plain classification: a screen that needs a
# person (a dialog no keys answer, or a notice while not busy), and a dialog omp answers.
# Every other capture: (its EXPECTED state, None).
NEEDS: dict[str, tuple[str, str]] = {
    "claude-01-onboarding-offline-exit": ("needs_person", "onboarding"),
    "claude-02-trust-dialog": ("dialog", "trust-select"),
    "claude-03-trust-down-yes-selected": ("dialog", "trust"),
    "claude-04-api-key-question": ("needs_person", "API key question"),
    "claude-05-bypass-warning": ("dialog", "bypass-permissions-select"),
    "claude-06-bypass-down-yes-selected": ("dialog", "bypass-permissions"),
    "claude-16-permission-prompt": ("needs_person", "permission prompt"),
    "claude-19-auto-mode-billing-dialog": ("dialog", "auto-mode-notice"),
    "claude-21-error-429-rate-limit": ("needs_person", "rate limit"),
    "claude-22-error-500": ("needs_person", "API error"),
    "claude-23-error-529-overloaded": ("needs_person", "API error"),
    "claude-24-error-401-not-logged-in": ("needs_person", "sign in"),
    "claude-25-error-credit-balance": ("needs_person", "quota"),
    # with a model server of its own, the first run asks for a theme, then shows notes
    "claude-27-onboarding-theme-picker": ("needs_person", "onboarding"),
    "claude-28-onboarding-security-notes": ("needs_person", "onboarding"),
    # without --dangerously-skip-permissions, on a model server of one's own: the first tool
    # call waits for a person (it read as busy: nobody was told)
    "claude-29-auto-mode-check-unreachable": ("needs_person", "auto mode check"),
    "codex-02-start-5s-signin": ("needs_person", "sign in"),
    "codex-03-start-10s": ("needs_person", "sign in"),
    "codex-04-start-20s": ("needs_person", "sign in"),
    "codex-05-signin-other-way": ("needs_person", "sign in"),
    "codex-06-apikey-entry": ("needs_person", "sign in"),
    "codex-07-trust-dialog": ("dialog", "trust"),
    "codex-17-f2-warnings": ("dialog", "warnings"),
    "codex-20-cm-run-start-2s-trust": ("dialog", "trust"),
    "codex-40-error-429-retry-limit": ("needs_person", "rate limit"),
    "codex-41-error-500-high-demand": ("needs_person", "API error"),
    "codex-42-error-401": ("needs_person", "sign in"),
    "copilot-02-start-5s-trust-dialog": ("dialog", "trust"),
    # signed out: "Please use /login to sign in to use Copilot" above the prompt
    "copilot-05-trust-enter-ready": ("needs_person", "sign in"),
    "copilot-06-typed": ("needs_person", "sign in"),
    "copilot-07-enter-0.2s": ("needs_person", "sign in"),  # "You must be logged in to send"
    "copilot-10-slash-completion": ("needs_person", "sign in"),
    "copilot-11-login-account-menu": ("needs_person", "menu"),
    "copilot-12-login-method-menu": ("needs_person", "menu"),
    "copilot-13-login-network-error": ("needs_person", "login error"),
    "copilot-20-allow-all-tools-5s-trust-dialog": ("dialog", "trust"),
    "copilot-21-allow-all-tools-trust-1-ready": ("needs_person", "sign in"),
    "copilot-22-allow-all-tools-typed": ("needs_person", "sign in"),
    "copilot-23-allow-all-tools-cm-0.2s": ("needs_person", "sign in"),
    "copilot-26-burst-text+enter-2s": ("needs_person", "sign in"),
    "copilot-30-env-COPILOT_ALLOW_ALL-5s-no-trust-dialog": ("needs_person", "sign in"),
    "copilot-50-error-429": ("needs_person", "rate limit"),
    "copilot-51-error-500": ("needs_person", "API error"),
    "copilot-52-error-401-provider-auth": ("needs_person", "sign in"),
    "gemini-01-start-2s-trust-dialog": ("dialog", "trust"),
    "gemini-02-start-5s": ("dialog", "trust"),
    "gemini-06-auth-dialog": ("needs_person", "sign in"),
    "gemini-07-apikey-entry": ("needs_person", "sign in"),
    "gemini-21-cm-run-5s-trust-dialog": ("dialog", "trust"),
    "gemini-40-error-401": ("needs_person", "sign in"),
    "pi-01-no-models": ("needs_person", "sign in"),
    "pi-09-error-429-retry-failed": ("needs_person", "rate limit"),
    "pi-10-error-500-retry-failed": ("needs_person", "API error"),
    "pi-11-error-401": ("needs_person", "sign in"),
    "pi-12-error-credit-balance": ("needs_person", "quota"),
}


def screen(name: str) -> list[str]:
    return (SCREENS / f"{name}.txt").read_text(encoding="utf-8").split("\n")


def profile_for(name: str) -> AgentProfile:
    return BUILTIN_PROFILES[name.split("-", 1)[0]]


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.stem for p in SCREENS.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED.items()))
def test_real_screens_are_classified(name: str, expected: tuple[str, str | None]) -> None:
    profile, lines = profile_for(name), screen(name)
    dialog = match_dialog(profile, lines)
    assert (classify_screen(profile, lines), dialog.name if dialog else None) == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_which_screens_need_a_person(name: str) -> None:
    """`screen_state`, the monitor's one call, on every capture: the error screens come from
    each CLI on the scripted model answering 429, 401, 500 (an error after which the person
    typed again and the agent answered reads ready: it is history)."""
    want = NEEDS.get(name, (EXPECTED[name][0], None))
    assert screen_state(profile_for(name), screen(name)) == want


def test_every_profile_knows_a_screen_that_needs_a_person() -> None:
    seen = {name.split("-", 1)[0] for name, (state, _) in NEEDS.items() if state == "needs_person"}
    assert seen == set(BUILTIN_PROFILES) - {"demo"}


def test_a_notice_counts_only_at_the_bottom() -> None:
    """The rate-limit line moved up by later output (no new prompt echoed) stops counting once
    it leaves the profile's `notice_lines`."""
    claude = BUILTIN_PROFILES["claude"]
    lines = [ln for ln in screen("claude-21-error-429-rate-limit") if ln.strip()]
    at = next(i for i, ln in enumerate(lines) if "API Error" in ln)
    assert screen_state(claude, lines) == ("needs_person", "rate limit")
    pushed = [
        *lines[: at + 1],
        *(f"  output {i}" for i in range(claude.notice_lines)),
        *lines[at + 1 :],
    ]
    assert screen_state(claude, pushed) == ("ready", None)


def test_a_fix_is_known_for_sign_in_and_first_run_screens() -> None:
    claude = BUILTIN_PROFILES["claude"]
    fix = person_fix(claude, screen("claude-01-onboarding-offline-exit"))
    assert fix is not None and "hasCompletedOnboarding" in fix
    fix = person_fix(claude, screen("claude-04-api-key-question"))
    assert fix is not None and "ANTHROPIC_AUTH_TOKEN" in fix
    assert person_fix(BUILTIN_PROFILES["pi"], screen("pi-01-no-models")) is not None
    assert person_fix(claude, screen("claude-16-permission-prompt")) is None
    assert person_fix(claude, screen("claude-07-ready")) is None


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        # Claude Code 2.1.328 preselects "No, exit" and Down wraps: Down only while No is
        # selected, Enter only once Yes is (never Enter on the default)
        ("claude-02-trust-dialog", ("Down",)),
        ("claude-03-trust-down-yes-selected", ("Enter",)),
        ("claude-05-bypass-warning", ("Down",)),
        ("claude-06-bypass-down-yes-selected", ("Enter",)),
        ("claude-04-api-key-question", ()),  # a billing choice: a person answers it
        ("claude-16-permission-prompt", ()),  # Enter would approve the command
        ("claude-29-auto-mode-check-unreachable", ()),  # how actions get approved: a person's call
        ("claude-07-ready", None),
        ("copilot-02-start-5s-trust-dialog", ("1",)),  # a digit selects directly
        ("codex-07-trust-dialog", ("Enter",)),  # the digit did nothing there; Enter accepted
        ("gemini-21-cm-run-5s-trust-dialog", ("1",)),
        ("codex-17-f2-warnings", ("Escape",)),
        ("codex-02-start-5s-signin", ()),  # only a human can sign in
        ("gemini-07-apikey-entry", ()),
        ("copilot-11-login-account-menu", ()),
        ("codex-09-trust-enter-ready-1s", None),
        (
            "gemini-05-trust-enter-restarting",
            None,
        ),  # the old dialog is still drawn: don't re-answer
        ("gemini-10-enter-0.2s-thinking", None),
    ],
)
def test_dialog_answers(name: str, keys: tuple[str, ...] | None) -> None:
    assert find_dialog(profile_for(name), screen(name)) == keys


def test_sign_in_hint_while_the_prompt_shows() -> None:
    lines = screen("copilot-05-trust-enter-ready")
    assert blocked_reason(BUILTIN_PROFILES["copilot"], lines) == (
        "Please use /login to sign in to use Copilot"
    )
    assert (
        blocked_reason(BUILTIN_PROFILES["codex"], screen("codex-09-trust-enter-ready-1s")) is None
    )


def test_signed_in_copilot_reads_ready_without_the_hint() -> None:
    lines = [ln for ln in screen("copilot-05-trust-enter-ready") if "/login" not in ln]
    assert classify_screen(BUILTIN_PROFILES["copilot"], lines) == "ready"


@pytest.mark.parametrize(
    ("name", "box"),
    [
        ("codex-10-typed", ["› hello from omp"]),
        # Codex repeats the first message in its footer: that is not the box.
        ("codex-14-reconnecting", ["› Ask Codex to do anything"]),
        ("codex-29-enter-while-working-text-kept-tab-to-queue", ["› m3-0.1"]),
        ("copilot-06-typed", ["❯ hello from omp"]),
        ("copilot-07-enter-0.2s", ["❯"]),
        ("gemini-09-typed", [" > hello from omp"]),
        ("gemini-10-enter-0.2s-thinking", [" >   Type your message or @path/to/file"]),
        ("copilot-02-start-5s-trust-dialog", None),  # `│ ❯ 1. Yes` is a menu item
    ],
)
def test_input_region(name: str, box: list[str] | None) -> None:
    assert input_region(profile_for(name), screen(name)) == box


@pytest.mark.parametrize(
    ("footer", "state"),
    [
        (" ● Working esc esc edit prompt", "busy"),  # a turn's start, before the first token
        (" ◉ Working · 61 B esc esc interrupt", "busy"),
        (" ● Waiting for background shells · 67 B esc esc interrupt", "busy"),
        (" ← open sidebar · Interactive · Manual Approval · / commands", "ready"),  # a narrow pane
    ],
)
def test_copilot_footer_under_an_empty_box(footer: str, state: str) -> None:
    """Copilot keeps its empty box drawn through a turn: only the footer tells (a line typed
    inside a turn pushes a running shell command to the background)."""
    lines = [ln for ln in screen("copilot-05-trust-enter-ready") if ln.strip()]
    assert "/ commands" in lines[-1]
    assert classify_screen(BUILTIN_PROFILES["copilot"], [*lines[:-1], footer]) == state


def test_busy_beats_a_prompt_drawn_below_it() -> None:
    lines = screen("codex-14-reconnecting")
    assert "› Ask Codex to do anything" in lines
    assert classify_screen(BUILTIN_PROFILES["codex"], lines) == "busy"


def test_old_busy_text_above_the_window_is_not_busy() -> None:
    codex = BUILTIN_PROFILES["codex"]
    old = ["• Working (3s • esc to interrupt)"]
    later = [f"output line {i}" for i in range(codex.bottom_lines)]
    box = ["", "› Ask Codex to do anything", "", "  ? for shortcuts"]
    assert classify_screen(codex, old + later[:2] + box) == "busy"
    assert classify_screen(codex, old + later + box) == "ready"


@pytest.mark.parametrize(
    ("lines", "state"),
    [
        (["❯ "], "ready"),
        (["❯ typed but not sent"], "ready"),
        (["❯ do task 1", "⠋ worker-1 working on task 1 (esc to interrupt)", "❯ "], "busy"),
        (["⠋ worker-1 working on task 1", "result written", "done: task 1", "❯ "], "ready"),
        (["❯ Continue working on your assigned task", "claimed task 1", "❯"], "ready"),
        (["starting the demo agent..."], "starting"),
        ([], "starting"),
        (["", "   ", ""], "starting"),
    ],
)
def test_demo_profile(lines: list[str], state: str) -> None:
    assert classify_screen(BUILTIN_PROFILES["demo"], lines) == state


def test_claude_reads_its_own_echoed_lines_as_history() -> None:
    """Claude Code echoes each typed line as `❯ <text>` in its transcript: only the `❯` right
    under a rule is the input box."""
    claude = BUILTIN_PROFILES["claude"]
    lines = screen("claude-26-error-429-then-answered")
    assert "❯ hello" in [ln.rstrip() for ln in lines]
    assert input_region(claude, lines) == ["❯"]
    # the box's `❯` is followed by a no-break space
    assert input_region(claude, screen("claude-08-typed")) == ["❯\xa0run the PROBE please"]
    assert input_region(claude, screen("claude-16-permission-prompt")) is None  # `❯ 1. Yes`


def test_demo_input_line_is_the_last_line_only() -> None:
    demo = BUILTIN_PROFILES["demo"]
    assert input_region(demo, ["got: x", "❯ abc", ""]) == ["❯ abc"]
    assert input_region(demo, ["❯ abc", "got: abc"]) is None
    assert input_region(demo, []) is None


def test_pi_input_box_lies_between_two_rules() -> None:
    pi = BUILTIN_PROFILES["pi"]
    assert squash("".join(input_region(pi, screen("pi-03-typed")) or [])) == "runthePROBEplease"
    assert squash("".join(input_region(pi, screen("pi-02-ready")) or ["x"])) == ""
    assert input_region(pi, ["no rules here", "at all"]) is None


def test_builtins() -> None:
    assert set(BUILTIN_PROFILES) == {"copilot", "claude", "codex", "gemini", "pi", "demo"}
    assert BUILTIN_PROFILES["pi"].command == ["pi"]
    assert BUILTIN_PROFILES["pi"].dialogs == ()  # no permission prompts, no trust screen
    assert BUILTIN_PROFILES["claude"].command == ["claude", "--dangerously-skip-permissions"]
    assert BUILTIN_PROFILES["copilot"].command == ["copilot", "--allow-all-tools"]
    assert BUILTIN_PROFILES["copilot"].submit_key == "Enter"  # >= 1.0.61 ignores C-m
    demo = BUILTIN_PROFILES["demo"]
    assert demo.command == [sys.executable, "-m", "omp", "demo-agent"]
    assert demo.program == sys.executable
    assert missing_program(demo) is None
    for p in BUILTIN_PROFILES.values():
        assert p.submit_delay >= 0.05  # never text and key in one burst


def test_missing_program(tmp_path: Path) -> None:
    gone = dataclasses.replace(BUILTIN_PROFILES["demo"], program="omp-no-such-program-x")
    assert missing_program(gone) == "omp-no-such-program-x"
    assert missing_program(dataclasses.replace(gone, program=str(tmp_path / "nope"))) is not None


def test_forwarded_env() -> None:
    environ = {"COPILOT_HOME": "/h", "GH_TOKEN": "t", "HOME": "/root", "COPILOT_AUTO_UPDATE": "1"}
    env = forwarded_env(BUILTIN_PROFILES["copilot"], environ)
    # The profile's fixed value wins over the forwarded one.
    assert env == {"COPILOT_HOME": "/h", "GH_TOKEN": "t", "COPILOT_AUTO_UPDATE": "false"}
    assert forwarded_env(BUILTIN_PROFILES["demo"], environ) == {}


@pytest.mark.parametrize(
    ("environ", "want"),
    [
        ({}, "1"),  # Claude Code's updater ran `npm install --global` in a test: off by default
        ({"DISABLE_AUTOUPDATER": "0"}, "0"),  # the user's own choice is forwarded
    ],
)
def test_claude_workers_get_no_auto_update_unless_the_user_says(
    environ: dict[str, str], want: str
) -> None:
    env = forwarded_env(BUILTIN_PROFILES["claude"], {**environ, "ANTHROPIC_BASE_URL": "http://x"})
    assert env["DISABLE_AUTOUPDATER"] == want and env["ANTHROPIC_BASE_URL"] == "http://x"


def test_claude_never_gets_is_sandbox_unless_the_user_set_it() -> None:
    claude = BUILTIN_PROFILES["claude"]
    assert "IS_SANDBOX" not in forwarded_env(claude, {})
    assert forwarded_env(claude, {"IS_SANDBOX": "1"})["IS_SANDBOX"] == "1"


def test_pi_forwards_its_own_variables() -> None:
    env = forwarded_env(BUILTIN_PROFILES["pi"], {"PI_OFFLINE": "1", "PI_CODING_AGENT_DIR": "/d"})
    assert env == {"PI_OFFLINE": "1", "PI_CODING_AGENT_DIR": "/d"}


def test_agent_argv_grants_copilot_the_directory_of_omp(tmp_path: Path) -> None:
    copilot = BUILTIN_PROFILES["copilot"]
    omp = ["/home/u/.local/bin/omp"]
    assert agent_argv(copilot, omp) == [*copilot.command, "--add-dir", "/home/u/.local/bin"]
    py = ["/opt/py/bin/python3", "-m", "omp"]
    assert agent_argv(copilot, py)[-2:] == ["--add-dir", "/opt/py/bin"]
    assert agent_argv(copilot, ["omp"]) == copilot.command  # found on PATH: nothing to grant
    assert agent_argv(BUILTIN_PROFILES["demo"], omp) == BUILTIN_PROFILES["demo"].command
    write(tmp_path, "agents.toml", "[agents.copilot]\nadd_dir_flag = ''\n")
    assert agent_argv(load_profiles(tmp_path)["copilot"], omp) == copilot.command


# -- the profile file ---------------------------------------------------------------------------


def write(root: Path, name: str, text: str) -> Path:
    (root / ".omp").mkdir(exist_ok=True)
    path = root / ".omp" / name
    path.write_text(text)
    return path


def test_no_file_gives_the_builtins(tmp_path: Path) -> None:
    assert load_profiles(tmp_path) == dict(BUILTIN_PROFILES)


def test_toml_overrides_and_adds(tmp_path: Path) -> None:
    write(
        tmp_path,
        "agents.toml",
        """
[agents.copilot]
command = ["copilot", "--allow-all-tools", "--model", "x"]
submit_delay = 0.3

[agents.mycli]
command = ["/opt/mycli/bin/mycli", "--tui"]
prompt_pattern = '^> '
ready_patterns = ['^> ']
busy_patterns = ['esc to interrupt']
env = {MYCLI_MODE = "team"}
bottom_lines = 6
line_oriented = true

[[agents.mycli.dialogs]]
name = "trust"
pattern = 'Trust this folder\\?'
keys = ["Enter"]

[[agents.mycli.dialogs]]
name = "login"
pattern = 'Log in'
fix = "run mycli login"

[[agents.mycli.notices]]
name = "rate-limit"
pattern = '^Error: 429'
""",
    )
    profiles = load_profiles(tmp_path)
    copilot = profiles["copilot"]
    assert copilot.command[-1] == "x" and copilot.submit_delay == 0.3
    assert copilot.dialogs == BUILTIN_PROFILES["copilot"].dialogs  # untouched fields stay
    mine = profiles["mycli"]
    assert mine.program == "/opt/mycli/bin/mycli"
    assert mine.dialogs == (
        Dialog("trust", r"Trust this folder\?", ("Enter",)),
        Dialog("login", "Log in", (), "run mycli login"),
    )
    assert mine.notices == (Dialog("rate-limit", "^Error: 429"),)
    assert screen_state(mine, ["Error: 429 slow down", "> "]) == ("needs_person", "rate limit")
    assert screen_state(mine, ["Log in", "> 1. yes"]) == ("ready", None)
    assert screen_state(mine, ["> 1. yes", "Log in"]) == ("needs_person", "login")
    assert mine.env == {"MYCLI_MODE": "team"} and mine.bottom_lines == 6 and mine.line_oriented
    assert classify_screen(mine, ["Trust this folder?", "> 1. yes"]) == "ready"
    assert classify_screen(mine, ["> 1. yes", "Trust this folder?"]) == "dialog"


def test_json_file(tmp_path: Path) -> None:
    write(tmp_path, "agents.json", json.dumps({"agents": {"demo": {"startup_timeout": 5}}}))
    assert load_profiles(tmp_path)["demo"].startup_timeout == 5.0


@pytest.mark.parametrize(
    ("file", "text", "problem"),
    [
        ("agents.toml", "[agents.x\n", "does not parse"),
        ("agents.json", "{", "does not parse"),
        ("agents.json", "[1]", "the top level must be"),
        ("agents.toml", "[teams]\n", "unknown top-level key 'teams'"),
        ("agents.toml", "agents = 3\n", "'agents' must be a table"),
        ("agents.toml", "[agents.Bad]\ncommand=['x']\n", "invalid profile name 'Bad'"),
        ("agents.toml", "[agents.copilot]\nsubmit_dealy = 1\n", "unknown key 'submit_dealy'"),
        ("agents.toml", "[agents.new]\nprogram = 'x'\n", "a new profile needs 'command'"),
        ("agents.toml", "[agents.copilot]\ncommand = 'copilot'\n", "agents.copilot.command must"),
        ("agents.toml", "[agents.copilot]\ncommand = []\n", "agents.copilot.command must"),
        ("agents.toml", "[agents.copilot]\nbusy_patterns = ['(']\n", "bad regex '('"),
        ("agents.toml", "[agents.copilot]\nbottom_lines = 0\n", "bottom_lines must be"),
        ("agents.toml", "[agents.copilot]\nbottom_lines = true\n", "bottom_lines must be"),
        ("agents.toml", "[agents.copilot]\nsubmit_delay = -1\n", "submit_delay must be"),
        ("agents.toml", "[agents.copilot]\nsubmit_key = 'Enter;'\n", "not a tmux key name"),
        ("agents.toml", "[agents.copilot]\nenv = {A = 1}\n", "env must be a table of string"),
        ("agents.toml", "[agents.copilot]\nline_oriented = 1\n", "must be true or false"),
        ("agents.toml", "[agents.copilot]\nadd_dir_flag = 1\n", "add_dir_flag must be"),
        ("agents.toml", "[[agents.copilot.dialogs]]\npattern = 'x'\n", "name must be"),
        (
            "agents.toml",
            "[[agents.copilot.notices]]\nname = 'n'\npattern = 'x'\nkeys = ['1']\n",
            "unknown key 'keys'",  # nothing ever answers a notice
        ),
        ("agents.toml", "[agents.copilot]\nnotice_lines = 0\n", "notice_lines must be"),
        ("agents.toml", "[agents.copilot]\nboxed_input = 'yes'\n", "must be true or false"),
        ("agents.toml", "[agents.copilot]\nenv_defaults = {A = 1}\n", "env_defaults must be"),
        (
            "agents.toml",
            "[[agents.copilot.dialogs]]\nname = 't'\npattern = 'x'\nfix = 1\n",
            "fix must be a string",
        ),
        (
            "agents.toml",
            "[[agents.copilot.dialogs]]\nname = 't'\npattern = 'x'\nkey = ['1']\n",
            "unknown key 'key'",
        ),
        (
            "agents.toml",
            "[[agents.copilot.dialogs]]\nname = 't'\npattern = 'x'\nkeys = ['a b']\n",
            "not a tmux key name",
        ),
    ],
)
def test_bad_files_are_refused_in_one_clear_line(
    tmp_path: Path, file: str, text: str, problem: str
) -> None:
    path = write(tmp_path, file, text)
    with pytest.raises(OmpError) as err:
        load_profiles(tmp_path)
    assert err.value.code == "invalid_agents_file"
    assert err.value.message.startswith(f"{path}: ")
    assert problem in err.value.message
    assert "\n" not in err.value.message


def test_both_files_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "agents.toml", "")
    write(tmp_path, "agents.json", "{}")
    with pytest.raises(OmpError) as err:
        load_profiles(tmp_path)
    assert "keep one" in err.value.message


# ---- which agent runs in the leader's pane ------------------------------------------------


def test_profile_for_command_names_agents_not_interpreters() -> None:
    from omp.agents import BUILTIN_PROFILES, profile_for_command

    found = profile_for_command(BUILTIN_PROFILES, "copilot")
    assert found is not None and found.name == "copilot"
    assert profile_for_command(BUILTIN_PROFILES, "/usr/local/bin/codex").name == "codex"  # type: ignore[union-attr]
    for word in ("node", "python3", "bash", "sh", "", "vim"):
        assert profile_for_command(BUILTIN_PROFILES, word) is None, word


def test_an_agent_is_found_among_this_process_ancestors(tmp_path: Path) -> None:
    """`node .../bin/copilot` runs the shell tool that runs omp: the leader is Copilot."""
    import subprocess
    import sys

    agent = tmp_path / "bin" / "copilot"
    agent.parent.mkdir()
    probe = (
        "from omp.agents import BUILTIN_PROFILES, profile_of_ancestors as f; "
        "p = f(BUILTIN_PROFILES); print(p.name if p else None)"
    )
    agent.write_text(f"#!/bin/sh\n{sys.executable} -c '{probe}'\n")
    agent.chmod(0o755)
    out = subprocess.run(["/bin/sh", str(agent)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "copilot", out.stderr


def test_start_refusal_is_claude_as_root_with_the_bypass_flag_and_no_sandbox() -> None:
    from omp.agents import start_refusal

    claude = BUILTIN_PROFILES["claude"]
    cmd = claude.command
    refused = start_refusal(claude, cmd, {}, 0)
    assert refused is not None and "IS_SANDBOX=1" in refused[0] and "IS_SANDBOX" in refused[1]
    assert start_refusal(claude, cmd, {"IS_SANDBOX": "1"}, 0) is None
    assert start_refusal(claude, cmd, {}, 1000) is None  # a normal user
    assert start_refusal(claude, ["claude"], {}, 0) is None  # no bypass flag: it starts
    boxed = dataclasses.replace(claude, env={"IS_SANDBOX": "1"})  # set by the profile itself
    assert start_refusal(boxed, cmd, {}, 0) is None
    codex = BUILTIN_PROFILES["codex"]
    assert start_refusal(codex, codex.command, {}, 0) is None
