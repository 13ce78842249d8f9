#!/usr/bin/env python3
"""Regenerate `.omp-example/`: the `.omp/` tree of a real demo team, run to completion.

    .venv/bin/python scripts/make_example.py            # rewrite .omp-example/ (README.md kept)
    .venv/bin/python scripts/make_example.py --check    # regenerate into a temp dir and compare

What it runs, through the real `omp` CLI in a scratch project, on a private tmux server (never the
user's), with HOME pinned and the demo agent (no model):

1. `omp ralph start ...`                          -> the loop file `state/ralph.json`
2. `omp team launch 2 "<task>" --agent demo`      -> config, tasks, inboxes, panes, the monitor
3. wait until both tasks are completed and the leader has the four status messages
4. a teammate exchange: a message "from worker-1" to worker-2 (typed by this script, as worker-1's
   agent would run it); worker-2's demo agent is nudged, reads it and replies; worker-1 reads that
5. the leader reads its mail (`mailbox-read`), which writes the delivery receipts
6. `omp team shutdown haiku`, `omp ralph cancel`, and the monitor's own exit

Then `.omp/` is copied with everything that differs between runs replaced by stable placeholders:
the project path `<root>`, the tmux socket `<socket>`, message ids `<msg-N>` (numbered by sender,
recipient and body, not by arrival), times `<time>`, pids and other per-run numbers `0`, pane ids
`<pane:worker-1>`, tokens and hashes `<token>`/`<hex>`. File names carrying a hash are renamed the
same way (`pane-SOCKNAME-worker-1.lock`). `compare()` is what tests/test_example_tree.py uses.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / ".omp-example"
KEEP = frozenset({"README.md"})  # hand-written files of the example directory
TEAM = "haiku"
TASK = "write a haiku about tmux"
LOOP_TASK = "write a haiku about tmux, then stop"
QUESTION = "Which line of the haiku are you writing?"
WORK_SECONDS = "0.5"
# Values that depend on timing (how many scans the monitor made, who refreshed a heartbeat last):
# only their JSON structure is compared.
VOLATILE = (
    re.compile(r"^state/team-monitor/"),
    re.compile(r"(^|/)heartbeat\.json$"),
    re.compile(r"\.nudge\.json$"),  # which nudge went last depends on timing
    re.compile(r"^state/team/[^/]+/events\.jsonl$"),  # two workers' events interleave
    re.compile(r"^state/notify/outbox\.jsonl$"),  # each event has a random id
)
TRANSIENT = re.compile(r"\.(tmp|new|old)$")  # half-done atomic writes: never part of the tree
# `.omp/.gitignore` (`*`) would hide the committed example from git itself: the README says it.
LEFT_OUT = frozenset({".gitignore"})


class ExampleError(RuntimeError):
    pass


# ---- running the scenario -------------------------------------------------------------------


def _env(home: Path, socket: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "TMUX"))}
    env.update(
        HOME=str(home),
        SHELL="/bin/sh",
        OMP_TMUX_SOCKET=socket,
        OMP_DEMO_WORK_SECONDS=WORK_SECONDS,
        # The monitor: scan often (so it ends soon after shutdown); no idle prompts and no
        # re-nudges (it may still nudge new mail once, racing the send's own nudge).
        OMP_MONITOR_SCAN_SECONDS="0.2",
        OMP_MONITOR_IDLE_SECONDS="3600",
        OMP_MONITOR_UNREAD_REPEAT_SECONDS="3600",
    )
    return env


def _poll(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ExampleError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(raw)
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return None


class Scenario:
    def __init__(self, project: Path, home: Path, socket: str) -> None:
        self.project = project
        self.env = _env(home, socket)
        self.socket = socket
        self.state = project / ".omp" / "state"
        self.team = self.state / "team" / TEAM

    def omp(self, *args: str) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "omp", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        if proc.returncode != 0:
            raise ExampleError(
                f"omp {' '.join(args)} exited {proc.returncode}: {proc.stdout} {proc.stderr}"
            )
        return json.loads(proc.stdout) if "--json" in args else proc.stdout

    def api(self, sub: str, **payload: Any) -> Any:
        return self.omp("team", "api", sub, "--input", json.dumps(payload), "--json")

    def mailbox(self, who: str) -> list[dict[str, Any]]:
        return _lines(self.team / "mailbox" / f"{who}.jsonl")

    def read_by(self, who: str, pred: Callable[[dict[str, Any]], bool]) -> bool:
        """A message matching `pred` is in `who`'s mailbox and has a delivery receipt."""
        lines = self.mailbox(who)
        ids = {m["id"] for m in lines if m.get("type") == "message" and pred(m)}
        got = {r.get("messageId") for r in lines if r.get("type") == "delivery-receipt"}
        return bool(ids) and ids <= got

    def monitor_owner(self) -> dict[str, Any] | None:
        obj = _read_json(self.state / "team-monitor" / "owner.lock")
        return obj if isinstance(obj, dict) else None

    def run(self) -> None:
        self.omp("ralph", "start", LOOP_TASK, "--max-iterations", "3", "--json")
        self.omp("team", "launch", "2", TASK, "--agent", "demo", "--name", TEAM, "--json")
        self._settle_monitor()

        def all_done() -> bool:
            tasks = [_read_json(p) for p in sorted((self.team / "tasks").glob("*.json"))]
            done = bool(tasks) and all(
                isinstance(t, dict) and t.get("status") == "completed" for t in tasks
            )
            leader = [m for m in self.mailbox("leader") if m.get("type") == "message"]
            return done and len(leader) == 4  # started + completed, from each worker

        _poll("both tasks completed and reported", all_done)
        sent = self.api(
            "send-message", team_name=TEAM, to="worker-2", body=QUESTION, **{"from": "worker-1"}
        )
        # The send types the nudge, or the monitor (scanning every 0.2 s) typed it first, and
        # the send then types nothing (`not_needed`): one nudge either way. The polls below
        # prove it was read.
        if not sent.get("nudged") and sent.get("nudge") != "not_needed":
            raise ExampleError(f"worker-2 was not nudged: {sent}")
        _poll(
            "worker-1 to have read worker-2's reply",
            lambda: self.read_by("worker-1", lambda m: m.get("from") == "worker-2"),
        )
        _poll(
            "worker-2 to have read the question",
            lambda: self.read_by("worker-2", lambda m: m.get("body") == QUESTION),
        )
        self.api("mailbox-read", team_name=TEAM, worker="leader")
        self.omp("team", "shutdown", TEAM, "--json")
        self.omp("ralph", "cancel", "--json")
        self._monitor_exit()

    def _settle_monitor(self) -> None:
        """If this build has a monitor, let it scan the live team once (its files then exist)."""
        status = self.state / "team-monitor" / "status.json"
        with contextlib.suppress(ExampleError):
            _poll("the monitor's first scan", lambda: status.exists(), timeout=3.0)

    def _monitor_exit(self) -> None:
        """The monitor ends by itself once no live team is left; wait for it to let go."""
        owner = self.monitor_owner()
        if owner is None or owner.get("phase") != "running":
            return  # none, or a start that no monitor ever took over: nothing to wait for
        try:
            _poll("the monitor to exit", lambda: self.monitor_owner() is None, timeout=10.0)
        except ExampleError:
            pid = owner.get("pid")
            if isinstance(pid, int) and pid > 0:  # the monitor this run started, by its pid
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
            raise


def _kill_server(socket: str) -> None:
    """Kill the private server (if the shutdown left it running) and remove its socket file."""
    from omp.tmux import Tmux

    with contextlib.suppress(Exception):
        Tmux(socket_name=socket).kill_server()


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    tmp = Path(tempfile.mkdtemp(prefix="omp-example-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def generate(out: Path) -> None:
    """Run the scenario in a scratch project and write the normalized `.omp/` tree to `out`."""
    if shutil.which("tmux") is None:
        raise ExampleError("tmux is not installed")
    with scratch() as tmp:
        project = tmp / "project"
        home = tmp / "home"
        (project / ".git").mkdir(parents=True)
        home.mkdir()
        socket = f"omp-example-{secrets.token_hex(4)}"
        sc = Scenario(project, home, socket)
        try:
            sc.run()
        finally:
            _kill_server(socket)
        ctx = Context.from_project(project, home, socket)
        write_normalized(project / ".omp", out, ctx)


# ---- normalizing ----------------------------------------------------------------------------

ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
CLAIM = re.compile(r"\b((?:worker|demo)-[A-Za-z0-9._-]*?)-\d{10,}-[0-9a-f]+\b")
PANE = re.compile(r'"%(\d+)"')
ZERO_KEYS = ("pid", "parentPid", "serverPid", "serverStartedAt", "sessionCreatedAt", "ino")
HEX_KEYS = ("probe", "generation", "targetId", "token", "launchToken", "attemptId")


class Context:
    """The per-run values to hide, learned from the run's own files."""

    def __init__(
        self,
        literals: list[tuple[str, str]],
        panes: dict[str, str],
        msg_ids: dict[str, str],
        file_tags: dict[str, str],
        targets: dict[str, str],
    ) -> None:
        self.literals = literals
        self.panes = panes  # "3" (of %3) -> worker name
        self.msg_ids = msg_ids
        self.file_tags = file_tags  # hash in a file name -> placeholder
        self.targets = targets  # monitor target id -> placeholder

    @classmethod
    def from_project(cls, project: Path, home: Path, socket: str) -> Context:
        state = project / ".omp" / "state"
        cfg = _read_json(state / "team" / TEAM / "config.json") or {}
        ident = cfg.get("tmuxIdentity") or {}
        sock_path = str(ident.get("socketPath") or "")
        literals: list[tuple[str, str]] = []
        for path in {str(project), os.path.realpath(project)}:
            literals.append((path, "<root>"))
        for path in {str(home), os.path.realpath(home)}:
            literals.append((path, "<home>"))
        if sock_path:
            literals.append((sock_path, "<socket>"))
        literals.append((socket, "<socket-name>"))
        if cfg.get("ompCommand"):
            literals.append((str(cfg["ompCommand"]), "<omp>"))  # the launching omp's path
        literals.append((sys.executable, "<python>"))
        literals.sort(key=lambda kv: -len(kv[0]))  # longest first: a path before its prefix
        panes = {str(w["paneId"]).lstrip("%"): w["name"] for w in cfg.get("workers", [])}
        if cfg.get("leaderPaneId"):
            panes[str(cfg["leaderPaneId"]).lstrip("%")] = "leader"
        tags = {}
        for value, tag in ((socket, "SOCKNAME"), (sock_path, "SOCKPATH")):
            if value:
                tags[hashlib.sha256(value.encode()).hexdigest()[:12]] = tag
        return cls(literals, panes, _message_numbers(state), tags, _target_names(state))

    def text(self, text: str) -> str:
        for value, placeholder in self.literals:
            text = text.replace(value, placeholder)
        for key in ZERO_KEYS:
            text = re.sub(rf'("{key}":\s*)(?:\d+|null)', r"\g<1>0", text)
        for key in HEX_KEYS:
            text = re.sub(rf'("{key}":\s*)"[^"]*"', rf'\g<1>"<{_kebab(key)}>"', text)
        text = re.sub(r'("sessionId":\s*)"\$\d+"', r'\g<1>"<session>"', text)
        text = re.sub(r'("windowId":\s*)"@\d+"', r'\g<1>"<window>"', text)
        text = PANE.sub(lambda m: f'"<pane:{self.panes.get(m.group(1), "?")}>"', text)
        text = CLAIM.sub(r"\1-<ms>-<hex>", text)
        text = ULID.sub(lambda m: self.msg_ids.get(m.group(0), "<id>"), text)
        for tid, name in self.targets.items():
            text = text.replace(tid, name)
        return ISO.sub("<time>", text)

    def name(self, rel: str) -> str:
        """A file's relative path with per-run hashes and pane numbers replaced."""
        m = re.search(r"pane-([0-9a-f]{12})-(\d+)\.lock$", rel)
        if m:
            tag = self.file_tags.get(m.group(1), "SERVER")
            who = self.panes.get(m.group(2), m.group(2))
            return rel[: m.start()] + f"pane-{tag}-{who}.lock"
        for tid, name in self.targets.items():
            rel = rel.replace(tid, name)
        return rel


def _kebab(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"-\1", key).lower()


def _message_numbers(state: Path) -> dict[str, str]:
    """Message id -> `<msg-N>`, N from the sorted (from, to, body): the same every run."""
    found: dict[str, tuple[str, str, str]] = {}
    for box in sorted(state.glob("team/*/mailbox/*.jsonl")):
        for m in _lines(box):
            if m.get("type") == "message" and isinstance(m.get("id"), str):
                found[m["id"]] = (str(m.get("from")), str(m.get("to")), str(m.get("body")))
    ordered = sorted(found, key=lambda i: found[i])
    return {mid: f"<msg-{n}>" for n, mid in enumerate(ordered, 1)}


def _target_names(state: Path) -> dict[str, str]:
    """Monitor target id -> `TARGET-<team>-<worker>` (from the target file's own fields)."""
    out: dict[str, str] = {}
    for path in sorted((state / "team-monitor" / "targets").glob("*.json")):
        obj = _read_json(path)
        if isinstance(obj, dict) and obj.get("teamName") and obj.get("worker"):
            out[path.stem] = f"TARGET-{obj['teamName']}-{obj['worker']}"
        else:
            out[path.stem] = f"TARGET-{len(out) + 1}"
    return out


def _walk(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and not TRANSIENT.search(p.name)
        and p.relative_to(root).as_posix() not in LEFT_OUT
    )


def write_normalized(src: Path, out: Path, ctx: Context) -> None:
    """Replace `out` (keeping its hand-written files) with the normalized copy of `src`."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in out.iterdir():
        if entry.name in KEEP:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for path in _walk(src):
        rel = ctx.name(path.relative_to(src).as_posix())
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(ctx.text(path.read_text(encoding="utf-8")), encoding="utf-8")


# ---- comparing ------------------------------------------------------------------------------


def files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for p in _walk(root)
        if p.relative_to(root).as_posix() not in KEEP
    }


def skeleton(value: Any, *, loose: bool = False) -> Any:
    """The shape of a JSON value: keys and types, not values. A list is the set of its items'
    shapes, or (`loose`, for files whose lists depend on timing) just "list"."""
    if isinstance(value, dict):
        return {k: skeleton(v, loose=loose) for k, v in sorted(value.items())}
    if isinstance(value, list):
        if loose:
            return "list"
        shapes = {json.dumps(skeleton(v), sort_keys=True) for v in value}
        return ["list", sorted(shapes)]
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    if isinstance(value, (int, float)):
        return "number"
    return "str"


def _loosely_same(a: Any, b: Any) -> bool:
    """Skeletons of a timing-dependent file: equal, but a value that is null in one run (a
    monitor that had typed nothing yet) may be anything in the other."""
    if a == "NoneType" or b == "NoneType":
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_loosely_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two skeletons part: `tracker.unread.count: number != str`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}{k}: {'only in the committed copy' if k in a else 'new'}"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}{k}.")
    return f"{path.rstrip('.') or '(top)'}: {json.dumps(a)} != {json.dumps(b)}"


def _parse(rel: str, text: str) -> tuple[Any, list[Any] | None]:
    """(the JSON value of a .json file, the parsed lines of a .jsonl file)."""
    if rel.endswith(".jsonl"):
        return None, [json.loads(line) for line in text.splitlines() if line.strip()]
    if rel.endswith(".json") or (rel.endswith(".lock") and text.lstrip().startswith("{")):
        return json.loads(text), None
    return None, None


def compare(expected: Path, actual: Path) -> list[str]:
    """What differs between two normalized trees; [] when they agree."""
    problems: list[str] = []
    exp, act = files(expected), files(actual)
    for rel in sorted(set(exp) - set(act)):
        problems.append(f"{rel}: in the committed example, not produced by this code")
    for rel in sorted(set(act) - set(exp)):
        problems.append(f"{rel}: produced by this code, missing from the committed example")
    for rel in sorted(set(exp) & set(act)):
        a, b = exp[rel].read_text(encoding="utf-8"), act[rel].read_text(encoding="utf-8")
        volatile = any(v.search(rel) for v in VOLATILE)
        try:
            ja, la = _parse(rel, a)
            jb, lb = _parse(rel, b)
        except ValueError as exc:
            problems.append(f"{rel}: does not parse: {exc}")
            continue
        if la is not None and lb is not None:
            if volatile:
                continue  # a log whose length depends on timing: both parse, that is all
            if sorted(a.splitlines()) != sorted(b.splitlines()):
                problems.append(f"{rel}: lines differ")
            continue
        if ja is not None or jb is not None:
            sa, sb = skeleton(ja, loose=volatile), skeleton(jb, loose=volatile)
            if not (_loosely_same(sa, sb) if volatile else sa == sb):
                problems.append(f"{rel}: JSON structure differs ({_first_difference(sa, sb)})")
                continue
            if volatile:
                continue
        if a != b:
            problems.append(f"{rel}: content differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--out", type=Path, default=EXAMPLE, help="where to write (default %(default)s)"
    )
    ap.add_argument("--check", action="store_true", help="compare a fresh run with --out")
    args = ap.parse_args(argv)
    try:
        if args.check:
            with scratch() as tmp:
                generate(tmp / "example")
                problems = compare(args.out, tmp / "example")
            for p in problems:
                print(p)
            print("example is up to date" if not problems else "example drifted")
            return 1 if problems else 0
        generate(args.out)
    except ExampleError as exc:
        print(f"make_example: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
