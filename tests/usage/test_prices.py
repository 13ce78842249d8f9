"""Estimated cost from `[prices."<model>"]` in `.omp/config.toml`: no built-in prices."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.errors import OmpError
from omp.store.paths import StatePaths
from omp.usage.prices import Cost, Price, estimate, load_prices
from omp.usage.read import read_usage
from omp.usage.totals import Tokens, UsageTotals
from tests.usage import fixtures as fx


def project(tmp_path: Path, text: str | None) -> StatePaths:
    (tmp_path / ".omp").mkdir(mode=0o700, exist_ok=True)
    if text is not None:
        (tmp_path / ".omp" / "config.toml").write_text(text)
    return StatePaths(tmp_path)


def test_no_prices_no_cost(tmp_path: Path) -> None:
    assert load_prices(project(tmp_path, None)) == {}
    assert load_prices(project(tmp_path, "[limits]\nrate_max_messages = 3\n")) == {}
    cost = estimate({"m": Tokens(1, 10, 10, 0, 0)}, {})
    assert cost == Cost(0.0, ("m",))
    assert cost.to_json() == {"estimatedCost": 0.0, "unpricedModels": ["m"]}


def test_a_recorded_session_priced_per_million_tokens(tmp_path: Path) -> None:
    """Claude's recorded session: 6033 fresh input, 69 output, 600 cache reads, 120 writes."""
    text = (
        '[prices."claude-opus-5-5"]\n'
        "input = 5.0\noutput = 25.0\ncache_read = 0.5\ncache_write = 6.25\n"
    )
    prices = load_prices(project(tmp_path, text))
    assert prices == {"claude-opus-5-5": Price(5.0, 25.0, 0.5, 6.25)}
    got, _ = read_usage("claude", fx.records("claude")[0])
    assert isinstance(got, UsageTotals)
    cost = estimate(got.models, prices)
    dollars = (6033 * 5.0 + 69 * 25.0 + 600 * 0.5 + 120 * 6.25) / 1e6
    assert cost.dollars == pytest.approx(dollars) and cost.unpriced == ()


def test_cache_prices_default_to_the_input_price(tmp_path: Path) -> None:
    prices = load_prices(project(tmp_path, '[prices."m"]\ninput = 2\noutput = 8\n'))
    assert prices == {"m": Price(2.0, 8.0, 2.0, 2.0)}
    cost = estimate(
        {"m": Tokens(2, 1_000_000, 1_000_000, 500_000, 500_000), "idle": Tokens()}, prices
    )
    assert cost == Cost(2.0 + 8.0 + 1.0 + 1.0, ())  # a model with no tokens needs no price


def test_a_model_without_a_price_is_named_not_priced_at_zero(tmp_path: Path) -> None:
    prices = load_prices(project(tmp_path, '[prices."a"]\ninput = 1\noutput = 1\n'))
    cost = estimate({"a": Tokens(1, 1_000_000, 0, 0, 0), "b": Tokens(1, 5, 5, 0, 0)}, prices)
    assert cost == Cost(1.0, ("b",))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[prices."m"]\ninput = 1\n', "needs output"),
        ('[prices."m"]\ninput = 1\noutput = -2\n', "output must be a number >= 0"),
        ('[prices."m"]\ninput = 1\noutput = "3"\n', "output must be a number >= 0"),
        ('[prices."m"]\ninput = 1\noutput = true\n', "output must be a number >= 0"),
        ('[prices."m"]\ninput = 1\noutput = nan\n', "output must be a number >= 0"),
        ('[prices."m"]\ninput = 1\noutput = 2\ncached = 1\n', "unknown key 'cached'"),
        ("[prices]\nm = 3\n", "[prices.'m'] must be a table"),
        ("prices = 3\n", "[prices] must be a table"),
        ("[prices\n", "config.toml"),
    ],
)
def test_bad_prices_are_refused_naming_the_file(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(OmpError) as err:
        load_prices(project(tmp_path, text))
    assert err.value.code == "invalid_config"
    assert needle in err.value.message and "config.toml" in err.value.message
