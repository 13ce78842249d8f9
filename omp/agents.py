"""Agent profiles as data, and what an agent's screen says: ready, busy, a dialog, or starting;
and whether it needs a person (`screen_state`).

Built-in profiles: `copilot`, `claude`, `codex`, `gemini`, `pi` and `demo`. A project overrides
or adds profiles in `<root>/.omp/agents.toml` or `<root>/.omp/agents.json` (one of them, not
both):

    [agents.copilot]              # override: each field given replaces the built-in's value
    command = ["copilot", "--allow-all-tools", "--model", "gpt-5"]
    submit_delay = 0.2

    [agents.mycli]                # a new profile: `command` is required, the rest has defaults
    command = ["mycli", "--tui"]
    prompt_pattern = '^> '
    ready_patterns = ['^> ']
    busy_patterns = ['esc to interrupt']

    [[agents.mycli.dialogs]]      # answered at start; keys = [] means only a human can answer
    name = "trust"
    pattern = 'Trust this folder\\?'
    keys = ["Enter"]

    [[agents.mycli.notices]]      # a line saying a person must act, though the prompt shows
    name = "rate-limit"
    pattern = '^Error: 429 '

The JSON file holds the same thing: `{"agents": {"mycli": {"command": ["mycli"], ...}}}`.
Profile names: 1-32 of `a-z 0-9 _ -`, starting with a letter. Fields:

    command          list of strings   argv of the agent (run without a shell)
    program          string            the executable that must be on PATH (default: command[0])
    env_prefixes     list of strings   environment variables with these prefixes are forwarded
    env              table of strings  fixed extra variables for the agent's pane
    env_defaults     table of strings  variables for the agent's pane unless the launching
                                       environment sets them (then its value is forwarded)
    add_dir_flag     string            flag that lets the agent use files in a directory; launch
                                       appends it with the directory of the omp the agent runs
                                       (Copilot asks before a command names a path outside its
                                       allowed directories, and omp is named by absolute path)
    prompt_pattern   regex             the agent's input line (the last match is the input box)
    ready_patterns   list of regexes   the agent waits for input
    busy_patterns    list of regexes   the agent is working (beats ready: prompts stay drawn)
    starting_patterns list of regexes  the agent is (re)starting
    blocked_patterns list of regexes   a human must act (e.g. sign in) although a prompt shows
                                       (the older form of a notice, named "blocked")
    dialogs          list of tables    {name, pattern, keys, fix}: a modal screen and the keys
                                       that answer it (sent one by one), in priority order; no
                                       keys: only a person can answer it (`fix` says how)
    notices          list of tables    {name, pattern, fix}: a line saying a person must act
                                       although the prompt shows (a sign-in, a rate limit, a
                                       quota, an API error), in priority order
    notice_lines     integer           how many bottom non-blank lines a notice counts in (so
                                       one the agent has moved past stops counting)
    submit_key       string            key that submits typed text (Copilot >= 1.0.61 ignores C-m)
    submit_delay     seconds           pause between typing and the submit key (Codex and Gemini
                                       take text + Enter in one burst as a paste)
    startup_timeout  seconds           how long a launch waits for `ready`
    ready_settle     seconds           how long `ready` must hold before a launch trusts it
                                       (Gemini draws its prompt ~3 s before its trust dialog)
    bottom_lines     integer           how many bottom non-blank lines the screen is judged by
    boxed_input      boolean           the input box has no prompt glyph: it is the lines
                                       between the last two horizontal rules (pi)
    line_oriented    boolean           a line-by-line agent (the demo), not a full-screen one: its
                                       input line is only ever the last line, so a prompt line
                                       with output under it was submitted
    resume_args      list of strings   appended to the recorded command by `omp team resume` when
                                       the worker's session id is known; `{session_id}` is
                                       replaced by it (checked against each pinned CLI's --help)

Patterns are Python regexes searched in the bottom window joined by newlines, with `re.MULTILINE`
(so `^`/`$` anchor at lines and a pattern may span lines). Only the bottom of the screen counts, so
old output never reads as busy. Among dialog, starting and ready the lowest match wins (what was
drawn last is the current state); busy beats ready and starting (agents keep their prompt drawn
while working) and beats a dialog only from below it.

A screen needs a person (`screen_state` says `needs_person` and what) when it shows a dialog no
keys answer (a permission prompt, a sign-in, a menu) or, while not busy, a notice in its bottom
`notice_lines` lines (a rate limit, a quota, a rejected key, an API error). omp types nothing into
such a screen. The built-in patterns come from real captures (`tests/fixtures/screens/`: Copilot
CLI 1.0.102, Codex 0.171, Gemini 0.61, Claude Code 2.1.328, pi 0.73.1; the error screens from
each CLI on the tests' scripted model answering 429, 401, 500).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from omp.errors import OmpError
from omp.store.paths import StatePaths

ScreenState = Literal["ready", "busy", "dialog", "starting"]
# What `screen_state` says: a ScreenState, or that a person must act.
PersonState = Literal["ready", "busy", "dialog", "starting", "needs_person"]

# A prompt glyph, optionally inside a box border; not a numbered menu item (`❯ 1. Yes`).
GENERIC_PROMPT = r"^\s*(?:[│┃]\s*)?[›>❯](?!\s*\d+\.\s)(?:\s|$)"


@dataclass(frozen=True)
class Dialog:
    """A modal screen: `pattern` finds it, `keys` answer it; `()` means only a human can (`fix`
    tells them how). Also a notice: a line saying a person must act (never any keys)."""

    name: str
    pattern: str
    keys: tuple[str, ...] = ()
    fix: str = ""

    @property
    def what(self) -> str:
        """The short label a person reads: `permission prompt` for `permission-prompt`."""
        words = self.name.replace("-", " ")
        return " ".join("API" if w == "api" else w for w in words.split(" "))


@dataclass(frozen=True)
class AgentProfile:
    name: str
    command: list[str]
    program: str
    env_prefixes: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    env_defaults: dict[str, str] = field(default_factory=dict)
    add_dir_flag: str = ""
    prompt_pattern: str = GENERIC_PROMPT
    ready_patterns: tuple[str, ...] = (GENERIC_PROMPT,)
    busy_patterns: tuple[str, ...] = (r"(?i)esc to (?:interrupt|cancel)",)
    starting_patterns: tuple[str, ...] = ()
    blocked_patterns: tuple[str, ...] = ()
    dialogs: tuple[Dialog, ...] = ()
    notices: tuple[Dialog, ...] = ()
    notice_lines: int = 6
    submit_key: str = "Enter"
    submit_delay: float = 0.15
    startup_timeout: float = 60.0
    ready_settle: float = 0.0
    bottom_lines: int = 12
    line_oriented: bool = False
    boxed_input: bool = False
    resume_args: tuple[str, ...] = ()


_COPILOT_SIGN_IN = (
    "run `copilot` once and sign in with /login, or set COPILOT_PROVIDER_BASE_URL (and its key) "
    "for a model server of your own"
)
_CODEX_SIGN_IN = (
    "run `codex` once and sign in, or set a model provider of your own in ~/.codex/config.toml"
)
_GEMINI_SIGN_IN = (
    "run `gemini` once and sign in, or set GEMINI_API_KEY (and GOOGLE_GEMINI_BASE_URL for a "
    "server of your own)"
)


def _builtins() -> dict[str, AgentProfile]:
    copilot = AgentProfile(
        name="copilot",
        command=["copilot", "--allow-all-tools"],
        program="copilot",
        env_prefixes=("COPILOT_", "GH_", "GITHUB_"),
        # A worker must not update itself in the middle of a team run.
        env={"COPILOT_AUTO_UPDATE": "false"},
        # `--allow-all-tools` does not cover paths: a shell command naming omp by absolute path
        # outside the project (a pipx or --user install) stops at an "Allow path access" dialog.
        add_dir_flag="--add-dir",
        # `❯` alone also marks the highlighted item of every menu; those are indented or boxed.
        prompt_pattern=r"^❯(?:\s|$)",
        ready_patterns=(r"(?:^|· )Interactive · ", r"^[─━]{8,}\n❯.*\n[─━]{8,}$"),
        # `(Esc to cancel)` with the parenthesis: dialogs end in `· esc to cancel` without one.
        # 1.0.102 under the input box while a turn runs (a shell command or the model):
        # ` ◉ Working · 295 B esc esc interrupt` (the glyph spins); the box stays drawn. From the
        # submit to the model's first token it reads ` ◎ Working esc esc edit prompt`, and
        # ` ● Waiting for background shells · 67 B esc esc interrupt` after a command was
        # pushed aside: a line typed then lands inside the turn, so these are busy too.
        busy_patterns=(
            r"(?i)\(esc to cancel\b[^)]*\)",
            r"(?i)esc to interrupt",
            r"^\s*\S \S.*\besc esc (?:interrupt|edit prompt)\b",
        ),
        dialogs=(
            # `1` selects "Yes" (this session only) directly; no Enter needed.
            Dialog(
                "trust", r"Do you trust the files in this folder\?|Confirm folder trust", ("1",)
            ),
            Dialog("login-error", r"Press any key to retry", fix=_COPILOT_SIGN_IN),
            Dialog("menu", r"↑/↓ to navigate · enter to select"),
        ),
        # An error ends a turn as ` ✗ <what>` above the prompt (seen on the scripted model).
        notices=(
            Dialog(
                "sign-in",
                r"Please use /login to sign in|You must be logged in to send messages"
                r"|^ ✗ Authentication failed",
                fix=_COPILOT_SIGN_IN,
            ),
            Dialog("rate-limit", r"^ ✗ (?:429\b|.*\b[Rr]ate limit)"),
            Dialog("quota", r"^ ✗ .*\b(?:[Qq]uota|credit balance|premium requests)"),
            Dialog("api-error", r"^ ✗ (?:\d{3} |.*\(HTTP \d{3}\))"),
        ),
        notice_lines=7,
        ready_settle=0.5,
        resume_args=("--resume={session_id}",),  # 1.0.102: `-r, --resume [<value>]`
    )
    claude = AgentProfile(
        name="claude",
        command=["claude", "--dangerously-skip-permissions"],
        program="claude",
        # IS_SANDBOX: as root, --dangerously-skip-permissions refuses to start without it. omp
        # never sets it; a user who set it (a container) gets it forwarded.
        env_prefixes=(
            "ANTHROPIC_",
            "CLAUDE_",
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "DISABLE_ERROR_REPORTING",
            "IS_SANDBOX",
        ),
        # Left on, its updater ran `npm install --global` into the system during a test.
        env_defaults={"DISABLE_AUTOUPDATER": "1"},
        prompt_pattern=r"^❯(?:\s|$)",
        # The input box: `❯` right under a rule (the transcript echoes typed lines as `❯ ...`
        # too), and the footer `⏵⏵ bypass permissions on (shift+tab to cycle)`.
        ready_patterns=(
            r"^[─━]{8,}\n❯(?:\s|$)",
            r"⏵⏵ .*\(shift\+tab to cycle\)",
            r"\? for shortcuts",
        ),
        # The footer gains `· esc to interrupt` while a turn runs; above the box a spinner line
        # `✶ Recombobulating… (3s · ↓ 10 tokens)` (glyph and word vary).
        busy_patterns=(r"(?i)esc to interrupt", r"^(?![❯●⎿])\S [A-Z][a-z]+…(?:\s|$)"),
        dialogs=(
            # 2.1.328's menus preselect "No, exit" and have no digit keys; Down wraps around.
            # So: Down only while "No" is selected, Enter only once "Yes" is: never Enter on No.
            Dialog("trust", r"^\s*❯ Yes, I trust this folder", ("Enter",)),
            Dialog("trust-select", r"Yes, I trust this folder", ("Down",)),
            Dialog(
                "bypass-permissions",
                r"Bypass Permissions mode(?:.*\n)*?\s*❯ Yes, I accept",
                ("Enter",),
            ),
            Dialog("bypass-permissions-select", r"Bypass Permissions mode", ("Down",)),
            Dialog(
                "api-key-question",
                r"Detected a custom API key|Do you want to use this API key\?",
                fix="Claude Code asks whether to use ANTHROPIC_API_KEY (a billing choice omp "
                "leaves to you): run `claude` once in this project and answer it, or pass the "
                "key as ANTHROPIC_AUTH_TOKEN instead",
            ),
            Dialog(
                "onboarding",
                r"Unable to connect to Anthropic services|Choose the text style"
                r"|^\s*Syntax theme: |^\s*Security notes:|Select login method",
                fix="Claude Code's first-run setup is not done (offline it exits): run `claude` "
                "once and finish it; with a model server of your own (ANTHROPIC_BASE_URL) set "
                '"hasCompletedOnboarding": true in ~/.claude.json',
            ),
            Dialog(
                "permission-prompt",
                r"Do you want to proceed\?|Esc to cancel · Tab to amend"
                r"|Do you want to (?:make this edit|create|allow)",
            ),
            # Auto mode (a profile without --dangerously-skip-permissions) on a model server of
            # one's own: its safety check cannot get through, and it asks at the first tool
            # call. Enter keeps auto mode with every action approved by hand: a person decides.
            Dialog(
                "auto-mode-check",
                r"Auto mode can't check actions|Enter to stay in auto mode",
                fix="Claude Code's auto mode cannot reach its safety check through your model "
                "server (ANTHROPIC_BASE_URL): answer it in the worker's pane, or let the profile "
                "keep --dangerously-skip-permissions (the built-in claude profile passes it)",
            ),
            # Auto mode's billing notice (not in bypass mode): Enter continues.
            Dialog("auto-mode-notice", r"Enter to continue · Esc to cancel", ("Enter",)),
            Dialog("menu", r"Enter to confirm · Esc to (?:exit|cancel)"),
        ),
        # A failed turn ends in `● API Error: ...` or `⎿  <what>` above the box.
        notices=(
            Dialog(
                "sign-in",
                r"Not logged in · Please run /login|^● API Error: (?:Request rejected \()?40[13]\b",
                fix="Claude Code is not signed in: run `claude` once and /login, or set "
                "ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN for a model server of your own",
            ),
            Dialog(
                "rate-limit", r"^● API Error: .*(?:\b429\b|[Rr]ate limit)|^\s*⎿\s+.*limit reached"
            ),
            Dialog("quota", r"^\s*⎿\s+Credit balance too low|^● API Error: .*credit balance"),
            Dialog("api-error", r"^● API Error: "),
        ),
        notice_lines=7,
        ready_settle=1.0,
        resume_args=("--resume", "{session_id}"),  # 2.1.328: `-r, --resume [value]`
    )
    codex = AgentProfile(
        name="codex",
        # --no-daemon: plain `codex` leaves an app-server daemon that outlives its pane.
        command=["codex", "--no-daemon", "--dangerously-bypass-approvals-and-sandbox"],
        program="codex",
        env_prefixes=("OPENAI_", "CODEX_"),
        prompt_pattern=r"^›(?:\s|$)",
        ready_patterns=(r"^›(?:\s|$)", r"\? for shortcuts"),
        # Codex keeps its input box drawn while a turn runs; these lines mean it is working, or
        # that typed text was queued behind the running turn.
        busy_patterns=(
            r"esc to interrupt\)",
            r"Queued follow-up inputs",
            r"Messages to be submitted after next tool call",
            r"tab to queue message",
        ),
        dialogs=(
            # Enter takes the preselected "1. Trust and continue"; the digit alone does nothing.
            Dialog("trust", r"Trust this folder\?|enter continue · esc back", ("Enter",)),
            Dialog(
                "sign-in",
                r"Sign in with ChatGPT|Sign in another way|Use an OpenAI API key"
                r"|Paste or type your API key|Press enter to continue",
                fix=_CODEX_SIGN_IN,
            ),
            Dialog("hooks-review", r"Hooks need review"),
            Dialog("warnings", r"esc dismiss & close", ("Escape",)),
        ),
        # A failed turn ends in `■ <what>` above the box (`■ Conversation interrupted` is Esc).
        notices=(
            Dialog("sign-in", r"^■ unexpected status 40[13]\b", fix=_CODEX_SIGN_IN),
            Dialog("rate-limit", r"^■ .*(?:\b429\b|[Rr]ate limit)"),
            Dialog("quota", r"^■ .*(?:[Qq]uota|usage limit|credits)"),
            Dialog(
                "api-error",
                r"^■ (?:unexpected status|exceeded retry limit|stream disconnected"
                r"|We’re currently experiencing)",
            ),
        ),
        notice_lines=5,
        ready_settle=0.5,
        resume_args=("resume", "{session_id}"),  # 0.171: `codex [OPTIONS] resume [SESSION_ID]`
    )
    gemini = AgentProfile(
        name="gemini",
        command=["gemini", "--approval-mode", "yolo"],
        program="gemini",
        env_prefixes=("GEMINI_", "GOOGLE_"),
        # Trust the workspace for this process only (answering the dialog would persist it).
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        # ` > ` normally, ` * ` in YOLO mode.
        prompt_pattern=r"^ ?[>*](?:\s|$)",
        ready_patterns=(r"^ ?[>*](?:\s|$)", r"\? for shortcuts"),
        busy_patterns=(r"\(esc to cancel, \d",),
        starting_patterns=(r"restarting to apply the trust changes",),
        dialogs=(
            Dialog("trust", r"Do you trust the files in this folder\?", ("1",)),
            Dialog(
                "sign-in",
                r"How would you like to authenticate|\(Use Enter to select\)"
                r"|Enter Gemini API Key|Paste your API key here",
                fix=_GEMINI_SIGN_IN,
            ),
        ),
        # A failed turn ends in `✕ [API Error: <the server's JSON>]` above the box.
        notices=(
            Dialog(
                "sign-in",
                r"^✕ \[API Error:.*(?:\b40[13]\b|UNAUTHENTICATED|PERMISSION_DENIED|API key not)",
                fix=_GEMINI_SIGN_IN,
            ),
            Dialog("rate-limit", r"^✕ \[API Error:.*(?:\b429\b|RESOURCE_EXHAUSTED|[Rr]ate limit)"),
            Dialog("quota", r"^✕ \[API Error:.*[Qq]uota"),
            Dialog("api-error", r"^✕ \[API Error:"),
        ),
        notice_lines=8,
        # The prompt shows ~3 s before the trust dialog on a fresh directory.
        ready_settle=3.5,
        bottom_lines=16,
        resume_args=("--resume", "{session_id}"),  # 0.61: `--resume {uuid}` (or an index)
    )
    pi = AgentProfile(
        name="pi",
        command=["pi"],
        program="pi",
        # PI_OFFLINE=1 skips its startup network calls (version check, fd/ripgrep download);
        # PI_CODING_AGENT_DIR moves ~/.pi/agent (models.json, settings.json).
        env_prefixes=("PI_",),
        # No prompt glyph: the input box is the lines between two rules, the cwd and a footer
        # with the model under it. No dialogs: pi asks no permission and has no trust screen.
        prompt_pattern=r"^(?!)",
        ready_patterns=(r"^[─━]{8,}\n(?:(?![─━]{8,}).*\n){0,8}[─━]{8,}$",),
        # ` ⠙ Working...` above the box while a turn runs, ` ⠏ Retrying (3/3) in 1s...` while
        # it waits to retry a failed request.
        busy_patterns=(r"^\s*\S (?:Working\.\.\.|Retrying \(\d+/\d+\))",),
        # A failed turn ends in ` Error: <status> <message>` above the box.
        notices=(
            Dialog(
                "sign-in",
                r"^ Error: (?:Retry failed after \d+ attempts: )?40[13]\b"
                r"|Warning: No models available|%/0 \([^)]*\)\s+unknown$",
                fix="pi has no usable model: add one to ~/.pi/agent/models.json (a server of "
                "your own) or run `pi` once and /login",
            ),
            Dialog("rate-limit", r"^ Error: (?:Retry failed after \d+ attempts: )?429\b"),
            Dialog("quota", r"^ Error: .*(?:credit balance|[Qq]uota)"),
            Dialog("api-error", r"^ Error: (?:Retry failed after \d+ attempts: )?\d{3}\b"),
        ),
        notice_lines=5,
        boxed_input=True,
        ready_settle=0.5,
        resume_args=("--session", "{session_id}"),  # 0.73.1: "session file or partial UUID"
    )
    demo = AgentProfile(
        name="demo",
        command=[sys.executable, "-m", "omp", "demo-agent"],
        program=sys.executable,
        # A tmux server that already runs gives new panes its own environment, not the
        # launching shell's: forward the demo's knobs explicitly.
        env_prefixes=("OMP_DEMO_",),
        prompt_pattern=r"^❯(?:\s|$)",
        ready_patterns=(r"^❯(?:\s.*)?$",),
        # The prompt is always the last line; while working, a busy line sits right above it and
        # is erased when the work ends. Not a `❯` line: typed text may contain the word.
        busy_patterns=(r"^(?!❯).*\bworking\b.*\(esc to interrupt\)",),
        submit_delay=0.05,
        startup_timeout=20.0,
        bottom_lines=3,
        line_oriented=True,
    )
    return {p.name: p for p in (copilot, claude, codex, gemini, pi, demo)}


BUILTIN_PROFILES: Mapping[str, AgentProfile] = _builtins()


# -- screen classification ------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def bottom_window(lines: Sequence[str], size: int) -> list[str]:
    """The last `size` non-blank lines, right-stripped."""
    kept = [ln.rstrip() for ln in lines if ln.strip()]
    return kept[-size:] if size > 0 else []


def _lowest(patterns: Sequence[str], text: str) -> int:
    """Index of the lowest window line any pattern matches (a match counts at its last line)."""
    best = -1
    for pat in patterns:
        for m in _rx(pat).finditer(text):
            end = max(m.start(), m.end() - 1)
            best = max(best, text.count("\n", 0, end))
    return best


def _judge(profile: AgentProfile, lines: Sequence[str]) -> tuple[ScreenState, Dialog | None]:
    text = "\n".join(bottom_window(lines, profile.bottom_lines))
    dialog_at = -1
    dialog: Dialog | None = None
    for d in profile.dialogs:  # priority order: the first dialog present names the screen
        at = _lowest((d.pattern,), text)
        if at >= 0:
            dialog_at = max(dialog_at, at)
            dialog = dialog or d
    starting_at = _lowest(profile.starting_patterns, text)
    ready_at = _lowest(profile.ready_patterns, text)
    busy_at = _lowest(profile.busy_patterns, text)

    # Among dialog, starting and ready, the lowest wins (ties: dialog, then starting).
    state: ScreenState = "starting"
    top = max(dialog_at, starting_at, ready_at)
    if top >= 0:
        state = "dialog" if dialog_at == top else "starting" if starting_at == top else "ready"
    # Busy beats ready and starting (agents keep their prompt drawn while working), and beats a
    # dialog only from below it (the dialog is older).
    if busy_at >= 0 and (state != "dialog" or busy_at > dialog_at):
        return "busy", None
    return state, dialog if state == "dialog" else None


def classify_screen(profile: AgentProfile, lines: Sequence[str]) -> ScreenState:
    """What the bottom of the screen says. `starting` also covers anything unrecognised."""
    return _judge(profile, lines)[0]


def match_dialog(profile: AgentProfile, lines: Sequence[str]) -> Dialog | None:
    """The dialog the agent is waiting on, or None when the screen is not a dialog."""
    return _judge(profile, lines)[1]


def find_dialog(profile: AgentProfile, lines: Sequence[str]) -> tuple[str, ...] | None:
    """Keys that answer the current dialog; `()` if only a human can; None if no dialog shows."""
    d = match_dialog(profile, lines)
    return None if d is None else d.keys


def blocked_reason(profile: AgentProfile, lines: Sequence[str]) -> str | None:
    """The bottom line saying a human must act (e.g. sign in), or None: a notice (in the bottom
    `notice_lines`) or a `blocked_patterns` match (in the bottom window)."""
    found = _notice(profile, lines)
    if found is not None:
        return found[1]
    for ln in reversed(bottom_window(lines, profile.bottom_lines)):
        if any(_rx(p).search(ln) for p in profile.blocked_patterns):
            return ln.strip()
    return None


_BLOCKED = Dialog("blocked", "")


def _notice(profile: AgentProfile, lines: Sequence[str]) -> tuple[Dialog, str] | None:
    """The first notice (priority order) in the bottom `notice_lines` lines, and its line.

    Only below the last line the agent echoed a typed message on (a `prompt_pattern` line above
    the input box): what came before the person's last message is history.
    """
    window = bottom_window(lines, profile.notice_lines)
    if not profile.boxed_input and not profile.line_oriented:
        prompts = [i for i, ln in enumerate(window) if _rx(profile.prompt_pattern).search(ln)]
        if len(prompts) >= 2:
            window = window[prompts[-2] + 1 :]
    text = "\n".join(window)
    for d in profile.notices:
        m = _rx(d.pattern).search(text)
        if m is not None:
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start())
            return d, text[start : len(text) if end < 0 else end].strip()
    for p in profile.blocked_patterns:
        for ln in reversed(window):
            if _rx(p).search(ln):
                return _BLOCKED, ln.strip()
    return None


def screen_state(profile: AgentProfile, lines: Sequence[str]) -> tuple[PersonState, str | None]:
    """What the screen says, for the monitor: (state, what).

    - `("needs_person", what)`: a dialog no keys answer (what: its label, e.g. `permission
      prompt`, `sign in`, `menu`), or, unless busy, a notice (`rate limit`, `quota`, `sign in`,
      `api error`, `blocked`). Nothing may be typed into it; a person must look.
    - `("dialog", name)`: a dialog omp answers at launch (e.g. `trust`).
    - `("ready" | "busy" | "starting", None)` otherwise.
    """
    state, dialog = _judge(profile, lines)
    if dialog is not None:
        return ("dialog", dialog.name) if dialog.keys else ("needs_person", dialog.what)
    if state != "busy":
        found = _notice(profile, lines)
        if found is not None:
            return "needs_person", found[0].what
    return state, None


def person_fix(profile: AgentProfile, lines: Sequence[str]) -> str | None:
    """How a person clears what the screen shows (a dialog's or notice's `fix`), if known."""
    state, dialog = _judge(profile, lines)
    if dialog is not None:
        return dialog.fix or None
    found = _notice(profile, lines) if state != "busy" else None
    return found[0].fix or None if found is not None else None


# -- what a screen that needs a person shows ---------------------------------------------------

_RULE = set("─━═╌╍┄┈-—_╭╮╰╯┌┐└┘ ")


def _person_at(profile: AgentProfile, lines: Sequence[str], window: Sequence[str]) -> int:
    """Index in `window` of the line where what needs a person starts (the first line of a
    dialog no keys answer, the lowest line of a notice), -1 if the screen needs no person."""
    state, dialog = _judge(profile, lines)
    text = "\n".join(window)
    if dialog is not None:
        if dialog.keys:
            return -1
        m = _rx(dialog.pattern).search(text)
        return -1 if m is None else text.count("\n", 0, m.start())
    if state == "busy":
        return -1
    found = _notice(profile, lines)
    if found is None:
        return -1
    # The notice's own line (the lowest line of the window that reads the same).
    for i in range(len(window) - 1, -1, -1):
        if window[i].strip() == found[1]:
            return i
    return -1


def person_lines(profile: AgentProfile, lines: Sequence[str], count: int = 3) -> list[str]:
    """`count` non-blank lines that say what a screen needing a person asks (`screen_state` says
    `needs_person`): from the first line of the dialog or the notice's line (the bottom lines
    otherwise), box borders and rules left out. Raw text: sanitise it before showing it."""
    window = bottom_window(lines, profile.bottom_lines)
    start = _person_at(profile, lines, window)

    def clean(part: Sequence[str]) -> list[str]:
        kept = [ln.strip().strip("│┃║").strip() for ln in part]
        return [ln for ln in kept if ln and not set(ln) <= _RULE]

    kept = clean(window[max(start, 0) :])
    if start >= 0 and len(kept) >= count:
        return kept[:count]
    # Too few lines below it, or nothing found: the bottom lines, the question above a footer.
    return clean(window)[-count:]


def input_region(profile: AgentProfile, lines: Sequence[str]) -> list[str] | None:
    """The agent's input box: the last prompt line plus its continuation lines; None if absent.

    Continuation lines run until a blank line or a rule/border, so a footer below the box (Codex
    repeats the first message there) is never mistaken for unsent text. A line-oriented agent's
    input line is the last line or nothing: a prompt line with output under it was submitted.
    """
    stripped = [ln.rstrip() for ln in lines]
    nonblank = [i for i, ln in enumerate(stripped) if ln.strip()]
    if not nonblank:
        return None
    if profile.boxed_input:
        return _between_rules(stripped, nonblank[-profile.bottom_lines :])
    rx = _rx(profile.prompt_pattern)
    if profile.line_oriented:
        last = stripped[nonblank[-1]]
        return [last] if rx.search(last) else None
    first = nonblank[-profile.bottom_lines] if len(nonblank) >= profile.bottom_lines else 0
    start = next((i for i in reversed(nonblank) if i >= first and rx.search(stripped[i])), None)
    if start is None:
        return None
    region = [stripped[start]]
    for ln in stripped[start + 1 :]:
        if not ln.strip() or ln.lstrip()[:1] in ("─", "━", "═", "╰", "└", "╭", "┌"):
            break
        region.append(ln)
    return region


def _is_rule(line: str) -> bool:
    body = line.strip()
    return len(body) >= 8 and set(body) <= {"─", "━"}


def _between_rules(stripped: list[str], window: list[int]) -> list[str] | None:
    """The lines between the last two rules in the window (blank lines kept: an empty box is
    one blank line); None without two rules."""
    rules = [i for i in window if _is_rule(stripped[i])]
    if len(rules) < 2:
        return None
    return stripped[rules[-2] + 1 : rules[-1]]


def squash(text: str) -> str:
    """`text` without whitespace: wrapped or re-indented input compares equal."""
    return "".join(text.split())


def text_probe(text: str, size: int = 24) -> str:
    """The tail of `text` (whitespace removed) that identifies it in an input box."""
    return squash(text)[-size:]


# -- environment and programs ---------------------------------------------------------------------


def forwarded_env(
    profile: AgentProfile, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Variables to set in the agent's pane: matching `env_prefixes`, `env_defaults` unless the
    environment has them, then the fixed `env`."""
    src = os.environ if environ is None else environ
    out = {k: v for k, v in src.items() if k.startswith(profile.env_prefixes)}
    for key, value in profile.env_defaults.items():
        out[key] = src.get(key, value)
    out.update(profile.env)
    return out


# A pane whose foreground program is one of these says nothing about which agent runs in it.
_INTERPRETERS = re.compile(r"^(?:python[\d.]*|node|nodejs|bun|deno|sh|bash|zsh|fish|dash)$")


def profile_for_command(profiles: Mapping[str, AgentProfile], command: str) -> AgentProfile | None:
    """The profile whose program is `command` (a pane's foreground command, e.g. `copilot`)."""
    name = os.path.basename(command.strip())
    if not name or _INTERPRETERS.match(name):
        return None
    for p in profiles.values():
        if os.path.basename(p.command[0] if p.command else p.program) == name:
            return p
    return None


def profile_of_ancestors(
    profiles: Mapping[str, AgentProfile], pid: int | None = None, depth: int = 12
) -> AgentProfile | None:
    """The agent this process runs under, found by walking up its parents (`omp.procs`):
    a leader agent runs `omp team launch` through its shell tool, so its CLI is an ancestor.
    `node .../bin/copilot` counts as `copilot`. None when no ancestor is a known agent."""
    from omp import procs  # psutil: launch only, never a per-call command

    for argv in procs.lineage(pid, depth):
        for word in argv[:2]:
            found = profile_for_command(profiles, word)
            if found is not None:
                return found
    return None


def agent_argv(
    profile: AgentProfile, omp_argv: Sequence[str], dirs: Sequence[str] = ()
) -> list[str]:
    """The agent's command, granted the directory of the omp it runs and `dirs`
    (`add_dir_flag`): a worker in a worktree outside the project is also granted the project,
    where its inbox and result file are."""
    if not profile.add_dir_flag:
        return list(profile.command)
    grant: list[str] = []
    if omp_argv and os.path.isabs(omp_argv[0]):
        grant.append(os.path.dirname(omp_argv[0]))
    grant += [d for d in dirs if d not in grant]
    out = list(profile.command)
    for d in grant:
        out += [profile.add_dir_flag, d]
    return out


def missing_program(profile: AgentProfile) -> str | None:
    """The profile's program if it cannot be found (PATH lookup, or an executable path)."""
    return None if shutil.which(profile.program) else profile.program


SKIP_PERMISSIONS = "--dangerously-skip-permissions"


def start_refusal(
    profile: AgentProfile, command: list[str], env: Mapping[str, str], euid: int
) -> tuple[str, str] | None:
    """(why, fix) when the agent is known to refuse to start at all with `command` in `env`;
    None otherwise. Claude Code 2.1.328 as root refuses --dangerously-skip-permissions unless
    `IS_SANDBOX=1` says the machine is a sandbox, and says so where nobody sees it: in a tmux
    pane its one line is gone with the screen, so launch could only report "Pane is dead"."""
    if euid != 0 or os.path.basename(profile.program) != "claude":
        return None
    if SKIP_PERMISSIONS not in command:
        return None
    if {**env, **profile.env}.get("IS_SANDBOX", "").strip() == "1":
        return None
    return (
        f"running as root: Claude Code refuses {SKIP_PERMISSIONS} (how omp starts its "
        "workers) unless IS_SANDBOX=1 says this machine is a sandbox; omp never sets it for you",
        "run omp as a normal user; or, only in a container or VM you can throw away, "
        "`export IS_SANDBOX=1` before launching",
    )


# -- loading --------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_KEY_RE = re.compile(r"(?:[CMS]-)*[A-Za-z0-9][A-Za-z0-9-]*|[!-~]")
_FIELDS = {f.name for f in dataclasses.fields(AgentProfile)} - {"name"}


def load_profiles(root: Path) -> dict[str, AgentProfile]:
    """Built-in profiles, overridden and extended by `<root>/.omp/agents.toml` or `agents.json`."""
    profiles = dict(BUILTIN_PROFILES)
    toml_path, json_path = StatePaths(root).agents_toml, StatePaths(root).agents_json
    has_toml, has_json = toml_path.is_file(), json_path.is_file()
    if has_toml and has_json:
        raise _bad(toml_path, f"both it and {json_path.name} exist; keep one")
    if not (has_toml or has_json):
        return profiles
    path = toml_path if has_toml else json_path
    doc = _read(path)
    unknown = sorted(set(doc) - {"agents"})
    if unknown:
        raise _bad(path, f"unknown top-level key {unknown[0]!r} (only 'agents' is allowed)")
    agents = doc.get("agents", {})
    if not isinstance(agents, dict):
        raise _bad(path, "'agents' must be a table of profiles")
    for name, spec in agents.items():
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise _bad(path, f"invalid profile name {name!r}: use a-z, 0-9, '_' or '-' (max 32)")
        if not isinstance(spec, dict):
            raise _bad(path, f"agents.{name} must be a table")
        profiles[name] = _profile(path, name, spec, profiles.get(name))
    return profiles


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _bad(path, f"cannot read it ({exc.strerror})") from exc
    try:
        if path.suffix == ".toml":
            import tomllib

            doc: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            from omp.store.strictjson import SETTINGS_DEPTH, nests_deeper

            if nests_deeper(raw, SETTINGS_DEPTH):
                raise ValueError("nested too deeply")
            doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(path, f"does not parse: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad(path, "the top level must be a table/object")
    return doc


def _bad(path: Path, problem: str) -> OmpError:
    return OmpError("invalid_agents_file", f"{path}: {problem}", path=str(path))


def _profile(
    path: Path, name: str, spec: dict[str, Any], base: AgentProfile | None
) -> AgentProfile:
    unknown = sorted(set(spec) - _FIELDS)
    if unknown:
        allowed = ", ".join(sorted(_FIELDS))
        raise _bad(path, f"agents.{name}: unknown key {unknown[0]!r} (allowed: {allowed})")
    if base is None and "command" not in spec:
        raise _bad(path, f"agents.{name}: a new profile needs 'command'")
    where = f"agents.{name}"
    values: dict[str, Any] = {}
    for key, val in spec.items():
        values[key] = _field(path, f"{where}.{key}", key, val)
    if base is None:
        values.setdefault("program", values["command"][0])
        return AgentProfile(name=name, **values)
    return dataclasses.replace(base, **values)


def _field(path: Path, where: str, key: str, val: Any) -> Any:
    def fail(what: str) -> OmpError:
        return _bad(path, f"{where} must be {what}")

    if key == "command":
        if not _str_list(val) or not val or not val[0]:
            raise fail("a non-empty list of strings")
        return list(val)
    if key == "add_dir_flag":
        if not isinstance(val, str):
            raise fail("a string ('' for none)")
        return val
    if key in ("program", "submit_key"):
        if not isinstance(val, str) or not val:
            raise fail("a non-empty string")
        if key == "submit_key":
            _key(path, where, val)
        return val
    if key in ("env_prefixes", "resume_args"):
        if not _str_list(val) or not all(val):
            raise fail("a list of non-empty strings")
        return tuple(val)
    if key in ("env", "env_defaults"):
        if not isinstance(val, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in val.items()
        ):
            raise fail("a table of string values")
        return dict(val)
    if key == "prompt_pattern":
        if not isinstance(val, str):
            raise fail("a regex string")
        _regex(path, where, val)
        return val
    if key.endswith("_patterns"):
        if not _str_list(val):
            raise fail("a list of regex strings")
        for pat in val:
            _regex(path, where, pat)
        return tuple(val)
    if key == "dialogs":
        if not isinstance(val, list):
            raise fail("a list of {name, pattern, keys} tables")
        return tuple(_dialog(path, f"{where}[{i}]", d) for i, d in enumerate(val))
    if key == "notices":
        if not isinstance(val, list):
            raise fail("a list of {name, pattern} tables")
        return tuple(_dialog(path, f"{where}[{i}]", d, notice=True) for i, d in enumerate(val))
    if key in ("bottom_lines", "notice_lines"):
        if type(val) is not int or not 1 <= val <= 500:
            raise fail("an integer from 1 to 500")
        return val
    if key in ("line_oriented", "boxed_input"):
        if not isinstance(val, bool):
            raise fail("true or false")
        return val
    limits = {"submit_delay": 5.0, "startup_timeout": 3600.0, "ready_settle": 60.0}
    top = limits[key]
    if isinstance(val, bool) or not isinstance(val, int | float) or not 0 <= val <= top:
        raise fail(f"a number of seconds from 0 to {top:g}")
    return float(val)


def _dialog(path: Path, where: str, spec: Any, *, notice: bool = False) -> Dialog:
    allowed = {"name", "pattern", "fix"} | (set() if notice else {"keys"})
    if not isinstance(spec, dict):
        raise _bad(path, f"{where} must be a table with {', '.join(sorted(allowed))}")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        shown = ", ".join(sorted(allowed))
        raise _bad(path, f"{where}: unknown key {unknown[0]!r} (allowed: {shown})")
    name, pattern, keys = spec.get("name"), spec.get("pattern"), spec.get("keys", [])
    fix = spec.get("fix", "")
    if not isinstance(fix, str):
        raise _bad(path, f"{where}.fix must be a string")
    if not isinstance(name, str) or not name:
        raise _bad(path, f"{where}.name must be a non-empty string")
    if not isinstance(pattern, str) or not pattern:
        raise _bad(path, f"{where}.pattern must be a non-empty regex string")
    _regex(path, f"{where}.pattern", pattern)
    if not _str_list(keys):
        raise _bad(path, f"{where}.keys must be a list of key names")
    for k in keys:
        _key(path, f"{where}.keys", k)
    return Dialog(name, pattern, tuple(keys), fix)


def _str_list(val: Any) -> bool:
    return isinstance(val, list) and all(isinstance(v, str) for v in val)


def _regex(path: Path, where: str, pattern: str) -> None:
    try:
        re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise _bad(path, f"{where}: bad regex {pattern!r}: {exc}") from exc


def _key(path: Path, where: str, key: str) -> None:
    if not _KEY_RE.fullmatch(key) or key == ";":
        raise _bad(path, f"{where}: {key!r} is not a tmux key name (e.g. Enter, C-m, Escape, 1)")
