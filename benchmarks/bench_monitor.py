"""Benchmarks of the project monitor on real tmux (a private server; never the user's).

    .venv/bin/python benchmarks/bench_monitor.py [--quick]

Two teams of 8 worker panes each (16 panes, one session per team), every pane running a trivial
idle prompt program, team configs written by hand as a launch would.

(a) time per scan of the 16 panes, in-process (`Monitor.scan`), in four situations:
    no loop and no mail (every worker's screen is still judged: does it need a person? The first
    scan captures all 16, later ones only screens with new output: the median shows steady
    state); a loop active, first scan (all 16 captured); a loop active, steady state (screens
    unchanged since the last capture are not captured again); a loop active with every capture
    forced (the worst case);
(b) CPU of the detached monitor process over 60 s with those idle teams (10 s with --quick), its
    own time plus its reaped children (the tmux clients it runs), and the tmux server's time over
    the same window, without and with a loop active. Idle prompts are pushed out of the window
    (`OMP_MONITOR_IDLE_SECONDS=86400`): sends are rare events (at most 3 per pane per team), the
    target is about watching.

Targets (issue 4): at most 50 ms per scan of 16 panes; under 2% of one core while idle.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp import modes  # noqa: E402
from omp.monitor import ctl as ctl  # noqa: E402
from omp.monitor.loop import Monitor  # noqa: E402
from omp.monitor.policy import Intervals  # noqa: E402
from omp.record import config as team_config  # noqa: E402
from omp.store import fs  # noqa: E402
from omp.store.paths import StatePaths  # noqa: E402
from omp.team.setup import create_team  # noqa: E402
from omp.tmux import Tmux, TmuxIdentity  # noqa: E402

WORKERS = 8
TEAMS = ("alpha", "beta")
# Prints the demo profile's prompt, and a fresh one after each line typed: an idle agent.
IDLE = ["sh", "-c", "while :; do printf '\\342\\235\\257 '; read -r line || exit 0; done"]


def make_team(root: Path, tmux: Tmux, name: str) -> list[str]:
    create_team(root, name, WORKERS)
    sid, wid, first = tmux.new_session(f"bench-{name}", cwd=root, command=IDLE)
    panes = [first]
    for i in range(1, WORKERS):
        panes.append(tmux.split_pane(panes[-1], cwd=root, command=IDLE, horizontal=i % 2 == 1))
        tmux.select_layout(wid, "tiled")
    server = tmux.server_identity()
    assert server is not None
    tp = StatePaths(root).team(name)
    raw = team_config.load(tp).raw
    for w, p in zip(raw["workers"], panes, strict=True):
        w["paneId"] = p
    raw.update(
        agent="demo",
        launchToken=secrets.token_hex(8),
        tmuxIdentity=TmuxIdentity.of(server, sid, wid).to_config(),
    )
    team_config.write(tp, raw)
    return panes


def wait_prompts(tmux: Tmux, panes: list[str]) -> None:
    end = time.monotonic() + 20
    for p in panes:
        while not any("❯" in ln for ln in tmux.capture(p)):
            if time.monotonic() > end:
                raise SystemExit(f"pane {p} never showed its prompt")
            time.sleep(0.05)


def own(paths: StatePaths, token: str) -> None:
    paths.ensure(paths.monitor)
    fs.write_json_atomic(
        paths.monitor / "owner.lock",
        (
            {"schemaVersion": 1, "token": token, "phase": "pending", "parentPid": os.getpid(),
             "createdAt": "2020-01-01T00:00:00.000Z"}
        )
    )  # fmt: skip
    assert ctl.adopt(paths, token, pid=os.getpid(), now=time.time())


def time_scans(mon: Monitor, n: int, *, force: bool = False) -> tuple[list[float], list[int]]:
    times, caps = [], []
    for _ in range(n):
        if force:
            mon._screens.clear()
        t0 = time.perf_counter()
        rep = mon.scan()
        times.append(time.perf_counter() - t0)
        caps.append(rep.captures)
        assert rep.live_teams == len(TEAMS) and not rep.sent, rep
    return times, caps


def bench_scans(root: Path, scans: int) -> list[tuple[str, str, str, str]]:
    paths = StatePaths(root)
    token = secrets.token_hex(16)
    own(paths, token)
    iv = Intervals(idle_delay=86400.0)
    rows = []
    mon = Monitor(root, token, intervals=iv)
    t, c = time_scans(mon, scans)
    rows.append(("no loop, no mail", ms(statistics.median(t)), str(max(c)), "≤ 50 ms"))
    modes.start_ralph(paths, "bench")
    mon = Monitor(root, token, intervals=iv)
    t, c = time_scans(mon, 1)
    rows.append(("loop active, first scan (all captured)", ms(t[0]), str(c[0]), "≤ 50 ms"))
    time.sleep(1.1)  # tmux stamps activity in whole seconds: let the capture's second pass
    t, c = time_scans(mon, scans)
    rows.append(("loop active, steady (unchanged screens)", ms(statistics.median(t)),
                 str(statistics.median(c)), "≤ 50 ms"))  # fmt: skip
    t, c = time_scans(mon, scans, force=True)
    rows.append(("loop active, every pane captured (one tmux client)",
                 ms(statistics.median(t)), str(max(c)), "≤ 50 ms"))  # fmt: skip
    modes.cancel(paths, "ralph")
    ctl.release(paths, token)
    return rows


def cpu_ticks(pid: int, children: bool) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14)
    own = int(fields[11]) + int(fields[12])
    return own + (int(fields[13]) + int(fields[14]) if children else 0)


def registered() -> bool:
    """Whether `omp team monitor-run` exists (registered by omp.cli.app or omp.cli.team)."""
    import omp.cli.app  # noqa: F401  (registers the sub-apps)
    from omp.cli.team import app

    return any(c.name == "monitor-run" for c in app.registered_commands)


def fallback_spawn(root: Path, token: str) -> int:
    code = "import sys; from pathlib import Path; from omp.monitor.loop import serve; "
    code += f"sys.exit(serve(Path({str(root)!r}), {token!r}))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    ctl._CHILDREN.append(proc)
    return proc.pid


def bench_cpu(root: Path, tmux: Tmux, seconds: float, loop: bool) -> tuple[float, float, int]:
    paths = StatePaths(root)
    if loop:
        modes.start_ralph(paths, "bench")
    spawn = ctl.spawn_detached if registered() else fallback_spawn
    r = ctl.ensure_monitor(root, spawn=spawn)
    assert r["started"], r
    end = time.monotonic() + 20
    while True:
        o, _ = ctl.read_owner(paths)
        if o is not None and o.phase == "running":
            break
        if time.monotonic() > end:
            raise SystemExit("the monitor never adopted its lock")
        time.sleep(0.05)
    pid = o.pid
    assert pid is not None
    time.sleep(6)  # past start-up (imports) and the first full scan
    server = tmux.server_identity()
    assert server is not None
    spid = server["server_pid"]
    hz = os.sysconf("SC_CLK_TCK")
    m0, s0, w0 = cpu_ticks(pid, True), cpu_ticks(spid, False), time.monotonic()
    time.sleep(seconds)
    m1, s1, w1 = cpu_ticks(pid, True), cpu_ticks(spid, False), time.monotonic()
    status = json.loads((paths.monitor / "status.json").read_text())
    os.kill(pid, 15)
    end = time.monotonic() + 10
    while ctl.read_owner(paths)[1] is not None and time.monotonic() < end:
        time.sleep(0.05)
    ctl._reap()
    if loop:
        modes.cancel(paths, "ralph")
    wall = w1 - w0
    return (m1 - m0) / hz / wall * 100, (s1 - s0) / hz / wall * 100, int(status["scans"])


def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short runs: a smoke test, not a measure")
    args = ap.parse_args()
    scans, seconds = (5, 10.0) if args.quick else (50, 60.0)
    for k in list(os.environ):
        if k.startswith("OMP_") or k in ("TMUX", "TMUX_PANE"):
            del os.environ[k]
    os.environ["OMP_MONITOR_IDLE_SECONDS"] = "86400"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print("\n".join(machine_lines()))
    tmux = Tmux(socket_name=f"omp-bench-{secrets.token_hex(4)}", config_file="/dev/null")
    try:
        with tempfile.TemporaryDirectory(prefix="omp-bench-") as d:
            root = Path(d) / "proj"
            (root / ".git").mkdir(parents=True)
            panes = [p for name in TEAMS for p in make_team(root, tmux, name)]
            wait_prompts(tmux, panes)
            scan_rows = bench_scans(root, scans)
            cpu_rows = []
            for loop in (False, True):
                mon, srv, n = bench_cpu(root, tmux, seconds, loop)
                label = "loop active" if loop else "no loop"
                cpu_rows.append((label, f"{mon:.2f}%", f"{srv:.2f}%", str(n)))
    finally:
        tmux.kill_server()
    how = "omp team monitor-run" if registered() else "serve() via python -c (not registered)"
    print()
    print(f"| scan of 16 worker panes, 2 teams ({scans} scans) | median | captures | target |")
    print("|---|---|---|---|")
    for r in scan_rows:
        print(f"| {' | '.join(r)} |")
    print()
    print(f"| monitor process over {seconds:.0f} s, idle teams ({how}) | monitor CPU "
          "(+ its tmux clients) | tmux server CPU | scans so far | target |")  # fmt: skip
    print("|---|---|---|---|---|")
    for r in cpu_rows:
        print(f"| {' | '.join(r)} | < 2% of one core |")


if __name__ == "__main__":
    main()
