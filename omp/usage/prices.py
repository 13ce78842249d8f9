"""Estimated cost from the project's own prices: `[prices."<model>"]` in `.omp/config.toml`.

    [prices."claude-sonnet-4-5"]
    input = 3.0          # dollars per million fresh input tokens
    output = 15.0        # ... per million output tokens (reasoning included)
    cache_read = 0.30    # optional: defaults to the input price
    cache_write = 3.75   # optional: defaults to the input price

There is no built-in price table: prices change, and a number omp made up would be believed. A
model without prices has no cost; the estimate says which models it left out, so a partial sum
is never shown as the whole. Cache prices default to the input price: an estimate then errs
high, never low, which is the safe side for a budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from omp.errors import OmpError
from omp.store import project_config
from omp.store.paths import StatePaths
from omp.usage.totals import Tokens

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from typing import Any

KEYS = ("input", "output", "cache_read", "cache_write")


class Price(NamedTuple):
    """Dollars per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, t: Tokens) -> float:
        return (
            t.input * self.input
            + t.output * self.output
            + t.cache_read * self.cache_read
            + t.cache_write * self.cache_write
        ) / 1e6


class Cost(NamedTuple):
    dollars: float  # the sum over the priced models
    unpriced: tuple[str, ...]  # models that spent tokens but have no price: not in `dollars`

    def to_json(self) -> dict[str, Any]:
        return {"estimatedCost": round(self.dollars, 6), "unpricedModels": list(self.unpriced)}


def parse_prices(table: Mapping[str, Any], where: str) -> dict[str, Price]:
    """The `[prices]` table, checked: each model a table with `input` and `output`, numbers
    >= 0, no other keys than KEYS (a typo must not fall back to a default silently)."""
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        name = f"[prices.{model!r}]"
        if not isinstance(entry, dict):
            raise OmpError("invalid_config", f"{where}: {name} must be a table")
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            raise OmpError(
                "invalid_config",
                f"{where}: {name} unknown key {unknown[0]!r}; known: {', '.join(KEYS)}",
            )
        for key in ("input", "output"):
            if key not in entry:
                raise OmpError("invalid_config", f"{where}: {name} needs {key} (dollars per 1M)")
        values: dict[str, float] = {}
        for key, v in entry.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0:
                raise OmpError("invalid_config", f"{where}: {name} {key} must be a number >= 0")
            values[key] = float(v)
        values.setdefault("cache_read", values["input"])
        values.setdefault("cache_write", values["input"])
        prices[str(model)] = Price(**values)
    return prices


def load_prices(project: StatePaths) -> dict[str, Price]:
    """The project's prices (none when it gives none); `invalid_config` naming the file."""
    return parse_prices(project_config.load_table(project, "prices"), str(project.config_toml))


def estimate(models: Mapping[str, Tokens], prices: Mapping[str, Price]) -> Cost:
    dollars = 0.0
    unpriced = []
    for model, tokens in sorted(models.items()):
        price = prices.get(model)
        if price is not None:
            dollars += price.cost(tokens)
        elif tokens.total:
            unpriced.append(model)
    return Cost(dollars, tuple(unpriced))
