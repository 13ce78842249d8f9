"""omp's stop hook for pi, as a pi extension: `.pi/extensions/omp-stop.ts` in the project.

pi (0.73.1) has no stop hook, but loads TypeScript extensions from `.pi/extensions/*.ts` (and
`~/.pi/agent/extensions/`) at start. Its extension API has what a stop hook needs: the event
`agent_end` (a run of the agent over one prompt has ended, with its messages) and
`pi.sendUserMessage(text)` (a user message that starts a new run). So the extension, at every
`agent_end`, pipes a stop payload to `omp hook stop` (the same shell command the other CLIs' hook
entries run) and, when the answer is `{"decision":"block","reason":...}`, sends the reason as the
next user message; any other answer lets pi stop (a `systemMessage` is shown as a notice).

The payload is Claude-shaped plus its own event name, so `omp hook stop` knows it is pi:
`{"hook_event_name":"agent_end","session_id","cwd","last_assistant_message","stop_hook_active"}`
(`stop_hook_active`: this run was started by a block, and no person typed since).

The file is omp's when its first line is `MARKER`. Installing writes it (`created`), leaves it
(`unchanged`) when it is what this omp would write, and refuses (`conflict`) a file that differs
unless `force` (`updated`): an omp file edited by hand or written by another omp, or a file that
is not omp's at all. Uninstalling removes only omp's file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError

REL = ".pi/extensions/omp-stop.ts"
MARKER = "// omp stop hook for pi: written by `omp hooks install --agent pi`"
TIMEOUT_MS = 30_000

TEMPLATE = """__MARKER__
// (`omp hooks install --agent pi --uninstall` removes it). pi has no stop hook: when a run of
// the agent ends, this asks omp whether to go on; omp's "block" answer (the next step of an
// active ralph/ultrawork/ultraqa loop) becomes the next user message. Anything else lets pi stop.
import { spawn } from "node:child_process";

const OMP_HOOK = __COMMAND__;
const TIMEOUT_MS = __TIMEOUT__;

// Runs the hook with the payload on stdin; its stdout, or "" on any failure (pi then stops).
function ask(payload: object, cwd: string): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn("/bin/sh", ["-c", OMP_HOOK], { cwd, stdio: ["pipe", "pipe", "ignore"] });
    } catch {
      resolve("");
      return;
    }
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    child.stdout.on("data", (chunk) => (out += chunk));
    child.on("error", () => {
      clearTimeout(timer);
      resolve("");
    });
    child.on("close", () => {
      clearTimeout(timer);
      resolve(out);
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

function text(message: any): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  const parts = content.filter((p: any) => p?.type === "text");
  return parts.map((p: any) => String(p.text ?? "")).join("");
}

export default function (pi: any) {
  let continued = false; // this run was started by omp's block, nobody typed since

  pi.on("input", async (event: any) => {
    if (event?.source !== "extension") continued = false;
    return { action: "continue" };
  });

  pi.on("agent_end", async (event: any, ctx: any) => {
    const messages: any[] = Array.isArray(event?.messages) ? event.messages : [];
    const last = [...messages].reverse().find((m) => m?.role === "assistant");
    const payload = {
      hook_event_name: "agent_end",
      session_id: ctx?.sessionManager?.getSessionId?.() ?? null,
      cwd: ctx?.cwd ?? process.cwd(),
      last_assistant_message: text(last),
      stop_hook_active: continued,
    };
    let reply: any = {};
    try {
      reply = JSON.parse((await ask(payload, payload.cwd)) || "{}");
    } catch {
      reply = {};
    }
    const reason = typeof reply?.reason === "string" ? reply.reason.trim() : "";
    if (reply?.decision === "block" && reason) {
      continued = true;
      // Once this handler has returned the run is over: the message starts the next one.
      setTimeout(() => pi.sendUserMessage(reason, { deliverAs: "followUp" }), 0);
      return;
    }
    continued = false;
    if (typeof reply?.systemMessage === "string" && ctx?.hasUI) {
      ctx.ui.notify(reply.systemMessage, "info");
    }
  });
}
"""


def render(command: str) -> str:
    """The extension's text for `command` (the shell command line of `omp hook stop`)."""
    return (
        TEMPLATE.replace("__MARKER__", MARKER)
        .replace("__COMMAND__", json.dumps(command))
        .replace("__TIMEOUT__", str(TIMEOUT_MS))
    )


def is_omp_file(text: str) -> bool:
    return text.startswith(MARKER + "\n")


class PiPlan(NamedTuple):
    path: Path
    action: str  # created | unchanged | updated | conflict | removed | absent
    text: str | None  # what to write; None: nothing to write
    delete: bool = False


def _read(path: Path) -> str | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise OmpError("unsafe_path", f"refusing {path}: it is {kind}", path=str(path))
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise OmpError("storage_error", f"cannot read {path}: {exc.strerror or exc}") from exc


def plan(root: Path, command: str, *, uninstall: bool = False, force: bool = False) -> PiPlan:
    path = root / REL
    have = _read(path)
    if uninstall:
        if have is None or not is_omp_file(have):
            return PiPlan(path, "absent", None)
        return PiPlan(path, "removed", None, delete=True)
    want = render(command)
    if have is None:
        return PiPlan(path, "created", want)
    if have == want:
        return PiPlan(path, "unchanged", None)
    if not force:
        return PiPlan(path, "conflict", None)
    return PiPlan(path, "updated", want)
