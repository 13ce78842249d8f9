"""What reaching a pane on another host costs (issue 31): one multiplexed ssh connection per host
(OpenSSH ControlMaster, what omp uses) against a new connection per call, and against tmux here.

    sudo .venv/bin/python benchmarks/bench_remote.py [--quick] [--runs N]

The other host is a real sshd on 127.0.0.1 with a second user (the tests' harness,
`tests/tmux/sshd_server.py`: needs root and openssh-server), so the figures are ssh's own cost
without a network; add the link's round trip per call for a real host.

(a) one tmux command (`list-panes -a`): local; over the master; over a new connection each time;
(b) the monitor's scan of 16 panes on that host: `capture_many` in one call over the master;
(c) starting the master (the first call to a host).
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
