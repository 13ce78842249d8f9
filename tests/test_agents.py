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
)
from omp.errors import OmpError

SCREENS = Path(__file__).parent / "fixtures" / "screens"

# What each capture shows, from tests/fixtures/screens/README.md: (state, dialog name).
# "Looks idle" captures (Codex right after a submit) are ready: that is what the screen says.
EXPECTED: dict[str, tuple[str, str | None]] = {
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


@pytest.mark.parametrize(
    ("name", "keys"),
    [
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


@pytest.mark.parametrize(
    ("lines", "state"),
    [
        (
            [
                "╭" + "─" * 20 + "╮",
                "│ >                  │",
                "╰" + "─" * 20 + "╯",
                "  ? for shortcuts",
            ],
            "ready",
        ),
        (["✻ Caramelizing… (esc to interrupt)", "╭──╮", "│ > │", "╰──╯"], "busy"),
        (
            ["Do you trust the files in this folder?", "❯ 1. Yes, proceed", "  2. No, exit"],
            "dialog",
        ),
        (
            ["Bypass Permissions mode", "  1. No, exit", "❯ 2. Yes, I accept", "Enter to confirm"],
            "dialog",
        ),
    ],
)
def test_claude_profile_on_screens_described_elsewhere(lines: list[str], state: str) -> None:
    """Claude Code was not installable here (node 20): these screens follow OMC/OMX's detectors."""
    assert classify_screen(BUILTIN_PROFILES["claude"], lines) == state


def test_demo_input_line_is_the_last_line_only() -> None:
    demo = BUILTIN_PROFILES["demo"]
    assert input_region(demo, ["got: x", "❯ abc", ""]) == ["❯ abc"]
    assert input_region(demo, ["❯ abc", "got: abc"]) is None
    assert input_region(demo, []) is None


def test_builtins() -> None:
    assert set(BUILTIN_PROFILES) == {"copilot", "claude", "codex", "gemini", "demo"}
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
""",
    )
    profiles = load_profiles(tmp_path)
    copilot = profiles["copilot"]
    assert copilot.command[-1] == "x" and copilot.submit_delay == 0.3
    assert copilot.dialogs == BUILTIN_PROFILES["copilot"].dialogs  # untouched fields stay
    mine = profiles["mycli"]
    assert mine.program == "/opt/mycli/bin/mycli"
    assert mine.dialogs == (Dialog("trust", r"Trust this folder\?", ("Enter",)),)
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
