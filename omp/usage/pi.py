"""pi: `~/.pi/agent/sessions/--<cwd, slashes as dashes>--/<time>_<session id>.jsonl`
(`$PI_CODING_AGENT_DIR` moves `~/.pi/agent`).

The first line is `{"type": "session", "version", "id", "timestamp", "cwd"}`; each model reply
is a `{"type": "message", "message": {"role": "assistant", "model", "usage", ...}}` entry whose
`usage` holds `input` (fresh input only: a call sending 1111 prompt tokens of which 100 were
cached was recorded as `input` 1011, `cacheRead` 100), `output`, `cacheRead`, `cacheWrite` (and
pi's own cost estimate, not used). Entries form a tree (branches of the conversation) but each
is written once, so every assistant entry is one call. A reply that failed before any token
(`stopReason` "error" or "aborted", usage all zero) is not counted.
"""

from __future__ import annotations

from omp.usage.scan import Reader
from omp.usage.totals import Tally, count

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


def is_record(first: dict[str, Any]) -> bool:
    return first.get("type") == "session"


def take(rec: dict[str, Any], tally: Tally) -> None:
    if rec.get("type") != "message":
        return
    msg = rec.get("message")
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        return
    usage = msg.get("usage")
    if not isinstance(usage, dict):
        return
    fresh = count(usage.get("input"))
    out = count(usage.get("output"))
    read = count(usage.get("cacheRead"))
    wrote = count(usage.get("cacheWrite"))
    if fresh or out or read or wrote:
        model = msg.get("model")
        tally.add(
            model if isinstance(model, str) else "",
            input=fresh,
            output=out,
            cache_read=read,
            cache_write=wrote,
            at=rec.get("timestamp") or msg.get("timestamp"),
        )


READER = Reader(
    kind="pi",
    markers=(b'"usage"',),
    is_record=is_record,
    take=take,
    what="a pi session file",
)
