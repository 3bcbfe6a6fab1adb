"""specbench.analysis.stream_adaptation on synthetic per-prompt tables with a known truth: the verdict's three answers with
and without the training seconds, disturbed timing never confident, windows cut at shift points, recovery."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.stream_adaptation import online_verdict, recovery_table, shift_points, window_table

SCENARIO = {"target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "workload": "stream"}
SEGMENTS = ["code"] * 10 + ["chat"] * 10


def config_rows(label: str, strategy: str, *, tokens_per_s, alpha, train_s=0.0, timing_ok=True, seed=0) -> list:
    """One row per stream prompt; ``alpha`` and ``tokens_per_s`` are per-position arrays (or numbers)."""
    rng = np.random.default_rng(seed)
    rows = []
    for position, segment in enumerate(SEGMENTS):
        a = alpha[position] if np.ndim(alpha) else alpha
        rate = (tokens_per_s[position] if np.ndim(tokens_per_s) else tokens_per_s) * rng.uniform(0.97, 1.03)
        drafted = 60
        accepted = round(a * drafted)
        rounds = 20
        tokens = rounds + accepted
        rows.append(
            {
                **SCENARIO,
                "prompt_id": f"p{position}",
                "position": position,
                "stream_segment": segment,
                "drafter": "eagle3",
                "drafter_params": "{}",
                "drafter_label": label,
                "tree": "chain",
                "gamma": 3,
                "schedule": "fixed",
                "strategy": strategy,
                "start": "checkpoint" if strategy == "online" else "",
                "loss": "accepted" if strategy == "online" else "",
                "version": float(position // 2) if strategy == "online" else math.nan,
                "version_end": float(position // 2 + 1) if strategy == "online" else math.nan,
                "accepted": accepted,
                "drafted": drafted,
                "rounds": rounds,
                "decode_tokens": tokens,
                "decode_s": tokens / rate,
                "online_train_s": train_s,
                "base_tokens": 40,
                "base_s": 40 / 10.0,
                "timing_ok": timing_ok,
            }
        )
    return rows


def table(online_rate, static_rate=10.0, train_s=0.0, timing_ok=True) -> pd.DataFrame:
    static = config_rows("eagle3", "sequential", tokens_per_s=static_rate, alpha=0.3, seed=1)
    online = config_rows(
        "eagle3 online", "online", tokens_per_s=online_rate, alpha=0.5, train_s=train_s, timing_ok=timing_ok, seed=2
    )
    return pd.DataFrame(static + online)


def answers(verdict) -> dict:
    return {d["deployment"]: (d["answer"], d["confident"]) for d in verdict["deployments"]}


def test_faster_online_drafter_pays_elsewhere_but_not_when_training_shares_the_machine():
    verdict = online_verdict(table(online_rate=13.0, train_s=3.0), SCENARIO)
    assert answers(verdict) == {"separate": ("confident yes", True), "shared": ("confident no", True)}
    separate, shared = verdict["deployments"]
    assert separate["ratio"] == pytest.approx(1.3, rel=0.05)
    assert verdict["tau_ratio"][0]["ratio"] > 1  # α 0.5 vs 0.3: more tokens per target forward


def test_equal_speed_cannot_tell_and_says_how_many_prompts_would_settle_it():
    verdict = online_verdict(table(online_rate=10.0), SCENARIO)
    assert answers(verdict)["separate"] == ("cannot tell", False)


@pytest.mark.parametrize("timing_ok", [False, [True, True] + [False] * 18])
def test_disturbed_timing_is_never_confident(timing_ok):
    frame = table(online_rate=13.0, train_s=3.0)
    online = frame["strategy"] == "online"
    frame.loc[online, "timing_ok"] = timing_ok if isinstance(timing_ok, bool) else np.array(timing_ok)
    verdict = online_verdict(frame, SCENARIO)
    assert {d["answer"] for d in verdict["deployments"]} == {"confident yes", "confident no"}
    assert not any(d["confident"] for d in verdict["deployments"])
    assert all("interference" in d["text"] for d in verdict["deployments"])


def test_disturbed_prompts_are_left_out_when_enough_clean_ones_remain():
    frame = table(online_rate=13.0)
    slow = (frame["strategy"] == "online") & (frame["position"] < 5)
    frame.loc[slow, "decode_s"] *= 10  # a noisy neighbour during the first five prompts, flagged as such
    frame.loc[slow, "timing_ok"] = False
    separate = online_verdict(frame, SCENARIO)["deployments"][0]
    assert (separate["answer"], separate["confident"]) == ("confident yes", True)
    assert separate["candidates"][0]["n_prompts"] == 15


def test_windows_never_cross_a_shift_point_and_recovery_counts_prompts():
    frame = table(online_rate=10.0)
    assert shift_points(frame) == [(10, "chat")]
    windows = window_table(frame, window=4)
    for _, w in windows.iterrows():
        assert {SEGMENTS[p] for p in range(w["first"], w["last"] + 1)} == {w["stream_segment"]}
    assert list(windows[windows["drafter_label"] == "eagle3"]["prompts"]) == [4, 4, 2, 4, 4, 2]
    # the online drafter starts the chat segment at α 0.1 and reaches its level 0.5 from the 4th prompt on
    alpha = [0.5] * 10 + [0.1, 0.2, 0.3] + [0.5] * 7
    online = pd.DataFrame(config_rows("eagle3 online", "online", tokens_per_s=10.0, alpha=alpha))
    frame = pd.concat([frame[frame["strategy"] == "sequential"], online])
    recovery = recovery_table(frame, window=1).set_index("drafter_label")
    row = recovery.loc["eagle3 online"]
    assert (row["shift_at"], row["recover_prompts"], row["beats_static_at"]) == (10, 3, 3)
    assert row["alpha_first"] == pytest.approx(0.1, abs=0.02)
