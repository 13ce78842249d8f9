"""A team of 32 demo workers over two hosts (issue 31): 16 here and 16 on an ssh host, the team's
mail and tasks in Redis (`appendfsync always`, a password), against the same 32 workers all here
with their mail in Redis and with the files (the default), so the hosts' cost and the store's
cost are told apart.

    sudo .venv/bin/python benchmarks/bench_hosts.py [--quick] [--runs N]

The other host is the tests' harness (`tests/tmux/sshd_server.py`): a real sshd on 127.0.0.1 and
a second user whose home plays the machine, so no network round trip is in the figures (add the
link's round trip per ssh call for a real host). Needs root, openssh-server, tmux and
redis-server; exits 2 saying which is missing.

For each team, per run (a fresh project, tmux server, Redis namespace and remote directory):
(1) `omp team launch 32 ... --agent demo [--host build1:16]`: the command's wall time (it
    returns once every worker, here and there, is ready and handed its task) and its CPU time;
(2) `omp team status --json` of the finished team: wall and CPU, the median of several;
(3) the hand-over: from launch's return to all 32 tasks completed and their completions verified
    (the team's check `ls work/*.md`; a remote worker's runs here, on its branch brought back by
    the leader's monitor), and from launch's start, then `omp team merge` of the 32 branches
    (wall).
Medians over runs. The demo workers "work" OMP_DEMO_WORK_SECONDS (0.2 s here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cputime import cpu_run, interpreter  # noqa: E402
from benchmarks.machine import machine_lines  # noqa: E402

WORK_SECONDS = "0.2"
VERIFY = "ls work/*.md"
HANDOVER_TIMEOUT = 240.0  # seconds; a hand-over past it is reported as stuck, saying why
TEAMS = ("hosts", "redis", "files")


def title(label: str, n: int) -> str:
    """A team's column: where its `n` workers run, where its mail and tasks are."""
    return {
        "hosts": f"{n // 2} here + {n // 2} on the ssh host, Redis",
        "redis": f"{n} here, Redis",
        "files": f"{n} here, files",
    }[label]


@dataclass
class Figures:
    launch_wall: list[float] = field(default_factory=list)
    launch_cpu: list[float] = field(default_factory=list)
    status_wall: list[float] = field(default_factory=list)
    status_cpu: list[float] = field(default_factory=list)
    handover: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)  # launch's start to all verified
    merge_wall: list[float] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # hand-overs that did not finish: why


def missing() -> str | None:
    """Why this benchmark cannot run here, or None."""
    from tests.store.redis_server import binary
    from tests.tmux.sshd_server import missing_reason

    why = missing_reason()
    if why is not None:
        return why
    if shutil.which("tmux") is None:
        return "tmux is not installed (apt-get install -y tmux)"
    if binary() is None:
        return "redis-server is not installed (apt-get install -y redis-server)"
    return None


def host_toml(host: Any) -> str:
    s = host.settings
    # The remote workers' panes get only omp's own variables (`omp.team.remote`), so the demo's
    # work time is handed to them in the host's omp command line, as a wrapper would
    omp = f"env OMP_DEMO_WORK_SECONDS={WORK_SECONDS} {s.omp}"
    return (
        "[hosts.build1]\n"
        f'address = "{s.address}"\nport = {s.port}\nidentity_file = "{s.identity_file}"\n'
        f'known_hosts = "{s.known_hosts}"\nomp = "{omp}"\ndir = "{s.dir}"\n'
    )


def child_env(tmp: Path, store: str | None) -> dict[str, str]:
    from tests.helpers import child_env as base
    from tests.workspace.gitrepo import IDENTITY

    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = base(
        home,
        TMPDIR=os.environ["TMPDIR"],  # the ssh masters' short private directory
        OMP_DEMO_WORK_SECONDS=WORK_SECONDS,
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        XDG_STATE_HOME=str(tmp / "state"),
        SHELL="/bin/sh",
        **IDENTITY,
    )
    if store:
        env["OMP_STORE"] = store
    for key in list(env):
        if key.startswith("TMUX"):
            del env[key]
    return env


def timed_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, Any]:
    """(wall s, CPU s of the process and what it waited for, its JSON)."""
    t0 = time.perf_counter()
    cpu, out = cpu_run(argv, env=env, cwd=cwd)
    return time.perf_counter() - t0, cpu, json.loads(out)


def tasks_done(store: Any, n: int) -> bool:
    docs = store.docs("t", "tasks")
    return len(docs) == n and all(
        t.get("status") == "completed" and (t.get("verify") or {}).get("status") == "passed"
        for t in docs
    )


def wait_for(check: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.1)
    return True


def stuck(store: Any) -> str:
    """What kept a hand-over from finishing: each unfinished task, and its check's last line."""
    out = []
    for t in store.docs("t", "tasks"):
        v = t.get("verify") or {}
        if t.get("status") == "completed" and v.get("status") == "passed":
            continue
        why = ""
        with contextlib.suppress(OSError, KeyError):
            why = Path(v["log"]).read_text(errors="replace").strip().splitlines()[-1][:300]
        out.append(f"task {t['id']} {t.get('status')}, check {v.get('status')}: {why}")
    return "; ".join(out)


def stop_monitor(repo: Path) -> None:
    """The project's monitor, started by the launch: ended by the pid its owner lock records."""
    from omp.monitor.ctl import pid_alive
    from omp.store.paths import StatePaths

    try:
        lock = json.loads(StatePaths(repo).monitor_owner.read_text())
        pid, token = int(lock["pid"]), str(lock["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not pid_alive(pid, token):  # only that monitor, never a recycled pid
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 10
    while pid_alive(pid, token) and time.monotonic() < end:
        time.sleep(0.05)


@contextlib.contextmanager
def team_place(tmp: Path, sshd: Any, remote: int) -> Iterator[tuple[Path, Any]]:
    """A fresh project (its host in `[hosts.build1]` when `remote`), and everything a run
    leaves cleaned after it: the monitor, both tmux servers, the ssh master, the remote files."""
    from omp.team.remote import project_key
    from omp.tmux import ssh
    from omp.tmux.remote import RemoteTmux
    from tests.workspace.gitrepo import make_repo

    repo = make_repo(tmp / "proj")
    remote_dir = f".omp-bench-{secrets.token_hex(3)}"
    host = sshd.host(dir=remote_dir) if remote else None
    (repo / ".omp").mkdir(exist_ok=True)
    hosts = host_toml(host) + "\n" if host is not None else ""
    (repo / ".omp" / "config.toml").write_text(
        f'{hosts}[team]\nverify = "{VERIFY}"\n', encoding="utf-8"
    )
    try:
        yield repo, host
    finally:
        stop_monitor(repo)
        if host is not None:
            with contextlib.suppress(Exception):
                RemoteTmux(host, f"omp-{project_key(repo)}").kill_server()
            with contextlib.suppress(Exception):
                ssh.stop_master(host)
            shutil.rmtree(Path(sshd.user.pw_dir) / remote_dir, ignore_errors=True)


def one_team(
    base: Path, sshd: Any, redis_url: str, label: str, n: int, status_runs: int, fig: Figures
) -> None:
    from omp.store.select import open_store
    from omp.tmux import Tmux

    tmp = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=base))
    remote = n // 2 if label == "hosts" else 0
    store = f"{redis_url}?ns=b{secrets.token_hex(4)}" if label != "files" else None
    env = child_env(tmp, store)
    omp = interpreter(sys.executable)[1]
    sock = f"omp-bench-{secrets.token_hex(4)}"
    try:
        with team_place(tmp, sshd, remote) as (repo, _):
            argv = [*omp, "team", "launch", str(n), "write one line each", "--agent", "demo",
                    "--name", "t", "--socket", sock, "--json"]  # fmt: skip
            if remote:
                argv += ["--host", f"build1:{remote}"]
            wall, cpu, res = timed_cpu(argv, env, repo)
            t0 = time.perf_counter()
            assert res["ok"] and len(res["workers"]) == n, res
            assert sum(1 for w in res["workers"] if w.get("host")) == remote, res
            fig.launch_wall.append(wall)
            fig.launch_cpu.append(cpu)
            tasks = open_store(repo, url=store or "file")
            if not wait_for(lambda: tasks_done(tasks, n), HANDOVER_TIMEOUT):
                why = stuck(tasks)
                print(f"  {label}: the hand-over did not finish: {why}", file=sys.stderr)
                fig.stuck.append(why)
                return
            fig.handover.append(time.perf_counter() - t0)
            fig.total.append(fig.launch_wall[-1] + fig.handover[-1])
            for _ in range(status_runs):
                wall, cpu, st = timed_cpu([*omp, "team", "status", "t", "--json"], env, repo)
                assert st.get("ok", True), st
                fig.status_wall.append(wall)
                fig.status_cpu.append(cpu)
            wall, _, merged = timed_cpu([*omp, "team", "merge", "t", "--json"], env, repo)
            fig.merge_wall.append(wall)
            assert len(merged["merged"]) == n, merged
            files = list((repo / "work").glob("*.md"))
            assert len(files) == n, files
    finally:
        with contextlib.suppress(Exception):
            Tmux(socket_name=sock).kill_server()
        shutil.rmtree(tmp, ignore_errors=True)


def med(xs: list[float], unit: str = "s") -> str:
    if not xs:
        return "—"
    m = statistics.median(xs)
    return f"{m * 1000:.0f} ms" if unit == "ms" else f"{m:.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="4 workers, one run: proves it runs")
    ap.add_argument("--runs", type=int, default=0, help="teams of each kind (default 3)")
    ap.add_argument("--workers", type=int, default=0, help="team size, even (default 32)")
    ap.add_argument(
        "--teams",
        default=",".join(TEAMS),
        help=f"which teams, comma-separated, of {', '.join(TEAMS)} (default all)",
    )
    opts = ap.parse_args()
    runs = opts.runs or (1 if opts.quick else 3)
    n = opts.workers or (4 if opts.quick else 32)
    labels = [x for x in opts.teams.split(",") if x]
    if n < 2 or n % 2 or n > 32 or any(x not in TEAMS for x in labels):
        ap.error("--workers takes an even number 2-32; --teams names of " + ", ".join(TEAMS))
    why = missing()
    if why is not None:
        print(f"bench_hosts: {why}", file=sys.stderr)
        sys.exit(2)
    import pytest

    from tests.store.redis_server import RedisServer
    from tests.tmux.sshd_server import running
    from tests.workspace.gitrepo import IDENTITY

    # the repositories this process makes (make_repo) use no one's git config
    os.environ.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", **IDENTITY)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed omp keeps its bytecode
    figures = {label: Figures() for label in labels}
    status_runs = 2 if opts.quick else 5
    mp = pytest.MonkeyPatch()
    base = Path(tempfile.mkdtemp(prefix="omp-bench-hosts-"))
    load_before = os.getloadavg()
    redis = RedisServer(base / "redis", password="pw-" + secrets.token_hex(8))
    try:
        redis.start()
        with running(mp) as sshd:
            for r in range(runs):
                for label in labels:  # interleaved: the machine's drift hits every team alike
                    print(f"  run {r + 1}/{runs}: {title(label, n)}", file=sys.stderr)
                    one_team(base, sshd, redis.url, label, n, status_runs, figures[label])
    finally:
        redis.stop()
        mp.undo()
        shutil.rmtree(base, ignore_errors=True)
    print(f"# A team of {n} demo workers over two hosts\n")
    for line in machine_lines():
        print(f"- {line}")
    print(f"- load average at the start: {', '.join(f'{x:.2f}' for x in load_before)}")
    print(
        "- the ssh host: sshd on 127.0.0.1, a second user (no network round trip); Redis: "
        "a private redis-server, appendfsync always, a password"
    )
    print(
        f"- {runs} run(s) of each team, medians; status: {status_runs} per run; demo work "
        f"{WORK_SECONDS} s; the team's check `{VERIFY}`"
    )
    head = " | ".join(title(x, n) for x in labels)
    print(f"\n| | {head} |\n|---|{'---|' * len(labels)}")
    rows: list[tuple[str, str, str]] = [
        ("(1) launch to all ready and handed their task, wall", "launch_wall", "s"),
        ("(1) launch, CPU of the command", "launch_cpu", "s"),
        ("(2) `omp team status --json`, wall", "status_wall", "ms"),
        ("(2) `omp team status --json`, CPU", "status_cpu", "ms"),
        ("(3) launch's return to all tasks completed and verified", "handover", "s"),
        ("(3) launch's start to all tasks completed and verified", "total", "s"),
        (f"(3) `omp team merge` of {n} branches, wall", "merge_wall", "s"),
    ]
    for what, attr, unit in rows:
        cells = " | ".join(med(getattr(figures[x], attr), unit) for x in labels)
        print(f"| {what} | {cells} |")
    cells = " | ".join(f"{len(figures[x].handover)} of {runs}" for x in labels)
    print(f"| (3) hand-overs that finished | {cells} |")
    for x in labels:
        for why in figures[x].stuck:
            print(f"\n{title(x, n)}: a hand-over did not finish in {HANDOVER_TIMEOUT:.0f} s: {why}")


if __name__ == "__main__":
    main()
