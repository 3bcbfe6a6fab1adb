"""The concurrency axis in the analysis: best γ per (workload, concurrency), where speculation
stops paying, and vLLM's num_speculative_tokens_per_batch_size ranges — from measured records."""

from __future__ import annotations

import pandas as pd

from specbench.analysis.concurrency import batch_size_ranges, has_concurrency, scenario_keys, summary

# decode tokens/s of the baseline and of ngram at γ 1 and 3, per concurrency: speculation pays at 1
# and 4 (γ 3 best at 1, γ 1 best at 4) and loses at 16.
SPEED = {1: {0: 10.0, 1: 13.0, 3: 15.0}, 4: {0: 30.0, 1: 33.0, 3: 31.0}, 16: {0: 80.0, 1: 70.0, 3: 60.0}}


def _records() -> pd.DataFrame:
    rows = []
    for concurrency, speeds in SPEED.items():
        for gamma, tps in speeds.items():
            for prompt in ("a", "b"):
                rows.append({"mode": "live", "target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0,
                             "workload": "w", "backend": "vllm", "concurrency": concurrency, "prompt_id": prompt,
                             "turn": 1, "repeat": 0, "drafter": "ngram" if gamma else "none",
                             "drafter_label": "ngram" if gamma else "none", "drafter_params": "{}" if not gamma
                             else '{"n_max": 3, "n_min": 1}', "tree": "chain", "gamma": gamma,
                             "decode_tokens": 100, "decode_s": 100 / tps, "drafted": 10 * gamma,
                             "accepted": 5 * gamma})
    return pd.DataFrame(rows)


def test_best_gamma_per_concurrency_and_where_speculation_stops():
    result = summary(_records())
    best = {r["concurrency"]: (r["gamma"], round(r["speedup"], 3)) for r in result["levels"]}
    assert best == {1: (3, 1.5), 4: (1, 1.1), 16: (0, 0.875)}
    assert result["stops"] == [{"target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "workload": "w",
                                "backend": "vllm", "stops_at": 16}]


def test_vllm_ranges_close_with_k0_and_say_what_the_last_range_means():
    (schedule,) = summary(_records())["schedules"]
    assert schedule["ranges"] == [[1, 3, 3], [4, 15, 1], [16, 16, 0]]
    assert schedule["vllm_config"] == {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3,
                                       "num_speculative_tokens": 3,
                                       "num_speculative_tokens_per_batch_size": [[1, 3, 3], [4, 15, 1], [16, 16, 0]]}
    assert "every batch above it" in schedule["note"]


def test_ranges_when_speculation_still_pays_at_the_largest_level():
    assert batch_size_ranges([1, 8, 32], [4, 4, 2]) == [[1, 31, 4], [32, 32, 2]]
    assert batch_size_ranges([2, 8], [3, 0]) == [[1, 7, 3], [8, 8, 0]]
    records = _records()
    records = records[records["concurrency"] != 16]
    (schedule,) = summary(records)["schedules"]
    assert schedule["ranges"][-1] == [4, 4, 1]
    assert "applies the last range's K = 1 to every larger batch" in schedule["note"]


def test_scenario_keys_add_concurrency_only_when_it_varies():
    records = _records()
    assert scenario_keys(records)[-1] == "concurrency" and has_concurrency(records)
    one = records[records["concurrency"] == 1]
    assert "concurrency" not in scenario_keys(one) and not has_concurrency(one)
    assert "concurrency" not in scenario_keys(one.drop(columns=["concurrency", "backend"]))


def test_recommend_gives_one_answer_per_workload_and_concurrency():
    from specbench.analysis.recommend import recommend
    from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame

    drafter = SyntheticDrafter(alpha=0.8, gammas=(1, 2))
    records = []
    for concurrency, costs in ((1, SyntheticCosts(verify_b_s=0.0005)), (8, SyntheticCosts(verify_b_s=0.05))):
        for r in make_records([drafter], costs=costs, n_prompts=6, max_new_tokens=32, seed=concurrency):
            records.append({**r, "unit_id": f"{r['unit_id']}-c{concurrency}", "backend": "vllm",
                            "concurrency": concurrency})
    recs = recommend(records_frame(records), n_boot=20)
    assert sorted(r.keys["concurrency"] for r in recs) == [1, 8]
    by_level = {r.keys["concurrency"]: r for r in recs}
    assert by_level[1].final is not None  # cheap verification: speculation pays
    assert by_level[8].final is None  # verifying 2-3 tokens costs 2-3× a step: it does not


def test_recommend_json_carries_each_scenarios_concurrency_summary():
    import json

    from specbench.analysis.concurrency import for_scenario
    from specbench.analysis.recommend import recommend, to_json
    from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame

    whole = summary(_records())
    keys = {"target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "workload": "w", "concurrency": 4}
    part = for_scenario(whole, keys)
    assert [r["concurrency"] for r in part["levels"]] == [4]  # only this level's best configuration
    assert part["stops"] == whole["stops"] and part["schedules"] == whole["schedules"]  # workload-wide
    assert for_scenario(whole, {**keys, "workload": "other"})["stops"] == []

    records = []
    for concurrency, costs in ((1, SyntheticCosts(verify_b_s=0.0005)), (8, SyntheticCosts(verify_b_s=0.05))):
        for r in make_records([SyntheticDrafter(alpha=0.8, gammas=(1, 2))], costs=costs, n_prompts=6,
                              max_new_tokens=32, seed=concurrency):
            records.append({**r, "unit_id": f"{r['unit_id']}-c{concurrency}", "backend": "vllm",
                            "concurrency": concurrency})
    frame = records_frame(records)
    recs = recommend(frame, n_boot=0)
    both = summary(frame)
    data = json.loads(to_json(recs, [for_scenario(both, r.keys) for r in recs]))
    assert sorted(d["concurrency"]["levels"][0]["concurrency"] for d in data) == [1, 8]
    assert all(len(d["concurrency"]["levels"]) == 1 for d in data)
    assert all(d["concurrency"] is None for d in json.loads(to_json(recs)))
