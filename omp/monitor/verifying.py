"""Completions a team verifies (`--verify`): the check started, its verdict settled, a crashed
check run again. No task stays `verifying` for good.

A worker's completion in a team that verifies becomes `verifying` (`omp.api.operations`), and
`start` begins the check in the background under the task's guard: `omp.workspace.verify` runs
the team's command under a supervisor process of its own, so it never runs inside the agent's
tool call; its state and output are kept beside the task (`tasks/<id>.verify/`). A worktree
worker's completion is checked in a scratch checkout of the commit it completed with
(`omp.workspace.scratch`, provisioned like a worktree, removed after): the check never changes
the worktree it checks, so what it leaves behind (`__pycache__/`, caches) is never taken for the
worker's uncommitted work. A shared worker has no commit of its own: its check runs in the
team's directory. The verdict is settled by whoever comes
first, both through `settle_task`, which acts only on the run the task records:

- the supervisor, which runs `python -m omp.monitor.verifying ROOT TEAM TASK` once it wrote the
  outcome;
- the monitor, on every scan of a team that verifies (`settle_team`), like the sweeps.

Verdicts:

- passed: the task is `completed` (the worker's outbox and the team's events say so: the leader
  hears of it as of any completion);
- failed or timed out: back to `in_progress` with the same claimant and token, and the worker is
  mailed the command, its exit code, the last 40 lines of its output and "fix it, commit,
  complete again";
- crashed (the supervisor is gone without an outcome: killed, a reboot): run again, at most
  `MAX_ATTEMPTS` runs in all, then it counts as failed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from omp import clock
from omp.errors import OmpError
from omp.mail import bootstrap
from omp.record.config import TeamConfig
from omp.record.workspace import DEFAULT_VERIFY_TIMEOUT, team_verify, worktree_of
from omp.tasks import tasks

MAX_ATTEMPTS = 3
MAX_FAILED_CHECKS = 3  # a backlog task's check failing this often fails the task
TAIL_LINES = 40
MAX_LINE = 300  # characters of one log line in the mail
Action = dict[str, Any]


def _cwd(cfg: TeamConfig, worker: str | None) -> Path:
    wt = worktree_of(cfg.worker(worker) if worker else None)
    if wt is not None:
        return Path(wt.path)
    cwd = cfg.raw.get("cwd")
    return Path(cwd) if isinstance(cwd, str) and os.path.isdir(cwd) else cfg.paths.project.root


def start(cfg: TeamConfig, task: dict[str, Any], *, restart: bool = False) -> dict[str, Any]:
    """Start the team's check of `task` in the background; what the task records of it.
    Call it holding the task's guard (the record and the run then always agree)."""
    from omp.workspace import verify

    found = team_verify(cfg.raw)
    own = task.get("verifyCommand")  # a backlog task's own check (`omp.backlog.files`)
    if isinstance(own, str) and own.strip():
        found = (own, found[1] if found else DEFAULT_VERIFY_TIMEOUT)
    if found is None:
        raise OmpError("invalid_config", f"team {cfg.name} has no verify command")
    command, timeout = found
    tid = str(task["id"])
    owner = task.get("owner") if isinstance(task.get("owner"), str) else None
    root = cfg.paths.project.root
    _bring_back(cfg, owner)
    own_tree = worktree_of(task)  # a backlog task's own worktree, else the worker's
    checkout = _checkout(cfg, owner, task)
    st = verify.start(
        cfg.paths.verify_dir(tid),
        Path(own_tree.path) if own_tree is not None else _cwd(cfg, owner),
        command,
        timeout,
        restart=restart,
        then=[sys.executable, "-m", "omp.monitor.verifying", str(root), cfg.name, tid],
        then_env={"OMP_ROOT": str(root)},
        checkout=checkout,
    )
    out = {
        "status": "running",
        "run": st.run,
        "command": command,
        "timeout": timeout,
        "cwd": st.cwd,
        "log": str(st.log),
        "attempt": st.attempt,
        "startedAt": clock.iso(),
    }
    if checkout is not None:
        out["commit"] = checkout.commit  # checked in a scratch checkout of it
    return out


def _bring_back(cfg: TeamConfig, worker: str | None) -> None:
    """A worker on another host: its branch into this repository first (fast-forward only;
    `host_unreachable` leaves the task queued for the next scan)."""
    from omp.record.placement import host_of, placed_of

    entry = cfg.worker(worker) if worker else None
    placed = placed_of(entry)
    host = host_of(cfg.raw, entry)
    if placed is None or host is None:
        return
    from omp.workspace import remote, repo

    project = os.path.basename(os.path.dirname(placed.root))
    top = repo.toplevel(cfg.paths.project.root)
    remote.fetch_back(host, top, project, branch=placed.branch)


def _checkout(cfg: TeamConfig, worker: str | None, task: dict[str, Any]) -> Any:
    """The scratch checkout a worktree worker's completion is checked in (the commit the
    completion recorded, `work.commit`), or None: a shared worker's check runs in place."""
    from omp.record.workspace import load_settings
    from omp.workspace import verify

    if worker is None or (worktree_of(task) is None and worktree_of(cfg.worker(worker)) is None):
        return None
    work = task.get("work")
    commit = work.get("commit") if isinstance(work, dict) else None
    if not isinstance(commit, str) or not commit:
        return None
    from omp.workspace import repo

    try:
        settings = load_settings(cfg.paths.project)
        copy, link = tuple(settings.copy), tuple(settings.link)
    except OmpError:  # launch checked it; a file broken since must not block the completion
        copy, link = (), ()
    return verify.Checkout(str(repo.toplevel(cfg.paths.project.root)), commit, copy, link)


def _summary(v: dict[str, Any]) -> dict[str, Any]:
    """What an event shows of a check."""
    out = {"status": v.get("status"), "log": v.get("log")}
    if v.get("exit") is not None:
        out["exit"] = v["exit"]
    return out


def _tail(log: str) -> str:
    from omp.workspace import verify

    if not log:
        return ""
    try:
        lines = verify.tail(Path(log), TAIL_LINES).splitlines()
    except (OSError, OmpError):
        return ""
    return "\n".join(ln if len(ln) <= MAX_LINE else ln[: MAX_LINE - 1] + "…" for ln in lines)


def failure_mail(cfg: TeamConfig, task: dict[str, Any], v: dict[str, Any]) -> str:
    """What the worker is told when its completion's check failed."""
    from omp.invocation import team_command

    tid, worker = str(task["id"]), str(task.get("owner") or "")
    status = v.get("status")
    if status == "timed_out":
        how = f"did not finish within {float(v.get('timeout') or 0):g} s and was stopped"
    elif status == "crashed":
        how = f"was cut short {MAX_ATTEMPTS} times (its supervisor died)"
    else:
        how = f"exited with code {v.get('exit')}"
    done = bootstrap.complete_command(team_command(cfg.raw), cfg.name, tid, worker)
    tail = _tail(str(v.get("log") or "")) or "(no output)"
    commit = v.get("commit")
    where = (
        f"in a scratch checkout of your commit {str(commit)[:10]}, removed since"
        if commit
        else f"in {v.get('cwd')}"
    )
    return (
        f"The check of your completion of task {tid} failed: `{v.get('command')}` {how} "
        f"({where}). Task {tid} is in_progress again, still yours (same claimToken).\n"
        f"Last {TAIL_LINES} lines of its output ({v.get('log')}):\n{tail}\n\n"
        f"Fix it, commit, complete again:\n   {done}"
    )


def _mail(cfg: TeamConfig, task: dict[str, Any], v: dict[str, Any]) -> str | None:
    worker = task.get("owner")
    if not isinstance(worker, str) or worker not in cfg.worker_names:
        return None
    from omp.mail import delivery

    return delivery.auto_mail(cfg, worker, failure_mail(cfg, task, v), {"intent": "verify_failed"})


def _notify(cfg: TeamConfig, task: dict[str, Any], v: dict[str, Any]) -> None:
    """Queue a `verify_failed` notification, once per run of the check."""
    from omp.monitor import notices

    tid, worker = str(task["id"]), str(task.get("owner") or "")
    status = str(v.get("status") or "failed").replace("_", " ")
    code = f" (exit {v['exit']})" if v.get("exit") is not None else ""
    event = {
        "kind": "verify_failed",
        "team": cfg.name,
        "worker": worker,
        "text": f"{cfg.name}/{worker}: the check of task {tid} {status}{code}: {v.get('command')}",
        "taskId": tid,
        "status": v.get("status"),
        "exit": v.get("exit"),
        "log": v.get("log"),
    }
    notices.queue(cfg.paths.project, event, f"verify_failed:{cfg.name}:{tid}:{v.get('run')}")


def settle_task(cfg: TeamConfig, tid: str, *, now: float | None = None) -> Action | None:
    """Settle one `verifying` task as its check stands now (see the module docstring); the
    action taken, or None when there was nothing to do."""
    from omp.workspace import verify

    team = cfg.paths
    task = tasks.read(team, tid)
    if task is None or task.get("status") != "verifying":
        return None
    v = task.get("verify") if isinstance(task.get("verify"), dict) else {}
    assert isinstance(v, dict)
    run = v.get("run")

    def same_run(t: dict[str, Any]) -> bool:
        tv = t.get("verify")
        return isinstance(tv, dict) and tv.get("run") == run

    def run_again(action: str, shown: dict[str, Any]) -> Action | None:
        """Start the check (again) under the task's guard, if the task is still this run's."""
        begun: dict[str, Any] = {}

        def begin(t: dict[str, Any]) -> None:
            begun.update(start(cfg, t, restart=True))
            t["verify"] = begun

        moved = tasks.omp_move(
            team,
            tid,
            expect="verifying",
            to="verifying",
            check=same_run,
            amend=begin,
            extra={"verify": shown},
        )
        if moved is None:
            return None
        return {"action": action, "team": cfg.name, "taskId": tid, **begun}

    if v.get("status") == "queued":  # a remote worker's completion: checked here
        return run_again("verify_started", {"status": "running", "log": None})
    st = verify.poll(team.verify_dir(tid), now=now)
    if st is not None and st.run != run:
        st = None  # another run's state: this one never got as far as recording itself
    verdict = st.status if st is not None else "crashed"
    if st is None:
        started = clock.parse_iso(str(v.get("startedAt"))) or 0.0
        if (now if now is not None else time.time()) - started < verify.STARTUP:
            return None  # just started: its supervisor may not have written its state yet
    if verdict == "running":
        return None
    if verdict == "crashed" and int(v.get("attempt") or 1) < MAX_ATTEMPTS:
        return run_again("verify_restarted", {"status": "restarted", "log": v.get("log")})
    record = {
        **v,
        "status": verdict,
        "exit": st.exit if st is not None else None,
        "finishedAt": clock.iso(),
    }
    if st is not None and st.cwd:
        record["cwd"] = st.cwd  # where it ran: a scratch checkout, once the supervisor made it
    if verdict == "passed":
        done = tasks.omp_move(
            team,
            tid,
            expect="verifying",
            to="completed",
            fields={"verify": record},
            check=same_run,
            extra={"verify": _summary(record)},
        )
        if done is None:
            return None
        return {"action": "verified", "team": cfg.name, "taskId": tid, "log": record.get("log")}
    owner = task.get("owner")
    if isinstance(owner, str) and owner not in cfg.worker_names:
        # its worker was taken off the team meanwhile: nobody to give the task back to (a task
        # is never left in_progress with an owner who is not a member)
        gone = tasks.omp_move(
            team,
            tid,
            expect="verifying",
            to="interrupted",
            fields={"verify": record, "result": f"interrupted: its check {verdict}, and "
                    f"{owner} is no longer on the team"},
            check=same_run,
            extra={"verify": _summary(record)},
        )  # fmt: skip
        if gone is None:
            return None
        _notify(cfg, gone, record)
        return {"action": "verify_failed", "team": cfg.name, "taskId": tid, "status": verdict}
    # A backlog task whose check keeps failing fails (its dependents then show as blocked by
    # it; `retries` may give it to another worker): the worker is free for the next task.
    failures = int(task.get("verifyFailures") or 0) + 1
    give_up = task.get("backlog") is True and failures >= MAX_FAILED_CHECKS
    fields: dict[str, Any] = {"verify": record, "verifyFailures": failures}
    if give_up:
        fields["result"] = f"failed: its check failed {failures} times ({record.get('log')})"
    back = tasks.omp_move(
        team,
        tid,
        expect="verifying",
        to="failed" if give_up else "in_progress",
        fields=fields,
        # the failed attempt's one-line result is not the task's now
        drop=() if give_up else ("result",),
        check=same_run,
        extra={"verify": _summary(record)},
    )
    if back is None:
        return None
    _notify(cfg, back, record)
    if give_up:
        return {"action": "verify_gave_up", "team": cfg.name, "taskId": tid,
                "failures": failures, "log": record.get("log")}  # fmt: skip
    action: Action = {
        "action": "verify_failed",
        "team": cfg.name,
        "taskId": tid,
        "status": verdict,
        "exit": record["exit"],
        "log": record.get("log"),
    }
    try:
        mid = _mail(cfg, back, record)
    except OmpError:  # the task moved already: a lost mail must not hide that
        mid = None
    if mid is not None:
        action["messageId"] = mid
    return action


def verifying_ids(cfg: TeamConfig) -> list[str]:
    """Ids of the team's tasks being verified (read-only)."""
    out = []
    for t in tasks.list_all(cfg.paths):
        if t.get("status") == "verifying":
            out.append(str(t["id"]))
    return out


def settle_team(cfg: TeamConfig, *, now: float | None = None) -> list[Action]:
    """The monitor's pass over one team: settle every task being verified. Cheap for a team
    that does not verify (one dictionary lookup)."""
    if team_verify(cfg.raw) is None and not isinstance(cfg.raw.get("backlog"), dict):
        return []  # (a backlog task may carry a check of its own)
    out: list[Action] = []
    for tid in verifying_ids(cfg):
        try:
            action = settle_task(cfg, tid, now=now)
        except OmpError:
            continue  # moved or unreadable meanwhile: the next scan looks again
        if action is not None:
            out.append(action)
    return out


def main(argv: list[str]) -> int:
    """`python -m omp.monitor.verifying ROOT TEAM TASK`: the supervisor's word that a check
    ended. Prints nothing; a failure is left to the monitor's next scan."""
    if len(argv) != 3:
        return 2
    from omp.record import config as team_config
    from omp.store.paths import StatePaths

    root, team, tid = argv
    try:
        cfg = team_config.load(StatePaths(Path(root)).team(team))
        settle_task(cfg, tid)
    except Exception:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
