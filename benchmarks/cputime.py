"""CPU time of one child process, and commands timed round by round against the floor.

What an agent pays for a per-call command is the CPU its process burns, start-up included: wall
time on a shared machine measures the neighbours as much as omp. So the per-call benchmarks time
each child's user + system time, as the kernel accounts it when the child is reaped
(`os.wait4`), and run their commands in turn, round after round (A B C A B C ...): drift in the
machine's speed then hits every command alike, and each round's ratio to the floor
(`python -c pass` of the same interpreter) is taken in that round. Medians of both are quoted.

`interpreter(path)` is how a benchmark runs another Python's omp (`--python PATH`): the console
script beside that interpreter, as its venv installed it, else `PATH -m omp`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path


def interpreter(python: str) -> tuple[str, list[str]]:
    """(the interpreter, the words that run its omp): its venv's console script if it has one."""
    script = Path(python).parent / "omp"
    return python, [str(script)] if script.exists() else [python, "-m", "omp"]


def cpu_run(
    cmd: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str],
    stdin: bytes = b"",
    ok: int = 0,
) -> tuple[float, str]:
    """(user + system CPU seconds of the child, its stdout). Raises when it exits other than
    `ok`. The output goes to a file, not a pipe, so reading it costs the child nothing."""
    with (
        tempfile.TemporaryFile() as inp,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        inp.write(stdin)
        inp.seek(0)
        proc = subprocess.Popen(
            list(cmd), env=dict(env), cwd=cwd, stdin=inp, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        if code != ok:
            err.seek(0)
            why = err.read().decode("utf-8", "replace")
            raise RuntimeError(f"{' '.join(cmd[:5])}... exited {code}: {text}{why}")
    return usage.ru_utime + usage.ru_stime, text


Job = tuple[Sequence[str], bytes, Mapping[str, str]]  # argv, stdin, environment on top


def job(argv: Sequence[str], stdin: bytes = b"", env: Mapping[str, str] | None = None) -> Job:
    return argv, stdin, env or {}


class Rounds:
    """CPU seconds per named command over interleaved rounds, each against the round's floor."""

    def __init__(self, floor: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self.floor_cmd, self.env, self.cwd = list(floor), env, cwd
        self.times: dict[str, list[float]] = {"floor": []}
        self.ratios: dict[str, list[float]] = {}

    def round(self, jobs: Mapping[str, Job], *, keep: bool = True) -> dict[str, str]:
        """Run the floor, then each job once; their stdouts. `keep=False`: a warm-up round (the
        bytecode cache, the files a first call writes), run and not counted."""
        base, _ = cpu_run(self.floor_cmd, env=self.env, cwd=self.cwd)
        outs = {}
        times = {}
        for name, (cmd, stdin, extra) in jobs.items():
            env = {**self.env, **extra} if extra else self.env
            times[name], outs[name] = cpu_run(cmd, env=env, cwd=self.cwd, stdin=stdin)
        if keep:
            self.times["floor"].append(base)
            for name, t in times.items():
                self.times.setdefault(name, []).append(t)
                self.ratios.setdefault(name, []).append(t / base if base > 0 else float("inf"))
        return outs

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def ratio(self, name: str) -> float:
        """The median over rounds of the command's CPU over the same round's floor."""
        return statistics.median(self.ratios[name])

    def runs(self, name: str = "floor") -> int:
        return len(self.times[name])
