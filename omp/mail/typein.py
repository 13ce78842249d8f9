"""Typing one line into an agent's input box and seeing it submitted: nudges and launch triggers.

Built on the thin tmux client's primitives (`send_literal`, `send_key`, `capture`, `pane_info`,
`lock_path`); what makes it reliable is the agent's screen, judged by its profile:

- under a per-pane flock (so two senders never interleave keystrokes), refuse a gone or dead
  pane, a pane in copy mode (the user's scrollback is left alone), a pane whose agent exited to a
  shell, a screen that needs a person (a permission prompt, where Enter would approve a command;
  a sign-in; a rate-limit or error notice: `omp.agents.screen_state`), and a screen that is
  neither ready nor busy (a dialog, a restart);
- type the text, wait `profile.submit_delay` and until the text shows in the input box, then
  press `profile.submit_key` on its own: text and the key in one burst are taken as a paste by
  Codex and Gemini (tmux 3.3a, reproduced);
- poll until the text has left the input box, pressing the key again up to `rounds` times. Text
  an earlier unverified attempt left in the box is not typed twice.

A caller whose line may stop being wanted while it waits for the lock (a nudge: another process
may have nudged about the same mail meanwhile) passes `guard`, asked under the lock before
anything is read or typed, and `on_submitted`, run under the lock once the line was seen
submitted (where it records that it typed, so the next typer's `guard` sees it).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from omp.agents import AgentProfile, input_region, screen_state, squash, text_probe
from omp.errors import OmpError
from omp.store import fs, locks
from omp.tmux import NO_SERVER, NO_TARGET, PaneIdentity, PaneInfo, Tmux, check_literal

SHELLS = frozenset({"sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "csh", "tcsh", "login"})


@dataclass(frozen=True)
class Delivery:
    """How typing a line ended. `ok` only when the screen showed the text leave the input box.

    reason: delivered | gone | dead | copy_mode | agent_not_running | needs_person (`screen`
    says what) | not_ready | busy (with `only_idle`) | lock_timeout | no_echo (the text never
    showed in the input box) | unverified
    (still there after all rounds) | unwanted (the caller's `guard` said why, in `screen`);
    from `omp.mail.panes.deliver_line` also no_identity, pane_mismatch, server_gone or an
    error code.
    """

    ok: bool
    reason: str
    rounds: int = 0
    elapsed: float = 0.0
    # the classification when reason is "not_ready" or "busy"; what a person must handle when
    # it is "needs_person" (e.g. "permission prompt")
    screen: str | None = None


@dataclass(frozen=True)
class Timing:
    """How long typing waits: `rounds` presses of the submit key, `round_timeout` each; the echo
    of the text up to `echo_timeout`; the pane's lock up to `lock_timeout`; screens read every
    `poll` seconds."""

    rounds: int = 3
    poll: float = 0.03
    echo_timeout: float = 1.0
    round_timeout: float = 1.0
    lock_timeout: float = 10.0


TIMING = Timing()


def type_line(
    tmux: Tmux,
    pane_id: str,
    text: str,
    profile: AgentProfile,
    *,
    lock_dir: Path,
    expected: PaneIdentity | None = None,
    only_idle: bool = False,
    timing: Timing = TIMING,
    guard: Callable[[], str | None] | None = None,
    on_submitted: Callable[[], None] | None = None,
) -> Delivery:
    """Type `text` into the agent's input box in `pane_id` and submit it (see the module).

    `only_idle`: type nothing unless the screen is `ready` (reason `busy` otherwise): keys that
    reach a busy agent disturb it (Copilot CLI backgrounds a running command, and replays
    queued lines as turns later).

    Raises `OmpError("pane_mismatch")` if `expected` is given and the pane id now belongs to
    another pane or server incarnation: the caller's record is stale, not just "not now".
    Raises `invalid_text` / `text_too_long` for text that must not be typed.

    `guard()`, asked once the pane's lock is held: None to go on, or why the line is not
    wanted any more (reason `unwanted`, nothing typed). `on_submitted()` runs, still under the
    lock, when the line was seen submitted.
    """
    check_literal(text)
    t0 = time.monotonic()

    def done(ok: bool, reason: str, n: int = 0, screen: str | None = None) -> Delivery:
        return Delivery(ok, reason, n, time.monotonic() - t0, screen)

    probe = text_probe(text)

    def in_box(lines: Sequence[str]) -> bool:
        box = input_region(profile, lines)
        return box is not None and probe in squash("".join(box))

    with pane_lock(tmux, lock_dir, pane_id, timing.lock_timeout) as locked:
        if not locked:
            return done(False, "lock_timeout")
        why = guard() if guard is not None else None
        if why is not None:
            return done(False, "unwanted", screen=why)
        info = tmux.pane_info(pane_id)
        if info is None:
            return done(False, "gone")
        if expected is not None and info.identity != expected:
            raise OmpError(
                "pane_mismatch",
                f"pane {pane_id} is not the recorded pane any more "
                "(its session, window or tmux server changed)",
                pane_id=pane_id,
            )
        refused = _refusal(info, profile)
        if refused:
            return done(False, refused)
        try:
            lines = tmux.capture(pane_id, 200)
            screen, what = screen_state(profile, lines)
            if screen == "needs_person":
                return done(False, "needs_person", screen=what)
            if screen not in ("ready", "busy"):
                return done(False, "not_ready", screen=screen)
            if only_idle and screen != "ready":
                return done(False, "busy", screen=screen)
            if not in_box(lines):
                tmux.send_literal(pane_id, text)
            sent = time.monotonic()
            # Wait for the echo (bounded) and at least submit_delay, so the key does not
            # arrive in the same burst as the text.
            seen = in_box(tmux.capture(pane_id, 200))
            while not seen and time.monotonic() < sent + timing.echo_timeout:
                time.sleep(timing.poll)
                seen = in_box(tmux.capture(pane_id, 200))
            rest = sent + profile.submit_delay - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            for n in range(1, timing.rounds + 1):
                now = tmux.pane_info(pane_id)
                if now is None or now.dead:
                    return done(False, "gone" if now is None else "dead", n - 1)
                if now.in_mode:
                    return done(False, "copy_mode", n - 1)
                tmux.send_key(pane_id, profile.submit_key)
                end = time.monotonic() + timing.round_timeout
                while True:
                    time.sleep(timing.poll)
                    if not in_box(tmux.capture(pane_id, 200)):
                        if seen and on_submitted is not None:
                            on_submitted()
                        return done(seen, "delivered" if seen else "no_echo", n)
                    if time.monotonic() >= end:
                        break
            return done(False, "unverified", timing.rounds)
        except OmpError as exc:
            if any(s in exc.message for s in NO_TARGET + NO_SERVER):
                return done(False, "gone")
            raise


@contextlib.contextmanager
def pane_lock(tmux: Tmux, lock_dir: Path, pane_id: str, timeout: float) -> Iterator[bool]:
    """An exclusive flock per (server, pane); yields False if not had within `timeout`."""
    if not fs.check_entry(lock_dir, want_dir=True):
        try:  # the last component only: callers hand in a directory inside their own tree
            os.mkdir(lock_dir, fs.DIR_MODE)
        except FileExistsError:
            pass
        fs.check_entry(lock_dir, want_dir=True)
    with locks.flocked(tmux.lock_path(lock_dir, pane_id), timeout, poll=0.01) as taken:
        yield taken


def _refusal(info: PaneInfo, profile: AgentProfile) -> str | None:
    if info.dead:
        return "dead"
    if info.in_mode:
        return "copy_mode"
    # The agent exited and left a shell: typed text would run as a command.
    cmd = os.path.basename(info.current_command).lstrip("-")
    if cmd in SHELLS and os.path.basename(profile.program) not in SHELLS:
        return "agent_not_running"
    return None


class TypingTmux(Tmux):
    """The thin client plus typing: what the monitor's scans use of tmux (its `Adapter`)."""

    def deliver(
        self,
        pane_id: str,
        text: str,
        profile: AgentProfile,
        *,
        lock_dir: Path,
        expected: PaneIdentity | None = None,
        only_idle: bool = False,
        guard: Callable[[], str | None] | None = None,
        on_submitted: Callable[[], None] | None = None,
    ) -> bool:
        """`type_line`, True only if the line was seen submitted."""
        res = type_line(
            self,
            pane_id,
            text,
            profile,
            lock_dir=lock_dir,
            expected=expected,
            only_idle=only_idle,
            guard=guard,
            on_submitted=on_submitted,
        )
        return res.ok
