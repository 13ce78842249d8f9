"""Shared pieces of the fault-injection suite: child-process bodies and file checks.

Children are forked (`multiprocessing` "fork"), so they start in milliseconds and inherit the
test's environment; every function a child runs is module-level. A child that must die at an
exact point kills itself with SIGKILL there: no cleanup handler, no `finally`, no flush runs,
exactly as when the kernel or a person kills it.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

CTX = multiprocessing.get_context("fork")


def die() -> None:
    """SIGKILL this process now (nothing after this line runs)."""
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # pragma: no cover - the signal is delivered before this returns


def start(target: Callable[..., None], *args: Any) -> BaseProcess:
    proc = CTX.Process(target=target, args=args)
    proc.start()
    return proc


def kill_and_reap(proc: BaseProcess) -> None:
    if proc.is_alive():
        proc.kill()
    proc.join(10)
    assert not proc.is_alive(), f"child {proc.pid} survived SIGKILL"


def append_line(path: str | Path, text: str) -> None:
    """One `write` on an O_APPEND descriptor: a whole line or (if killed) nothing useful."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def complete_lines(path: str | Path) -> list[str]:
    """The newline-terminated lines of a side file (a torn last line is not an entry)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return [ln.decode() for ln in data.split(b"\n")[:-1] if ln]


def split_jsonl(data: bytes) -> tuple[list[dict[str, Any]], list[bytes]]:
    """(records of every line that parses, the raw lines that do not), file order."""
    good: list[dict[str, Any]] = []
    bad: list[bytes] = []
    for raw in data.split(b"\n")[:-1]:
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            bad.append(raw)
            continue
        if isinstance(rec, dict):
            good.append(rec)
        else:
            bad.append(raw)
    return good, bad


# ---- fault 1: senders ------------------------------------------------------------------------

# Senders are worker-1..8; each spreads its sends over these (an index holding thousands of
# unread messages costs every send more, and the default limits would refuse that backlog).
RECIPIENTS = ("leader", "worker-9", "worker-10", "worker-11")


def sender(root: str, slot: int, first: int, total: int, acks: str, tear_at: int) -> None:
    """Send messages `first..total-1` of sender slot `slot` through `omp.api.operations`.

    An id goes to the side file `acks` only after `send_message` returned ok. With
    `tear_at >= 0`, send number `tear_at` writes half of its mailbox line and then SIGKILLs
    this process mid-line (the worst moment a writer can die).
    """
    from omp.api import operations as api
    from omp.store import jsonl

    if tear_at >= 0:
        real = jsonl._write_all
        state = {"seq": -1}

        def tearing(fd: int, data: bytes) -> int:
            if state["seq"] == tear_at and data.startswith(b'{"type":"message"'):
                os.write(fd, data[: len(data) // 2])
                die()
            return real(fd, data)

        jsonl._write_all = tearing
    me = f"worker-{slot + 1}"
    for seq in range(first, total):
        if tear_at >= 0:
            state["seq"] = seq
        to = RECIPIENTS[seq % len(RECIPIENTS)]
        body = f"{me} #{seq} " + "x" * (seq % 7) * 40
        reply = api.send_message(
            {"team_name": "demo", "cwd": root, "from": me, "to": to, "body": body}
        )
        assert reply.result["ok"] is True
        append_line(acks, reply.result["messageId"])


# ---- fault 2: readers ------------------------------------------------------------------------


def _stdout_to(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True
    )


def api_reader(argv: list[str], out: str, die_before_receipts: bool) -> None:
    """`omp team api <argv>` with stdout to `out`; optionally SIGKILLed before its receipts.

    The kill replaces `Mailbox.mark`, which `mailbox-read` calls only after printing.
    """
    _stdout_to(out)
    if die_before_receipts:
        from omp.mail import mailbox

        mailbox.Mailbox.mark = lambda self, ids: die()  # type: ignore[assignment,method-assign,return-value]
    from omp.cli import main

    try:
        main(["team", "api", *argv])
    except SystemExit:
        pass


def cursor_reader(log: str, cursor: str, out: str, die_in_handler: bool, rounds: int) -> None:
    """Consume `log` through `cursor` `rounds` times, recording each record's `n` in `out`.

    With `die_in_handler`, the first handler that got records SIGKILLs the process after
    recording them: between reading and moving the cursor.
    """
    from omp.store import jsonl

    def handle(chunk: jsonl.Chunk) -> None:
        if chunk.records:
            append_line(out, " ".join(str(rec["n"]) for _, _, rec in chunk.records))
            if die_in_handler:
                die()

    for _ in range(rounds):
        jsonl.consume(Path(log), Path(cursor), handle)


def log_writer(log: str, count: int) -> None:
    from omp.store import jsonl

    for n in range(count):
        jsonl.append(Path(log), {"n": n, "pad": "p" * (n % 13) * 30})
