"""The short human form of `omp team api` results (without `--json`)."""

from __future__ import annotations

from typing import Any

from omp.textsafe import inline, one_line, visible

BODY_WIDTH = 200


def _message_line(m: dict[str, Any], *, cut: bool) -> str:
    ts = str(m.get("timestamp", ""))[11:19] or "--:--:--"
    sender = inline(str(m.get("from", "?")))
    mark = "" if m.get("deliveredAt") else " *"
    body = str(m.get("body", ""))
    if not cut:  # mailbox-read marks what it shows delivered: show all of it
        text = visible(body).replace("\n", "\n    ")
        return f"{ts}  {sender}{mark}: {text}"
    shown = one_line(body, BODY_WIDTH)
    line = f"{ts}  {sender}{mark}: {shown}"
    if shown != visible(body):
        line += f"  [cut; whole text of {m.get('id')}: add --json]"
    return line


def _sent(result: dict[str, Any]) -> str:
    mid = result.get("messageId")
    if "pong" in result:
        return f"pong: {visible(str(result['pong'].get('body', '')))}\n"
    if result.get("status") == "rejected":
        return f"{result.get('event')} {mid} rejected: {result.get('reason')}\n"
    state, why = result.get("nudge"), result.get("nudgeReason")
    if result.get("nudged"):
        how = "nudged"
    elif state == "deferred":
        how = f"nudge deferred: {why}" if why else "nudge deferred"
    else:
        how = f"not nudged: {why}" if why else "not nudged"
    line = f"sent {mid} ({how})"
    if result.get("status") == "acknowledged":
        line += f"; task {result.get('taskId')} acknowledged, the worker is now busy"
    return line + "\n"


def render(sub: str, result: dict[str, Any]) -> str:
    if "messages" in result:
        msgs = result["messages"]
        reading = sub == "mailbox-read"
        lines = [_message_line(m, cut=not reading) for m in msgs] or ["no messages"]
        if msgs and result.get("notice"):
            lines.insert(0, f"({result['notice']})")
        if result.get("omitted") and reading:
            lines.append(f"({result['omitted']} more unread, newer: run the same command again)")
        elif result.get("omitted"):
            lines.append(f"({result['omitted']} older not shown; raise limit to see them)")
        if result.get("badLines"):
            lines.append(f"({result['badLines']} unreadable line(s) skipped)")
        return "\n".join(lines) + "\n"
    if sub == "send-message":
        return _sent(result)
    if sub == "broadcast":
        out = f"sent to {', '.join(result.get('recipients', [])) or 'nobody'}\n"
        for e in result.get("errors", []):
            out += f"failed: {e}\n"
        return out
    if "task" in result:
        t = result["task"]
        line = f"task {inline(str(t.get('id')))}: {inline(str(t.get('status')))}"
        if result.get("claimToken"):
            line += f" (claim_token {result['claimToken']})"
        return line + "\n"
    if "tasks" in result:
        rows = [
            f"{inline(str(t.get('id')))}  {inline(str(t.get('status')))}  "
            f"{inline(str(t.get('owner') or '-'))}  "
            f"{one_line(str(t.get('description', '')), 60)}"
            for t in result["tasks"]
        ]
        rows += [
            f"{inline(str(b.get('id')))}  unreadable: {inline(str(b.get('message')))}"
            for b in result.get("broken", [])
        ]
        return "\n".join(rows or ["no tasks"]) + "\n"
    if "members" in result:
        rows = [
            f"{inline(str(m['name'])):<12} {inline(str(m.get('status', '?'))):<9} "
            f"{inline(str(m.get('presence', '?'))):<8} "
            f"{one_line(str(m.get('description', '')), 60)}"
            for m in result["members"]
        ]
        return "\n".join(rows or ["no other members"]) + "\n"
    return "ok\n"
