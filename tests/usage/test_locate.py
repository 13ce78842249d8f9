"""Finding a session's record: from the stop-hook payloads the CLIs really sent, and from what
the pane's processes show."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from omp.usage.locate import (
    Located,
    claude_project,
    from_hook,
    from_process,
    pi_project,
    session_files,
)
from omp.usage.process import Process
from tests.usage import fixtures as fx

HOOKED = ["claude", "claude-subagent", "codex", "copilot", "copilot-anthropic",
          "copilot-subagent", "gemini"]  # fmt: skip


def setup(name: str, tmp_path: Path) -> tuple[Path, list[dict[str, Any]], Path]:
    """The fixture's HOME under tmp_path, its stop payloads pointing there, its main record."""
    home = fx.copy_home(name, tmp_path / "home")
    payloads = [
        json.loads(json.dumps(p).replace(f'"{fx.FAKE_HOME}/.', f'"{home}/.'))
        for p in fx.stops(name)
    ]
    main = home / fx.records(name)[0].relative_to(fx.home(name))
    return home, payloads, main


@pytest.mark.parametrize("name", HOOKED)
def test_every_real_stop_payload_leads_to_its_record(name: str, tmp_path: Path) -> None:
    home, payloads, main = setup(name, tmp_path)
    assert payloads
    for payload in payloads:
        assert from_hook(fx.kind(name), payload, {"HOME": str(home)}) == Located(
            main, "the hook's transcript path"
        )


@pytest.mark.parametrize("name", HOOKED)
def test_without_a_transcript_path_the_session_id_leads_there(name: str, tmp_path: Path) -> None:
    """A CLI version that leaves the path out: the id (Copilot's subagent stop: its parent's),
    with the cwd for Claude Code, and each CLI's layout under HOME."""
    home, payloads, main = setup(name, tmp_path)
    for payload in payloads:
        bare = {k: v for k, v in payload.items() if k not in ("transcriptPath", "transcript_path")}
        got = from_hook(fx.kind(name), bare, {"HOME": str(home)})
        assert got.path == main, got
        if fx.kind(name) == "claude":  # a cwd encoded otherwise: found by the id alone
            got = from_hook("claude", {**bare, "cwd": "/elsewhere"}, {"HOME": str(home)})
            assert got.path == main, got


def test_pis_stop_payload_leads_to_its_record_by_the_id(tmp_path: Path) -> None:
    """omp's pi extension sends pi's session id and cwd, no path (pi 0.73.1's
    `sessionManager.getSessionId()`): the record is `sessions/--<cwd>--/<time>_<id>.jsonl`. Seen
    live: two pi workers, one of them found by nothing else (tests/agents/test_usage_team.py)."""
    home = fx.copy_home("pi", tmp_path / "home")
    main = home / fx.records("pi")[0].relative_to(fx.home("pi"))
    sid = json.loads(main.read_text().splitlines()[0])["id"]
    assert main.name.endswith(f"_{sid}.jsonl")
    payload = {"hook_event_name": "agent_end", "session_id": sid, "cwd": f"{fx.FAKE_HOME}/proj"}
    env = {"HOME": str(home)}
    assert from_hook("pi", payload, env) == Located(main, "the session id and cwd")
    # a cwd pi does not file it under (moved since): the id alone
    assert from_hook("pi", {**payload, "cwd": "/elsewhere"}, env) == Located(main, "the session id")
    moved = tmp_path / "pi-dir"
    (home / ".pi" / "agent").rename(moved)
    assert from_hook("pi", payload, {**env, "PI_CODING_AGENT_DIR": str(moved)}).path == (
        moved / main.relative_to(home / ".pi" / "agent")
    )
    other = from_hook("pi", {**payload, "session_id": "01a231eb-none"}, env)
    assert other.path is None and other.how.startswith("no record found"), other


def test_a_copilot_subagent_stop_names_the_subagent_not_the_session(tmp_path: Path) -> None:
    _, payloads, main = setup("copilot-subagent", tmp_path)
    sub = next(p for p in payloads if "parentAgentId" in p)
    assert sub["sessionId"] != sub["parentAgentId"] == main.parent.name


def test_the_cli_homes_move_with_their_variables(tmp_path: Path) -> None:
    home, payloads, main = setup("copilot", tmp_path)
    moved = tmp_path / "elsewhere"
    (home / ".copilot").rename(moved)
    bare = {"sessionId": payloads[0]["sessionId"]}
    got = from_hook("copilot", bare, {"HOME": str(home), "COPILOT_HOME": str(moved)})
    assert got.path == moved / main.relative_to(home / ".copilot")
    # `~/` in a payload is the hook's HOME
    tilde = {"transcript_path": "~/x/events.jsonl"}
    assert from_hook("copilot", tilde, {"HOME": "/h"}).path == Path("/h/x/events.jsonl")


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"sessionId": "../../etc/passwd"},
        {"session_id": "a/b"},
        {"session_id": ""},
        {"session_id": 7},
        {"transcript_path": "relative/path.jsonl"},
    ],
)
def test_a_payload_naming_no_usable_session_finds_nothing(payload: dict[str, Any]) -> None:
    for kind in ("copilot", "claude", "codex", "gemini"):
        got = from_hook(kind, payload, {"HOME": "/nonexistent"})
        assert got.path is None and got.how


def test_an_id_with_no_record_says_so(tmp_path: Path) -> None:
    for kind in ("copilot", "claude", "codex", "gemini"):
        got = from_hook(kind, {"session_id": "0123abcd-none"}, {"HOME": str(tmp_path)})
        assert got.path is None and got.how
    assert from_hook("pi", {"session_id": "abc"}, {"HOME": str(tmp_path)}).path is None
    assert from_hook("copilot", {"session_id": "abc"}, {}).how.startswith("no HOME")


def test_folder_names_for_a_cwd() -> None:
    assert claude_project("/home/me/proj") == "-home-me-proj"
    assert claude_project("/tmp/ompusagerecnfw_p9fe/proj") == "-tmp-ompusagerecnfw-p9fe-proj"
    assert pi_project("/home/me/proj") == "--home-me-proj--"


# ---- from the pane's processes -----------------------------------------------------------------


def proc(home: Path, *, files: tuple[str, ...] = (), started: float | None = None) -> Process:
    if started is None:
        started = time.time() - 60
    return Process(4242, Path(fx.FAKE_HOME) / "proj", {"HOME": str(home)}, started, files)


def held(name: str, home: Path) -> tuple[str, ...]:
    files = json.loads((fx.ROOT / name / "open-files.json").read_text())
    return tuple(f.replace(fx.FAKE_HOME, str(home), 1) for f in files)


@pytest.mark.parametrize("name", ["copilot", "codex"])
def test_the_file_the_cli_holds_open_names_its_record(name: str, tmp_path: Path) -> None:
    """What the recorded runs held open: Copilot its session lock, Codex its rollout."""
    home, _, main = setup(name, tmp_path)
    got = from_process(fx.kind(name), [proc(home, files=held(name, home))])
    assert got.path == main, got


def test_codex_holding_only_its_thread_lock_is_found_by_it(tmp_path: Path) -> None:
    home, _, main = setup("codex", tmp_path)
    locks = tuple(f for f in held("codex", home) if "thread-writer-locks" in f)
    assert len(locks) == 1
    assert from_process("codex", [proc(home, files=locks)]).path == main
    assert from_process("codex", [proc(home)]).path is None


def test_two_copilot_sessions_in_one_tree_are_not_guessed(tmp_path: Path) -> None:
    files = (f"{tmp_path}/.copilot/session-state/a/inuse.1.hold",
             f"{tmp_path}/.copilot/session-state/b/inuse.2.hold")  # fmt: skip
    got = from_process("copilot", [proc(tmp_path, files=files)])
    assert got.path is None and len(got.candidates) == 2


@pytest.mark.parametrize("name", ["claude", "gemini", "pi"])
def test_a_cli_holding_nothing_open_is_found_by_cwd_and_time(name: str, tmp_path: Path) -> None:
    home, _, main = setup(name, tmp_path)
    os.utime(main)  # written now, as by a running CLI (the copy kept the recording's time)
    kind = fx.kind(name)
    assert from_process(kind, [proc(home)]).path == main
    # a session written before the process started is another process's
    assert from_process(kind, [proc(home, started=time.time() + 600)]).path is None
    # a second session in the same folder: ambiguous, unless a marker tells them apart
    other = main.with_name("session-2026-12-01T14-08-00000000" + main.suffix)
    if kind != "gemini":
        other = main.with_name(f"other{main.suffix}")
    other.write_text(main.read_text().replace("Write the word usage", "Write another word"))
    got = from_process(kind, [proc(home)])
    assert got.path is None and set(got.candidates) == {main, other}
    assert from_process(kind, [proc(home)], marker="Write the word usage").path == main
    assert from_process(kind, [proc(home)], marker="nowhere").path is None


def test_no_process_no_record() -> None:
    assert from_process("copilot", []).path is None
    empty = Process(1, None, {}, None, ())
    assert from_process("claude", [empty]).how == "the process shows no cwd or HOME"
    assert from_process("aider", [Process(1, Path("/"), {"HOME": "/h"}, None, ())]).path is None


def test_a_session_owns_its_subagents_records(tmp_path: Path) -> None:
    _, _, main = setup("claude-subagent", tmp_path)
    subs = sorted((main.parent / main.stem / "subagents").glob("*.jsonl"))
    assert len(subs) == 1
    assert session_files("claude", main) == [main, *subs]
    _, _, gem = setup("gemini", tmp_path / "g")
    assert session_files("gemini", gem) == [gem]
    sid = json.loads(gem.read_text().splitlines()[0])["sessionId"]
    (gem.parent / sid).mkdir()
    sub = gem.parent / sid / "sub-1.jsonl"
    sub.write_text("{}\n")
    assert session_files("gemini", gem) == [gem, sub]
    assert session_files("copilot", Path("/x/events.jsonl")) == [Path("/x/events.jsonl")]
