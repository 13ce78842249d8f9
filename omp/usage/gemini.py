"""Gemini CLI: `~/.gemini/tmp/<project>/chats/session-<start time>-<session id[:8]>.jsonl`,
where `<project>` is the name `~/.gemini/projects.json` gives the project directory; a
subagent's chat goes to `chats/<parent session id>/<its id>.jsonl`.

Lines (0.61): first `{"sessionId", "projectHash", "startTime", "lastUpdated", "kind"}`, then
message records `{"id", "timestamp", "type": "user"|"gemini"|..., "content", ...}` mixed with
`{"$set": {...}}` and `{"$rewindTo": id}` updates. A model reply is a `gemini` record whose
`tokens` are `input` (the whole prompt, cached part included), `cached`, `output`, `thoughts`,
`tool` (tool-use prompt tokens), `total`; its `model` names the model. The CLI writes a reply
again when it learns its tool calls or tokens (same `id`): counted once. `$set.messages`
restates the history and adds no call: it is not counted. Older versions kept the same
records in one JSON document (`.json`, `{"sessionId", ..., "messages": [...]}`), read whole.
"""

from __future__ import annotations

from omp.usage.scan import Reader
from omp.usage.totals import Tally, count

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any


def is_record(first: dict[str, Any]) -> bool:
    """The first line is the session's metadata, or (seen with two workers starting in one
    project) any record: when Gemini 0.61 starts a new chat under the same file name, its
    asynchronous delete of the empty earlier one can land after the new metadata line, and the
    next append recreates the file without it."""
    if "sessionId" in first and "projectHash" in first:
        return True
    if "$set" in first or "$rewindTo" in first:
        return True
    return all(k in first for k in ("id", "timestamp", "type", "content"))  # a message


def take(rec: dict[str, Any], tally: Tally) -> None:
    if rec.get("type") != "gemini":
        return
    tokens = rec.get("tokens")
    if not isinstance(tokens, dict):
        return
    cached = count(tokens.get("cached"))
    fresh = max(count(tokens.get("input")) - cached, 0) + count(tokens.get("tool"))
    model = rec.get("model")
    tally.once(
        rec.get("id"),
        model if isinstance(model, str) else "",
        input=fresh,
        output=count(tokens.get("output")) + count(tokens.get("thoughts")),
        cache_read=cached,
        cache_write=0,
        at=rec.get("timestamp"),
    )


def take_whole(doc: dict[str, Any], tally: Tally) -> None:
    messages = doc.get("messages")
    for msg in messages if isinstance(messages, list) else []:
        if isinstance(msg, dict):
            take(msg, tally)


READER = Reader(
    kind="gemini",
    markers=(b'"tokens"',),
    is_record=is_record,
    take=take,
    what="a Gemini CLI chat file",
    whole=take_whole,
    whole_suffix=".json",
)
