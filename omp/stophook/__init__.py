"""The stop hook that drives Ralph, Ultrawork and UltraQA loops: `omp hook stop`.

Every agent CLI omp launches can run a command when the agent is about to end its turn (Copilot
`agentStop`/`Stop`, Claude Code and Codex `Stop`, Gemini `AfterAgent`). While a loop is active
that command refuses the stop and hands the agent its next prompt, until the agent prints the
mode's completion word on a line of its own or the loop's cap is reached.

- `payloads`: one thin reader per CLI's stdin shape, and which CLI sent it;
- `transcript`: the current reply from Copilot's lagging `events.jsonl`;
- `decision`: the pure function (loop state + reply + stop + now -> decision + new state);
- `replies`: one writer per CLI's output shape;
- `memory`: what the hook remembers per session (decisions to replay, Gemini's last response);
- `install`: `omp hooks install`, merging omp's entry into each CLI's hook file;
- `checks`: which hooks are installed where, for `omp doctor` and `omp ralph start`.

The glue behind `omp hook stop` (a fast path: no typer, failing open on any error) is the entry
point `omp.cli.hook_stop`, above `omp.modes`, which it reads and writes through.
"""
