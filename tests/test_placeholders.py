"""No placeholder inside a sentence: where a quantity is missing, the sentence says what is missing.

Before, a missing value was formatted as a placeholder and the placeholder went into the sentence: "best - -"
in the stopping history's last line, "- γ=-" and "–× [–, –]" in the HTML report. The words now come from
builders that take the missing case themselves (`speedup_words`, `best_phrase`, `Decision.headline`,
`recommendation_lines`, the crossover's `describe`, the report's `interval`). These properties feed them
records, looks and verdicts with quantities missing (None, NaN, absent keys) and check the text.
"""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.analysis.load.crossover import crossover, describe
from specbench.analysis.load.verdicts import verdicts
from specbench.analysis.options import Option
from specbench.analysis.recommendation.result import Recommendation, recommendation_lines
from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.stopping_history import History
from specbench.analysis.verdicts.stopping_report import look_rows, summary_lines
from specbench.analysis.verdicts.verdict import NO, TOO_FEW, UNSURE, YES, Candidate, Decision

SETTINGS = settings(
    deadline=None, derandomize=True, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
PLACEHOLDER = re.compile(r"(^|[\s=(\[:,])[-–?]($|[\s×,\])];])|\b(nan|NaN|None|inf)\b|γ=(-|–|None|\?)|×\s*\[[-–]")


def assert_no_placeholder(text: str) -> None:
    found = PLACEHOLDER.search(text)
    assert found is None, f"placeholder {found.group(0)!r} in: {text}"


missing = st.sampled_from([None, float("nan"), float("inf")])
number = st.one_of(missing, st.floats(0.2, 3.0))
answers = st.sampled_from([YES, NO, UNSURE, TOO_FEW, "mixed", None])


@st.composite
def best_dicts(draw):
    """A verdict's best option as stored in adaptive.json (`Candidate.from_dict` reads it), any field missing or
    absent."""
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    fields = {
        "drafter_label": st.one_of(st.none(), st.just("ngram(n_max=3)")),
        "tree": st.sampled_from(["chain", None]),
        "gamma": st.one_of(st.none(), st.integers(1, 6)),
        "speedup": number,
        "lo_adj": number,
        "hi_adj": number,
        "hi_sim": number,
        "timing_disturbed": st.booleans(),
    }
    keep = draw(st.sets(st.sampled_from(sorted(fields))))
    return {k: draw(fields[k]) for k in keep}


@st.composite
def histories(draw):
    workloads = {}
    for name in draw(
        st.lists(st.sampled_from(["humaneval", "mt-bench", "sharegpt"]), min_size=1, max_size=3, unique=True)
    ):
        looks = []
        for i in range(draw(st.integers(0, 3))):
            scenarios = [
                {
                    "keys": draw(
                        st.sampled_from(
                            [{}, {"concurrency": c}, {"request_rate": 2.0}, {"concurrency": c, "backend": "vllm"}]
                        )
                    ),
                    "answer": draw(answers),
                    "best": draw(best_dicts()),
                    "timing_disturbed": draw(st.booleans()),
                }
                for c in draw(st.lists(st.integers(1, 8), max_size=3))
            ]
            looks.append(
                {
                    "look": i + 1,
                    "prompts": 8 * (i + 1),
                    "calibration_prompts": draw(st.none() | st.just(4)),
                    "answer": draw(answers),
                    "best": draw(best_dicts()),
                    "scenarios": scenarios,
                    "prompts_needed": draw(st.none() | st.integers(1, 500)),
                    "dropped": [],
                }
            )
        workloads[name] = {
            "status": draw(st.sampled_from(["decided", "open", "budget", "prompts exhausted", "futile"])),
            "planned": [8, 16, 24],
            "looks": looks,
            "seconds": draw(st.none() | st.floats(0, 500)),
        }
    return {"workloads": workloads, "elapsed_s": 10.0}


@SETTINGS
@given(histories())
def test_stopping_history_words_say_what_is_missing(history):
    history = History.from_dict(history)  # adaptive.json as written, read back typed
    for line in summary_lines(history):
        assert_no_placeholder(line)
    for row in look_rows(history):
        for key in ("workload", "said", "best", "interval", "dropped"):
            assert_no_placeholder(str(row[key]))


@SETTINGS
@given(histories())
def test_the_html_stopping_section_says_what_is_missing(history):
    from types import SimpleNamespace

    from specbench.figures.report_sections.stopping import stopping_section

    html = stopping_section(SimpleNamespace(history=History.from_dict(history)))
    for cell in re.findall(r"<td[^>]*>(.*?)</td>|<li>(.*?)</li>", html):
        assert_no_placeholder(" ".join(cell))


@SETTINGS
@given(number, number, number)
def test_speedup_words_and_report_cells(point, lo, hi):
    from specbench.figures.report import interval

    assert_no_placeholder(speedup_words(point, lo, hi))
    assert_no_placeholder(interval(point, lo, hi, 2, "×"))


def _option(speedup, lo, hi) -> Option:
    return Option("ngram", "ngram(n_max=3)", "{}", "chain", 2, speedup, lo, hi, float("nan"), True)


@SETTINGS
@given(
    answers.filter(lambda a: a is not None and a != "mixed"),
    best_dicts(),
    number,
    number,
    number,
    st.booleans(),
    st.integers(0, 40),
)
def test_verdict_words_say_what_is_missing(answer, best, speedup, lo, hi, disturbed, prompts):
    option = _option(speedup, lo, hi) if answer == YES else None
    decision = Decision(
        answer,
        "measured",
        option,
        Candidate.from_dict(best),
        None,
        prompts,
        "text",
        timing_disturbed=disturbed,
        rule={"configurations": 2},
    )
    keys = {"workload": "w", "target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "concurrency": 2}
    rec = Recommendation(
        keys=keys,
        cost_source="own",
        objective="throughput",
        n_prompts=prompts,
        max_new_tokens=64,
        verdict="v",
        decision=decision,
    )
    for text in (decision.headline(), decision.short(), *recommendation_lines(rec), rec.headline()):
        assert_no_placeholder(text)
    (row,) = verdicts([rec], "concurrency", "vllm")
    assert_no_placeholder(row.short)
    assert_no_placeholder(row.headline)


@SETTINGS
@given(st.lists(st.tuples(number, number, number), min_size=1, max_size=5))
def test_crossover_words_say_what_is_missing(levels):
    ratios, lows, highs = (list(v) for v in zip(*levels))
    loads = [2**i for i in range(len(levels))]
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = crossover(loads, ratios, lows, highs)
    assert_no_placeholder(describe(curve, "requests in flight"))
    assert_no_placeholder(describe(curve, "requests/s", "kept", "over the target"))


def test_the_detector_finds_the_placeholders_that_leaked():
    """The cases of the report: each would have passed before only if the detector missed it."""
    for leaked in (
        "mt-bench: cannot tell within the budget (look 1 of 3, 8 prompts) — best - -",
        "- γ=-",
        "–× [–, –]",
        "best ngram γ=2 at nan× [nan, nan]",
        "best None γ=None",
    ):
        assert PLACEHOLDER.search(leaked), leaked
    for fine in (
        "γ 2–4 within the interval",
        "pays up to about 2 requests in flight [95 %: ≤1–>4]",
        "ngram(n_max=3,n_min=1) γ=2 — confident yes",
        "1.25× [1.08, 1.45]",
    ):
        assert PLACEHOLDER.search(fine) is None, fine
