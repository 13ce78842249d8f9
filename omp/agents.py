"""Agent profiles as data, and what an agent's screen says: ready, busy, a dialog, or starting.

Built-in profiles: `copilot`, `claude`, `codex`, `gemini` and `demo`. A project overrides or adds
profiles in `<root>/.omp/agents.toml` or `<root>/.omp/agents.json` (one of them, not both):

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

The JSON file holds the same thing: `{"agents": {"mycli": {"command": ["mycli"], ...}}}`.
Profile names: 1-32 of `a-z 0-9 _ -`, starting with a letter. Fields:

    command          list of strings   argv of the agent (run without a shell)
    program          string            the executable that must be on PATH (default: command[0])
    env_prefixes     list of strings   environment variables with these prefixes are forwarded
    env              table of strings  fixed extra variables for the agent's pane
    add_dir_flag     string            flag that lets the agent use files in a directory; launch
                                       appends it with the directory of the omp the agent runs
                                       (Copilot asks before a command names a path outside its
                                       allowed directories, and omp is named by absolute path)
    prompt_pattern   regex             the agent's input line (the last match is the input box)
    ready_patterns   list of regexes   the agent waits for input
    busy_patterns    list of regexes   the agent is working (beats ready: prompts stay drawn)
    starting_patterns list of regexes  the agent is (re)starting
    blocked_patterns list of regexes   a human must act (e.g. sign in) although a prompt shows
    dialogs          list of tables    {name, pattern, keys}: a modal screen and the keys that
                                       answer it (sent one by one), in priority order
    submit_key       string            key that submits typed text (Copilot >= 1.0.61 ignores C-m)
    submit_delay     seconds           pause between typing and the submit key (Codex and Gemini
                                       take text + Enter in one burst as a paste)
    startup_timeout  seconds           how long a launch waits for `ready`
    ready_settle     seconds           how long `ready` must hold before a launch trusts it
                                       (Gemini draws its prompt ~3 s before its trust dialog)
    bottom_lines     integer           how many bottom non-blank lines the screen is judged by
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
while working) and beats a dialog only from below it. The built-in patterns come from real captures
(`tests/fixtures/screens/`: Copilot CLI 1.0.102, Codex 0.171, Gemini 0.61); Claude Code's are
taken from other projects' detectors and are unverified here.
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

# A prompt glyph, optionally inside a box border; not a numbered menu item (`❯ 1. Yes`).
GENERIC_PROMPT = r"^\s*(?:[│┃]\s*)?[›>❯](?!\s*\d+\.\s)(?:\s|$)"


@dataclass(frozen=True)
class Dialog:
    """A modal screen: `pattern` finds it, `keys` answer it; `()` means only a human can."""

    name: str
    pattern: str
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentProfile:
    name: str
    command: list[str]
    program: str
    env_prefixes: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    add_dir_flag: str = ""
    prompt_pattern: str = GENERIC_PROMPT
    ready_patterns: tuple[str, ...] = (GENERIC_PROMPT,)
    busy_patterns: tuple[str, ...] = (r"(?i)esc to (?:interrupt|cancel)",)
    starting_patterns: tuple[str, ...] = ()
    blocked_patterns: tuple[str, ...] = ()
    dialogs: tuple[Dialog, ...] = ()
    submit_key: str = "Enter"
    submit_delay: float = 0.15
    startup_timeout: float = 60.0
    ready_settle: float = 0.0
    bottom_lines: int = 12
    line_oriented: bool = False
    resume_args: tuple[str, ...] = ()


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
        blocked_patterns=(
            r"Please use /login to sign in",
            r"You must be logged in to send messages",
        ),
        dialogs=(
            # `1` selects "Yes" (this session only) directly; no Enter needed.
            Dialog(
                "trust", r"Do you trust the files in this folder\?|Confirm folder trust", ("1",)
            ),
            Dialog("login-error", r"Press any key to retry"),
            Dialog("menu", r"↑/↓ to navigate · enter to select"),
        ),
        ready_settle=0.5,
        resume_args=("--resume={session_id}",),  # 1.0.102: `-r, --resume [<value>]`
    )
    claude = AgentProfile(
        name="claude",
        command=["claude", "--dangerously-skip-permissions"],
        program="claude",
        env_prefixes=("ANTHROPIC_", "CLAUDE_"),
        busy_patterns=(r"(?i)esc to interrupt",),
        ready_patterns=(GENERIC_PROMPT, r"\? for shortcuts"),
        dialogs=(
            Dialog(
                "trust",
                r"Do you trust the files in this folder\?|Do you trust the contents of this",
                ("Enter",),
            ),
            Dialog("bypass-permissions", r"Bypass Permissions mode", ("2", "Enter")),
            Dialog("sign-in", r"Select login method|Choose the text style"),
            Dialog("menu", r"Enter to confirm · Esc to (?:exit|cancel)"),
        ),
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
            ),
            Dialog("hooks-review", r"Hooks need review"),
            Dialog("warnings", r"esc dismiss & close", ("Escape",)),
        ),
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
            ),
        ),
        # The prompt shows ~3 s before the trust dialog on a fresh directory.
        ready_settle=3.5,
        bottom_lines=16,
        resume_args=("--resume", "{session_id}"),  # 0.61: `--resume {uuid}` (or an index)
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
    return {p.name: p for p in (copilot, claude, codex, gemini, demo)}


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
    """The bottom line saying a human must act (e.g. sign in), or None."""
    for ln in reversed(bottom_window(lines, profile.bottom_lines)):
        if any(_rx(p).search(ln) for p in profile.blocked_patterns):
            return ln.strip()
    return None


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
    """Variables to set in the agent's pane: matching `env_prefixes`, then the fixed `env`."""
    src = os.environ if environ is None else environ
    out = {k: v for k, v in src.items() if k.startswith(profile.env_prefixes)}
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
    """The agent this process runs under, found by walking up its parents (Linux `/proc`):
    a leader agent runs `omp team launch` through its shell tool, so its CLI is an ancestor.
    `node .../bin/copilot` counts as `copilot`. None when no ancestor is a known agent."""
    cur = os.getpid() if pid is None else pid
    for _ in range(depth):
        try:
            with open(f"/proc/{cur}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{cur}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        for word in argv[:2]:
            found = profile_for_command(profiles, word)
            if found is not None:
                return found
        if ppid <= 1:
            return None
        cur = ppid
    return None


def agent_argv(profile: AgentProfile, omp_argv: Sequence[str]) -> list[str]:
    """The agent's command, granted the directory of the omp it runs (`add_dir_flag`)."""
    if not profile.add_dir_flag or not omp_argv or not os.path.isabs(omp_argv[0]):
        return list(profile.command)
    return [*profile.command, profile.add_dir_flag, os.path.dirname(omp_argv[0])]


def missing_program(profile: AgentProfile) -> str | None:
    """The profile's program if it cannot be found (PATH lookup, or an executable path)."""
    return None if shutil.which(profile.program) else profile.program


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
    if key == "env":
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
    if key == "bottom_lines":
        if type(val) is not int or not 1 <= val <= 500:
            raise fail("an integer from 1 to 500")
        return val
    if key == "line_oriented":
        if not isinstance(val, bool):
            raise fail("true or false")
        return val
    limits = {"submit_delay": 5.0, "startup_timeout": 3600.0, "ready_settle": 60.0}
    top = limits[key]
    if isinstance(val, bool) or not isinstance(val, int | float) or not 0 <= val <= top:
        raise fail(f"a number of seconds from 0 to {top:g}")
    return float(val)


def _dialog(path: Path, where: str, spec: Any) -> Dialog:
    if not isinstance(spec, dict):
        raise _bad(path, f"{where} must be a table with name, pattern and keys")
    unknown = sorted(set(spec) - {"name", "pattern", "keys"})
    if unknown:
        raise _bad(path, f"{where}: unknown key {unknown[0]!r} (allowed: keys, name, pattern)")
    name, pattern, keys = spec.get("name"), spec.get("pattern"), spec.get("keys", [])
    if not isinstance(name, str) or not name:
        raise _bad(path, f"{where}.name must be a non-empty string")
    if not isinstance(pattern, str) or not pattern:
        raise _bad(path, f"{where}.pattern must be a non-empty regex string")
    _regex(path, f"{where}.pattern", pattern)
    if not _str_list(keys):
        raise _bad(path, f"{where}.keys must be a list of key names")
    for k in keys:
        _key(path, f"{where}.keys", k)
    return Dialog(name, pattern, tuple(keys))


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
