"""`omp hooks install --agent pi`: the extension file pi loads, and the payload it sends.

The end-to-end proof with a real pi is tests/agents/test_pi_claude_loop.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.stophook import payloads, replies
from omp.stophook.install import install
from omp.stophook.pi_extension import MARKER, REL, render
from tests.helpers import child_env, run_omp

CMD = "/opt/my omp/bin/omp hook stop"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / ".git").mkdir(parents=True)
    return r


def actions(r: dict[str, object]) -> list[str]:
    return [h["action"] for h in r["hooks"]]  # type: ignore[attr-defined]


def test_install_writes_the_extension_once_and_uninstall_removes_it(root: Path) -> None:
    path = root / REL
    assert actions(install(root, "pi", command=CMD)) == ["created"]
    text = path.read_text()
    assert text.startswith(MARKER + "\n") and json.dumps(CMD) in text
    assert 'pi.on("agent_end"' in text and "pi.sendUserMessage(reason" in text
    assert actions(install(root, "pi", command=CMD)) == ["unchanged"]
    assert path.read_text() == text
    assert actions(install(root, "pi", uninstall=True)) == ["removed"]
    assert not path.exists()
    assert actions(install(root, "pi", uninstall=True)) == ["absent"]


def test_an_edited_or_foreign_file_is_kept_unless_forced(root: Path) -> None:
    path = root / REL
    install(root, "pi", command=CMD)
    path.write_text(path.read_text() + "// my edit\n")
    with pytest.raises(OmpError) as err:
        install(root, "pi", command=CMD)
    assert err.value.code == "hook_changed"
    assert path.read_text().endswith("// my edit\n")  # nothing written
    assert actions(install(root, "pi", command=CMD, force=True)) == ["updated"]
    assert path.read_text() == render(CMD)
    path.write_text("export default function () {}\n")  # somebody else's extension by that name
    assert actions(install(root, "pi", uninstall=True)) == ["absent"]
    assert path.exists()  # never removed: it is not omp's


def test_all_means_the_four_hook_files_not_pi(root: Path) -> None:
    assert "pi" not in [h["agent"] for h in install(root, "all", command=CMD)["hooks"]]
    assert not (root / REL).exists()


def test_the_cli_names_what_pi_does_next(root: Path, tmp_path: Path) -> None:
    out = run_omp("hooks", "install", "--agent", "pi", cwd=root, env=child_env(tmp_path / "h"))
    assert out.rc == 0, out.stderr
    assert "pi loads the extension at its next start" in out.stdout
    assert (root / REL).is_file()


def test_the_payload_it_sends_reads_as_pi() -> None:
    doc = {
        "hook_event_name": "agent_end",
        "session_id": "s1",
        "cwd": "/p",
        "last_assistant_message": "Draft 2.\nRALPH_COMPLETE",
        "stop_hook_active": True,
    }
    inp = payloads.read(doc, {})
    assert (inp.cli, inp.session_id, inp.reply, inp.hook_active) == (
        "pi",
        "s1",
        doc["last_assistant_message"],
        True,
    )
    assert json.loads(replies.block("pi", "go on")) == {"decision": "block", "reason": "go on"}
    assert json.loads(replies.allow("pi", "loop ended")) == {"systemMessage": "loop ended"}


# Loads the extension as pi does (jiti, from pi's own install) and plays pi's part: two
# `agent_end` events, then prints what the extension sent and the payloads the hook got.
DRIVER = r"""
const { createJiti } = require(process.argv[2]);
const jiti = createJiti(__filename);
const sent = [], notes = [], handlers = {};
const pi = {
  on: (name, fn) => (handlers[name] = fn),
  sendUserMessage: (text, opts) => sent.push([text, opts]),
};
const ctx = {
  cwd: process.argv[4],
  hasUI: true,
  ui: { notify: (text) => notes.push(text) },
  sessionManager: { getSessionId: () => "sess-1" },
};
const reply = (text) => ({ messages: [{ role: "user", content: "go" },
  { role: "assistant", content: [{ type: "text", text }] }] });
(async () => {
  const mod = await jiti.import(process.argv[3]);
  (mod.default || mod)(pi);
  await handlers.agent_end(reply("Draft 1."), ctx);
  await new Promise((r) => setTimeout(r, 50));
  await handlers.input({ source: "interactive", text: "hi" }, ctx);
  await handlers.agent_end(reply("RALPH_COMPLETE"), ctx);
  await new Promise((r) => setTimeout(r, 50));
  console.log(JSON.stringify({ sent, notes }));
})();
"""


def test_the_extension_asks_the_hook_and_sends_its_reason(tmp_path: Path) -> None:
    """With pi's own TypeScript loader (skipped when pi is not installed here): the first stop
    is blocked (its reason sent as the next message), the second allowed (its note shown)."""
    from tests.agents.clis import CLIS

    jiti = CLIS["pi"].cache_bin.parents[1] / "jiti"
    if not (jiti / "package.json").is_file() or subprocess.run(["which", "node"]).returncode:
        pytest.skip(
            'pi (and its jiti) not found: run `eval "$(bash scripts/install-agent-clis.sh)"`'
        )
    log = tmp_path / "payloads.jsonl"
    # a stand-in for `omp hook stop`: records the payload, blocks once, then allows
    hook = tmp_path / "hook.sh"
    block = json.dumps({"decision": "block", "reason": "step 2"})
    allow = json.dumps({"systemMessage": "loop ended"})
    hook.write_text(
        f"#!/bin/sh\ncat >> '{log}'; echo >> '{log}'\n"
        f"if [ $(wc -l < '{log}') -le 1 ]; then echo '{block}'; else echo '{allow}'; fi\n"
    )
    hook.chmod(0o755)
    ext = tmp_path / "omp-stop.ts"
    ext.write_text(render(f"'{hook}'"))
    driver = tmp_path / "driver.cjs"
    driver.write_text(DRIVER)
    proc = subprocess.run(
        ["node", str(driver), str(jiti), str(ext), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"sent": [["step 2", {"deliverAs": "followUp"}]], "notes": ["loop ended"]}
    sent = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert [p["last_assistant_message"] for p in sent] == ["Draft 1.", "RALPH_COMPLETE"]
    # the first run after a block is the hook's own; a person typing resets it
    assert [p["stop_hook_active"] for p in sent] == [False, False]
    assert {p["hook_event_name"] for p in sent} == {"agent_end"}
    assert sent[0]["session_id"] == "sess-1" and sent[0]["cwd"] == str(tmp_path)
