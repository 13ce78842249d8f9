"""Workers' git worktrees: create, inspect, verify, merge back, remove. Knows git, not tmux.

Plain functions over a repository path, each tested on temporary repositories with real git.
Nothing here is imported at `omp team api` start: callers import the module they need lazily.
Every git call goes through `git.git()` (a clean environment: `git_env()`, a time limit, exit
codes checked, only `-z` / porcelain / rev-parse output parsed); failures are `OmpError`s with
stable codes (`git_not_found`, `git_failed`, `git_too_old`, `not_a_git_repo`, `invalid_branch`,
`unknown_revision`, `worktree_exists`, `carry_failed`, `unsafe_path`, `leader_dirty`,
`detached_head`, `unmerged_work`, `branch_checked_out`, `target_busy`, `signing_failed`). A
command that asks many things of one repository (`merge`) goes through one `handle.Repo`, which
asks each repeated read once.

How the team commands use it (the callers: `omp.team.worktrees`, `omp.tasks.handover`,
`omp.monitor.verifying`, `omp.views.worktrees`, `omp.team.merging`; docs/worktrees.md):

- `launch` / `add-worker` (`--workspace worktree|shared`):
  `repo.has_commit(root)` picks the default; `repo.head(root)` is the team's base;
  `create.uncommitted_count(root)` is launch's one line about what the worktrees lack;
  `create.recover_unfinished(root)` first (rolls back worktrees a crashed launch left);
  then per worker, around the config write::

      with create.provisioned(root, create.worktree_dir(root, team, w),
                              create.branch_name(team, w), base,
                              carry=carry_changes, spec=create.Provision(copy, link)) as made:
          ...record made.worktree.path / .branch / .base in the team's config...

  A failure inside the block rolls the worktree and branch back; a process killed inside it
  leaves a lock naming it, which the next `recover_unfinished` rolls back. `create` refuses a
  `copy`/`link` path that leaves the repository (`unsafe_path`), and keeps copied or linked
  paths out of commits (`info/exclude` when no ignore rule covers them).
- `api transition-task-status … completed` (a worktree worker): `repo.changes(worktree)` lists
  what is uncommitted (refuse with `uncommitted_changes`); `review.inspect_branch(root, branch,
  base)` gives head, commits ahead and files changed to record. With `--verify`:
  `verify.start(run_dir, worktree, cmd, timeout, checkout=verify.Checkout(top, commit, ...))`
  and return (the supervisor runs cmd in a scratch checkout of the commit, `scratch.make`,
  removed after); the monitor calls
  `verify.poll(run_dir)` (`running` / `passed` / `failed` / `timed_out` / `crashed`), re-runs a
  crashed one with `verify.start(..., restart=True)`, and mails `verify.tail(status.log, 40)`.
- `diff`, `status`, `collect` (read-only): `review.inspect_branch(root, branch, base,
  worktree=path, target=leader_branch)` (commits, files, `stat.line()`, dirty paths, merged),
  `review.diff_text(root, base, branch, stat=...)`.
- `merge`: `merge.merge_branches(root, branches, into=..., squash=..., messages={branch: text},
  check=merge.Verify(cmd, timeout, log, provision), dry_run=..., stop_on_conflict=...)`; each
  `MergeResult.status` is `fast_forward` / `merged` / `squashed` / `up_to_date` / `conflict`
  (with `conflicts`) / `verify_failed` (with `verify`) / `target_moved` / `checkout_refused`;
  `leader_dirty` is raised before anything happens. `git.check_version()` is doctor's check.
- `delete` / `prune` / `remove-worker`: `remove.remove_worktree(root, path, branch,
  target=..., force=..., keep_branch=...)` refuses with `unmerged_work` (its `commits` and
  `files`) unless forced, and returns what was lost; `remove.prune(root)` forgets worktrees
  whose directory vanished.

Where worktrees live: `create.worktree_dir(root, team, worker)`, by default under
`create.outside_worktrees_dir(root)` = `$XDG_STATE_HOME/omp/worktrees/<project>-<hash>/<team>/
<worker>` (`~/.local/state` without XDG_STATE_HOME): outside the project, because jest and
vitest sweep dot-directories and a project's own pytest `norecursedirs` can collect
`.omp/worktrees`, so every worker's copy of the tests would run from the project root.
`create.worktrees_dir(root)` (`<project>/.omp/worktrees`, ignored by git, ruff, ripgrep and
default pytest) is the alternative, by `worktree_dir(..., under=...)`. See those functions.

Modules: `git` (runner, environment, version), `repo` (facts: top, HEAD, branch, worktrees,
uncommitted changes, commits), `handle` (one command's door: `repo`'s reads asked once, the
merge's writes, what operation holds a branch), `create`, `scratch` (a checkout of one commit
for a check), `review`, `verify`, `merge`, `remove`.
"""
