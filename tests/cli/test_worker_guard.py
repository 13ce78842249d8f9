"""Identity beyond the API (issue 21, class 1): a process carrying any worker identity variable
runs no command that changes a team or the project.

The commands are enumerated from the typer app itself, never listed by hand: every command not in
`omp.cli.guard.WORKER_MAY_RUN` is run under a worker identity, in its own team, in another team,
in another project (with `OMP_ROOT` unset, and set), and under every subset of the identity
variables, and each must refuse with `worker_not_allowed` (exit 1) and write nothing anywhere.
Removing the guard (`guard_all`) fails every one of these; so does dropping a variable from
`omp.identity.WORKER_VARS`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from omp.cli.guard import WORKER_MAY_RUN, guard_all
from omp.errors import CODES, EXIT_REFUSED
from omp.identity import WORKER_VARS
from omp.record import config as team_config
from omp.store.paths import StatePaths
from tests.helpers import child_env, isolate, make_project, make_team, run_omp, snapshot_tree

TOKEN = "lt-guard"
REPO = Path(__file__).resolve().parents[2]
IDENTITY = {
    "OMP_TEAM": "t",
    "OMP_WORKER": "worker-1",
    "OMP_LAUNCH_TOKEN": TOKEN,
    "OMP_TEAM_WORKER": "1",
}
# every non-empty subset of the variables launch gives a worker's pane (not of WORKER_VARS: the
# test must fail if the code forgets one)
SUBSETS = [combo for n in range(1, 5) for combo in itertools.combinations(IDENTITY, n)]


def _leaves(cmd: Any, words: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(cmd, "commands"):  # a group (typer vendors its own click)
        for name, sub in sorted(cmd.commands.items()):
            yield from _leaves(sub, (*words, name))
    else:
        yield words, cmd


def all_commands() -> dict[tuple[str, ...], Any]:
    from omp.cli.app import app

    return dict(_leaves(typer.main.get_command(app)))


COMMANDS = all_commands()
GUARDED = sorted(w for w in COMMANDS if w not in WORKER_MAY_RUN)


def argv(words: tuple[str, ...], team: str) -> list[str]:
    """A command line for `words` built from its own parameters: every required argument and
    option gets a plausible value (a TEAM is `team`), and `--json` when it has one."""
    cmd = COMMANDS[words]
    out = list(words)
    for p in cmd.params:
        if not p.required:
            continue
        if p.type.name == "choice":
            value = str(p.type.choices[0])
        elif p.type.name in ("int", "integer", "float"):
            value = "1"
        elif p.name == "team":
            value = team
        else:
            value = "worker-2"
        if p.param_type_name == "option":
            out += [p.opts[0], value]
        else:
            out.append(value)
    if any(p.param_type_name == "option" and "--json" in p.opts for p in cmd.params):
        out.append("--json")
    return out


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two projects: `proj` with teams t (the worker's, launched with a token) and `other`;
    `proj2` with team t2. No tmux and no agent on PATH: a command that slipped through would fail
    fast, never start anything."""
    home = isolate(monkeypatch, tmp_path)
    proj = make_project(tmp_path / "proj")
    tp = make_team(proj, "t", 3, task="x", no_limits=True)
    raw = team_config.load(tp).raw
    raw["launchToken"] = TOKEN
    team_config.write(tp, raw)
    make_team(proj, "other", 1, task="y", no_limits=True)
    proj2 = make_project(tmp_path / "proj2")
    make_team(proj2, "t2", 1, task="z", no_limits=True)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path / "tmux"))
    monkeypatch.delenv("TMUX", raising=False)
    return {"proj": proj, "proj2": proj2, "home": home, "tmp": tmp_path}


def everything(world: dict[str, Path]) -> dict[str, Any]:
    """Every byte of both projects and of HOME (hooks and skills land in the project)."""
    return {k: snapshot_tree(world[k]) for k in ("proj", "proj2", "home")}


def run_in_process(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    from omp.cli import main

    capsys.readouterr()
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    else:  # pragma: no cover - main always exits
        code = 0
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(words: tuple[str, ...], rc: int, out: str, err: str) -> None:
    assert rc == EXIT_REFUSED, (words, rc, out, err)
    if "--json" in argv(words, "t"):
        import json

        doc = json.loads(out)
        assert doc["error"] == "worker_not_allowed" and doc["command"] == " ".join(words), doc
        assert "\n" not in doc["message"]
    else:
        assert "[worker_not_allowed]" in err, (words, err)


def test_the_app_has_commands_that_change_a_team_and_the_guard_knows_every_allowed_one() -> None:
    # the enumeration is real: the leader's commands are all in it
    for words in [
        ("team", "delete"),
        ("team", "prune"),
        ("team", "shutdown"),
        ("team", "launch"),
        ("team", "create"),
        ("team", "add-worker"),
        ("team", "remove-worker"),
        ("ralph", "start"),
        ("ralph", "cancel"),
        ("ultrawork", "start"),
        ("ultraqa", "cancel"),
        ("ultraqa", "cycle"),
        ("hooks", "install"),
        ("skills", "install"),
        ("demo",),
    ]:
        assert words in GUARDED, words
    # no stale entry: every command a worker may run exists
    assert set(WORKER_MAY_RUN) <= set(COMMANDS)
    assert CODES["worker_not_allowed"] == EXIT_REFUSED
    assert set(WORKER_VARS) == set(IDENTITY)


@pytest.mark.parametrize("words", GUARDED, ids=" ".join)
@pytest.mark.parametrize("where", ["own team", "other team", "other project", "OMP_ROOT elsewhere"])
def test_a_worker_runs_no_command_that_changes_a_team_or_the_project(
    world: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    words: tuple[str, ...],
    where: str,
) -> None:
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    team = {"own team": "t", "other team": "other"}.get(where, "t2")
    if where == "OMP_ROOT elsewhere":
        monkeypatch.setenv("OMP_ROOT", str(world["proj2"]))
        monkeypatch.chdir(world["proj"])
    else:
        monkeypatch.chdir(world["proj2"] if where == "other project" else world["proj"])
    before = everything(world)
    rc, out, err = run_in_process(capsys, argv(words, team))
    assert_refused(words, rc, out, err)
    assert everything(world) == before


@pytest.mark.parametrize("words", GUARDED, ids=" ".join)
def test_any_one_identity_variable_is_enough(
    world: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    words: tuple[str, ...],
) -> None:
    """Unsetting some of the variables never widens what a worker process may do."""
    monkeypatch.chdir(world["proj"])
    before = everything(world)
    for subset in SUBSETS:
        for k in IDENTITY:
            if k in subset:
                monkeypatch.setenv(k, IDENTITY[k])
            else:
                monkeypatch.delenv(k, raising=False)
        rc, out, err = run_in_process(capsys, argv(words, "t"))
        assert_refused(words, rc, out, err)
    assert everything(world) == before


@pytest.mark.slow  # one real process per command (the in-process tests above cover each one)
def test_the_console_script_refuses_every_one_as_a_worker_pane_would_run_it(
    world: dict[str, Path],
) -> None:
    """The same through real processes, with the environment launch gives a pane, OMP_ROOT too."""
    env = child_env(
        world["home"],
        PATH=str(world["tmp"] / "empty-path"),
        TMUX_TMPDIR=str(world["tmp"] / "tmux"),
        OMP_ROOT=str(world["proj"]),
        **IDENTITY,
    )
    env.pop("TMUX", None)
    before = everything(world)
    for words in GUARDED:
        r = run_omp(*argv(words, "t"), cwd=world["proj"], env=env)
        assert_refused(words, r.rc, r.stdout, r.stderr)
    assert everything(world) == before


def test_the_leader_is_not_refused(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(world["proj"])
    rc, out, _ = run_in_process(capsys, ["team", "delete", "other", "--json"])
    assert rc == 0, out
    assert not (StatePaths(world["proj"]).team("other").dir).exists()


READ_ONLY_ALLOWED = sorted(w for w, why in WORKER_MAY_RUN.items() if why.startswith("read-only"))


@pytest.mark.parametrize("words", READ_ONLY_ALLOWED, ids=" ".join)
def test_a_worker_may_run_the_read_only_commands_and_they_write_nothing(
    world: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    words: tuple[str, ...],
) -> None:
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(world["proj"])
    args = argv(words, "t")
    if any("--timeout" in getattr(p, "opts", []) for p in COMMANDS[words].params):
        args += ["--timeout", "0.05"]
    before = everything(world)
    _, out, err = run_in_process(capsys, args)
    assert "worker_not_allowed" not in out + err, (words, out, err)
    assert everything(world) == before


def test_a_command_added_later_is_refused_to_workers_by_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`merge` and `resume` (issue 21) are refused the moment they are registered."""
    app = typer.Typer()
    ran: list[str] = []
    sub = typer.Typer()

    @sub.command("merge")
    def merge(team: str, as_json: bool = typer.Option(False, "--json")) -> None:
        ran.append("merge")

    @sub.command("resume")
    def resume(team: str, as_json: bool = typer.Option(False, "--json")) -> None:
        ran.append("resume")

    app.add_typer(sub, name="team")
    guard_all(app)
    guard_all(app)  # applying it twice wraps once
    for cmd in ("merge", "resume"):
        monkeypatch.setenv("OMP_TEAM", "t")
        with pytest.raises(SystemExit) as exc:
            typer.main.get_command(app).main(["team", cmd, "t", "--json"], standalone_mode=False)
        assert exc.value.code == EXIT_REFUSED
        assert '"error":"worker_not_allowed"' in capsys.readouterr().out
        monkeypatch.delenv("OMP_TEAM")
        typer.main.get_command(app).main(["team", cmd, "t"], standalone_mode=False)
    assert ran == ["merge", "resume"]


def test_the_docs_list_exactly_the_commands_a_worker_may_run() -> None:
    text = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    section = text.split("#### Commands a worker process may run", 1)[1].split("\n\n", 2)[1]
    rows = re.findall(r"^\| `omp ([^`]+)` \| (.+?) \|$", section, flags=re.M)
    assert {tuple(words.split()): why for words, why in rows} == WORKER_MAY_RUN


def test_a_worker_sees_its_own_usage_row_and_no_other_teams(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(world["proj"])
    rc, out, _ = run_in_process(capsys, ["team", "usage", "t", "--json"])
    doc = json.loads(out)
    assert rc == 0 and doc["onlyFor"] == IDENTITY["OMP_WORKER"]
    assert [m["name"] for m in doc["members"]] == [IDENTITY["OMP_WORKER"]]  # not the leader's
    rc, out, _ = run_in_process(capsys, ["team", "usage", "other", "--json"])
    assert rc == EXIT_REFUSED and json.loads(out)["error"] == "worker_not_allowed"
