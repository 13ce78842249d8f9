"""GitHub Copilot CLI: `~/.copilot/session-state/<session id>/events.jsonl`.

Every line is an event `{"type", "data", "id", "timestamp", "parentId", "agentId"?}`. Each model
call is one `session.usage_record` whose `data.usage` holds `model`, `inputTokens`,
`outputTokens`, `cacheReadTokens`, `cacheWriteTokens`, `reasoningTokens` (seen on 1.0.102, with
subagents' calls in the same file under their `agentId`). `inputTokens` is the whole prompt:
cache reads and cache writes are inside it (a call served 1011 fresh, 100 read, 20 written was
recorded as `inputTokens` 1131), so the fresh input is what is left when both are taken out.
`outputTokens` already holds the reasoning tokens. `session.shutdown` repeats the sums per model
(`modelMetrics`); it is not counted, the calls are.
"""

from __future__ import annotations

from omp.usage.scan import Reader
from omp.usage.totals import Tally, count

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


def is_record(first: dict[str, Any]) -> bool:
    return isinstance(first.get("type"), str) and isinstance(first.get("data"), dict)


def take(rec: dict[str, Any], tally: Tally) -> None:
    if rec.get("type") != "session.usage_record":
        return
    data = rec.get("data")
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return
    read = count(usage.get("cacheReadTokens"))
    wrote = count(usage.get("cacheWriteTokens"))
    fresh = max(count(usage.get("inputTokens")) - read - wrote, 0)
    out = count(usage.get("outputTokens"))
    if fresh or out or read or wrote:
        model = usage.get("model")
        tally.add(
            model if isinstance(model, str) else "",
            input=fresh,
            output=out,
            cache_read=read,
            cache_write=wrote,
            at=rec.get("timestamp"),
        )


READER = Reader(
    kind="copilot",
    markers=(b"session.usage_record",),
    is_record=is_record,
    take=take,
    what="a Copilot CLI events.jsonl",
)
