"""The backlog: tasks from a file or a tracker, a ready queue that hands idle workers their next
task, a worktree and branch per task, and each task's landing on the team's target branch.

- `files`: the tasks-file parsers (TOML `[[task]]`, a Markdown checklist, a GitHub issues
  export), checked whole before anything is written (`invalid_tasks`);
- `settings`: what a team's config records of its backlog (merge auto/manual, the target);
- `handover`: a free worker is given the next ready task that fits it, by mail and a nudge
  (the claim itself is `omp.tasks.queue`'s, under the task guard);
- `worktrees`: a task's own worktree and branch, prepared ahead of its hand-over;
- `landing`: a task's branch merged onto the target, and the fan-out to the workers whose base
  moved;
- `tick`: what the monitor does for a backlog team on every scan.

The graph (readiness, the order of the queue) is `omp.tasks.graph`: plain functions over task
records, with no I/O.

Imports: mail, tasks, record, workspace, store and the leaves; never tmux directly (a nudge goes
through `omp.mail.delivery`).
"""
