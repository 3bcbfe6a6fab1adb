"""One drafter → vLLM speculative_config mapping (`specbench.analysis.settings.vllm_speculative`): the in-process
vLLM backend, the vllm-server backend, `recommend --engine vllm`, the per-concurrency schedule and
`export-drafter` give the same config for the same drafter, γ and model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from specbench.analysis.load.verdicts import LoadVerdict, schedules
from specbench.analysis.options import Option
from specbench.analysis.settings.engine_settings import engine_settings
from specbench.analysis.settings.vllm_speculative import speculative_config as build
from specbench.analysis.verdicts.verdict import YES, Decision
from specbench.backends.vllm import config as vllm_config
from specbench.backends.vllm import server as vllm_server
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig
from specbench.training.vllm_export import serving_config


def run_config(kind: str, params: dict, gamma: int, tree: str = "chain") -> RunConfig:
    return RunConfig(DrafterConfig(kind, tuple(sorted(params.items()))), gamma, tree, 0.0, 1.0, 0)


def _schedule(kind: str, params: dict, gamma: int) -> dict:
    """The per-load schedule (`analysis.load.verdicts.schedules`) of one confident yes at concurrency 1."""
    option = Option(kind, kind, json.dumps(params), "chain", gamma, 1.5, 1.2, 1.8, float("nan"), True)
    decision = Decision(YES, "measured", option, None, None, 12, "")
    keys = {"target": "t", "temperature": 0.0, "top_p": 1.0, "top_k": 0, "workload": "w"}
    (plan,) = schedules([LoadVerdict(keys, "vllm", 1, 0.0, 1, decision)], "t", None)
    return plan


def _schedule_config(kind: str, params: dict, gamma: int) -> dict:
    """The config a per-load schedule carries, without its ranges."""
    config = dict(_schedule(kind, params, gamma)["setting"].config)
    assert config.pop("num_speculative_tokens_per_batch_size") == [[1, 1, gamma]]
    return config


def vllm_layout(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    return str(folder.resolve())


def as_given(spec: str) -> str:
    return spec


def every_user(kind: str, params: dict, gamma: int) -> dict[str, dict | None]:
    """The config each user builds, with models named as given (no alias resolution, no hub ids)."""
    config = run_config(kind, params, gamma)
    return {
        "in-process backend": vllm_config.speculative_config(config, as_given),
        "vllm-server backend": vllm_server.speculative_config(config, as_given),
        "recommend --engine vllm": engine_settings(kind, params, "chain", gamma, engines=("vllm",))["vllm"].config,
        "per-load schedule": _schedule_config(kind, params, gamma),
    }


@pytest.mark.parametrize(
    "kind, params, gamma, expected",
    [
        (
            "ngram",
            {"n_min": 2, "n_max": 4},
            3,
            {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        ),
        (
            "ngram",
            {},
            1,
            {"method": "ngram", "num_speculative_tokens": 1, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
        ),
        (
            "draft-model",
            {"model": "/models/small"},
            4,
            {"method": "draft_model", "model": "/models/small", "num_speculative_tokens": 4},
        ),
    ],
)
def test_every_user_builds_the_same_config(kind, params, gamma, expected):
    built = every_user(kind, params, gamma)
    assert built == {user: expected for user in built}
    assert build(kind, params, gamma) == expected
    assert build(kind, json.dumps(params), gamma) == expected  # the records' drafter_params JSON


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "medusa"])
def test_trained_heads_same_config_from_backends_recommendation_and_export(kind, tmp_path):
    folder = vllm_layout(tmp_path / kind)
    built = every_user(kind, {"checkpoint": folder}, 4)
    expected = {"method": kind, "model": folder, "num_speculative_tokens": 4}
    assert built == {user: expected for user in built}
    written = {"num_heads": 4} if kind == "medusa" else {"num_attention_heads": 9}  # what each exporter writes
    exported = serving_config(kind, tmp_path / kind, written)
    assert exported == (expected if kind == "medusa" else {**expected, "num_speculative_tokens": 3})


def test_model_names_and_parallelism_are_the_callers():
    config = run_config("draft-model", {"model": "smollm2-135m"}, 2)
    local = vllm_config.speculative_config(config, lambda spec: f"/cache/{spec}", {"draft_tensor_parallel_size": 2})
    assert local == {
        "method": "draft_model",
        "model": "/cache/smollm2-135m",
        "num_speculative_tokens": 2,
        "draft_tensor_parallel_size": 2,
    }
    pasted = engine_settings(
        "draft-model",
        {"model": "smollm2-135m"},
        "chain",
        2,
        engines=("vllm",),
        hub_ids={"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"},
    )["vllm"].config
    assert pasted == {
        "method": "draft_model",
        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "num_speculative_tokens": 2,
    }
    assert build("ngram", {}, 2, draft_tensor_parallel_size=2) == build("ngram", {}, 2)  # no model, no draft TP


def test_target_only_and_unknown_drafters():
    assert build(None, {}, 0) is None and build("none", {}, 0) is None and build("ngram", {}, 0) is None
    assert vllm_config.speculative_config(RunConfig(None, 0, "chain", 0.0, 1.0, 0)) is None
    assert vllm_server.speculative_config(RunConfig(None, 0, "chain", 0.0, 1.0, 0)) is None
    with pytest.raises(SpecbenchError, match="vLLM has no speculative method for drafter 'lookahead'"):
        build("lookahead", {}, 2)
    assert not engine_settings("lookahead", {}, "chain", 2, engines=("vllm",))["vllm"].supported
    unknown = _schedule("lookahead", {}, 2)["setting"]  # a per-load schedule of a drafter vLLM cannot run
    assert not unknown.supported and unknown.config == {}


@pytest.mark.parametrize(
    "kind, params, tree, message",
    [
        ("ngram", {}, "2x2", "tree '2x2' cannot run on vLLM"),
        ("mtp", {}, "chain", "drafter mtp cannot run on vLLM"),
        ("eagle", {}, "chain", "drafter eagle cannot run on vLLM"),
        ("draft-model", {}, "chain", "drafter draft-model cannot run on vLLM without a model"),
    ],
)
def test_both_backends_refuse_the_same_configs(kind, params, tree, message):
    config = run_config(kind, params, 2, tree)
    for backend in (vllm_config.speculative_config, vllm_server.speculative_config):
        with pytest.raises(SpecbenchError, match=message):
            backend(config, as_given)


def test_the_documented_way_to_serve_an_exported_head_is_accepted(tmp_path, prompts_file):
    """docs/drafters.md's `drafters: [{type: eagle3, params: {...: FOLDER}}]` is what a vllm-server sweep takes."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "drafters.md").read_text()
    snippet = re.search(r"drafters: \[(\{type: eagle3, params: \{\w+: FOLDER\}\})\]", text).group(1)
    drafter = yaml.safe_load(snippet.replace("FOLDER", vllm_layout(tmp_path / "head")))
    spec = build_spec(
        {
            "name": "t",
            "backend": "vllm-server",
            "drafters": [drafter],
            "gammas": [2],
            "workloads": [f"jsonl:{prompts_file}:field=text:id=id"],
        }
    )
    assert spec.drafters[0].params_dict == {"checkpoint": str((tmp_path / "head").resolve())}
