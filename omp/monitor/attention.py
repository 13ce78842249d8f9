"""A worker that needs a person ("needs you"): what the monitor decides, publishes and tells.

A worker needs a person when its screen shows what only a person can answer
(`omp.agents.screen_state` says `needs_person`: a permission prompt, a sign-in, a rate-limit or
quota notice, an API error), or when it has sat idle at its prompt for longer than
`[team] stuck_after` seconds (default 600) while a task it owns is still `in_progress`. The
monitor judges every live worker's screen on every scan (a screen unchanged since its last
capture is not captured again).

One stretch of needing a person is an episode; it ends when the screen no longer asks. The
monitor keeps the open episode in the pane's tracker (`omp.monitor.trackers`), so a restarted
monitor neither opens it again nor tells anyone twice. When an episode opens:

- `team/<name>/attention.json` gets the worker's entry (what, since, 3 sanitised screen lines,
  the command to attach to its pane, the episode's number `seq`): `status` and `wait` read it;
- the team's `events.jsonl` gets a line (`{"type": "attention", "change": "started"}`);
- the leader gets one message (automatic, from the worker);
- a notification is queued (`omp.notify.emit`, kind `attention`).

Nothing is typed into a pane whose screen needs a person (`omp.mail.typein` refuses, and the
monitor's policy reads such a screen as not idle), so nudges wait until it is gone.
"""

from __future__ import annotations

from omp import clock
from omp.invocation import quote
from omp.mail import mailbox
from omp.record import history
from omp.record.config import TeamConfig
from omp.record.settings import TeamSettings, team_settings
from omp.store import fs, locks
from omp.store.names import LEADER
from omp.store.paths import StatePaths, TeamPaths
from omp.textsafe import inline

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SCHEMA = 1
LINE_MAX = 200


def settings(project: StatePaths) -> TeamSettings:
    """`[team]` of `.omp/config.toml` (defaults when absent): `stuck_after` is the seconds idle
    at the prompt with a task in progress (`omp.record.settings`, the table's one reader)."""
    return team_settings(project)


def stuck_text(seconds: float, task: str) -> str:
    mins = seconds / 60
    span = f"{mins:g} min" if mins >= 1 else f"{seconds:g} s"
    return f"idle at its prompt for over {span} with task {task} in progress"


def clean_lines(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Screen lines safe to show anywhere: one row each, controls escaped, cut."""
    return [inline(ln)[:LINE_MAX] for ln in lines]


def attach_command(cfg: TeamConfig, pane: str) -> str | None:
    """The command a person runs to reach `pane`: select it, then attach to its session."""
    ident = cfg.tmux or {}
    socket = ident.get("socketPath")
    session = cfg.raw.get("tmuxSession") or ident.get("sessionId")
    if not isinstance(socket, str) or not socket or not isinstance(session, str) or not session:
        return None
    tmux = f"tmux -S {quote(socket)}"
    return f"{tmux} select-pane -t {pane} && {tmux} attach -t {quote(session)}"


# ---- the published view: team/<name>/attention.json ----------------------------------------


def _generation(raw: dict[str, Any]) -> str:
    from omp.monitor.policy import generation

    return generation(raw)


def read(cfg: TeamConfig) -> dict[str, Any]:
    """`{"seq": N, "workers": {name: entry}}` for this launch of the team. Read-only; a file of
    an earlier launch, or none, reads as nobody needing anyone."""
    empty: dict[str, Any] = {"seq": 0, "workers": {}}
    try:
        if not fs.check_entry(cfg.paths.attention, want_dir=False):
            return empty
        doc = fs.read_json(cfg.paths.attention)
    except Exception:
        return empty
    if not isinstance(doc, dict) or doc.get("generation") != _generation(cfg.raw):
        return empty
    seq = doc.get("seq")
    workers = doc.get("workers")
    if not isinstance(seq, int) or not isinstance(workers, dict):
        return empty
    names = set(cfg.worker_names)
    return {
        "seq": seq,
        "workers": {w: e for w, e in workers.items() if w in names and isinstance(e, dict)},
    }


def _update(team: TeamPaths, raw: dict[str, Any], change: Any) -> Any:
    """Read-modify-write of attention.json under its lock; `change(doc)` edits it in place and
    returns what the caller wants back."""
    gen = _generation(raw)
    with locks.flocked(team.attention_lock):
        doc = (
            fs.read_json(team.attention) if fs.check_entry(team.attention, want_dir=False) else None
        )
        if not isinstance(doc, dict) or doc.get("generation") != gen:
            doc = {"schemaVersion": SCHEMA, "generation": gen, "seq": 0, "workers": {}}
        if not isinstance(doc.get("workers"), dict) or not isinstance(doc.get("seq"), int):
            doc["workers"], doc["seq"] = {}, 0
        before = json_copy(doc)
        out = change(doc)
        if doc != before:
            fs.write_json_atomic(team.attention, doc)
    return out


def json_copy(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "workers": dict(doc.get("workers") or {})}


def publish_open(
    cfg: TeamConfig, worker: str, what: str, since: float, lines: list[str], pane: str
) -> int:
    """Add the worker's entry with the next episode number; returns that number."""

    def change(doc: dict[str, Any]) -> int:
        seq = int(doc["seq"]) + 1
        doc["seq"] = seq
        doc["workers"][worker] = {
            "what": what,
            "since": clock.iso(since),
            "seq": seq,
            "lines": clean_lines(lines),
            "pane": pane,
            "attach": attach_command(cfg, pane),
        }
        return seq

    seq: int = _update(cfg.paths, cfg.raw, change)
    return seq


def publish_close(cfg: TeamConfig, worker: str, seq: int | None = None) -> None:
    """Drop the worker's entry (only episode `seq`'s, when given)."""

    def change(doc: dict[str, Any]) -> None:
        entry = doc["workers"].get(worker)
        if entry is not None and (seq is None or entry.get("seq") == seq):
            del doc["workers"][worker]

    _update(cfg.paths, cfg.raw, change)


def prune(cfg: TeamConfig, live: set[str]) -> list[str]:
    """Drop the entries of workers whose pane is no longer live; returns whom."""
    if not fs.check_entry(cfg.paths.attention, want_dir=False):
        return []

    def change(doc: dict[str, Any]) -> list[str]:
        gone = [w for w in doc["workers"] if w not in live]
        for w in gone:
            del doc["workers"][w]
        return gone

    dropped: list[str] = _update(cfg.paths, cfg.raw, change)
    return dropped


# ---- telling: events, the leader's mail, a notification ------------------------------------


def tell_opened(
    cfg: TeamConfig, worker: str, what: str, seq: int, lines: list[str], pane: str
) -> None:
    """The episode's one events line, one leader message and one queued notification. Each is
    best effort: the episode is already recorded; a failure here costs a notice, never adds one.
    """
    shown = clean_lines(lines)
    attach = attach_command(cfg, pane)
    history.record(
        cfg.paths,
        {"type": "attention", "worker": worker, "change": "started", "what": what, "seq": seq},
    )
    screen = " | ".join(shown).rstrip(" .") if shown else "(nothing)"  # its own "." ends it
    body = (
        f"{worker} needs you: {what}. Its screen shows: {screen}. "
        + (f"Attach to its pane: {attach}. " if attach else "")
        + "Nothing is typed into its pane until this is gone."
    )
    msg = mailbox.new_message(
        worker, LEADER, body, {"intent": "needs_person", "auto": True, "attention": seq}
    )
    try:
        mailbox.Mailbox(cfg.paths, LEADER).append_messages([msg])
    except Exception:
        pass
    try:
        from omp import notify

        notify.emit(
            cfg.paths.project,
            {
                "kind": "attention",
                "team": cfg.name,
                "worker": worker,
                "text": f"{cfg.name}/{worker} needs you: {what}",
                "what": what,
                "lines": shown,
                "attach": attach,
                "seq": seq,
            },
            key=f"attention:{cfg.name}:{_generation(cfg.raw)}:{seq}",
        )
    except Exception:
        pass


def tell_closed(cfg: TeamConfig, worker: str, what: str, seq: int) -> None:
    history.record(
        cfg.paths,
        {"type": "attention", "worker": worker, "change": "ended", "what": what, "seq": seq},
    )
