"""One duration parser (`specbench.durations.parse_duration`) for every flag and key that takes a time: a latency
target (`--itl-p90 50ms`: units us to s, no bare number) and a sweep's budget (`--budget 20m`: s to d, a bare
number is seconds)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbench.analysis.load.slo import LATENCY_UNITS, parse_latency
from specbench.durations import UNIT_S, parse_duration
from specbench.errors import SpecbenchError
from specbench.measure.grid.adaptive import BUDGET_UNITS, parse_budget


@given(st.floats(0, 1e6, allow_nan=False), st.sampled_from(sorted(UNIT_S)), st.booleans(), st.booleans())
def test_a_number_and_a_unit_is_that_many_units(number, unit, spaced, upper):
    shown = unit.upper() if upper and unit.isascii() else unit  # (µ's upper case is Greek Mu, another letter)
    text = f"{number:.6f}{' ' if spaced else ''}{shown}"
    assert parse_duration(text, UNIT_S) == pytest.approx(float(f"{number:.6f}") * UNIT_S[unit])
    others = [u for u in UNIT_S if UNIT_S[u] != UNIT_S[unit]]
    assert parse_duration(text, others) is None  # a unit the caller does not take


@pytest.mark.parametrize("value", [True, "", "ms", "-3ms", "1e3s", "3 m s", "fast", None, [1]])
def test_what_is_no_duration(value):
    assert parse_duration(value, UNIT_S, bare=True) is None


def test_a_bare_number_counts_only_where_the_caller_says_seconds():
    assert parse_duration("600", UNIT_S) is None and parse_duration(600, UNIT_S) is None
    assert parse_duration("600", UNIT_S, bare=True) == 600 and parse_duration(1.5, UNIT_S, bare=True) == 1.5


def test_each_caller_takes_its_units_and_words_its_errors():
    assert parse_latency("500us", "--itl-p90") == pytest.approx(5e-4) and parse_budget("1.5h", "s.yaml") == 5400
    assert set(LATENCY_UNITS) | set(BUDGET_UNITS) <= set(UNIT_S)
    with pytest.raises(SpecbenchError, match="--itl-p90 takes a duration with its unit"):
        parse_latency("20m", "--itl-p90")  # minutes are no latency
    with pytest.raises(SpecbenchError, match="budget must be a duration such as 90s, 20m or 1.5h, got '50ms'"):
        parse_budget("50ms", "s.yaml: adaptive.budget")
    with pytest.raises(SpecbenchError, match="got True"):
        parse_budget(True, "s.yaml: adaptive.budget")
