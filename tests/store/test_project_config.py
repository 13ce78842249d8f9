"""`.omp/config.toml` read without `tomllib` when it holds only plain tables of numbers: the
same answer as `tomllib`, and anything else left to `tomllib`."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omp.store.project_config import plain_toml


def _tomllib(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _same(text: str) -> None:
    mine = plain_toml(text)
    if mine is None:
        return  # left to tomllib
    theirs = _tomllib(text)
    assert theirs is not None, f"plain_toml read a file tomllib refuses: {text!r}"
    assert mine == theirs
    for name, table in theirs.items():  # 8 stays an int and 8.0 a float, as tomllib reads them
        values = table.values() if isinstance(table, dict) else [table]
        mine_values = mine[name].values() if isinstance(table, dict) else [mine[name]]
        assert [type(v) for v in values] == [type(v) for v in mine_values]


def test_the_usual_file_is_read_plainly() -> None:
    text = (
        "# loop breakers\n[limits]\nrate_max_messages = 20  # per window\n"
        "duplicate_window_seconds = 2.5\n\n[timeouts]\n\tclaim_seconds\t=\t600\n"
    )
    assert plain_toml(text) == tomllib.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        "[a]\nx = 01\n",
        "[a]\nx = 1_000\n",
        "[a]\nx = 1e3\n",
        "[a]\nx = .5\n",
        "[a]\nx = 1.\n",
        "[a]\nx = 1\nx = 2\n",
        "[a]\n[a]\n",
        "x = 1\n[x]\n",
        "[a.b]\n",
        "[[a]]\n",
        '[a]\nx = "s"\n',
        "[a]\r\nx = 1\r\n",
        "[a]\nx = 1 # \x01\n",
        "[a]\nx = true\n",
        "[a]x=1\n",
        "[a]\nx = ١\n",
        "[a]\n= 1\n",
        "[a]\nx =\n",
    ],
)
def test_anything_else_is_left_to_tomllib(text: str) -> None:
    assert plain_toml(text) is None


_PIECES = st.sampled_from(
    [
        "[limits]", "[timeouts]", "[a-b_c]", "[ limits ]", "[limits] # c", "[]", "[a.b]",
        "x = 1", "x=2", "y = -3", "z = +4", "w = 0", "w = 00", "v = 2.5", "v = -0.0", "u = 1e2",
        "t = 1_0", "s = true", 'r = "x"', "q = 7 # note", "# comment", "", "   ", "\tx\t=\t5",
        "x = 1 2", "a.b = 1", "k = 0.", "k = 9999999999999999999", "é = 1", "x = 1 # é",
    ]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=12).map("\n".join))
def test_plain_toml_agrees_with_tomllib(text: str) -> None:
    _same(text)
    _same(text + "\n")
