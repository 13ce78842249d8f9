"""A backlog in a team's life: what `omp team launch --tasks` and `add-worker` do differently.

The launch reads and checks the tasks file before anything is touched (`omp.backlog.files`),
decides each worker's first task (`omp.backlog.start`), makes those tasks' worktrees (with the
team's other provisional worktrees: a failed launch leaves none), starts every pane in the
directory of the tasks' worktrees, writes each inbox with its task claimed for its worker, and
records the backlog in the config. The monitor hands out the rest (`omp.backlog.tick`).

`add-worker` on a backlog team gives its newcomers no worktree of their own and no task in their
inbox: they join the queue (`joining`, then `omp.backlog.handover.run` for them once their
panes are ready).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omp import clock
from omp.backlog import settings as backlog_settings
from omp.backlog import worktrees as task_worktrees
from omp.backlog.files import Spec
from omp.backlog.settings import AUTO, Backlog
from omp.errors import OmpError
from omp.invocation import hint
from omp.mail import bootstrap
from omp.record import history
from omp.record.workspace import Worktree
from omp.store.paths import StatePaths, TeamPaths
from omp.tasks.graph import Graph, Worker
from omp.tasks.queue import JOINING

if TYPE_CHECKING:
    from omp.agents import AgentProfile
    from omp.record.config import TeamConfig
    from omp.team.worktrees import Plan

    # `omp.team.launch.Launch` and its request (named loosely: launch imports this module)
    Launch = Any
    LaunchRequest = Any


class BacklogStart:
    """The backlog part of one launch (or add-worker)."""

    def __init__(self, specs: list[Spec], bl: Backlog) -> None:
        self.specs = specs
        self.settings = bl
        self.records: list[dict[str, Any]] = []
        self.given: dict[str, dict[str, Any]] = {}
        self._started = False

    # ---- checks that touch nothing ---------------------------------------------------------

    @classmethod
    def load(
        cls, req: LaunchRequest, project: StatePaths, team: str, plan: Plan | None
    ) -> BacklogStart:
        from omp.backlog import files

        if req.tasks_file is None:
            raise OmpError("usage", "--merge goes with --tasks FILE (a backlog of tasks)")
        if req.task:
            raise OmpError("usage", "give the task text or --tasks FILE, not both")
        specs = files.load(req.tasks_file)
        mode = backlog_settings.merge_mode(req.merge, project)
        source = str(req.tasks_file)
        if plan is None or not plan.worktree:
            if mode == AUTO:
                raise OmpError(
                    "invalid_input",
                    "--merge auto needs a worktree per task (--workspace worktree, in a git "
                    "repository with a commit): in a shared checkout there is no branch to merge",
                )
            return cls(specs, Backlog(mode, None, False, None, source))
        from omp.workspace import repo

        assert plan.top is not None
        target = repo.current_branch(plan.top)
        if target is None:
            raise OmpError(
                "detached_head",
                f"{plan.top} has no branch checked out (detached HEAD): each task starts from "
                "the branch you are on and is merged back into it; check one out first",
            )
        where = backlog_settings.tasks_dir_for(plan.top, team, plan.under)
        clear_leftovers(plan.top, team, where, [s.id for s in specs])
        return cls(specs, Backlog(mode, target, True, str(where), source))

    @classmethod
    def joining(cls, cfg: TeamConfig) -> BacklogStart | None:
        """For add-worker: the team's backlog (no tasks of its own), or None."""
        bl = backlog_settings.of(cfg)
        return cls([], bl) if bl is not None else None

    # ---- the launch ------------------------------------------------------------------------

    def make_worktrees(self, launch: Launch, team: str, workers: list[str]) -> dict[str, Worktree]:
        """Decide the first tasks and make their worktrees (provisional in the launch's stack,
        under `task-<id>` keys of `launch.made`: a later failure removes them safely)."""
        from omp.backlog.start import first_tasks

        if not self._started:
            self._started = True
            who = [Worker(w, launch.req.agent) for w in workers]
            start = first_tasks(self.specs, who, source=self.settings.source or "tasks")
            self.records, self.given = start.records, start.given
        if not self.settings.worktrees:
            return {}
        root = Path(launch.req.cwd)
        from omp.store.paths import find_root

        root = find_root(root)
        spec = task_worktrees.spec_of(root)
        for rec in self.given.values():
            tid = str(rec["id"])
            record = launch.stack.enter_context(
                task_worktrees.provisional_at(root, team, self.settings, tid, spec)
            )
            rec["workspace"] = record
            launch.made[f"task-{tid}"] = Worktree(record["path"], record["branch"], record["base"])
        if self.given:
            launch.progress(f"{len(self.given)} task worktree(s) made under {self.settings.dir}")
        return {}

    def pane_place(
        self, launch: Launch, profile: AgentProfile, team: TeamPaths, omp: str
    ) -> dict[str, Any]:
        """Where a backlog worker's pane starts: beside every task's worktree."""
        if not self.settings.worktrees:
            return {}
        home = task_worktrees.pane_home(self.settings)
        dirs = [str(team.project.root), str(home)]
        return {"cwd": home, "command": launch.agent_command(profile, team, omp, dirs)}

    def record(self, raw: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        """The backlog and each new worker's first task into the config about to be written."""
        if not isinstance(raw.get("backlog"), dict):
            raw["backlog"] = self.settings.to_config()
        if not raw.get("task") and self.records:
            raw["task"] = f"backlog: {len(self.records)} task(s) from {self.settings.source}"
        for e in entries:
            rec = self.given.get(str(e.get("name")))
            e["taskId"] = str(rec["id"]) if rec is not None else None
            if self.settings.worktrees:
                e["workspace"] = {"kind": "tasks", "dir": self.settings.dir}
            if rec is None:
                # no task in its inbox: the queue may hand it one only once it was told to read
                # that inbox (else omp's mail and nudge could reach its pane first); `joined`
                e[JOINING] = clock.iso()

    def joined(self, team: TeamPaths, workers: list[str]) -> None:
        """Their triggers were typed: the queue may hand them tasks now."""
        from omp.record import config as team_config
        from omp.team.membership import members_locked

        with contextlib.suppress(OmpError), members_locked(team):
            cfg = team_config.load(team)
            changed = False
            for e in cfg.workers:
                if e.get("name") in workers and JOINING in e:
                    del e[JOINING]
                    changed = True
            if changed:
                team_config.write(team, cfg.raw)

    def inbox(
        self, launch: Launch, team: TeamPaths, w: dict[str, Any], teammates: list[str], omp: str
    ) -> str:
        from omp.backlog.handover import backlog_words

        name = str(w["name"])
        rec = self.given.get(name)
        check = launch.plan.verify if launch.plan is not None else None
        words = backlog_words(self.settings)
        if rec is None:
            return bootstrap.inbox_markdown(
                team=team.name, worker=name, task_id=None, description="", teammates=teammates,
                result_path=team.result(name), omp=omp, backlog=words,
            )  # fmt: skip
        ws = rec.get("workspace")
        worktree = (str(ws["path"]), str(ws["branch"])) if isinstance(ws, dict) else None
        own = rec.get("verifyCommand")
        return bootstrap.inbox_markdown(
            team=team.name, worker=name, task_id=str(rec["id"]),
            description=str(rec.get("description") or ""), teammates=teammates,
            result_path=team.result(name), omp=omp, worktree=worktree,
            verify=own if isinstance(own, str) and own else (check[0] if check else None),
            claim_token=str(rec["claimToken"]), backlog=words,
        )  # fmt: skip

    def written(self, team: TeamPaths) -> None:
        for worker, rec in self.given.items():
            event: dict[str, Any] = {"type": "handover", "taskId": rec["id"], "worker": worker}
            ws = rec.get("workspace")
            if isinstance(ws, dict):
                event["branch"] = ws.get("branch")
            history.record(team, event)

    def summary(self) -> dict[str, Any]:
        g = Graph(self.records)
        return {
            "tasks": len(self.records),
            "ready": len(g.queue()) + len(self.given),
            "merge": self.settings.merge,
            "worktrees": self.settings.worktrees,
            "target": self.settings.target,
            "dir": self.settings.dir,
            "first": {w: str(rec["id"]) for w, rec in self.given.items()},
        }


def clear_leftovers(top: Path, team: str, where: Path, ids: list[str]) -> None:
    """Task worktrees and branches an earlier run of this team left under these ids: removed
    when nothing in them would be lost, else the launch is refused (`worktree_exists`)."""
    from omp.workspace import remove
    from omp.workspace.git import git

    prefix = f"refs/heads/{task_worktrees.BRANCH_PREFIX}/{team}/"
    res = git(top, "for-each-ref", "--format=%(refname)", prefix, ok=(0, 1, 128))
    have = {ln[len("refs/heads/") :] for ln in res.text.splitlines() if ln.startswith(prefix)}
    found: list[tuple[Path, str]] = []
    for tid in ids:
        branch = f"{task_worktrees.BRANCH_PREFIX}/{team}/task-{tid}"
        path = where / f"task-{tid}"
        if branch in have or path.exists():
            found.append((path, branch))
    risky: list[str] = []
    clear: list[tuple[Path, str]] = []
    for path, branch in found:
        try:
            risk = remove.at_risk(top, path, branch)
        except OmpError:
            risk = None
        if risk is None or risk:
            risky.append(f"{branch} at {path}")
        else:
            clear.append((path, branch))
    if risky:
        raise OmpError(
            "worktree_exists",
            f"an earlier run of team {team} left work under the ids of these tasks: "
            f"{'; '.join(risky[:10])}. Merge it ({hint(f'team merge {team}')}), or throw it "
            f"away ({hint(f'team delete {team} --force')}), or launch under another --name",
            team=team,
            worktrees=risky,
        )
    for path, branch in clear:
        with contextlib.suppress(OmpError):
            remove.remove_worktree(top, path, branch)
