"""Which omp the agent texts name: the one running, however it was installed."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from omp import invocation


def _script(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_a_venv_console_script_is_named_by_its_absolute_path(tmp_path: Path) -> None:
    omp = _script(tmp_path / "proj/.venv/bin/omp")
    py = tmp_path / "proj/.venv/bin/python"
    assert invocation.omp_argv(str(omp), str(py)) == [str(omp)]


def test_a_relative_argv0_is_made_absolute(tmp_path: Path) -> None:
    omp = _script(tmp_path / ".venv/bin/omp")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert invocation.omp_argv(".venv/bin/omp", "/usr/bin/python3") == [str(omp)]
    finally:
        os.chdir(cwd)


def test_pipx_link_is_kept_not_resolved(tmp_path: Path) -> None:
    """pipx links ~/.local/bin/omp to its venv: the link survives a pipx reinstall."""
    real = _script(tmp_path / "pipx/venvs/omp/bin/omp")
    link = tmp_path / "local/bin/omp"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    py = tmp_path / "pipx/venvs/omp/bin/python"
    assert invocation.omp_argv(str(link), str(py)) == [str(link)]


def test_pip_user_script_away_from_the_interpreter(tmp_path: Path) -> None:
    """`pip install --user`: the script is in ~/.local/bin, the interpreter in /usr/bin."""
    script = _script(tmp_path / "home/.local/bin/omp")
    assert invocation.omp_argv(str(script), "/usr/bin/python3") == [str(script)]


def test_python_dash_m_uses_the_script_beside_the_interpreter_or_the_interpreter(
    tmp_path: Path,
) -> None:
    beside = _script(tmp_path / "venv/bin/omp")
    py = tmp_path / "venv/bin/python"
    main = str(tmp_path / "site/omp/__main__.py")
    assert invocation.omp_argv(main, str(py)) == [str(beside)]
    bare_py = tmp_path / "nomp/bin/python3"
    assert invocation.omp_argv(main, str(bare_py)) == [str(bare_py), "-m", "omp"]


def test_a_path_with_spaces_is_one_shell_word(tmp_path: Path) -> None:
    omp = _script(tmp_path / "my tools/bin/omp")
    cmd = invocation.omp_command(str(omp), "/usr/bin/python3")
    assert cmd == shlex.quote(str(omp)) and shlex.split(cmd) == [str(omp)]


def test_a_team_keeps_the_command_it_was_launched_with() -> None:
    assert invocation.team_command({"ompCommand": "/opt/a/bin/omp"}) == "/opt/a/bin/omp"
    assert invocation.team_command({}) == os.environ.get(
        invocation.ENV_VAR, invocation.omp_command()
    )


def test_the_command_runs_this_omp_from_a_bare_shell() -> None:
    """What the texts print runs from `sh -c` with a PATH that has no omp on it."""
    cmd = invocation.omp_command()
    proc = subprocess.run(
        ["/bin/sh", "-c", f"{cmd} --version"],
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    from omp import __version__

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"omp {__version__}"


def test_version_is_answered_without_typer() -> None:
    """`omp --version` is what doctor's pane check runs: it skips typer's import."""
    import sys

    code = (
        "import sys\nfrom omp.cli import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass\nprint('typer' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    from omp import __version__

    assert out.stdout.splitlines() == [f"omp {__version__}", "False"], out


@given(
    st.text() | st.sampled_from(["", "'", "a b", "/x/.venv/bin/omp", "é", "a'b\"c", "$HOME", "-"])
)
def test_quote_is_shlex_quote(word: str) -> None:
    """`omp.invocation.quote` is `shlex.quote`, without loading `shlex` (and `re`) for status."""
    assert invocation.quote(word) == shlex.quote(word)
