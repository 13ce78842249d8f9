"""`omp doctor`: what a first run needs, each miss with a one-line fix. Read-only.

Checks, in order: the project root; tmux (present, and 3.2 or later: omp passes `-e` to
`new-session`/`split-window`); the program of every agent profile (the one `--agent` names,
`copilot` by default, is required, the others only warn); what the agent in use needs beyond
its program (Claude Code as root, its model server and key, its first-run setup; pi's model:
`omp.doctor.agents`); the state tree's safety (no symlink or
foreign owner anywhere under `.omp/state`, which omp refuses to use, and private modes, 0700/0600);
the monitor's owner lock (stale when pending past its grace, or running with an old heartbeat or a
dead pid); live teams whose worker panes are dead or gone; and whether a worker's pane, started
as launch starts it, runs this omp by the command every agent text names (`omp.doctor.pane`).

Each check is `ok`, `warn` or `fail`; the verdict is good (exit 0) only without a `fail`. A
`fail` means the default agent's team cannot launch or run; a `warn` means something else is off
that omp copes with or that another agent would need. Doctor writes nothing and starts nothing
that outlives it: no directory, no monitor; the pane check's private tmux server is killed before
doctor returns.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omp import clock, invocation
from omp.doctor.check import Check
from omp.doctor.store import check_store
from omp.errors import OmpError
from omp.store.paths import StatePaths

MIN_TMUX = (3, 2)
DEFAULT_AGENT = "copilot"
MAX_STATE_ENTRIES = 20000  # stop walking a huge tree; what was seen is reported

# How to get each built-in agent's program (the npm packages their vendors publish).
INSTALL_HINTS = {
    "copilot": "npm install -g @github/copilot, then run `copilot` once to sign in",
    "claude": "npm install -g @anthropic-ai/claude-code, then run `claude` once to sign in",
    "codex": "npm install -g @openai/codex, then run `codex` once to sign in",
    "gemini": "npm install -g @google/gemini-cli, then run `gemini` once to sign in",
    "pi": "npm install -g @mariozechner/pi-coding-agent, then run `pi` once to sign in",
}
# A model provider of the agent's own (Ollama, vLLM, any OpenAI-compatible server): no sign-in.
PROVIDER_VARS = {"copilot": "COPILOT_PROVIDER_BASE_URL", "claude": "ANTHROPIC_BASE_URL"}


def provider_of(agent: str) -> str | None:
    """The model provider set for `agent` in this environment (launch forwards it), or None."""
    var = PROVIDER_VARS.get(agent)
    return os.environ.get(var) or None if var else None


# ---- tmux -----------------------------------------------------------------------------------


def parse_tmux_version(text: str) -> tuple[int, int] | None:
    """(3, 3) for `3.3a`, `next-3.3` or `3.3-rc`; None for `master` or garbage."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_tmux(version: Callable[[], str | None] | None = None) -> Check:
    if version is None:
        from omp.tmux import Tmux

        version = Tmux().version
    found = version()
    need = f"{MIN_TMUX[0]}.{MIN_TMUX[1]}"
    if found is None:
        return Check(
            "tmux",
            "fail",
            "tmux not found on PATH (every team runs in tmux panes)",
            "install tmux: `sudo apt-get install tmux` or `brew install tmux`",
        )
    parsed = parse_tmux_version(found)
    if parsed is None:
        return Check(
            "tmux",
            "warn",
            f"tmux {found}: cannot tell its version; omp needs {need} or later",
            f"if launches fail, install a tmux release >= {need}",
        )
    if parsed < MIN_TMUX:
        return Check(
            "tmux",
            "fail",
            f"tmux {found} is too old; omp needs {need} or later (for `-e` on new panes)",
            f"upgrade tmux to {need} or later",
        )
    return Check("tmux", "ok", f"tmux {found} (needs {need} or later)")


# ---- agents ---------------------------------------------------------------------------------


def check_agents(root: Path, default: str) -> list[Check]:
    from omp.agents import load_profiles, missing_program

    try:
        profiles = load_profiles(root)
    except OmpError as err:
        return [Check("agents", "fail", err.message, "fix or remove the file it names")]
    out: list[Check] = []
    if default not in profiles:
        out.append(
            Check(
                f"agent {default}",
                "fail",
                f"no agent profile named {default!r}; profiles: {', '.join(sorted(profiles))}",
                "pick one of those with --agent, or define it in .omp/agents.toml",
            )
        )
    for name in sorted(profiles, key=lambda n: (n != default, n)):
        prof = profiles[name]
        missing = missing_program(prof)
        role = "default agent" if name == default else "agent"
        if missing is None:
            import shutil

            where = shutil.which(prof.program) or prof.program
            provider = provider_of(name)
            if provider:
                where += f"; model provider {provider} (no sign-in needed)"
            out.append(Check(f"agent {name}", "ok", f"{role} {name}: {where}"))
            continue
        hint = INSTALL_HINTS.get(name) or (
            f"install {missing}, or fix agents.{name}.command in .omp/agents.toml"
        )
        if provider_of(name):
            hint = hint.replace(f", then run `{name}` once to sign in", "") + (
                f" (no sign-in needed: {PROVIDER_VARS[name]} is set)"
            )
        if name == default:
            out.append(
                Check(
                    f"agent {name}",
                    "fail",
                    f"{role} {name}: program {missing!r} not on PATH",
                    hint + f" (or try the model-free demo: {invocation.hint('demo')})",
                )
            )
        else:
            out.append(
                Check(
                    f"agent {name}",
                    "warn",
                    f"{role} {name}: program {missing!r} not on PATH "
                    f"(only --agent {name} needs it)",
                    hint,
                )
            )
    return out


# ---- the state tree -------------------------------------------------------------------------


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def check_state(project: StatePaths) -> Check:
    """Everything omp would refuse under .omp/state: symlinks, foreign owners, modes open to
    others (omp keeps 0700/0600 and never widens them), entries of the wrong kind."""
    root = project.root
    omp_dir, state = project.omp_dir, project.state
    problems: list[tuple[str, str]] = []  # (what, how to fix)
    uid = os.geteuid()
    seen = 0
    remove = "remove it (omp never follows or repairs such paths), or move .omp/state aside"

    def look(path: Path, private: bool) -> bool:
        """Record what is wrong with `path`; True if it is a directory to descend into."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        rel = _rel(root, path)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            problems.append((f"{rel} is a symlink", remove))
            return False
        if st.st_uid != uid:
            problems.append((f"{rel} is owned by uid {st.st_uid}, not by you", remove))
            return False
        is_dir = stat.S_ISDIR(st.st_mode)
        if not is_dir and not stat.S_ISREG(st.st_mode):
            problems.append((f"{rel} is not a regular file", remove))
        elif private and mode & 0o077:
            problems.append(
                (
                    f"{rel} is {mode:04o}, open to other users (omp keeps "
                    f"{'0700' if is_dir else '0600'})",
                    f"find out who changed it, then: chmod -R go-rwx {_rel(root, state)}",
                )
            )
        return is_dir

    if not os.path.lexists(omp_dir):
        return Check("state", "ok", f"no state yet under {root} (the first launch creates it)")
    if look(omp_dir, private=False) and look(state, private=True):
        stack = [state]
        while stack and seen < MAX_STATE_ENTRIES:
            d = stack.pop()
            try:
                names = sorted(os.listdir(d))
            except OSError as exc:
                problems.append((f"{_rel(root, d)} cannot be read ({exc.strerror})", remove))
                continue
            for n in names:
                seen += 1
                p = d / n
                if look(p, private=True):
                    stack.append(p)
    where = _rel(root, state)
    if problems:
        what, fix = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return Check("state", "fail", f"{where}: {what}{more}; omp refuses to use it", fix)
    capped = f", first {seen} entries checked" if seen >= MAX_STATE_ENTRIES else ""
    return Check("state", "ok", f"{where}: private, no symlinks or foreign owners{capped}")


# ---- the monitor lock -----------------------------------------------------------------------


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def check_monitor(project: StatePaths, now: float | None = None) -> Check:
    from omp.monitor import ctl as monitor_ctl
    from omp.monitor.policy import Intervals

    now = clock.now() if now is None else now
    lock = project.monitor_owner
    rel = _rel(project.root, lock)
    try:
        owner, data = monitor_ctl.read_owner(project)
    except OmpError as err:
        return Check("monitor", "fail", err.message, f"remove {rel}")
    if data is None:
        return Check("monitor", "ok", "no monitor running (it starts with a launch or a loop)")
    fix = f"nothing to do: the next launch or loop start replaces it (or: rm {rel})"
    if owner is None:
        return Check("monitor", "warn", f"{rel} is not a valid owner lock", fix)
    try:
        iv = Intervals.from_env()
    except OmpError as err:
        return Check("monitor", "warn", err.message, "unset that variable")
    if owner.phase == "pending":
        age = now - owner.created_at
        if owner.stale(now, iv):
            return Check(
                "monitor",
                "warn",
                f"stale monitor lock: taken {_ago(age)} by a monitor that never started",
                fix,
            )
        return Check("monitor", "ok", f"monitor starting (lock taken {_ago(age)})")
    assert owner.pid is not None and owner.updated_at is not None
    beat = now - owner.updated_at
    if not monitor_ctl.pid_alive(owner.pid, owner.token):
        return Check("monitor", "warn", f"stale monitor lock: pid {owner.pid} is gone", fix)
    if owner.stale(now, iv):
        return Check(
            "monitor",
            "warn",
            f"stale monitor lock: pid {owner.pid} last beat {_ago(beat)}",
            fix,
        )
    return Check("monitor", "ok", f"monitor running: pid {owner.pid}, heartbeat {_ago(beat)}")


# ---- teams ----------------------------------------------------------------------------------


def check_teams(project: StatePaths) -> list[Check]:
    from omp.mail.panes import pane_views
    from omp.record import config as team_config
    from omp.tasks import tasks

    out: list[Check] = []
    for name in team_config.list_teams(project):
        label = f"team {name}"
        try:
            cfg = team_config.load(project.team(name))
            out += [
                Check(label, "warn", f"{label}: {b['message']}", f"fix or move aside {b['file']}")
                for b in tasks.read_all(cfg.paths).broken
            ]
            if os.path.lexists(cfg.paths.shutdown):
                continue  # shut down on purpose: its panes are meant to be gone
            if not any(cfg.pane_of(w) for w in cfg.worker_names):
                out.append(Check(label, "ok", f"{label}: headless (no panes)"))
                continue
            views = pane_views(cfg)
        except OmpError as err:
            out.append(Check(label, "warn", f"{label}: {err.message}", None))
            continue
        states = {w: v.state for w, v in views.items() if cfg.pane_of(w)}
        bad = {w: s for w, s in states.items() if s in ("dead", "gone")}
        unknown = [w for w, s in states.items() if s == "unknown"]
        if bad:
            shown = ", ".join(f"{w} {s}" for w, s in bad.items())
            out.append(
                Check(
                    label,
                    "warn",
                    f"{label}: {shown} ({len(bad)} of {len(states)} worker panes)",
                    invocation.hint(f"team shutdown {name}")
                    + " (mail and results are kept), then launch again",
                )
            )
        elif unknown:
            out.append(
                Check(label, "warn", f"{label}: tmux did not answer about {', '.join(unknown)}")
            )
        else:
            out.append(Check(label, "ok", f"{label}: {len(states)} worker panes alive"))
    return out


def check_agent_setup(root: Path, agent: str) -> list[Check]:
    """What the agent in use needs beyond its program (Claude Code, pi: omp.doctor.agents)."""
    from omp.agents import load_profiles
    from omp.doctor.agents import agent_checks

    profile = load_profiles(root).get(agent)
    if profile is None:
        return []
    return [Check(**c) for c in agent_checks(agent, profile.command)]


def check_hooks(root: Path, agent: str) -> list[Check]:
    from omp.stophook.checks import doctor_checks

    return [Check(**c) for c in doctor_checks(root, agent)]


# ---- all of it ------------------------------------------------------------------------------


def _guard(name: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """A check that breaks reports itself as failed; it never hides the others."""
    try:
        return fn()
    except OmpError as err:
        return [Check(name, "fail", err.message)]
    except Exception as exc:
        return [Check(name, "warn", f"check failed: {type(exc).__name__}: {exc}")]


def _pane_check(root: Path, agent: str, earlier: list[Check]) -> list[Check]:
    """Only with a usable tmux and a known agent: the pane check needs both."""
    if any(c.name == "tmux" and c.status == "fail" for c in earlier):
        return []
    from omp.agents import load_profiles
    from omp.doctor import pane as doctor_pane

    profile = load_profiles(root).get(agent)
    return [] if profile is None else [doctor_pane.check(root, profile)]


def _hosts(project: StatePaths) -> list[Check]:
    from omp import __version__
    from omp.doctor.hosts import check_hosts

    return check_hosts(project, f"omp {__version__}")


def diagnose(root: Path, *, agent: str = DEFAULT_AGENT) -> dict[str, Any]:
    project = StatePaths(root)
    checks: list[Check] = [Check("project", "ok", f"project root {root}")]
    checks += _guard("tmux", lambda: [check_tmux()])
    checks += _guard("agents", lambda: check_agents(root, agent))
    checks += _guard("agent-setup", lambda: check_agent_setup(root, agent))
    checks += _guard("pane-omp", lambda: _pane_check(root, agent, checks))
    checks += _guard("state", lambda: [check_state(project)])
    checks += _guard("monitor", lambda: [check_monitor(project)])
    checks += _guard("teams", lambda: check_teams(project))
    checks += _guard("store", lambda: check_store(project))
    checks += _guard("hosts", lambda: _hosts(project))
    checks += _guard("hooks", lambda: check_hooks(root, agent))
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail")}
    good = counts["fail"] == 0
    out: dict[str, Any] = {
        "ok": good,
        "agent": agent,
        "root": str(root),
        "checks": [c.to_json() for c in checks],
        "counts": counts,
    }
    if not good:
        out["error"] = "doctor_failed"
        out["message"] = summary(out)
    return out


def summary(r: dict[str, Any]) -> str:
    c = r["counts"]
    tail = (
        f"ready for --agent {r['agent']}"
        if c["fail"] == 0
        else f"not ready for --agent {r['agent']}"
    )
    return f"{c['fail']} failed, {c['warn']} warning(s): {tail}"
