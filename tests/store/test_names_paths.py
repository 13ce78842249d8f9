"""Names that become path components, and where the state tree lives."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omp.errors import OmpError
from omp.store import names
from omp.store.paths import ROOT_MARKERS, StatePaths, find_root
from tests.helpers import isolate, make_project, make_team, snapshot_tree


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)


VALID = ["a", "0", "worker-1", "leader", "A.b_c-d", "x" * 64, "team.v2", "9lives"]
INVALID: list[object] = [
    "",
    ".",
    "..",
    "../escape",
    "worker-1/../../etc",
    "a\\b",
    "a/b",
    "/abs",
    "-dash",
    ".hidden",
    "_under",
    "x" * 65,
    "a b",
    "a\nb",
    "tab\t",
    "caf\u00e9",
    "nul\x00",
    None,
    5,
    ["a"],
]


@pytest.mark.parametrize("name", VALID)
def test_valid_names_pass_every_checker(name: str) -> None:
    assert names.is_valid_name(name)
    assert names.team_name(name) == name
    assert names.recipient_name(name) == name
    assert names.worker_name(name) == name


@pytest.mark.parametrize("name", INVALID, ids=repr)
def test_invalid_names_are_refused_with_the_right_code(name: object) -> None:
    assert not names.is_valid_name(name)
    for check, code in (
        (names.team_name, "invalid_team_name"),
        (names.recipient_name, "invalid_recipient_name"),
        (names.worker_name, "invalid_worker_name"),
    ):
        with pytest.raises(OmpError) as exc:
            check(name)
        assert exc.value.code == code
        assert exc.value.exit_code == 2
        assert "1-64" in exc.value.message


def test_name_message_is_bounded_for_huge_input() -> None:
    with pytest.raises(OmpError) as exc:
        names.team_name("y" * 10_000)
    assert len(exc.value.message) < 300


@pytest.mark.slow  # a property test
@given(st.text(max_size=80))
def test_a_valid_name_is_always_exactly_one_path_component(text: str) -> None:
    if names.is_valid_name(text):
        base = Path("/base")
        assert (base / text).parent == base
        assert os.path.normpath(base / text) == str(base / text)
        assert "/" not in text and "\\" not in text and "\x00" not in text
        assert text not in (".", "..")


@pytest.mark.parametrize("tid", ["1", "42", "task_2", "a-b", "x" * 64])
def test_valid_task_ids(tid: str) -> None:
    assert names.task_id(tid) == tid


@pytest.mark.parametrize("tid", ["../escape", "", "a.b", "a/b", "x" * 65, 1, None, ".."], ids=repr)
def test_invalid_task_ids(tid: object) -> None:
    with pytest.raises(OmpError) as exc:
        names.task_id(tid)
    assert exc.value.code == "invalid_task_id"


# The patterns the str-method checks stand for (omp/store/names.py checks without `re`).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TASK_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Characters near the edges of the allowed sets, so most strings drawn are close calls
CLOSE = st.text(
    alphabet=st.sampled_from("aZ09._-/\\ \n\x00\u00e9\u0660\uff21Kk\u212a@[`{:"), max_size=70
)


@pytest.mark.parametrize("text", [*VALID, *(x for x in INVALID if isinstance(x, str))])
def test_names_and_task_ids_agree_with_their_patterns(text: str) -> None:
    assert names.is_valid_name(text) is (NAME_PATTERN.fullmatch(text) is not None)
    assert names.is_task_id(text) is (TASK_ID_PATTERN.fullmatch(text) is not None)


@given(st.one_of(CLOSE, st.text(max_size=70)))
def test_names_and_task_ids_agree_with_their_patterns_on_any_text(text: str) -> None:
    assert names.is_valid_name(text) is (NAME_PATTERN.fullmatch(text) is not None)
    assert names.is_task_id(text) is (TASK_ID_PATTERN.fullmatch(text) is not None)
    for long in (text * 10, "a" * 63 + text, "a" * 64 + text):
        assert names.is_valid_name(long) is (NAME_PATTERN.fullmatch(long) is not None)
        assert names.is_task_id(long) is (TASK_ID_PATTERN.fullmatch(long) is not None)


# ---- the root ---------------------------------------------------------------------------------


def test_root_markers_are_omp_and_git() -> None:
    assert set(ROOT_MARKERS) == {".omp", ".git"}


def test_root_is_the_nearest_ancestor_with_git(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    sub = root / "src" / "deep"
    sub.mkdir(parents=True)
    assert find_root(sub) == root.resolve()
    assert find_root(str(sub)) == root.resolve()
    assert find_root(root) == root.resolve()


def test_a_git_file_counts_as_a_marker(tmp_path: Path) -> None:
    root = tmp_path / "worktree"
    (root / "sub").mkdir(parents=True)
    (root / ".git").write_text("gitdir: /elsewhere\n")
    assert find_root(root / "sub") == root.resolve()


def test_nearest_omp_dir_wins_over_a_farther_git(tmp_path: Path) -> None:
    outer = make_project(tmp_path / "outer")
    inner = outer / "pkg"
    (inner / ".omp").mkdir(parents=True)
    (inner / "src").mkdir()
    assert find_root(inner / "src") == inner.resolve()


def test_no_marker_means_cwd(tmp_path: Path) -> None:
    bare = tmp_path / "bare" / "dir"
    bare.mkdir(parents=True)
    if any(os.path.lexists(d / m) for d in bare.resolve().parents for m in ROOT_MARKERS):
        pytest.skip("an ancestor of the temp directory holds .git or .omp")
    assert find_root(bare) == bare.resolve()


def test_root_defaults_to_the_process_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path / "proj")
    (root / "a").mkdir()
    monkeypatch.chdir(root / "a")
    assert find_root() == root.resolve()


def test_omp_root_overrides_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proj = make_project(tmp_path / "proj")
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("OMP_ROOT", str(other))
    assert find_root(proj) == other


def test_relative_omp_root_is_taken_from_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rel").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_ROOT", "rel")
    assert find_root() == tmp_path / "rel"


def test_omp_root_that_is_not_a_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_ROOT", str(tmp_path / "missing"))
    with pytest.raises(OmpError) as exc:
        find_root(tmp_path)
    assert exc.value.code == "invalid_root"


def test_cwd_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OmpError) as exc:
        find_root(tmp_path / "nope")
    assert exc.value.code == "invalid_input"


# ---- the layout -------------------------------------------------------------------------------


def test_state_layout_touches_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    before = snapshot_tree(root)
    p = StatePaths(root)
    team = p.team("demo")
    assert p.omp_dir == root / ".omp"
    assert p.state == root / ".omp" / "state"
    assert p.teams == root / ".omp" / "state" / "team"
    assert team.dir == p.teams / "demo"
    assert team.name == "demo"
    assert team.config == team.dir / "config.json"
    assert team.mailbox("worker-1") == team.dir / "mailbox" / "worker-1.jsonl"
    assert team.mailbox_index("leader") == team.dir / "mailbox" / ".leader.index.json"
    assert team.worker_dir("worker-1") == team.dir / "workers" / "worker-1"
    assert team.task("3") == team.dir / "tasks" / "3.json"
    assert team.task_lock("3") == team.dir / "tasks" / "3.lock"
    assert p.mode_file("ralph") == p.state / "ralph.json"
    assert snapshot_tree(root) == before


@pytest.mark.parametrize("bad", ["../escape", "worker-1/../../etc", ".", "..", "a\\b", ""])
def test_layout_refuses_bad_names_before_touching_anything(tmp_path: Path, bad: str) -> None:
    root = make_project(tmp_path / "proj")
    p = StatePaths(root)
    with pytest.raises(OmpError) as exc:
        p.team(bad)
    assert exc.value.code == "invalid_team_name"
    team = p.team("demo")
    with pytest.raises(OmpError) as exc:
        team.mailbox(bad)
    assert exc.value.code == "invalid_recipient_name"
    with pytest.raises(OmpError) as exc:
        team.mailbox_index(bad)
    assert exc.value.code == "invalid_recipient_name"
    with pytest.raises(OmpError) as exc:
        team.worker_dir(bad)
    assert exc.value.code == "invalid_worker_name"
    assert not (root / ".omp").exists()


def test_check_walks_every_component(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    team = make_team(root, "demo", 1)
    p = team.project
    assert p.check(team.mailbox_dir) is True
    assert p.check(p.teams / "nope" / "mailbox") is False
    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(team.dir, tmp_path / "moved")
    os.symlink(tmp_path / "moved", team.dir)
    with pytest.raises(OmpError) as exc:
        p.check(team.mailbox_dir)
    assert exc.value.code == "unsafe_path"


def test_ensure_creates_private_dirs_under_the_root(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    p = StatePaths(root)
    p.ensure(p.teams / "demo" / "mailbox")
    for d in (p.omp_dir, p.state, p.teams, p.teams / "demo", p.teams / "demo" / "mailbox"):
        assert d.is_dir()
        assert os.stat(d).st_mode & 0o777 == 0o700


def test_the_map_parses_back_the_names_it_builds(tmp_path: Path) -> None:
    """Listings are read back through the same map that names the files."""
    from omp.store import paths as p

    team = StatePaths(tmp_path).team("t")
    assert p.task_id_of_lock(team.task_lock("7").name) == "7"
    assert p.task_id_of_record(team.task("7").name) == "7"
    assert p.task_id_of_record(team.conversation("7").name) == "7"
    assert p.task_id_of_record(team.open_conversations.name) is None
    assert p.task_id_of_record(team.task_lock("7").name) is None
    assert p.task_id_of_record(team.tasks_guard.name) is None
    assert p.recipient_of_mailbox(team.mailbox("leader").name) == "leader"
    assert p.recipient_of_mailbox(team.mailbox_index("leader").name) is None
    project = team.project
    assert p.target_id_of(project.monitor_target("abc").name) == "abc"
    assert p.target_id_of(project.monitor_target_lock("abc").name) is None
    assert p.is_hook_file(project.hook_file("decisions", "s1").name, "decisions")
    assert not p.is_hook_file(project.hook_file("session", "s1").name, "decisions")
    assert p.worker_of_inbox(team.inbox("w-1")) == ("t", "w-1")
    run = team.run("2026-01-01T00-00-00Z")
    assert run.worker_dir("w-1").relative_to(team.dir).parts[:2] == ("runs", run.name)
    assert p.in_state_tree(team.config) and not p.in_state_tree(project.config_toml)
