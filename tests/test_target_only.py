"""A "no" is as paste-ready as a "yes" (issue 46, item 7): for a confident no, every engine's panel of
`specbench recommend` gives the command line that serves the target alone, with no speculative setting in it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specbench.analysis.settings.engine_settings import engine_settings, target_only_settings
from specbench.catalogue import drafters, engines
from tests.synthetic_results import SyntheticDrafter, write_synthetic_results

# words any engine's speculation is spelled with (vLLM's config, SGLang's and llama-server's flags, transformers'
# assisted generation); the yes settings' own keys and flags are added per engine below
SPECULATIVE_WORDS = ("speculative", "--spec-", "draft", "assistant", "prompt_lookup")


@pytest.fixture(scope="module")
def confident_no(tmp_path_factory):
    """A sweep whose drafter costs more than it saves: 12 prompts, every γ confidently slower."""
    expensive = SyntheticDrafter(alpha=0.6, gammas=(1, 2, 4), draft_step_s=0.03)
    return write_synthetic_results(tmp_path_factory.mktemp("no") / "sweep", [expensive], n_prompts=12, seed=3)


def _invoke(*args):
    from specbench.cli import app

    return CliRunner().invoke(app, [str(a) for a in args], env={"SPECBENCH_NO_ENGINE_CHECK": "1"})


def _speculative_words(engine: str) -> set[str]:
    """What the engine's yes settings are spelled with, over every drafter kind it runs: their config keys and
    flags (vLLM: speculative_config's keys, SGLang's --speculative-* flags, transformers' kwargs, llama-server's
    --spec-* flags), less the two generic words vLLM's config shares with a target-only line ('model',
    'method'), plus the common words."""
    words = set(SPECULATIVE_WORDS)
    for kind in drafters.names(buildable=False):
        setting = engine_settings(kind, {"model": "d", "checkpoint": "c"}, "chain", 3, engines=[engine])[engine]
        config = setting.config.get("flags", setting.config) if setting.config else {}
        words |= {str(key) for key in config if not isinstance(config, list) or str(key).startswith("-")}
    assert len(words) > len(SPECULATIVE_WORDS), f"{engine}: no yes setting to compare with"
    return words - {"model", "method"}


@pytest.mark.parametrize("engine", engines.names())
def test_a_confident_no_prints_the_target_only_command_line_of_each_engine(confident_no, engine):
    data = json.loads(_invoke("recommend", confident_no, "--json", "--bootstrap", "200", "--engine", engine).stdout)
    assert len(data) == 1 and data[0]["recommended"] is None
    assert data[0]["decision"]["answer"] == "confident no"
    settings = data[0]["engine_settings"]
    assert list(settings) == [engine], "the engine asked for, and only it"
    setting = settings[engine]
    assert setting["target_only"] and setting["supported"] and setting["snippet"]
    assert "synthetic-target" in setting["snippet"] or engines.get(engine).model_names == "gguf"
    spoken = [word for word in _speculative_words(engine) if word in setting["snippet"]]
    assert not spoken, f"{engine}: the target-only line names speculation: {spoken}\n{setting['snippet']}"
    text = _invoke("recommend", confident_no, "--bootstrap", "200", "--engine", engine)
    assert text.exit_code == 0, text.output
    assert f"{engine} settings (target only: no speculation)" in text.output


def test_the_target_only_lines_are_the_engines_own_command_lines():
    """Each line starts the engine as its yes line does, less the speculative part (one builder per engine)."""
    no = target_only_settings(target="org/model")
    yes = engine_settings("draft-model", {"model": "org/draft"}, "chain", 3, target="org/model")
    assert set(no) == set(yes) == set(engines.names())
    for engine in engines.names():
        first_yes, first_no = yes[engine].snippet.split()[0], no[engine].snippet.split()[0]
        assert no[engine].target_only and not yes[engine].target_only
        assert first_no == first_yes or engine == "transformers", (engine, no[engine].snippet, yes[engine].snippet)
    assert "vllm serve org/model" in no["vllm"].snippet and "speculative_config" not in no["vllm"].snippet
    assert no["sglang"].snippet == "python -m sglang.launch_server --model-path org/model"
    assert no["llamacpp"].snippet.startswith("llama-server -m") and "--spec-type" not in no["llamacpp"].snippet
    assert "assistant" not in no["transformers"].snippet and "generate(**inputs)" in no["transformers"].snippet
