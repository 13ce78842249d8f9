"""omp.clock's stamps, read back as `datetime` reads them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omp import clock


def _iso_by_datetime(t: float) -> str:
    dt = datetime.fromtimestamp(t, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _parse_by_datetime(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


@given(st.floats(min_value=0, max_value=32503680000, allow_nan=False))
def test_iso_is_datetimes(t: float) -> None:
    assert clock.iso(t) == _iso_by_datetime(t)


@pytest.mark.parametrize("t", [0.0, 1.9999995, 1.0000005, 1767225599.9999996, 1767225599.9995])
def test_iso_rounds_as_datetime_does(t: float) -> None:
    assert clock.iso(t) == _iso_by_datetime(t)


@given(st.floats(min_value=0, max_value=32503680000, allow_nan=False), st.data())
def test_parse_iso_is_datetimes(t: float, data: st.DataObject) -> None:
    text = clock.iso(t)
    if data.draw(st.booleans()):  # a damaged stamp: same answer, None included
        k = data.draw(st.integers(0, len(text) - 1))
        text = text[:k] + data.draw(st.sampled_from("09:-TZ.x ٣")) + text[k + 1 :]
    assert clock.parse_iso(text) == _parse_by_datetime(text)


@pytest.mark.parametrize(
    "text",
    [
        "2024-02-29T23:59:59.999Z",
        "2023-02-29T00:00:00.000Z",
        "1900-02-29T00:00:00.000Z",
        "2000-02-29T12:00:00.000Z",
        "0000-01-01T00:00:00.000Z",
        "2026-01-01T24:00:00.000Z",
        "2026-01-01T00:00:60.000Z",
        "2026-11-29T23:53:52.449123Z",
        "2026-11-29T23:53:52Z",
        "2026-11-29T23:53:52.449+00:00",
        "",
    ],
)
def test_parse_iso_edges(text: str) -> None:
    assert clock.parse_iso(text) == _parse_by_datetime(text)
