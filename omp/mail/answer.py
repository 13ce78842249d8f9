"""Answering a worker's "needs you" prompt for a person: `omp team answer` and the board.

A screen that needs a person (`omp.agents.screen_state` says `needs_person`) may be a menu of
numbered options: Claude Code's permission prompt (`❯ 1. Yes` ... `4. No`), Copilot CLI's menus
(`↑/↓ to navigate · enter to select`). `read_prompt` reads what it asks and its options from the
screen; a prompt with no options (a rate-limit notice, a sign-in) cannot be answered from here.

`answer` chooses one option, and only on the prompt the person saw:

- under the pane's lock (the one `omp.mail.typein` types nudges under, so no nudge, trigger or
  other answer interleaves its keys), the screen is read again: the same prompt must be there
  (its `ident`: the dialog's lines and options, whichever option is highlighted), else nothing
  is typed and the refusal says what shows now;
- the highlight is moved with Up/Down one key at a time, each move seen on the screen, and the
  same prompt is checked once more before Enter: Enter on a permission prompt approves what is
  highlighted, so it is pressed only when the highlight is on the chosen option;
- then the screen must show the prompt gone (or another one: the agent asks the next thing)
  within `Timing.settle` seconds; if the same prompt is still there, `not_answered`.

Digit keys are not used: Claude Code 2.1.328's menus take none, and a digit on a screen that
changed meanwhile could land in an input box as text.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from typing import NamedTuple

from omp.agents import AgentProfile, bottom_window, match_dialog, person_lines, screen_state
from omp.errors import OmpError
from omp.textsafe import inline

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from omp.record.config import TeamConfig
    from omp.tmux import Tmux

# `❯ 1. Yes`, `  2. Yes, and always allow …`, `│ › 3) No │`: an optional box border, an optional
# highlight glyph, the number, the label.
_OPTION = re.compile(
    r"^\s*(?:[│┃║]\s*)?(?P<mark>[❯›>▶►●*]\s*)?(?P<n>\d{1,2})[.)]\s+(?P<label>\S.*?)\s*[│┃║]?\s*$"
)
LABEL_MAX = 160
IDENT_LEN = 16


class Option(NamedTuple):
    number: int  # as the screen numbers it (1 = the first)
    label: str  # one visible line (controls escaped)
    selected: bool  # the highlighted one: what Enter would choose


class Prompt(NamedTuple):
    """A screen that needs a person, as read from it."""

    what: str  # `permission prompt`, `menu`, `rate limit`...
    lines: list[str]  # what it asks: up to 3 sanitised lines
    options: list[Option]  # empty: nothing here can answer it (attach to the pane)
    ident: str  # the prompt's identity: its lines and options, not which one is highlighted

    @property
    def selected(self) -> Option | None:
        return next((o for o in self.options if o.selected), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "lines": self.lines,
            "options": [
                {"number": o.number, "label": o.label, "selected": o.selected} for o in self.options
            ],
            "promptId": self.ident,
        }


def parse_options(window: Sequence[str]) -> list[Option]:
    """The lowest run of numbered lines 1..k in `window` (screen lines, top to bottom)."""
    found: list[Option] = []
    for line in reversed(window):
        m = _OPTION.match(line)
        if m is None:
            if found:
                break  # the run ended above its first line
            continue
        found.append(Option(int(m["n"]), inline(m["label"])[:LABEL_MAX], m["mark"] is not None))
    found.reverse()
    if not found or [o.number for o in found] != list(range(1, len(found) + 1)):
        return []
    return found


def _ident(what: str, window: Sequence[str]) -> str:
    """A digest of the dialog's lines with the highlight glyph taken off its options: moving
    the highlight keeps the prompt the same; another command to approve makes another one."""
    parts = [what]
    for line in window:
        m = _OPTION.match(line)
        parts.append(f"{m['n']}. {m['label']}" if m else line.strip())
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:IDENT_LEN]


def read_prompt(profile: AgentProfile, lines: Sequence[str]) -> Prompt | None:
    """What the screen asks a person, or None when it needs no person."""
    state, what = screen_state(profile, lines)
    if state != "needs_person":
        return None
    window = bottom_window(lines, profile.bottom_lines)
    label = what or "needs you"
    # Options only on a dialog (a menu, a permission prompt): a notice's screen may hold a
    # numbered list that answers nothing (Gemini's tips above its prompt).
    options = parse_options(window) if match_dialog(profile, lines) is not None else []
    if len(options) < 2:
        options = []
    asked = person_lines(profile, lines, 6 if options else 3)
    shown = [inline(ln) for ln in asked if not (options and _OPTION.match(ln))][:3]
    return Prompt(label, shown or [inline(ln) for ln in asked][:3], options, _ident(label, window))


def pick(prompt: Prompt, choice: str) -> Option:
    """The option `choice` names: its number, or its label (case-insensitive, whole or the only
    one it starts)."""
    text = choice.strip()
    if text.isdigit():
        for o in prompt.options:
            if o.number == int(text):
                return o
    else:
        low = text.casefold()
        exact = [o for o in prompt.options if o.label.casefold() == low]
        starts = [o for o in prompt.options if o.label.casefold().startswith(low)] if low else []
        if exact or len(starts) == 1:
            return (exact or starts)[0]
    listed = "; ".join(f"{o.number}. {o.label}" for o in prompt.options)
    raise OmpError(
        "unknown_choice",
        f"{choice!r} is none of the prompt's options: {listed}",
        options=[o.label for o in prompt.options],
    )


# ---- typing the choice -------------------------------------------------------------------------


class Timing(NamedTuple):
    """How long answering waits: for the pane's lock, for each highlight move to show, and for
    the prompt to go once Enter was pressed; screens are read every `poll` seconds."""

    lock: float = 10.0
    move: float = 1.5
    settle: float = 5.0
    poll: float = 0.03


TIMING = Timing()


def answer(
    cfg: TeamConfig,
    worker: str,
    choice: str,
    *,
    prompt_id: str | None = None,
    timing: Timing = TIMING,
) -> dict[str, Any]:
    """Choose `choice` on the prompt `worker`'s screen shows (the one named `prompt_id`, when
    given) and see the prompt go. See the module for the checks; each refusal is an `OmpError`
    that types nothing (`not_answered`: typed, and the same prompt still shows)."""
    from omp.mail.panes import profile_for
    from omp.mail.typein import pane_lock

    tmux, pane, check = _target(cfg, worker)
    profile = profile_for(cfg, worker)
    with pane_lock(tmux, cfg.paths.project.tmux_locks, pane, timing.lock) as locked:
        if not locked:
            raise OmpError("not_answered", f"{worker}'s pane is busy with other typing; try again")
        check()
        prompt = _current(tmux, pane, profile, worker, prompt_id)
        option = pick(prompt, choice)
        keys = _move(tmux, pane, profile, prompt, option, timing)
        tmux.send_key(pane, "Enter")
        keys.append("Enter")
        after = _settled(tmux, pane, profile, prompt, timing)
    if after is not None and after.ident == prompt.ident:
        raise OmpError(
            "not_answered",
            f"typed {' '.join(keys)} for {option.number}. {option.label}, but the same prompt "
            f"still shows after {timing.settle:g} s",
            keys=keys,
        )
    from omp.record import history

    history.record(
        cfg.paths,
        {
            "type": "answer",
            "worker": worker,
            "what": prompt.what,
            "choice": option.label,
            "number": option.number,
        },
    )
    return {
        "ok": True,
        "team": cfg.name,
        "worker": worker,
        "what": prompt.what,
        "promptId": prompt.ident,
        "choice": {"number": option.number, "label": option.label},
        "keys": keys,
        # what the screen asks now, if anything (the agent's next question)
        "next": after.to_json() if after is not None else None,
    }


def show(cfg: TeamConfig, worker: str) -> dict[str, Any]:
    """What `worker`'s screen asks a person now (read-only): `prompt` is None when nothing."""
    from omp.mail.panes import profile_for, tmux_for

    if _remote(cfg, worker):
        from omp.mail import remote_answer

        lines = remote_answer.screen(cfg, worker, 200)  # host_unreachable: said, not hidden
    else:
        pane = _pane(cfg, worker)
        try:
            lines = tmux_for(cfg).capture(pane, 200)
        except OmpError:
            lines = []
    prompt = read_prompt(profile_for(cfg, worker), lines) if lines else None
    return {
        "ok": True,
        "team": cfg.name,
        "worker": worker,
        "prompt": prompt.to_json() if prompt else None,
    }


def _target(cfg: TeamConfig, worker: str) -> tuple[Tmux, str, Callable[[], None]]:
    """The worker's tmux server (its host's, over ssh, for a worker on another host), its pane,
    and the check that refuses to type into it (`no_prompt`: gone or dead; `pane_mismatch`: the
    id names another pane now; `not_answered`: in copy mode; `host_unreachable`)."""
    if _remote(cfg, worker):
        from omp.mail import remote_answer

        host_tmux, placed = remote_answer.target(cfg, worker)
        return (
            host_tmux,
            placed.pane,
            lambda: remote_answer.check(host_tmux, placed, cfg.name, worker),
        )
    from omp.mail.panes import expected_identity, tmux_for

    pane = _pane(cfg, worker)
    expected = expected_identity(cfg, pane)
    if expected is None:
        raise OmpError("no_prompt", f"{worker}'s pane was not recorded at launch", worker=worker)
    tmux = tmux_for(cfg)

    def check() -> None:
        info = tmux.pane_info(pane)
        if info is None or info.dead:
            raise OmpError("no_prompt", f"{worker}'s pane is {'gone' if info is None else 'dead'}")
        if info.identity != expected:
            raise OmpError(
                "pane_mismatch",
                f"pane {pane} is not {worker}'s recorded pane any more",
                pane_id=pane,
            )
        if info.in_mode:
            raise OmpError(
                "not_answered", f"{worker}'s pane is in copy mode: someone is scrolling it"
            )

    return tmux, pane, check


def _member(cfg: TeamConfig, worker: str) -> None:
    from omp.store.names import worker_name

    worker_name(worker)
    if worker not in cfg.worker_names:
        raise OmpError(
            "unknown_worker",
            f"{worker!r} is not a worker of team {cfg.name}; "
            f"workers: {', '.join(cfg.worker_names)}",
            candidates=cfg.worker_names,
        )


def _remote(cfg: TeamConfig, worker: str) -> bool:
    """A worker of the team on another host? (Its record says so; nothing of ssh loaded.)"""
    _member(cfg, worker)
    return isinstance((cfg.worker(worker) or {}).get("remote"), dict)


def _pane(cfg: TeamConfig, worker: str) -> str:
    _member(cfg, worker)
    pane = cfg.pane_of(worker)
    if not pane:
        raise OmpError("no_prompt", f"{worker} has no pane (a headless worker)", worker=worker)
    return pane


def _current(
    tmux: Tmux, pane: str, profile: AgentProfile, worker: str, prompt_id: str | None
) -> Prompt:
    prompt = read_prompt(profile, tmux.capture(pane, 200))
    if prompt is None:
        raise OmpError("no_prompt", f"{worker}'s screen asks nothing of a person now")
    if prompt_id is not None and prompt.ident != prompt_id:
        raise OmpError(
            "prompt_changed",
            f"{worker}'s screen shows another prompt than the one answered ({prompt.what}: "
            f"{' | '.join(prompt.lines)}); nothing was typed",
            prompt=prompt.to_json(),
        )
    if not prompt.options:
        raise OmpError(
            "prompt_unanswerable",
            f"{worker}'s {prompt.what} has no options omp can choose from: "
            f"{' | '.join(prompt.lines)}; attach to its pane",
            prompt=prompt.to_json(),
        )
    if prompt.selected is None:
        raise OmpError(
            "prompt_unanswerable",
            f"{worker}'s {prompt.what} shows no highlighted option to move from; attach to its "
            "pane",
            prompt=prompt.to_json(),
        )
    return prompt


def _move(
    tmux: Tmux, pane: str, profile: AgentProfile, prompt: Prompt, target: Option, timing: Timing
) -> list[str]:
    """Move the highlight onto `target`, one key at a time, each move seen on the screen."""
    keys: list[str] = []
    at = prompt.selected
    assert at is not None
    while at.number != target.number:
        key = "Down" if target.number > at.number else "Up"
        want = at.number + (1 if key == "Down" else -1)
        tmux.send_key(pane, key)
        keys.append(key)
        end = time.monotonic() + timing.move
        while True:
            now = read_prompt(profile, tmux.capture(pane, 200))
            if now is None or now.ident != prompt.ident:
                raise OmpError(
                    "prompt_changed",
                    f"the prompt changed while its highlight was moved ({' '.join(keys)}); "
                    "Enter was not pressed",
                    keys=keys,
                )
            sel = now.selected
            if sel is not None and sel.number == want:
                at = sel
                break
            if time.monotonic() >= end:
                raise OmpError(
                    "not_answered",
                    f"the highlight did not move to option {want} after {' '.join(keys)}; Enter "
                    "was not pressed",
                    keys=keys,
                )
            time.sleep(timing.poll)
    return keys


def _settled(
    tmux: Tmux, pane: str, profile: AgentProfile, prompt: Prompt, timing: Timing
) -> Prompt | None:
    """The screen once the prompt went (None: nothing asks now; another prompt: the agent's
    next question), or the same prompt still there after `timing.settle`."""
    end = time.monotonic() + timing.settle
    while True:
        time.sleep(timing.poll)
        try:
            lines = tmux.capture(pane, 200)
        except OmpError:
            return None  # the pane went with the answer (the agent exited): nothing asks
        now = read_prompt(profile, lines)
        if now is None or now.ident != prompt.ident or time.monotonic() >= end:
            return now
