"""Offline replay (`specbench.measure.replay.replayer`, `specbench.measure.replay.units`, `specbench sweep --mode`).

* the round walk against a direct simulation of the live loop's rules, and its moments against
  Monte Carlo;
* greedy exactness on SmolLM2-135M: replayed rounds == live rounds (accepted lengths, drafted
  tokens, drafter forwards, τ) for prompt lookup and the early-exit draft model, including
  generations that stop at the end-of-turn token;
* sampling: live τ inside the replay's prediction interval for most configurations on tiny
  random models, and the coupled coins unbiased for the live rounds;
* the CLI: --mode replay / both, resume, errors; summary, fit and recommend keep replayed rows
  apart from measurements.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError
from specbench.measure.replay.replayer import ChainTrace, Replayer, Trajectory, replay_chain, round_law, walk_rounds
from specbench.measure.replay.units import predict
from specbench.records.store import load_records
from tests.cli_helpers import assert_user_error, invoke, tiny_sweep_yaml

GREEDY = SamplingParams()


# ----------------------------------------------------------------------------- the walk


def simulate_live_rules(accept: np.ndarray, available: np.ndarray, gamma: int, n_stop: int, max_new: int):
    """The live loop's bookkeeping written out plainly, for deterministic coins (test oracle)."""
    rounds, t = [], 1
    while t < n_stop:
        k = min(gamma, max_new - t - 1, int(available[t - 1]))
        j = 0
        while j < k and accept[t - 1, j] == 1:
            j += 1
        emitted = min(j + 1, n_stop - t)
        rounds.append((k, j, emitted))
        t += emitted
    return rounds


@pytest.mark.parametrize("n_stop,max_new", [(30, 30), (17, 30), (2, 30), (1, 30)])
def test_deterministic_walk_follows_the_live_rules(n_stop, max_new):
    rng = np.random.default_rng(n_stop)
    starts, depth = max(n_stop - 1, 0), 6
    trace = ChainTrace(
        "test",
        (rng.random((starts, depth)) < 0.6).astype(float),
        rng.integers(0, depth + 1, starts),
        model_steps=False,
        exact=True,
    )
    for replay in replay_chain(trace, Trajectory((1,), tuple(range(max_new)), n_stop, max_new), [1, 2, 4, 6]):
        expected = simulate_live_rules(trace.accept, trace.available, replay.gamma, n_stop, max_new)
        r = replay.rounds
        assert list(zip(r.drafted, r.accepted, r.emitted)) == expected
        assert sum(r.emitted) == max(n_stop - 1, 0)
        assert np.allclose(replay.mean, [len(expected), sum(j for _, j, _ in expected), sum(k for k, _, _ in expected)])
        assert np.allclose(replay.coin_cov, 0.0)
        assert replay.hist.sum() == pytest.approx(len(expected))
        assert replay.attempts.sum() >= replay.accepts.sum()


def test_fractional_walk_moments_match_monte_carlo():
    """Forward expectations = backward first moments; covariance and histogram agree with sampled paths."""
    rng = np.random.default_rng(1)
    n_stop, max_new, depth = 25, 25, 4
    trace = ChainTrace(
        "test", rng.uniform(0.2, 0.9, (n_stop - 1, depth)), np.full(n_stop - 1, depth), model_steps=True, exact=False
    )
    law = round_law(trace, [1, 4], n_stop, max_new)
    replays = walk_rounds(law, np.random.default_rng(0))
    draws = 4000
    for g, replay in enumerate(replays):
        paths = [walk_one(law, g, rng) for _ in range(draws)]
        sample = np.array([(len(p.accepted), sum(p.accepted), sum(p.drafted)) for p in paths], float)
        se = sample.std(0) / np.sqrt(draws)
        assert np.all(np.abs(sample.mean(0) - replay.mean) < 5 * se + 1e-9)
        assert np.allclose(np.cov(sample.T), replay.coin_cov, rtol=0.15, atol=0.05)
        hist = np.bincount(np.concatenate([p.accepted for p in paths]), minlength=replay.gamma + 1) / draws
        assert np.allclose(hist, replay.hist, atol=0.08)
        assert all(s == k for p in paths for s, k in zip(p.draft_steps, p.requested))


def walk_one(law, g, rng):
    from specbench.measure.replay.replayer import _realise

    return _realise(law, g, rng)


# ----------------------------------------------------------------------------- greedy exactness

EXACT_PROMPTS = (0, 2, 3)  # a length-capped answer and two that end with <|im_end|>
EXACT_TOKENS = 32
EXACT_GAMMAS = (1, 3, 6)


@pytest.fixture(scope="module")
def greedy_replays(smollm2, smollm2_prompt_ids, early_exit_drafter):
    """Baselines (the trajectories) and the replay of every drafter and γ from them."""
    drafters = {"ngram": make_drafter("ngram", smollm2), "draft-model": early_exit_drafter}
    replayer = Replayer(smollm2)
    baseline = SpeculativeEngine(smollm2, None, gamma=0)
    cases = []
    for index in EXACT_PROMPTS:
        ids = smollm2_prompt_ids[index]
        base = baseline.generate(ids, EXACT_TOKENS)
        trajectory = replayer.trajectory(
            ids,
            base.tokens,
            stop_reason=base.stop_reason,
            max_new_tokens=EXACT_TOKENS,
            max_gamma=max(EXACT_GAMMAS),
            sampling=GREEDY,
            seed=0,
        )
        for name, drafter in drafters.items():
            trace = replayer.trace(drafter, trajectory, max(EXACT_GAMMAS), GREEDY)
            cases.append(
                (ids, base, name, drafter, {r.gamma: r for r in replay_chain(trace, trajectory, EXACT_GAMMAS)})
            )
    return cases


@pytest.mark.parametrize("gamma", EXACT_GAMMAS)
def test_greedy_replay_reproduces_live_rounds_exactly(smollm2, greedy_replays, gamma):
    stops, accepted = set(), 0
    for ids, base, name, drafter, replays in greedy_replays:
        live = SpeculativeEngine(smollm2, drafter, gamma=gamma).generate(ids, EXACT_TOKENS)
        replay = replays[gamma]
        assert live.tokens == base.tokens
        rounds = replay.rounds
        assert live.rounds.accepted == rounds.accepted, (name, gamma)
        assert live.rounds.drafted == rounds.drafted and live.rounds.emitted == rounds.emitted
        assert live.rounds.draft_steps == rounds.draft_steps
        assert live.tau == replay.tau and replay.exact  # τ equal as floats: same integers
        assert live.accepted == replay.mean[1] and live.drafted == replay.mean[2]
        assert live.accepted_length_histogram(gamma).tolist() == replay.hist.tolist()
        attempts, accepts = live.position_counts(gamma)
        assert attempts.tolist() == replay.attempts.tolist() and accepts.tolist() == replay.accepts.tolist()
        stops.add(base.stop_reason)
        accepted += live.accepted
    assert stops == {"eos", "length"} and accepted > 0  # both endings covered, something accepted


# ----------------------------------------------------------------------------- sampling


@pytest.fixture(scope="module")
def v8_models(tiny_v8):
    target, _ = tiny_v8
    return target, {
        "ngram": make_drafter("ngram", target),
        "draft-model": make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"}),
    }


def test_sampling_live_tau_inside_replay_interval(v8_models, record_property):
    """On tiny random models: live τ over 6 prompts inside the replay's 95% prediction interval."""
    target, drafters = v8_models
    rng = np.random.default_rng(0)
    new, gammas, inside = 32, (1, 2, 4), []
    replayer = Replayer(target)
    for temperature in (0.7, 1.0):
        sampling = SamplingParams(temperature)
        prompts = [rng.integers(0, 8, 16).tolist() for _ in range(6)]
        base = SpeculativeEngine(target, None, gamma=0, sampling=sampling)
        outputs = [base.generate(p, new, seed=100 + i, stop_at_eos=False).tokens for i, p in enumerate(prompts)]
        for name, drafter in drafters.items():
            moments = {g: [] for g in gammas}
            for i, (prompt, output) in enumerate(zip(prompts, outputs)):
                trajectory = replayer.trajectory(
                    prompt,
                    output,
                    stop_reason="length",
                    max_new_tokens=new,
                    max_gamma=max(gammas),
                    sampling=sampling,
                    seed=i,
                )
                trace = replayer.trace(drafter, trajectory, max(gammas), sampling)
                assert trace.exact == (name == "ngram")
                for r in replay_chain(trace, trajectory, gammas, seed=i):
                    moments[r.gamma].append(vars(r))
            for gamma in gammas:
                pred = predict(pd.DataFrame(moments[gamma]), greedy=False)
                engine = SpeculativeEngine(target, drafter, gamma=gamma, sampling=sampling)
                lives = [engine.generate(p, new, seed=7 + i, stop_at_eos=False) for i, p in enumerate(prompts)]
                tau = sum(x.decode_tokens for x in lives) / sum(x.target_forwards for x in lives)
                inside.append(pred["tau_lo"] <= tau <= pred["tau_hi"])
    fraction = float(np.mean(inside))
    record_property("live_tau_inside_replay_interval", f"{sum(inside)}/{len(inside)}")
    print(f"live τ inside the replay interval: {sum(inside)}/{len(inside)} configurations")
    assert fraction >= 0.75


def test_prompt_lookup_replay_of_a_sampled_live_output_is_its_rounds(v8_models):
    """One-hot drafts: a live round keeps drafts equal to the output and rejects with a token that
    differs from the draft, so the rounds are a function of the output — replay must recover them."""
    target, drafters = v8_models
    prompt = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 3, 6, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    sampling, replayer, accepted = SamplingParams(1.0), Replayer(target), 0
    for gamma in (2, 4):
        engine = SpeculativeEngine(target, drafters["ngram"], gamma=gamma, sampling=sampling)
        for seed in range(15):
            live = engine.generate(prompt, 24, seed=seed, stop_at_eos=False)
            trajectory = replayer.trajectory(
                prompt, live.tokens, stop_reason="length", max_new_tokens=24, max_gamma=gamma, sampling=sampling, seed=0
            )
            rounds = replay_chain(replayer.trace(drafters["ngram"], trajectory, gamma, sampling), trajectory, [gamma])[
                0
            ].rounds
            assert rounds.accepted == live.rounds.accepted and rounds.drafted == live.rounds.drafted
            accepted += live.accepted
    assert accepted > 0


def test_coupled_coins_are_unbiased_for_live_rounds(v8_models):
    """E over trajectories of E[rounds | trajectory] = E[live rounds] (the coupling theorem)."""
    target, drafters = v8_models
    prompt = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 3, 6, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    sampling, new, gamma, runs = SamplingParams(1.0), 12, 3, 80
    replayer = Replayer(target)
    base = SpeculativeEngine(target, None, gamma=0, sampling=sampling)
    outputs = [base.generate(prompt, new, seed=s, stop_at_eos=False).tokens for s in range(runs)]
    for name, drafter in drafters.items():
        replayed, coin_minus_expected = [], []
        for s, output in enumerate(outputs):
            trajectory = replayer.trajectory(
                prompt, output, stop_reason="length", max_new_tokens=new, max_gamma=gamma, sampling=sampling, seed=s
            )
            trace = replayer.trace(drafter, trajectory, gamma, sampling)
            replayed.append(replay_chain(trace, trajectory, [gamma], seed=s)[0].mean[:2])
            if trace.expected is not None:  # w_t − Σ min(p_t, q_t) has mean 0 given y_<t
                coin_minus_expected.extend(trace.accept[:, 0] - trace.expected)
        if coin_minus_expected:
            d = np.asarray(coin_minus_expected)
            assert abs(d.mean()) < 4 * d.std() / np.sqrt(len(d))
        engine = SpeculativeEngine(target, drafter, gamma=gamma, sampling=sampling)
        live = np.array(
            [
                (r.target_forwards, r.accepted)
                for r in (engine.generate(prompt, new, seed=10_000 + s, stop_at_eos=False) for s in range(runs))
            ],
            float,
        )
        replayed = np.array(replayed)
        se = np.sqrt(live.var(0) / runs + replayed.var(0) / runs)
        assert np.all(np.abs(live.mean(0) - replayed.mean(0)) < 4 * se), (name, live.mean(0), replayed.mean(0), se)


# ----------------------------------------------------------------------------- the CLI


def sweep_yaml(tmp_path: Path, prompts_file: Path, **overrides) -> Path:
    # These tests are about replay, not interference: a calibration unit set aside as disturbed (another xdist
    # worker's CPU-heavy test beside it) would leave the replayed rows without a cost model, by design.
    return tiny_sweep_yaml(
        tmp_path,
        prompts_file,
        **{
            "name": "tiny-replay",
            "max_new_tokens": 16,
            "gammas": [1, 2, 4],
            "timing": {"max_other_cores": 1000},
            **overrides,
        },
    )


def test_mode_replay_runs_calibration_live_and_replays_every_gamma(tmp_path, prompts_file):
    out = tmp_path / "replay"
    spec = sweep_yaml(tmp_path, prompts_file, calibration={"gammas": [1, 4], "prompts": 1})
    result = invoke("sweep", spec, "--mode", "replay", "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    live, replay = df[df["mode"] == "live"], df[df["mode"] == "replay"]
    assert (live[live.gamma == 0]["prompt_id"].nunique()) == 3  # the baseline on every prompt
    calibration = live[live.gamma > 0]
    assert set(calibration["gamma"]) == {1, 4} and calibration["prompt_id"].nunique() == 1
    assert len(calibration) == 2 * 2  # 2 drafters × 2 calibration γ × 1 prompt
    assert len(replay) == 2 * 3 * 3 and df["unit_id"].is_unique  # 2 drafters × 3 γ × 3 prompts
    assert (replay["tau"] - replay["decode_tokens"] / replay["rounds"]).abs().max() < 1e-12
    assert replay[["decode_s", "prefill_s", "tokens_per_s"]].notna().all().all()  # timings from the cost model
    assert (replay["round_verify_s"].map(len) == replay["rounds"]).all()
    # calibration units were also replayed: greedy replay equals them exactly
    paired = calibration.merge(
        replay, on=["drafter_label", "gamma", "prompt_id", "turn", "repeat"], suffixes=("", "_r")
    )
    assert len(paired) == 4 and (paired["round_accepted"].map(list) == paired["round_accepted_r"].map(list)).all()
    assert "identical τ for 4/4 configurations" in result.stdout
    summary = pd.read_csv(out / "replay-summary.csv")
    assert len(summary) == 6 and summary["exact"].all()
    assert len(list((out / "replay").glob("unit-*.json"))) == len(replay)

    shown = invoke("results", "show", out)
    assert shown.exit_code == 0 and "replay" in shown.stdout and "pred" in shown.stdout
    assert invoke("fit", out).exit_code == 0
    rec = invoke("recommend", out, "--json", "--bootstrap", "40")
    assert rec.exit_code == 0, rec.output
    for scenario in json.loads(rec.stdout):
        assert {o["gamma"] for o in scenario["options"]} <= {1, 4}  # measured options: live units only
        assert not any(p["measured"] for p in scenario["predictions"] if p["gamma"] == 2)

    again = invoke("sweep", spec, "--mode", "replay", "--out", out)  # resume: nothing left
    assert again.exit_code == 0 and "0 unit(s) measured now" in again.stdout
    assert len(load_records(out)) == len(df)


def test_mode_both_reports_agreement_and_extends_a_live_folder(tmp_path, prompts_file):
    out = tmp_path / "both"
    spec = sweep_yaml(tmp_path, prompts_file, drafters=[{"type": "ngram"}], gammas=[2], temperatures=[0.0, 1.0])
    assert invoke("sweep", spec, "--out", out).exit_code == 0  # a live sweep first
    live_ids = set(load_records(out)["unit_id"])
    result = invoke("sweep", spec, "--mode", "both", "--out", out)  # same spec hash: no --force needed
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert live_ids <= set(df["unit_id"]) and (df["mode"] == "replay").sum() == 2 * 3
    assert "identical τ for 1/1" in result.stdout and "sampling: live τ inside the replay interval" in result.stdout
    summary = pd.read_csv(out / "replay-summary.csv")
    greedy = summary[summary.temperature == 0].iloc[0]
    assert greedy["tau_diff"] == 0 and greedy["agrees"]
    sampled = summary[summary.temperature == 1.0].iloc[0]
    assert sampled["tau_lo"] <= sampled["tau"] <= sampled["tau_hi"] and sampled["n_live"] == 3


def test_dry_run_counts_replayed_units(tmp_path, prompts_file):
    result = invoke("sweep", sweep_yaml(tmp_path, prompts_file), "--mode", "replay", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "18 replayed units" in result.stdout and "mode replay" in result.stdout


@pytest.mark.parametrize(
    "extra,flags,needles",
    [
        ({}, ["--mode", "replya"], ["unknown mode 'replya'", "replay"]),
        ({"calibration": {"gammas": [3]}}, ["--mode", "replay"], ["calibration γ [3]", "[1, 2, 4]"]),
        ({"calibration": {"gamas": [1]}}, ["--mode", "replay"], ["calibration", "gammas and prompts"]),
        ({"calibration": {"prompts": 0}}, ["--mode", "replay"], ["calibration.prompts", "an integer from 1"]),
        ({"mode": "both", "calibration": [1]}, [], ["'calibration' must be a mapping"]),
        ({"trees": ["chain", "2x1"]}, ["--mode", "both"], ["replays chains only", "2x1"]),
    ],
)
def test_bad_replay_settings(tmp_path, prompts_file, extra, flags, needles):
    assert_user_error(
        invoke("sweep", sweep_yaml(tmp_path, prompts_file, **extra), *flags, "--out", tmp_path / "o"), *needles
    )


def test_mode_does_not_change_the_spec_hash():
    from specbench.measure.grid.sweep import build_spec

    raw = {"name": "h", "drafters": ["ngram"], "gammas": [1, 2], "workloads": ["mt-bench"]}
    hashes = {build_spec({**raw, "mode": m}).spec_hash for m in ("live", "replay", "both")}
    assert len(hashes) == 1
    assert build_spec({**raw, "mode": "replay"}).calibration.gammas == (1, 2)


def test_a_workload_entry_sets_its_own_output_length():
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.grid.units import expand_units, load_workloads

    raw = {
        "name": "h",
        "drafters": ["ngram"],
        "gammas": [1],
        "max_new_tokens": 16,
        "workloads": [{"name": "mt-bench", "count": 1}, {"name": "humaneval", "count": 1, "max_new_tokens": 40}],
    }
    spec = build_spec(raw)
    lengths = {(u.workload.name, u.max_new_tokens) for u in expand_units(spec, load_workloads(spec))}
    assert lengths == {("mt-bench", 16), ("humaneval", 40)}
    plain = {**raw, "workloads": [{"name": "mt-bench", "count": 1}, {"name": "humaneval", "count": 1}]}
    assert "max_new_tokens" not in build_spec(plain).to_dict()["workloads"][1]  # unset: old hashes stand
    assert build_spec(plain).spec_hash != spec.spec_hash
    with pytest.raises(SpecbenchError, match="max_new_tokens"):
        build_spec({**raw, "workloads": [{"name": "humaneval", "max_new_tokens": 0}]})


# ----------------------------------------------------------------------------- downstream code


def with_replayed_copies(records: pd.DataFrame, speed: float = 100.0) -> pd.DataFrame:
    """Every speculative record again as a 'replay' row whose timings claim ``speed``× faster decoding."""
    spec = records[records["gamma"] > 0].copy()
    spec["mode"] = "replay"
    spec["unit_id"] = spec["unit_id"] + "-replay"
    spec["decode_s"] = spec["decode_s"] / speed
    spec["tokens_per_s"] = spec["tokens_per_s"] * speed
    return pd.concat([records, spec], ignore_index=True)


@pytest.fixture(scope="module")
def synthetic():
    from tests.synthetic_results import SyntheticDrafter, make_records, records_frame

    return records_frame(make_records([SyntheticDrafter(alpha=0.6, gammas=(1, 3))], n_prompts=6, seed=3))


def test_tables_keep_replayed_rows_apart(synthetic):
    from specbench.records.summary import configuration_table, lossless_check, prefer_live

    both = with_replayed_copies(synthetic)
    table = configuration_table(both)
    assert set(table["mode"]) == {"live", "replay"}
    live = table[(table["mode"] == "live") & (table["gamma"] > 0)].set_index("gamma")
    assert (live["speedup"] < 10).all()  # measured speedups are untouched by the replayed rows
    assert (lossless_check(both)["identical"] == 1).all() and len(lossless_check(both)) == 2
    assert len(prefer_live(both)) == len(synthetic)
    assert (prefer_live(both)["mode"] == "live").all()


def test_fit_and_recommend_count_a_unit_once_and_measure_live_only(synthetic):
    from specbench.analysis.fit import fit_acceptance
    from specbench.analysis.recommendation.recommend import recommend

    both = with_replayed_copies(synthetic)
    alone, doubled = fit_acceptance(synthetic, n_boot=0), fit_acceptance(both, n_boot=0)
    assert doubled[0].n_units == alone[0].n_units and doubled[0].estimate.alpha == alone[0].estimate.alpha
    rec_alone = recommend(synthetic, n_boot=50)[0]
    rec_both = recommend(both, n_boot=50)[0]
    assert rec_both.options.equals(rec_alone.options)  # a 100× replayed row never becomes a measurement

    live_gamma_1 = synthetic[synthetic["gamma"] != 3]
    replayed_gamma_3 = with_replayed_copies(synthetic[synthetic["gamma"] == 3]).query("mode == 'replay'")
    mixed = pd.concat([live_gamma_1, replayed_gamma_3], ignore_index=True)  # γ 3 replayed only
    rec = recommend(mixed, n_boot=40, max_gamma=4)[0]
    assert set(rec.options["gamma"]) == {1}
    assert not rec.curves.set_index("gamma").loc[3, "measured"]
