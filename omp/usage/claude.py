"""Claude Code: `~/.claude/projects/<cwd, each non-alphanumeric character a dash>/<session>.jsonl`,
and a subagent's calls in `<session>/subagents/agent-<id>.jsonl` beside it.

Each reply of the model is written as one `{"type": "assistant", "message": {...}}` line per
content block (text, tool use, thinking), every one carrying the same `message.id` and the
reply's `message.usage`: `input_tokens` (fresh input only), `cache_read_input_tokens`,
`cache_creation_input_tokens`, `output_tokens` (thinking included). A reply is counted once, at
the largest usage its lines report (seen on 2.1.328: the lines agree). Lines of other types
(`user`, `attachment`, `api-request`, `cost-state`, ...) are not calls; nor is a reply of the
model `<synthetic>`, which Claude Code writes itself (an error shown as a reply, no tokens).
"""

from __future__ import annotations

from omp.usage.scan import Reader
from omp.usage.totals import Tally, count

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

SYNTHETIC = "<synthetic>"


def is_record(first: dict[str, Any]) -> bool:
    # Every line names its session; an old transcript may open with a `summary` line instead.
    return isinstance(first.get("type"), str) and (
        "sessionId" in first or first["type"] == "summary"
    )


def take(rec: dict[str, Any], tally: Tally) -> None:
    if rec.get("type") != "assistant":
        return
    msg = rec.get("message")
    if not isinstance(msg, dict):
        return
    usage = msg.get("usage")
    model = msg.get("model")
    if not isinstance(usage, dict) or model == SYNTHETIC:
        return
    tally.once(
        msg.get("id") or rec.get("requestId"),
        model if isinstance(model, str) else "",
        input=count(usage.get("input_tokens")),
        output=count(usage.get("output_tokens")),
        cache_read=count(usage.get("cache_read_input_tokens")),
        cache_write=count(usage.get("cache_creation_input_tokens")),
        at=rec.get("timestamp"),
    )


READER = Reader(
    kind="claude",
    markers=(b'"usage"',),
    is_record=is_record,
    take=take,
    what="a Claude Code transcript",
)
