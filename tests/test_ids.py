"""Message ids: ULID strings that python-ulid (the reference) accepts, time-ordered per process."""

from __future__ import annotations

import itertools
import time

import pytest
from ulid import ULID

from omp import ids

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


@pytest.fixture(autouse=True)
def _fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    # new_id keeps the last millisecond and random part; start every test from a clean slate so
    # an explicit now_ms in one test cannot hold later ids back.
    monkeypatch.setattr(ids, "_last_ms", -1)
    monkeypatch.setattr(ids, "_last_rand", 0)


def test_an_id_is_a_ulid_carrying_the_current_time() -> None:
    before = time.time_ns() // 1_000_000
    value = ids.new_id()
    after = time.time_ns() // 1_000_000
    assert len(value) == 26 and set(value) <= CROCKFORD
    parsed = ULID.from_str(value)
    assert str(parsed) == value
    assert before <= parsed.milliseconds <= after


@pytest.mark.parametrize("ms", [0, 1, 1_700_000_000_123, (1 << 48) - 1])
def test_the_time_part_is_exactly_the_millisecond_given(ms: int) -> None:
    assert ULID.from_str(ids.new_id(ms)).milliseconds == ms


def test_ids_within_one_millisecond_are_strictly_increasing() -> None:
    values = [ids.new_id(1_700_000_000_000) for _ in range(2000)]
    assert values == sorted(values)
    assert len(set(values)) == len(values)
    ints = [int(ULID.from_str(v)) for v in values]
    assert all(b == a + 1 for a, b in itertools.pairwise(ints))


def test_a_clock_step_backwards_never_reorders_ids() -> None:
    a = ids.new_id(2_000_000)
    b = ids.new_id(1_000_000)  # the wall clock went back
    c = ids.new_id(2_000_000)
    assert a < b < c
    assert ULID.from_str(b).milliseconds == 2_000_000


def test_ids_across_milliseconds_sort_by_time() -> None:
    values = [ids.new_id(1_000 + i) for i in range(50)]
    assert values == sorted(values)
    assert [ULID.from_str(v).milliseconds for v in values] == [1_000 + i for i in range(50)]


def test_many_real_time_ids_are_unique_and_valid() -> None:
    values = [ids.new_id() for _ in range(20_000)]
    assert len(set(values)) == len(values)
    assert values == sorted(values)
    for v in values[::997]:
        ULID.from_str(v)


def test_the_random_part_is_random_across_milliseconds() -> None:
    # 80 random bits per new millisecond: two different milliseconds never share them here.
    rand = [int(ULID.from_str(ids.new_id(5_000 + i))) & ((1 << 80) - 1) for i in range(20)]
    assert len(set(rand)) == 20
