"""`omp hook stop` end to end: stdin in, the CLI's answer out, state on disk. Run in this process
(`run_cli`); concurrent fires and the fast path's imports run real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, child_env, run_cli

FIX = REPO / "tests" / "fixtures" / "hooks"
SESSION = "90dd62ff-1c2e-4a8b-9d7e-3f1a2b3c4d5e"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    p = tmp_path / "proj"
    (p / ".git").mkdir(parents=True)
    (tmp_path / "home").mkdir()
    return p


def env_for(proj: Path, **extra: str) -> dict[str, str]:
    base = child_env(proj.parent / "home", OMP_HOOK_TRANSCRIPT_WAIT_MS="3000")
    for k in ("COPILOT_CLI", "CODEX_HOME", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID"):
        base.pop(k, None)
    base.update(extra)
    return base


def payload(name: str, proj: Path, **over: Any) -> dict[str, Any]:
    p = json.loads((FIX / name).read_text())
    p["cwd"] = str(proj)
    p.update(over)
    assert isinstance(p, dict)
    return p


def hook(proj: Path, stdin: dict[str, Any] | str, **env: str) -> tuple[int, str, str]:
    raw = stdin if isinstance(stdin, str) else json.dumps(stdin)
    r = run_cli("hook", "stop", input=raw, cwd=proj, env=env_for(proj, **env))
    return r.rc, r.stdout, r.stderr


def answer(out: str) -> dict[str, Any]:
    obj = json.loads(out) if out.strip() else {}
    assert isinstance(obj, dict)
    return obj


def start(proj: Path, *args: str) -> None:
    r = run_cli(*args, cwd=proj, env=env_for(proj))
    assert r.rc == 0, r.stderr


def state(proj: Path, mode: str = "ralph") -> dict[str, Any]:
    data = json.loads((proj / ".omp" / "state" / f"{mode}.json").read_text())
    assert isinstance(data, dict)
    return data


def log(proj: Path) -> list[dict[str, Any]]:
    path = proj / ".omp" / "state" / "hooks" / "hook.log"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def claude(proj: Path, text: str, session: str = "claude-1") -> dict[str, Any]:
    return payload("claude-Stop.json", proj, last_assistant_message=text, session_id=session)


def copilot_stop(proj: Path, ts: int, *, snake: bool = False) -> dict[str, Any]:
    """A Copilot stop at `ts` whose transcript (in the project) already records it."""
    tpath = proj / "events.jsonl"
    if snake:
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts / 1000)) + f".{ts % 1000:03d}Z"
        return payload("copilot-Stop.json", proj, timestamp=iso, transcript_path=str(tpath))
    return payload("copilot-agentStop.json", proj, timestamp=ts, transcriptPath=str(tpath))


def write_transcript(proj: Path, stops: list[tuple[int, str]]) -> None:
    lines = []
    for ts, reply in stops:
        lines.append({"type": "assistant.message", "data": {"content": reply}})
        lines.append({"type": "hook.start", "data": {"input": {"timestamp": ts}}})
    (proj / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def release_together(procs: list[subprocess.Popen[bytes]], inputs: list[str]) -> list[str]:
    """Let hook processes, started and waiting on stdin, go at the same moment; their stdouts.

    Each is given a second to start up and block reading stdin, then all stdins are written and
    closed back to back, so they reach the read-decide-write section together.
    """
    time.sleep(1.0)
    for p, text in zip(procs, inputs, strict=True):
        assert p.stdin is not None
        p.stdin.write(text.encode())
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
    outs = []
    for p in procs:
        assert p.stdout is not None
        outs.append(p.stdout.read().decode())
        p.wait(timeout=60)
    return outs


# ---- the basic contract -------------------------------------------------------------------


def test_without_a_loop_every_cli_is_allowed_and_nothing_is_written(proj: Path) -> None:
    for name in sorted(p.name for p in FIX.glob("*.json")):
        rc, out, err = hook(proj, payload(name, proj))
        assert rc == 0 and err == ""
        assert answer(out) == {}, name
    assert not (proj / ".omp").exists()


def test_a_loop_blocks_counts_and_ends_on_the_word(proj: Path) -> None:
    start(proj, "ralph", "start", "write the haiku", "--max-iterations", "3")
    rc, out, _ = hook(proj, claude(proj, "first draft"))
    a = answer(out)
    assert rc == 0 and a["decision"] == "block"
    assert "omp ralph step 1/3" in a["reason"] and "RALPH_COMPLETE" in a["reason"]
    assert state(proj)["iteration"] == 1 and state(proj)["active"] is True
    rc, out, _ = hook(proj, claude(proj, "second draft"))
    assert "step 2/3" in answer(out)["reason"]
    rc, out, _ = hook(proj, claude(proj, "Finished.\nRALPH_COMPLETE"))
    assert answer(out) == {"systemMessage": "omp ralph loop complete after 2/3 continuations"}
    s = state(proj)
    assert s["active"] is False and s["iteration"] == 2 and s["endReason"] == "complete"
    assert s["prompt"] == "write the haiku"
    assert [x["why"] for x in log(proj)] == ["continue", "continue", "complete"]
    # Over: the next stop is let through and changes nothing.
    before = (proj / ".omp" / "state" / "ralph.json").read_bytes()
    assert answer(hook(proj, claude(proj, "more"))[1]) == {}
    assert (proj / ".omp" / "state" / "ralph.json").read_bytes() == before


def test_ultrawork_and_ultraqa_are_driven_too(proj: Path) -> None:
    start(proj, "ultrawork", "start", "port every module", "--max-iterations", "1")
    a = answer(hook(proj, claude(proj, "one module done"))[1])
    assert "omp ultrawork step 1/1" in a["reason"] and "ULTRAWORK_COMPLETE" in a["reason"]
    assert "cap of 1" in answer(hook(proj, claude(proj, "two"))[1])["systemMessage"]
    start(proj, "ultraqa", "start", "pytest passes")
    a = answer(hook(proj, claude(proj, "still red"))[1])
    assert "omp ultraqa step 1/5" in a["reason"]
    assert state(proj, "ultraqa")["cycleCount"] == 1


def test_codex_is_allowed_with_empty_stdout_and_blocked_with_json(proj: Path) -> None:
    rc, out, _ = hook(proj, payload("codex-Stop.json", proj))
    assert rc == 0 and out == ""
    start(proj, "ralph", "start", "x")
    rc, out, _ = hook(proj, payload("codex-Stop.json", proj, last_assistant_message="not yet"))
    assert answer(out)["decision"] == "block"


# ---- one advance per stop ------------------------------------------------------------------


def test_a_duplicate_fire_replays_the_first_answer_and_counts_once(proj: Path) -> None:
    start(proj, "ralph", "start", "write the haiku", "--max-iterations", "1")
    write_transcript(proj, [(1796075680748, "working")])
    first = hook(proj, copilot_stop(proj, 1796075680748))[1]
    # The snake_case `Stop` entry for the same stop (registered in .claude/settings.json too).
    second = hook(proj, copilot_stop(proj, 1796075680748, snake=True))[1]
    assert answer(first)["decision"] == "block" and first == second
    assert state(proj)["iteration"] == 1 and state(proj)["active"] is True  # not at the cap
    assert [x.get("replayed", False) for x in log(proj)] == [False, True]
    # A new stop is a new decision: the cap.
    write_transcript(proj, [(1796075680748, "working"), (1796075690000, "still")])
    assert answer(hook(proj, copilot_stop(proj, 1796075690000))[1]) == {}
    assert state(proj)["endReason"] == "cap"


def test_without_a_session_id_nothing_is_replayed(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    anon = claude(proj, "same words")
    del anon["session_id"]
    hook(proj, anon)
    hook(proj, anon)
    assert state(proj)["iteration"] == 2


@pytest.mark.slow
def test_concurrent_fires_of_one_stop_count_once(proj: Path) -> None:
    start(proj, "ralph", "start", "write the haiku")
    write_transcript(proj, [(1796075680748, "working")])
    raw = json.dumps(copilot_stop(proj, 1796075680748))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "omp", "hook", "stop"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=proj,
            env=env_for(proj),
        )
        for _ in range(6)
    ]
    outs = release_together(procs, [raw] * len(procs))
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and answer(outs[0])["decision"] == "block"
    assert state(proj)["iteration"] == 1
    assert sorted(x.get("replayed", False) for x in log(proj)) == [False] + [True] * 5


@pytest.mark.slow
def test_concurrent_different_stops_each_count(proj: Path) -> None:
    start(proj, "ralph", "start", "x", "--max-iterations", "50")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "omp", "hook", "stop"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=proj,
            env=env_for(proj),
        )
        for _ in range(5)
    ]
    release_together(procs, [json.dumps(claude(proj, f"r{i}", session=f"s{i}")) for i in range(5)])
    steps = sorted(x["step"] for x in log(proj))
    assert steps == [1, 2, 3, 4, 5] and state(proj)["iteration"] == 5


def test_cancel_between_two_stops_lets_the_next_one_through(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    write_transcript(proj, [(1796075680748, "working")])
    stop1 = copilot_stop(proj, 1796075680748)
    assert answer(hook(proj, stop1)[1])["decision"] == "block"
    start(proj, "ralph", "cancel")
    assert not list((proj / ".omp" / "state" / "hooks").glob("decisions-*"))
    # A late duplicate of the blocked stop must not bring the cancelled loop back.
    assert answer(hook(proj, stop1)[1]) == {}
    write_transcript(proj, [(1796075680748, "working"), (1796075690000, "more")])
    assert answer(hook(proj, copilot_stop(proj, 1796075690000))[1]) == {}
    s = state(proj)
    assert s["active"] is False and s["iteration"] == 1 and "cancelledAt" in s


def test_a_new_start_is_not_swallowed_by_a_remembered_allow(proj: Path) -> None:
    start(proj, "ralph", "start", "x", "--max-iterations", "1")
    write_transcript(proj, [(1796075680748, "a")])
    hook(proj, copilot_stop(proj, 1796075680748))
    write_transcript(proj, [(1796075680748, "a"), (1796075690000, "b")])
    assert answer(hook(proj, copilot_stop(proj, 1796075690000))[1]) == {}  # cap
    start(proj, "ralph", "start", "y", "--max-iterations", "1")
    # The same stop fired again after the new start: decided afresh for the new loop.
    assert answer(hook(proj, copilot_stop(proj, 1796075690000))[1])["decision"] == "block"


# ---- the current reply -----------------------------------------------------------------------


@pytest.mark.slow
def test_copilot_transcript_lag_waits_for_this_stops_hook_start(proj: Path) -> None:
    start(proj, "ralph", "start", "write the haiku", "--max-iterations", "5")
    # The file ends at the previous stop; the current reply and hook.start are not there yet.
    write_transcript(proj, [(1796075675200, "First draft.")])
    stdin = json.dumps(copilot_stop(proj, 1796075680748))
    proc = subprocess.Popen(
        [sys.executable, "-m", "omp", "hook", "stop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=proj,
        env=env_for(proj, OMP_HOOK_TRANSCRIPT_WAIT_MS="20000"),
    )

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdin.encode())
    proc.stdin.close()
    # The hook is now polling a transcript that lacks this stop; the reply lands 0.5 s later.
    time.sleep(0.5)
    assert proc.poll() is None, "the hook did not wait for this stop's hook.start"
    write_transcript(proj, [(1796075675200, "First draft."), (1796075680748, "RALPH_COMPLETE")])
    out = proc.stdout.read().decode()
    assert proc.wait(timeout=60) == 0
    assert answer(out) == {}
    assert state(proj)["endReason"] == "complete"


def test_copilot_without_this_stop_in_time_counts_it_as_not_done(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    write_transcript(proj, [(1796075675200, "RALPH_COMPLETE")])  # an older stop's reply
    rc, out, _ = hook(proj, copilot_stop(proj, 1796075680748), OMP_HOOK_TRANSCRIPT_WAIT_MS="50")
    assert rc == 0 and answer(out)["decision"] == "block"
    assert log(proj)[-1]["reply"] is None


def test_gemini_looks_only_at_the_newest_part_of_its_response(proj: Path) -> None:
    start(proj, "ralph", "start", "say hello", "--max-iterations", "5")
    one = payload("gemini-AfterAgent-1.json", proj)
    two = payload("gemini-AfterAgent-2.json", proj)
    assert answer(hook(proj, one)[1])["decision"] == "block"
    out = answer(hook(proj, two)[1])
    assert out == {"systemMessage": "omp ralph loop complete after 1/5 continuations"}
    # A new loop in the same prompt: the old word still sits in the growing response.
    start(proj, "ralph", "start", "say goodbye")
    three = {**two, "timestamp": "2026-11-30T21:58:00.000Z"}
    three["prompt_response"] = two["prompt_response"] + "\nStarting the next task."
    assert answer(hook(proj, three)[1])["decision"] == "block"


# ---- who is never held, and failing open ----------------------------------------------------


@pytest.mark.parametrize("var", [{"OMP_TEAM_WORKER": "1"}, {"OMP_WORKER": "worker-2"}])
def test_a_worker_pane_is_never_held_by_the_leaders_loop(proj: Path, var: dict[str, str]) -> None:
    start(proj, "ralph", "start", "x")
    before = (proj / ".omp" / "state" / "ralph.json").read_bytes()
    rc, out, _ = hook(proj, claude(proj, "worker reply"), **var)
    assert rc == 0 and answer(out) == {}
    assert (proj / ".omp" / "state" / "ralph.json").read_bytes() == before
    assert not (proj / ".omp" / "state" / "hooks").exists()


@pytest.mark.parametrize("stdin", ["not json", "[1, 2]", '{"session_id": 5', "\x00\xff"])
def test_bad_stdin_is_allowed_and_logged(proj: Path, stdin: str) -> None:
    start(proj, "ralph", "start", "x")
    rc, out, err = hook(proj, stdin)
    assert rc == 0 and answer(out) == {} and err == ""
    assert "error" in log(proj)[-1]
    assert state(proj)["iteration"] == 0


def test_an_unsafe_state_tree_fails_open_and_says_why(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    ralph = proj / ".omp" / "state" / "ralph.json"
    target = proj / "elsewhere.json"
    target.write_text(ralph.read_text())
    ralph.unlink()
    ralph.symlink_to(target)
    rc, out, _ = hook(proj, claude(proj, "reply"))
    assert rc == 0 and answer(out) == {}
    assert "symlink" in log(proj)[-1]["error"]
    assert json.loads(target.read_text())["iteration"] == 0


def test_a_corrupt_loop_file_is_no_loop(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    (proj / ".omp" / "state" / "ralph.json").write_text("{not json")
    rc, out, _ = hook(proj, claude(proj, "reply"))
    assert rc == 0 and answer(out) == {}


def test_when_even_the_log_cannot_be_written_it_allows_and_tells_stderr(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    hooks = proj / ".omp" / "state" / "hooks"
    hooks.write_text("a file where the hook's directory belongs")
    rc, out, err = hook(proj, claude(proj, "reply"))
    assert rc == 0 and answer(out) == {}
    assert "omp hook stop:" in err and "not logged" in err
    assert state(proj)["iteration"] == 0


def test_help_and_the_fast_path_imports_nothing_costly(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    probe = (
        "import sys\n"
        "from omp.cli import main\n"
        "try:\n    main(['hook', 'stop'])\nexcept SystemExit:\n    pass\n"
        'heavy = ("typer", "libtmux", "ulid", "dataclasses", "inspect", "tempfile")\n'
        "sys.stderr.write(repr(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(claude(proj, "x")),
        capture_output=True,
        text=True,
        cwd=proj,
        env=env_for(proj),
        check=True,
    )
    assert answer(r.stdout)["decision"] == "block"
    assert r.stderr == "[]"
    assert os.path.exists(proj / ".omp" / "state" / "hooks" / "hook.log")


def test_claude_without_last_assistant_message_falls_back_to_its_transcript(proj: Path) -> None:
    start(proj, "ralph", "start", "x")
    tpath = proj / "claude.jsonl"
    rec = {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "RALPH_COMPLETE"}]},
    }
    tpath.write_text(json.dumps(rec) + "\n")
    p = claude(proj, "")
    del p["last_assistant_message"]
    p["transcript_path"] = str(tpath)
    assert "complete" in answer(hook(proj, p)[1])["systemMessage"]
    assert state(proj)["endReason"] == "complete"


def test_status_commands_show_the_step_and_the_last_decision(proj: Path) -> None:
    e = env_for(proj)
    start(proj, "ralph", "start", "write the haiku", "--max-iterations", "4")
    r = run_cli("team", "status", "--json", cwd=proj, env=e)
    assert r.json["loops"] == [{"mode": "ralph", "step": 0, "max": 4, "lastDecision": None}]
    hook(proj, claude(proj, "draft"))
    before = {p: p.read_bytes() for p in (proj / ".omp").rglob("*") if p.is_file()}
    r = run_cli("team", "status", cwd=proj, env=e)
    assert r.rc == 0
    assert "loop ralph: step 1/4, last stop: blocked the stop at 20" in r.stdout
    r = run_cli("ralph", "status", cwd=proj, env=e)
    assert r.stdout.startswith('ralph active: iteration 1/4 — "write the haiku"\n')
    assert "  last stop: blocked the stop at step 1/4, " in r.stdout and "(claude)" in r.stdout
    after = {p: p.read_bytes() for p in (proj / ".omp").rglob("*") if p.is_file()}
    assert after == before  # status commands are read-only
    hook(proj, claude(proj, "done\nRALPH_COMPLETE"))
    r = run_cli("ralph", "status", cwd=proj, env=e)
    assert r.stdout.startswith("ralph inactive (completed 20")
    assert "saw the completion word at step 1/4" in r.stdout
    assert run_cli("team", "status", "--json", cwd=proj, env=e).json["loops"] == []


def test_copilots_limit_of_8_blocks_in_a_row_pauses_the_loop_without_counting(proj: Path) -> None:
    start(proj, "ralph", "start", "x", "--max-iterations", "10")
    stops = [(1796075680000 + i, f"reply {i}") for i in range(11)]
    write_transcript(proj, stops)
    actions = []
    for i in range(10):
        p = copilot_stop(proj, stops[i][0])
        p["stop_hook_active"] = i > 0 and i != 9  # stop 9 starts a new turn (the user typed)
        actions.append(answer(hook(proj, p)[1]).get("decision", "allow"))
    # Blocks 1-8 are obeyed; Copilot would ignore a 9th in a row: let it stop, count nothing.
    assert actions == ["block"] * 8 + ["allow", "block"]
    s = state(proj)
    assert s["active"] is True and s["iteration"] == 9
    assert [x["why"] for x in log(proj)][-2:] == ["cli_limit", "continue"]
