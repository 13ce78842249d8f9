"""Answering a worker's prompt: the options read from real captured screens (`read_prompt`), the
choice matched (`pick`), and, on real tmux with a fake agent drawing Claude Code 2.1.328's
permission prompt, `omp team answer`: shown, refused when the prompt is another, answered with
the highlight moved and seen, and refused once nothing asks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from omp.agents import load_profiles
from omp.errors import OmpError
from omp.mail.answer import parse_options, pick, read_prompt
from omp.record import config as team_config
from omp.store.paths import StatePaths
from omp.tmux import Tmux
from tests.helpers import FIXTURES, assert_reply, child_env, poll, run_omp

SCREENS = FIXTURES / "screens"
PROFILES = load_profiles(Path("/nonexistent"))


def screen(name: str) -> list[str]:
    return (SCREENS / name).read_text(encoding="utf-8").splitlines()


def test_claude_codes_permission_prompt_reads_as_four_options_the_first_highlighted() -> None:
    p = read_prompt(PROFILES["claude"], screen("claude-16-permission-prompt.txt"))
    assert p is not None and p.what == "permission prompt"
    assert [(o.number, o.selected) for o in p.options] == [
        (1, True),
        (2, False),
        (3, False),
        (4, False),
    ]
    assert p.options[0].label == "Yes" and p.options[3].label == "No"
    assert p.lines[0] == "Do you want to proceed?"


def test_copilots_menu_reads_as_options() -> None:
    p = read_prompt(PROFILES["copilot"], screen("copilot-12-login-method-menu.txt"))
    assert p is not None and p.what == "menu"
    assert [o.label for o in p.options][1] == "Sign in with a device code"


@pytest.mark.parametrize(
    ("profile", "name"),
    [
        ("gemini", "gemini-40-error-401.txt"),  # a numbered list of tips above a notice
        ("claude", "claude-21-error-429-rate-limit.txt"),
        ("copilot", "copilot-50-error-429.txt"),
    ],
)
def test_a_notice_needs_a_person_but_offers_no_options(profile: str, name: str) -> None:
    p = read_prompt(PROFILES[profile], screen(name))
    assert p is not None and p.options == []


def test_a_screen_that_needs_nobody_is_no_prompt() -> None:
    assert read_prompt(PROFILES["claude"], screen("claude-07-ready.txt")) is None


def test_moving_the_highlight_keeps_the_prompt_another_command_makes_another() -> None:
    lines = screen("claude-16-permission-prompt.txt")
    p = read_prompt(PROFILES["claude"], lines)
    moved = [
        ln.replace("❯ 1. Yes", "  1. Yes").replace("  2. Yes, and", "❯ 2. Yes, and") for ln in lines
    ]
    q = read_prompt(PROFILES["claude"], moved)
    assert p is not None and q is not None
    assert q.selected is not None and q.selected.number == 2
    assert q.ident == p.ident
    other = [ln.replace("PROBE-OK", "rm -rf /") for ln in lines]
    r = read_prompt(PROFILES["claude"], other)
    assert r is not None and r.ident != p.ident


def test_options_must_run_one_to_k() -> None:
    assert parse_options(["  2. b", "  3. c"]) == []
    assert [o.number for o in parse_options(["x", "❯ 1. a", "  2. b", "tail"])] == [1, 2]


def test_a_choice_by_number_label_or_unique_prefix() -> None:
    p = read_prompt(PROFILES["claude"], screen("claude-16-permission-prompt.txt"))
    assert p is not None
    assert pick(p, "4").label == "No"
    assert pick(p, "no").number == 4
    assert pick(p, "yes").number == 1  # the exact label wins over the prefixes
    assert pick(p, "Yes, and always").number == 2
    with pytest.raises(OmpError) as err:
        pick(p, "Yes, and")  # two options start so
    assert err.value.code == "unknown_choice"
    with pytest.raises(OmpError):
        pick(p, "9")


# ---- on real tmux ------------------------------------------------------------------------------


@pytest.mark.tmux
@pytest.mark.slow
def test_omp_team_answer_types_only_on_the_prompt_it_was_given(
    omp_tmux: Tmux, tmux_env: Path, tmp_path: Path
) -> None:
    from omp.cli.replies import AnswerReply
    from tests.monitor.test_monitor_tmux import make_live_team

    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    keys = tmp_path / "keys"
    agent = [
        sys.executable,
        str(FIXTURES / "agents" / "prompt_agent.py"),
        str(SCREENS / "claude-16-permission-prompt.txt"),
        str(keys),
    ]
    pane = make_live_team(root, omp_tmux, "t", 2, agent, session="omp-team-t")["worker-1"]
    tp = StatePaths(root).team("t")
    raw = team_config.load(tp).raw
    raw.update(agent="claude", tmuxSession="omp-team-t")
    team_config.write(tp, raw)
    poll(lambda: any("Do you want to proceed?" in ln for ln in omp_tmux.capture(pane)))
    env = child_env(tmux_env, OMP_NO_MONITOR="1")

    shown = run_omp("team", "answer", "t", "worker-1", "--json", cwd=root, env=env)
    assert shown.rc == 0, shown
    assert_reply(shown.json, AnswerReply)
    prompt = shown.json["prompt"]
    assert [o["label"] for o in prompt["options"]][-1] == "No"
    text = run_omp("team", "answer", "t", "worker-1", cwd=root, env=env)
    assert "> 1. Yes" in text.stdout and "4. No" in text.stdout

    # another prompt id: refused, nothing typed
    wrong = run_omp(
        "team", "answer", "t", "worker-1", "4", "--prompt", "0" * 16, "--json", cwd=root, env=env
    )
    assert wrong.rc == 1 and wrong.json["error"] == "prompt_changed", wrong
    bad = run_omp("team", "answer", "t", "worker-1", "maybe", "--json", cwd=root, env=env)
    assert bad.rc == 2 and bad.json["error"] == "unknown_choice", bad
    assert keys.read_bytes() == b""

    done = run_omp(
        "team", "answer", "t", "worker-1", "No", "--prompt", prompt["promptId"], "--json",
        cwd=root, env=env,
    )  # fmt: skip
    assert done.rc == 0, done
    assert_reply(done.json, AnswerReply)
    assert done.json["choice"] == {"number": 4, "label": "No"}
    assert done.json["keys"] == ["Down", "Down", "Down", "Enter"]
    assert done.json["next"] is None
    assert (tmp_path / "keys.chosen").read_text() == "4"
    assert keys.read_bytes().endswith(b"\r") and keys.read_bytes().count(b"\r") == 1

    # the prompt is gone: nothing asks, nothing is typed
    again = run_omp("team", "answer", "t", "worker-1", "1", "--json", cwd=root, env=env)
    assert again.rc == 1 and again.json["error"] == "no_prompt", again
    assert keys.read_bytes().count(b"\r") == 1
    other = run_omp("team", "answer", "t", "worker-9", "1", "--json", cwd=root, env=env)
    assert other.rc == 1 and other.json["error"] == "unknown_worker", other
