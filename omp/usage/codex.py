"""Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-<local time>-<session id>.jsonl`
(`$CODEX_HOME` moves `~/.codex`).

Every line is `{"timestamp", "type", "payload"}` (0.171 adds `ordinal`). Two records of tokens:
- `token_usage_record` (0.171): one per model call, `payload.usage` of that call and
  `payload.response_id`; this is what is counted when the file has it;
- `event_msg` with `payload.type` `token_count`: `payload.info.total_token_usage`, the running
  sum for the session (and `last_token_usage`). Older Codex versions write only these, some
  twice for one call; their growth is counted instead, one call per growth.
Both use `input_tokens` for the whole prompt, cache reads (`cached_input_tokens`) and writes
(`cache_write_input_tokens`) inside it, and `output_tokens` with the reasoning tokens inside.
The model is the one of the latest `turn_context` (`payload.model`).
"""

from __future__ import annotations

from omp.usage.scan import Reader
from omp.usage.totals import ReadState, Tally, Tokens, UsageTotals, clamp, count, epoch

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


def is_record(first: dict[str, Any]) -> bool:
    return isinstance(first.get("type"), str) and isinstance(first.get("payload"), dict)


def _split(usage: dict[str, Any]) -> list[int]:
    """[fresh input, output, cache read, cache write] of a Codex usage object."""
    read = count(usage.get("cached_input_tokens"))
    wrote = count(usage.get("cache_write_input_tokens"))
    fresh = max(count(usage.get("input_tokens")) - read - wrote, 0)
    return [fresh, count(usage.get("output_tokens")), read, wrote]


def take(rec: dict[str, Any], tally: Tally) -> None:
    kind = rec.get("type")
    payload = rec.get("payload")
    if not isinstance(payload, dict):
        return
    if kind == "turn_context":
        if isinstance(payload.get("model"), str):
            tally.memo["model"] = payload["model"]
    elif kind == "token_usage_record":
        usage = payload.get("usage")
        if isinstance(usage, dict):
            fresh, out, read, wrote = _split(usage)
            tally.once(payload.get("response_id"),
                       str(tally.memo.get("model", "")), input=fresh, output=out,
                       cache_read=read, cache_write=wrote, at=rec.get("timestamp"))  # fmt: skip
    elif kind == "event_msg" and payload.get("type") == "token_count":
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            _running_total(tally, _split(total), rec.get("timestamp"))


def _running_total(tally: Tally, now: list[int], at: Any) -> None:
    """Count the growth of `total_token_usage` (the older records) aside, in `memo["tc"]`."""
    tc = tally.memo.get("tc")
    tc = dict(tc) if isinstance(tc, dict) else {"prev": [0, 0, 0, 0], "models": {}}
    prev = [count(x) for x in tc.get("prev", [0, 0, 0, 0])]
    grown = [n - p for n, p in zip(now, prev, strict=True)]
    if any(g < 0 for g in grown):
        grown = now  # the running sum started again (a new session in the same file)
    if any(grown):
        models = {m: list(v) for m, v in dict(tc.get("models") or {}).items()}
        row = models.setdefault(str(tally.memo.get("model", "")), [0, 0, 0, 0, 0])
        for i, n in enumerate([1, *grown]):
            row[i] = clamp(row[i] + n)
        tc["models"] = models
        when = epoch(at)
        if when is not None:
            tc["last"] = max(when, float(tc.get("last") or 0))
    tc["prev"] = now
    tally.memo["tc"] = tc


def view(state: ReadState) -> UsageTotals:
    """The per-call records when the file has any, else the running sums' growth."""
    tc = state.memo.get("tc")
    if state.models or not isinstance(tc, dict) or not tc.get("models"):
        return state.totals()
    models = {m: Tokens(*(count(x) for x in row)) for m, row in tc["models"].items()}
    total = Tokens()
    for t in models.values():
        total = total.plus(t)
    last = tc.get("last")
    return UsageTotals(
        total, models, float(last) if last else None, state.skipped, state.long_lines
    )


READER = Reader(
    kind="codex",
    markers=(b"token_usage_record", b'"token_count"', b'"turn_context"'),
    is_record=is_record,
    take=take,
    what="a Codex CLI rollout",
    view=view,
)
