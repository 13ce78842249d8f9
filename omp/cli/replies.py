"""The `--json` replies of the typer commands, as TypedDicts (`omp team api`'s are in
`omp.api.doc`): each key a reply may carry, `NotRequired` where it is there only sometimes.

The command bodies in `omp/cli/` are annotated with them; tests/cli/test_replies.py runs each
command and checks that its reply has exactly these keys (required ones always, no others).
Every command's refusal under `--json` is `ErrorReply`. Imported for type checking and by the
tests only: creating these classes costs ~2 ms. No `from __future__ import annotations`: Python
3.11 sees `NotRequired` only in evaluated annotations.
"""

from typing import Any, NotRequired, TypedDict


class ErrorReply(TypedDict):
    """Any refusal (`omp.errors.OmpError.to_json`): its detail fields come beside these."""

    ok: bool  # False
    error: str  # a code of docs/errors.md
    message: str


# ---- omp team status / collect / wait / events ----------------------------------------------


class NeedsYou(TypedDict):
    """A worker that needs a person (`omp.monitor.attention`): what, since when, its screen."""

    what: str  # what the screen says (`permission prompt`, `sign in`, ...) or that it is stuck
    since: str
    lines: list[str]  # the last screen lines, sanitised
    attach: str  # the command that shows its pane
    seq: int  # the episode's number in this launch


class WaitAttention(NeedsYou):
    """`team wait`'s `attention` event: each worker's episode as attention.json holds it."""

    worker: str
    pane: str  # its tmux pane


class BudgetAttention(TypedDict):
    """`team wait`'s `attention` event for a crossed token budget (`omp.monitor.budget`) while
    the leader has not read the message that said so."""

    kind: str  # budget
    worker: NotRequired[str]  # a worker's budget; none for the team's
    what: str
    since: str | None
    budget: dict[str, Any]  # the crossing: seq, scope, worker?, budget, used, at
    messageId: str | None


# ---- tokens spent (`omp team usage`, and its columns in status and collect) -------------------


class SpentTokens(TypedDict):
    """What the agents' own session records say was spent (`omp.usage.totals`)."""

    calls: int
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    total: int
    lastCall: str | None
    longLines: NotRequired[int]  # lines past the line limit: skipped, never parsed
    unreadBytes: NotRequired[int]  # left unread this time (the read's allowance ran out)


class UsageUnreadable(TypedDict):
    """Usage omp cannot tell (no session found, a record it cannot read): never zeros."""

    unreadable: str | None  # unknown | missing | permission | not_a_file | format | io_error ...
    why: str | None


class WorkerSpent(SpentTokens):
    budgetPercent: NotRequired[float | None]  # of the worker budget, when the team has one


class BudgetUse(TypedDict):
    tokens: int
    used: int | None
    percent: float | None


class Crossing(TypedDict):
    """A token budget crossed (`budget.json`), its keys there when known."""

    seq: NotRequired[int]
    scope: NotRequired[str]  # team | worker
    worker: NotRequired[str]
    budget: NotRequired[int]
    used: NotRequired[int]
    at: NotRequired[str]


class TeamSpent(SpentTokens):
    notCounted: list[str]  # members left out of the totals (their usage is unknown)
    budget: BudgetUse | None  # the team's budget
    workerBudget: int | None  # each worker's
    crossed: list[Crossing]


class MemberUsage(TypedDict):
    """One member's row of `omp team usage`: its counts, or why there are none."""

    name: str
    role: str  # worker | leader
    agent: str | None
    records: list[str]  # the session records read
    how: str  # how its session was found, or why it was not
    unreadable: NotRequired[str | None]
    why: NotRequired[str | None]
    calls: NotRequired[int]
    input: NotRequired[int]
    output: NotRequired[int]
    cacheRead: NotRequired[int]
    cacheWrite: NotRequired[int]
    lastCall: NotRequired[str | None]
    models: NotRequired[dict[str, dict[str, int]]]
    skippedLines: NotRequired[int]
    longLines: NotRequired[int]  # lines past the line limit: skipped, never parsed
    unreadBytes: NotRequired[int]  # left unread this time (the read's allowance ran out)
    total: NotRequired[int]
    staleRecords: NotRequired[list[str]]
    estimatedCost: NotRequired[float]  # where [prices] gives prices
    unpricedModels: NotRequired[list[str]]
    budget: NotRequired[BudgetUse]  # a worker's, when the team has a worker budget


class UsageTotalsRow(TypedDict):
    calls: int
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    lastCall: str | None
    models: dict[str, dict[str, int]]
    skippedLines: NotRequired[int]
    longLines: NotRequired[int]
    unreadBytes: NotRequired[int]
    total: int
    counted: list[str]
    notCounted: list[str]
    estimatedCost: NotRequired[float]
    unpricedModels: NotRequired[list[str]]


class UsageReply(TypedDict):
    ok: bool
    team: str
    members: list[MemberUsage]
    totals: UsageTotalsRow
    budget: BudgetUse | None
    workerBudget: int | None
    crossed: list[Crossing]
    prices: list[str]  # the models [prices] names
    indexedAt: str | None  # when the monitor last updated its usage index
    onlyFor: NotRequired[str]  # run by a worker: its own row alone


# ---- workers' worktrees (docs/worktrees.md) ----------------------------------------------------


class BranchRow(TypedDict):
    """A worktree worker's branch (`omp.views.worktrees`): a row of `team diff`, and `workspace`
    in status and collect. A branch git cannot read has `error` (and `head` None)."""

    worker: str
    branch: NotRequired[str]
    path: NotRequired[str]
    base: NotRequired[str | None]
    removed: NotRequired[bool]  # the worker was taken off the team; its branch stays
    worktreeExists: NotRequired[bool]
    head: NotRequired[str | None]
    error: NotRequired[str]
    since: NotRequired[str]  # where its own work starts
    commitsAhead: NotRequired[int]
    commits: NotRequired[list[dict[str, str]]]  # sha, subject (the first 50)
    files: NotRequired[list[str]]
    filesCount: NotRequired[int]
    stat: NotRequired[str]
    uncommitted: NotRequired[list[str]]
    uncommittedCount: NotRequired[int]
    host: NotRequired[str]  # a worker on another host: `path` is there; the branch as fetched
    fetchError: NotRequired[dict[str, Any]]  # `team diff`: error, message of a failed fetch
    merged: NotRequired[bool]  # into the leader's branch
    target: NotRequired[str | None]  # the leader's branch
    diff: NotRequired[str]  # `team diff` only


class SharedWorkspace(TypedDict):
    """A worker that works in the leader's checkout (as config.json records it)."""

    kind: str  # shared


class LaunchWorkspace(TypedDict):
    """What a launch or add-worker says of the workspace."""

    kind: str  # worktree | shared
    base: NotRequired[str | None]  # worktree: the commit every branch starts at
    repo: NotRequired[str]
    uncommitted: NotRequired[dict[str, int]]  # tracked, untracked: files the worktrees lack
    carried: NotRequired[bool]  # --carry-changes
    verify: NotRequired[dict[str, Any] | None]  # command, timeout: the check of completions


class WorktreeRemoval(TypedDict):
    """A worktree removed, or kept and why (`omp.team.worktrees.Removal`)."""

    worker: str
    path: str
    branch: str
    removed: bool
    lost: dict[str, Any]  # commits, files: thrown away (force), or at risk
    why: str | None
    host: str  # "" here; else its checkout is on that host (`path` is there): its branch only


class KeptWorktree(TypedDict):
    worker: str
    path: str
    branch: str
    merged: NotRequired[bool]  # the leader's branch has its work (absent: git cannot tell)
    target: NotRequired[str]  # that branch
    nothingCommitted: NotRequired[bool]  # its branch has no commit of its own: nothing to merge
    host: NotRequired[str]  # a worker on another host: `path` is there
    checkoutRemoved: NotRequired[bool]  # that checkout was removed (its branch fetched here)


class DiffReply(TypedDict):
    ok: bool
    team: str
    target: str | None  # the leader's branch
    stat: bool
    workers: list[BranchRow]


class MergeRow(TypedDict):
    """One worker's branch as `team merge` merged it, or the error that stopped it."""

    worker: str
    branch: str
    taskId: str | None
    status: str  # fast_forward | merged | squashed | up_to_date | conflict | verify_failed | ...
    # | not_fetched (a worker on another host whose branch could not be brought back)
    error: NotRequired[str]
    message: NotRequired[str | None]
    target: NotRequired[str]
    dryRun: NotRequired[bool]
    previous: NotRequired[str | None]
    commit: NotRequired[str | None]
    conflicts: NotRequired[list[str]]
    checkout: NotRequired[str | None]
    verify: NotRequired[dict[str, Any]]  # status, exit, log: the check on the merged result
    uncommittedInWorktree: NotRequired[list[str]]
    host: NotRequired[str]  # a worker on another host: its branch fetched from there first
    mailed: NotRequired[bool]  # a conflict: the worker was told how to rebase
    hook: NotRequired[dict[str, Any]]  # the user's post-merge hook, run after the move
    warning: NotRequired[str]  # what git said after the target had moved (the move stands)


class MergeReply(TypedDict):
    ok: bool
    team: str
    target: str
    checkout: str
    dryRun: bool
    squash: bool
    results: list[MergeRow]
    skipped: list[dict[str, Any]]  # worker, branch, taskId, why
    merged: list[str]


class PromptOption(TypedDict):
    number: int
    label: str
    selected: bool


class PromptShown(TypedDict):
    what: str  # permission prompt, menu, rate limit...
    lines: list[str]  # what it asks (3 sanitised screen lines)
    options: list[PromptOption]  # empty: nothing omp can choose (attach to the pane)
    promptId: str  # the prompt's identity: `omp team answer --prompt` answers only it


class AnswerReply(TypedDict):
    """`omp team answer`: without CHOICE, what the screen asks (`prompt`, None when nothing);
    with it, what was chosen and typed, and what the screen asks next, if anything."""

    ok: bool
    team: str
    worker: str
    prompt: NotRequired[PromptShown | None]
    what: NotRequired[str]
    promptId: NotRequired[str]
    choice: NotRequired[dict[str, Any]]  # number, label
    keys: NotRequired[list[str]]  # the keys typed: Up/Down to the option, then Enter
    next: NotRequired[PromptShown | None]


class ResumeHint(TypedDict):
    workers: list[str]  # the members whose pane died or went with its tmux server
    command: str  # `omp team resume <team>`


class WorkerStatus(TypedDict):
    name: str
    paneId: str | None
    pane: str  # alive | dead | gone | unknown | none
    deadStatus: int | None
    unread: int
    taskId: str | None
    lastActivity: str | None
    presence: str
    status: str  # available | busy | inactive
    busyWith: list[str]
    usage: WorkerSpent | UsageUnreadable | None  # tokens its agent's records say it spent
    needsYou: NeedsYou | None  # what only a person can answer now
    workspace: BranchRow | SharedWorkspace | None  # its worktree's branch, or the shared checkout
    host: NotRequired[str]  # a worker on another host (`omp team launch --host`)
    hostUnreachable: NotRequired[bool]  # its host did not answer: its pane is `unreachable`
    hostError: NotRequired[str | None]  # ssh's words


class HostState(TypedDict):
    """A host the team's workers run on, as status found it."""

    workers: list[str]
    reachable: bool
    error: NotRequired[str]  # host_unreachable
    message: NotRequired[str | None]


class TeamStatus(TypedDict):
    team: str
    agent: str | None
    session: str | None
    running: bool
    notRunning: str | None  # why not
    shutdown: dict[str, Any] | None
    leaderUnread: int
    tasks: list[dict[str, Any]]  # id, status, owner, result, description; or a broken file's row
    workers: list[WorkerStatus]
    allDone: bool
    usage: TeamSpent | UsageUnreadable  # the workers' tokens together, and the budgets
    resume: ResumeHint | None  # None unless a member's pane is down and the team not shut down
    # a backlog's states counted, what is ready, whether anything more can run
    backlog: NotRequired[dict[str, Any] | None]
    hosts: NotRequired[dict[str, HostState]]  # only for a team with workers on other hosts


class TeamError(TypedDict):
    """A team of the overview that could not be read: a row saying why."""

    team: str
    error: str
    message: str


class LoopSummary(TypedDict):
    mode: str
    step: int
    max: int
    lastDecision: dict[str, Any] | None


class StatusReply(TypedDict):
    ok: bool
    teams: list[TeamStatus | TeamError]
    monitor: dict[str, Any] | None  # what the monitor last wrote, with `state` judged now
    loops: list[LoopSummary]


class CollectRow(TypedDict):
    name: str
    outcome: str  # done | working | failed | interrupted | dead
    taskId: str | None
    taskStatus: str | None
    result: str | None
    resultFile: str | None
    resultMarkdown: str | None
    verify: NotRequired[dict[str, Any]]  # its task's check: status, exit, log, command, attempt
    work: NotRequired[dict[str, Any]]  # its task's committed work: branch, commit, commitsAhead
    mergedAt: NotRequired[str]
    mergedCommit: NotRequired[str | None]
    mergedInto: NotRequired[str]
    workspace: BranchRow | SharedWorkspace | None


class RemovedRow(TypedDict):
    name: str
    outcome: str  # removed
    resultFile: str
    resultMarkdown: str


class CollectReply(TypedDict):
    ok: bool
    team: str
    workers: list[CollectRow]
    usage: TeamSpent | UsageUnreadable
    removed: list[RemovedRow]
    total: int
    doneCount: int
    allDone: bool
    brokenTasks: list[dict[str, Any]]


class WaitReply(TypedDict):
    ok: bool
    team: str
    event: str  # attention | mail | tasks | all_done | shutdown | gone | timeout
    messages: dict[str, Any]  # count, senders, readCommand when there is mail
    moved: list[dict[str, Any]]
    tasks: NotRequired[dict[str, int]]  # tasks by status, when the team was looked at
    cursor: str
    brokenTasks: NotRequired[list[dict[str, Any]]]
    # all_done in a backlog with tasks that can never run: id -> the failed tasks it waits for
    stuck: NotRequired[dict[str, list[str]]]
    why: NotRequired[str]  # gone: why the team cannot move any more
    resume: NotRequired[str]  # gone: the command that starts its members again
    # attention: the episodes newer than the cursor, and budgets crossed whose message is unread
    attention: NotRequired[list[WaitAttention | BudgetAttention]]
    allDone: bool
    exitCode: int
    eventCode: int
    waitedSeconds: float
    next: str


# ---- a team's life ----------------------------------------------------------------------------


class LaunchedWorker(TypedDict):
    name: str
    paneId: str | None
    taskId: str | None  # None: no task yet (launched without one; a backlog with none ready)
    host: NotRequired[str]  # a worker on another host (its paneId is None)


class LaunchBacklog(TypedDict):
    """A backlog launch (`--tasks`): its tasks and who starts with what."""

    tasks: int
    ready: int  # ready at the start (handed out at once, or waiting for a worker)
    merge: str  # auto | manual
    worktrees: bool  # a worktree and branch per task
    target: str | None  # the branch each task starts from and is merged into
    dir: str | None  # where the tasks' worktrees go
    first: dict[str, str]  # worker -> its first task


class LaunchReply(TypedDict):
    ok: bool
    team: str
    agent: str
    session: str
    leaderPaneId: str | None
    workers: list[LaunchedWorker]
    config: str
    attach: str
    workspace: LaunchWorkspace
    backlog: NotRequired[LaunchBacklog]
    hosts: NotRequired[list[str]]  # the other hosts workers run on
    remoteAttach: NotRequired[list[str]]  # how to look at each remote worker's pane


class AddWorkerReply(TypedDict):
    ok: bool
    team: str
    agent: str
    workers: list[LaunchedWorker]
    members: list[str]
    workspace: LaunchWorkspace
    handedOver: NotRequired[list[dict[str, Any]]]  # a backlog team: the tasks they took at once
    hosts: NotRequired[list[str]]  # the other hosts new workers went to (`--host`)
    remoteAttach: NotRequired[list[str]]  # how to look at each new remote worker's pane
    hostsNotUpdated: NotRequired[list[dict[str, Any]]]  # {host, error, why}: kept the old config


class CreateReply(TypedDict):
    ok: bool
    team: str
    config: str
    workers: int
    tasks: NotRequired[int]  # a backlog's tasks (`--tasks`)


class ListRow(TypedDict):
    team: str
    workers: int
    agent: str | None
    shutdown: bool
    shutdownAt: str | None
    createdAt: str | None


class ListReply(TypedDict):
    ok: bool
    teams: list[ListRow | TeamError]


class RemoteTakeDown(TypedDict):
    """A worker on another host taken down (`omp.team.remote_life.take_down`)."""

    worker: str
    host: str
    branch: str
    closedPane: bool
    fetched: str | None  # its branch's commit, brought back to the leader's repository
    checkoutRemoved: bool
    alreadyGone: NotRequired[bool]  # nothing of it was there any more
    uncommitted: NotRequired[list[str]]  # why its checkout stayed
    error: NotRequired[str]  # host_unreachable, uncommitted, git_failed...
    why: NotRequired[str]
    left: NotRequired[list[str]]  # what stays on the host
    paneError: NotRequired[str]
    mirrorError: NotRequired[str]  # its host did not take the team's new config
    hostsNotUpdated: NotRequired[list[dict[str, Any]]]  # other hosts that kept the old config


class ShutdownReply(TypedDict):
    ok: bool
    team: str
    shutdownAt: str
    killedPanes: list[str]
    killedSession: bool
    clearedLocks: int
    forced: NotRequired[bool]  # --force: panes found by the identity omp gave them
    endedProcesses: int  # every process of the team ended (`omp.procs`)
    skipped: list[dict[str, str]]
    worktrees: NotRequired[list[KeptWorktree]]  # kept for `team merge` (not with --force)
    processesLeft: NotRequired[list[int]]  # pids still alive (another user's, unkillable)
    remote: NotRequired[list[RemoteTakeDown]]  # workers on other hosts
    hostsLeft: NotRequired[list[dict[str, Any]]]  # host, why, left: a host that did not answer


class RemoveWorkerReply(TypedDict):
    ok: bool
    team: str
    worker: str
    alreadyRemoved: bool  # an earlier remove-worker took it off; this one finished the work
    killedPane: str | None  # the pane killed, if it was alive
    endedProcesses: int
    processesLeft: NotRequired[list[int]]
    interrupted: list[dict[str, Any]]
    cancelled: list[dict[str, Any]]
    workers: list[str]
    worktree: WorktreeRemoval | None  # its worktree, removed unless it holds uncommitted work
    remote: NotRequired[RemoteTakeDown]  # a worker on another host: what was done there
    hostsNotUpdated: NotRequired[list[dict[str, Any]]]  # {host, error, why}: kept the old config


class DeleteReply(TypedDict):
    ok: bool
    team: str
    bytes: int
    lost: list[dict[str, Any]]
    finished: list[dict[str, Any]]
    endedProcesses: NotRequired[int]  # not when only an earlier delete's leftovers were finished
    processesLeft: NotRequired[list[int]]
    worktrees: NotRequired[list[WorktreeRemoval]]  # removed with the team (merged and clean)


class PruneReply(TypedDict):
    ok: bool
    dryRun: bool
    olderThanSeconds: float
    removed: list[dict[str, Any]]
    kept: list[dict[str, Any]]  # each with `worktrees` when its worktrees held unmerged work
    bytes: int
    worktreesForgotten: list[str]  # worktrees git listed whose directory vanished


class ResumedWorker(TypedDict):
    name: str
    paneId: str | None
    agent: str | None
    why: str  # what became of its pane
    conversation: str  # resumed | new
    sessionId: str | None
    sessionFrom: str | None  # hook: its stop hook recorded it; record: its session record named it
    cwd: str | None
    worktree: dict[str, Any] | None  # path, branch, ahead, uncommitted, ...
    missingEnv: list[str]  # variables launch forwarded that this environment lacks
    inbox: str  # the file it is told to read first (on its host, for a worker on another)
    host: NotRequired[str]  # a worker on another host: resumed there, in the checkout kept there
    pane: NotRequired[str]  # its pane id on that host's tmux server


class ResumeReply(TypedDict):
    ok: bool
    team: str
    resumed: list[ResumedWorker]  # [] when every member is alive
    skipped: list[dict[str, Any]]  # name, paneId, why
    reclaimed: list[dict[str, Any]]  # taskId, worker: a task interrupted by the death, its again
    place: NotRequired[str]  # in place | your window | new session
    attach: NotRequired[str]  # not in place: the command that shows the panes


class DemoReply(LaunchReply):
    allDone: bool
    collect: CollectReply
    repo: str  # the throwaway repository the team worked in
    demoDir: str
    merge: MergeReply | ErrorReply | None  # the workers' branches merged, when all were done
    tasks: NotRequired[list[dict[str, Any]]]  # `--backlog`: every task's row, as status shows it


# ---- loops ------------------------------------------------------------------------------------


class LoopReply(TypedDict):
    """`omp ralph|ultrawork|ultraqa start|status|cancel` and `omp ultraqa cycle`: the loop's
    file (shared with the TypeScript tool) with `ok` and `mode`; which fields it holds depends
    on the mode and on where the loop is."""

    ok: bool
    mode: str
    active: bool
    unreadable: NotRequired[bool]  # the file is there but is damaged or no JSON object
    file: NotRequired[str]  # with `unreadable`: the loop's file
    why: NotRequired[str]  # with `unreadable`: what is wrong with it (the file is left as it is)
    cancelled: NotRequired[bool]
    projectPath: NotRequired[str]
    sessionId: NotRequired[str]
    startedAt: NotRequired[str]
    cancelledAt: NotRequired[str]
    completedAt: NotRequired[str]
    endedAt: NotRequired[str]
    endReason: NotRequired[str]
    lastDecision: NotRequired[dict[str, Any]]
    # ralph
    prompt: NotRequired[str]
    iteration: NotRequired[int]
    maxIterations: NotRequired[int]
    completedSlices: NotRequired[int]
    # ultrawork
    objective: NotRequired[str]
    taskCount: NotRequired[int]
    taskSummary: NotRequired[str]
    # ultraqa
    goal: NotRequired[str]
    cycleCount: NotRequired[int]
    maxCycles: NotRequired[int]
    lastVerdict: NotRequired[str]


# ---- doctor, skills, hooks --------------------------------------------------------------------


class DoctorReply(TypedDict):
    ok: bool
    agent: str
    root: str
    checks: list[dict[str, str]]
    counts: dict[str, int]  # ok, warn, fail
    error: NotRequired[str]  # doctor_failed, when a check failed
    message: NotRequired[str]


class SkillsReply(TypedDict):
    ok: bool
    target: str
    skills: list[str]
    files: list[dict[str, str]]
    created: int
    updated: int
    unchanged: int


class HooksReply(TypedDict):
    ok: bool
    root: str
    command: str
    uninstall: bool
    hooks: list[dict[str, str]]
    counts: dict[str, int]


# The reply of each typer command with `--json` (events prints JSON lines, one event each).
COMMANDS: dict[str, type] = {
    "team launch": LaunchReply,
    "team status": StatusReply,
    "team collect": CollectReply,
    "team shutdown": ShutdownReply,
    "team list": ListReply,
    "team create": CreateReply,
    "team wait": WaitReply,
    "team add-worker": AddWorkerReply,
    "team remove-worker": RemoveWorkerReply,
    "team resume": ResumeReply,
    "team usage": UsageReply,
    "team diff": DiffReply,
    "team merge": MergeReply,
    "team answer": AnswerReply,
    "team delete": DeleteReply,
    "team prune": PruneReply,
    "demo": DemoReply,
    "ralph": LoopReply,
    "ultrawork": LoopReply,
    "ultraqa": LoopReply,
    "doctor": DoctorReply,
    "skills install": SkillsReply,
    "hooks install": HooksReply,
}
