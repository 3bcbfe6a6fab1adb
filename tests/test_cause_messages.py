"""Messages name the real cause (issue 47, items 8 and 9): each case is refused, or reported, for what is really
wrong — with the limit that applies stated — and nothing else reaches the user's terminal."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.backends import prometheus
from specbench.errors import SpecbenchError

# ----------------------------------------------------------------------------- /metrics counters


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    series=st.sampled_from(prometheus.SPEC_SERIES),
    value=st.sampled_from([1e30, 2.0**53 + 2, -1.0, float("inf"), float("-inf"), float("nan")])
    | st.floats(min_value=2.0**53 * 1.0001, allow_infinity=False)
    | st.floats(max_value=-1e-9, allow_infinity=False),
)
def test_a_counter_beyond_what_a_float_counts_is_refused_with_the_limit(series, value):
    """1e30 is finite and ≥ 0: the limit it breaks is 2^53 (above it a float skips whole counts), and the message
    says so — for every series specbench reads, whatever the value."""
    page = f"# TYPE {series} counter\n{series} {value!r}\n".replace("inf", "Inf").replace("nan", "NaN")
    try:
        prometheus.parse(page, server="http://127.0.0.1:1")
    except SpecbenchError as exc:
        message = str(exc)
    else:
        raise AssertionError(f"{series} {value!r} was accepted")
    assert f"{series} must be a count from 0 to 2^53" in message and "\n" not in message, message


@settings(max_examples=20, deadline=None, derandomize=True)
@given(series=st.sampled_from(prometheus.SPEC_SERIES), value=st.integers(0, 2**53))
def test_every_count_up_to_the_limit_is_read(series, value):
    scrape = prometheus.parse(f"# TYPE {series} counter\n{series} {value}\n")
    assert scrape.samples[(series, ())] == float(value)
