"""`omp skills install` and the skill it installs."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from omp import skills
from omp.errors import OmpError
from tests.helpers import REPO, child_env, make_project, run_cli

SKILL = REPO / "skills" / "team" / "SKILL.md"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


def _rendered() -> bytes:
    """The skill as installed: every `omp <command>` names this omp by absolute path."""
    from omp.invocation import omp_command
    from omp.skills import render

    return render(SKILL.read_bytes(), omp_command())


def test_installed_skill_names_this_omp_in_every_command() -> None:
    from omp.skills import render

    text = render(SKILL.read_bytes(), "/opt/x/bin/omp").decode()
    assert text.count("/opt/x/bin/omp team api mailbox-read") >= 1
    assert "/opt/x/bin/omp team launch 3" in text
    # Headings keep the product's name; no bare `omp <command>` is left for an agent to copy.
    assert "\n# omp team" in text
    body = [ln for ln in text.splitlines() if not ln.startswith("#")]
    bare = [ln for ln in body if re.search(r"(^|[\s`])omp (team|ralph|ultra\w+|skills) ", ln)]
    assert bare == [], bare


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return child_env(home)


# ---- the command ----------------------------------------------------------------------------


def test_install_copies_the_packaged_skill(proj: Path, tmp_path: Path) -> None:
    out = run_cli("skills", "install", "--json", cwd=proj, env=_env(tmp_path))
    dest = proj / ".github/skills/team/SKILL.md"
    assert out.rc == 0, out
    assert out.json == {
        "ok": True,
        "target": str(proj / ".github/skills"),
        "skills": ["team"],
        "files": [{"path": str(dest), "action": "created"}],
        "created": 1,
        "updated": 0,
        "unchanged": 0,
    }
    assert dest.read_bytes() == _rendered()


def test_install_from_a_subdirectory_goes_to_the_project_root(proj: Path, tmp_path: Path) -> None:
    sub = proj / "src" / "pkg"
    sub.mkdir(parents=True)
    out = run_cli("skills", "install", "--target", ".claude/skills", cwd=sub, env=_env(tmp_path))
    assert out.rc == 0, out
    assert (proj / ".claude/skills/team/SKILL.md").read_bytes() == _rendered()
    assert not (sub / ".claude").exists()
    assert out.stdout.splitlines()[-1] == (
        f"skills team in {proj / '.claude/skills'}: 1 created, 0 updated, 0 unchanged"
    )


def test_identical_file_is_unchanged_and_not_rewritten(proj: Path) -> None:
    skills.install(proj)
    dest = proj / ".github/skills/team/SKILL.md"
    before = os.stat(dest).st_mtime_ns
    res = skills.install(proj)
    assert (res["created"], res["updated"], res["unchanged"]) == (0, 0, 1)
    assert os.stat(dest).st_mtime_ns == before


def test_changed_file_is_refused_then_overwritten_with_force(proj: Path, tmp_path: Path) -> None:
    skills.install(proj)
    dest = proj / ".github/skills/team/SKILL.md"
    dest.write_text("my own notes\n")
    out = run_cli("skills", "install", "--json", cwd=proj, env=_env(tmp_path))
    assert out.rc == 1
    assert out.json["error"] == "skill_changed"
    assert out.json["files"] == [str(dest)]
    assert "--force" in out.json["message"]
    assert dest.read_text() == "my own notes\n"  # the edit is kept
    forced = run_cli("skills", "install", "--force", "--json", cwd=proj, env=_env(tmp_path))
    assert forced.rc == 0 and forced.json["updated"] == 1
    assert dest.read_bytes() == _rendered()


def test_refused_install_writes_nothing(proj: Path, tmp_path: Path) -> None:
    """A conflict found anywhere stops the whole install before the first write."""
    src = tmp_path / "src"
    for name in ("alpha", "beta"):
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(f"---\nname: {name}\n---\n")
    dest = proj / ".github/skills"
    (dest / "beta").mkdir(parents=True)
    (dest / "beta" / "SKILL.md").write_text("edited\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(skills, "source_dir", lambda: src)
        with pytest.raises(OmpError) as err:
            skills.install(proj)
    assert err.value.code == "skill_changed"
    assert not (dest / "alpha").exists()


def test_symlinked_destination_is_refused(proj: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("not yours\n")
    dest = proj / ".github/skills/team"
    dest.mkdir(parents=True)
    (dest / "SKILL.md").symlink_to(elsewhere)
    with pytest.raises(OmpError) as err:
        skills.install(proj, force=True)
    assert err.value.code == "unsafe_path"
    assert elsewhere.read_text() == "not yours\n"


def test_source_prefers_the_packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "omp"
    (pkg / "_skills" / "team").mkdir(parents=True)
    (pkg / "_skills" / "team" / "SKILL.md").write_text("packaged\n")
    monkeypatch.setattr("importlib.resources.files", lambda name: pkg)
    assert Path(str(skills.source_dir())) == pkg / "_skills"


def test_source_falls_back_to_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("importlib.resources.files", lambda name: tmp_path / "no-such-package")
    assert Path(str(skills.source_dir())) == REPO / "skills"


# ---- the skill itself -----------------------------------------------------------------------


def _front_matter(text: str) -> dict[str, str]:
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert m, "SKILL.md must start with YAML front matter"
    out = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z]+", key), f"one 'key: value' per line: {line!r}"
        assert not value.startswith(("'", '"', "|", ">")), "plain scalars only"
        assert ": " not in value and " #" not in value, f"would not parse as YAML: {line!r}"
        out[key] = value
    return out


def test_skill_front_matter_is_what_copilot_reads() -> None:
    fm = _front_matter(SKILL.read_text())
    assert set(fm) == {"name", "description"}
    assert fm["name"] == SKILL.parent.name
    assert re.fullmatch(r"[a-z0-9-]{1,64}", fm["name"])
    assert 1 <= len(fm["description"]) <= 1024
    assert "Use when" in fm["description"]


def test_skill_is_short() -> None:
    assert len(SKILL.read_text().split()) < 800


def _commands() -> list[list[str]]:
    """Every `omp ...` line inside the skill's code blocks, split into words."""
    text = SKILL.read_text()
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    lines = [ln.split("#")[0].strip() for b in blocks for ln in b.splitlines()]
    return [ln.split() for ln in lines if ln.startswith("omp ")]


def test_skill_documents_the_leader_commands() -> None:
    used = {" ".join(words[1:3]) for words in _commands()}
    for cmd in (
        "team launch",
        "team wait",
        "team status",
        "team collect",
        "team shutdown",
        "team api",
        "ralph start",
        "ralph status",
        "ralph cancel",
        "ultrawork start",
        "ultraqa start",
        "ultraqa cycle",
    ):
        assert cmd in used, cmd
    assert "mailbox-read" in SKILL.read_text()


def test_every_command_in_the_skill_exists() -> None:
    from omp.api.operations import OPERATIONS
    from omp.cli.app import app

    root = typer.main.get_command(app)
    for words in _commands():
        if words[1:3] == ["team", "api"]:
            assert words[3] in OPERATIONS, words
            continue
        cmd: Any = root
        for w in words[1:3]:
            sub = getattr(cmd, "commands", {}).get(w)
            assert sub is not None, f"no such command: omp {' '.join(words[1:3])}"
            cmd = sub
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for w in words[3:]:
            if w.startswith("--"):
                assert w in opts, f"omp {' '.join(words[1:3])} has no option {w}"


def test_skill_wait_pattern_fits_an_agents_tool_time_limit() -> None:
    """Copilot CLI gives a shell command 30 s: the skill's wait must return well before, say that
    unread mail returns at once, that outcomes are exit 0, and when to use --nudge-leader."""
    text = SKILL.read_text()
    waits = re.findall(r"omp team wait \S+ --timeout (\d+)", text)
    assert waits and all(int(t) < 30 for t in waits), waits
    assert "at once, while any is unread" in text
    assert "exits 0 for all of these" in text and "exit 13" in text
    assert "--nudge-leader" in text and "never over a running command" in text
    assert "readCommand" in text
