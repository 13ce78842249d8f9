"""What reaching a pane on another host costs (issue 31): one multiplexed ssh connection per host
(OpenSSH ControlMaster, what omp uses) against a new connection per call, and against tmux here.

    sudo .venv/bin/python benchmarks/bench_remote.py [--quick] [--runs N]

The other host is a real sshd on 127.0.0.1 with a second user (the tests' harness,
`tests/tmux/sshd_server.py`: needs root and openssh-server), so the figures are ssh's own cost
without a network; add the link's round trip per call for a real host.

(a) one tmux command (`list-panes -a`): local; over the master; over a new connection each time;
(b) the monitor's scan of 16 panes on that host: `capture_many` in one call over the master;
(c) starting the master (the first call to a host);
(d) the monitor's whole scan (`omp.monitor.loop.Monitor.scan`) of a team whose 16 workers run on
    that host: the first (one `list-panes` and one `capture_many` over the master, every screen
    judged, presence written), a steady one (one `list-panes`: screens unchanged are not captured
    again), and one while the host does not answer and is backing off (no ssh call at all).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine_lines  # noqa: E402
from omp.tmux import Tmux, ssh  # noqa: E402
from omp.tmux.remote import RemoteTmux  # noqa: E402

PANES = 16


def timed(fn: Callable[[], object], runs: int) -> float:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def ms(s: float) -> str:
    return f"{s * 1000:.1f} ms"


def monitor_rows(host: ssh.Host, sock: str, runs: int) -> list[tuple[str, str]]:
    """(d): a remote-only team of PANES demo-less workers (`cat` panes), each in its own session
    as `omp.team.remote.place` makes them, watched by a real `Monitor` over the host's master."""
    import tempfile

    from omp.errors import OmpError
    from omp.monitor.loop import Monitor
    from omp.monitor.policy import Intervals
    from omp.record import config as team_config
    from omp.record.placement import Placed, hosts_json, session_of
    from tests.helpers import make_project, make_team

    rows: list[tuple[str, str]] = []
    remote = RemoteTmux(host, sock)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_project(Path(tmp) / "proj")
        tp = make_team(root, "b", PANES, task="bench")
        raw = team_config.load(tp).raw
        for w in raw["workers"]:
            _, _, pane = remote.new_session(session_of("b", w["name"]), cwd="/tmp", command=["cat"])
            w["paneId"] = None
            w["remote"] = Placed(host.name, "/tmp", "/tmp", "b", sock, pane).to_config()
        raw.update(agent="demo", hosts=hosts_json({host.name: host}))
        team_config.write(tp, raw)
        iv = Intervals(scan=5.0)

        def first() -> None:
            report = Monitor(root, "bench", intervals=iv).scan()
            assert report.teams[0].get("remotePanes") == PANES, report
            assert report.captures == PANES and report.remote_calls == 2, report

        rows.append(
            (f"d | a monitor scan, {PANES} remote panes: the first", ms(timed(first, runs)))
        )
        mon = Monitor(root, "bench", intervals=iv)
        # tmux stamps activity in whole seconds: a screen captured in its window's last
        # active second is captured again (loop.Monitor._seen); steady means later than that
        time.sleep(1.1)
        mon.scan()

        def steady() -> None:
            report = mon.scan()
            assert report.captures == 0 and report.remote_calls == 1, report

        rows.append(
            (
                f"d | a monitor scan, {PANES} remote panes: steady (one call)",
                ms(timed(steady, runs)),
            )
        )

        class Down:
            def remote_panes(self) -> None:
                raise OmpError("host_unreachable", "down")

        slow = Intervals(scan=60.0)  # the next try is a minute away: every timed scan backs off
        mon = Monitor(root, "bench", intervals=slow, remote_factory=lambda h, s: Down())  # type: ignore[arg-type,return-value]
        mon.scan()  # the outage starts: the next try is a scan interval away

        def away() -> None:
            report = mon.scan()
            assert report.remote_calls == 0 and report.live_teams == 1, report

        rows.append(
            (f"d | a monitor scan, {PANES} remote panes, host backing off", ms(timed(away, runs)))
        )
    remote.kill_server()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="few runs: proves it runs")
    ap.add_argument("--runs", type=int, default=0)
    opts = ap.parse_args()
    runs = opts.runs or (3 if opts.quick else 30)
    from tests.tmux.sshd_server import missing_reason

    why = missing_reason()
    if why is not None:
        print(f"bench_remote: {why}", file=sys.stderr)
        sys.exit(2)
    import pytest

    from tests.tmux.sshd_server import running

    rows: list[tuple[str, str]] = []
    mp = pytest.MonkeyPatch()
    sock = f"omp-bench-{os.getpid()}"
    local = Tmux(socket_name=sock)
    try:
        with running(mp) as server:
            host = server.host()
            t0 = time.perf_counter()
            ssh.run(host, ["true"])
            rows.append(
                ("c | the first call to a host (starts its master)", ms(time.perf_counter() - t0))
            )
            remote = RemoteTmux(host, sock)
            _, _, first = remote.new_session("bench", cwd="/tmp", command=["cat"])
            panes = [first] + [
                remote.split_pane(first, cwd="/tmp", command=["cat"], size=1)
                for _ in range(PANES - 1)
            ]
            remote.select_layout(remote.all_panes()[first].window_id, "tiled")
            local.new_session("bench", cwd="/tmp", command=["cat"])

            rows.append(("a | `list-panes -a`, tmux here", ms(timed(local.all_panes, runs))))
            rows.append(
                ("a | `list-panes -a` over the host's master", ms(timed(remote.all_panes, runs)))
            )

            def fresh() -> None:
                subprocess.run(
                    ssh.argv(host, ["tmux", "-u", "-L", sock, "list-panes", "-a"], master=False),
                    capture_output=True,
                    check=True,
                )

            rows.append(("a | `list-panes -a` over a new ssh connection", ms(timed(fresh, runs))))
            scan = timed(lambda: remote.capture_many(panes), runs)
            rows.append((f"b | capture {PANES} remote panes, one call over the master", ms(scan)))
            remote.kill_server()
            rows += monitor_rows(host, sock, runs)
    finally:
        local.kill_server()
        mp.undo()
    print("# Panes on another host: ssh with one master per host\n")
    for line in machine_lines():
        print(f"- {line}")
    print("- the other host: sshd on 127.0.0.1, a second user (no network round trip)")
    print("\n| Benchmark | Median |\n|---|---|")
    for what, value in sorted(rows):
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    main()
