"""The drafter registry: every drafter is one type looked up by name.

* the worked example of docs/drafters.md ("Adding a drafter") is executed as written: its class
  registered with a catalogue entry,
  built with random weights on a tiny model, greedy output identical to target-only decoding,
  checkpoint saved and reloaded, objective run;
* unknown names are one-line errors with a did-you-mean; each trained type owns its parts;
* the engine never imports the training code (nor cli, measure, analysis).
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import pytest
import torch

from specbench.catalogue import drafters as catalogue
from specbench.catalogue.drafters import DrafterKind, Param
from specbench.engine.drafters import check_params, make_drafter, registry
from specbench.engine.loop import SpeculativeEngine
from specbench.errors import SpecbenchError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "drafters.md"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def docs_example() -> types.ModuleType:
    """The module that docs/drafters.md writes in its "Adding a drafter" section, executed."""
    text = DOCS.read_text()
    match = re.search(r"<!-- example: adding-a-drafter -->\s*```python\n(.*?)```", text, re.S)
    assert match, "docs/drafters.md lost its worked example"
    module = types.ModuleType("specbench_docs_lookahead")
    exec(compile(match.group(1), str(DOCS), "exec"), module.__dict__)  # noqa: S102 - our own docs
    return module


@pytest.fixture(scope="module")
def tiny():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama")


@pytest.fixture()
def lookahead():
    example = docs_example()
    catalogue.register(
        DrafterKind(
            "lookahead",
            "a linear layer on the last hidden state guesses the token after next",
            example.LookaheadType,
            params={"checkpoint": Param("str"), "seed": Param("int", 0)},
            trained=True,
            confident=True,
            forwards=(1, 0),
        )
    )
    yield registry.get("lookahead")
    catalogue.unregister("lookahead")


def test_the_docs_example_registers_builds_and_is_greedy_lossless(tiny, lookahead, tmp_path):
    assert "lookahead" in registry.names() and "lookahead" in registry.names(trained=True)
    check_params("lookahead", {"checkpoint": "random", "seed": 1})
    drafter = make_drafter("lookahead", tiny, {"checkpoint": "random", "seed": 1})
    prompts = [tiny.tokenizer(p)["input_ids"] for p in ("A registry of drafters.", "One new file, one line.")]
    accepted = 0
    for ids in prompts:
        base = SpeculativeEngine(tiny, None, gamma=0).generate(ids, 16, stop_at_eos=False).tokens
        for tree in ("chain", "3"):
            result = SpeculativeEngine(tiny, drafter, gamma=3, tree=tree).generate(ids, 16, stop_at_eos=False)
            assert result.tokens == base, tree
            assert max(result.rounds.depth) <= 1  # it drafts one token ahead, whatever γ asks
            accepted += result.accepted
    # the shared TrainedType machinery: checkpoint written, reloaded (fingerprint checked), same drafts
    lookahead.save(tmp_path / "ck", drafter.net, tiny, None, training={"command": "test"}, dtype=torch.float32)
    loaded = make_drafter("lookahead", tiny, {"checkpoint": str(tmp_path / "ck")})
    assert torch.equal(loaded.net.proj.weight, drafter.net.proj.weight)
    # and its objective, resolved by name on the training side
    from specbench.engine.drafters.networks.feature_layers import VocabHead
    from specbench.training.objectives import Batch, objective

    fn, kwargs = objective("lookahead")
    seq = torch.tensor([prompts[0] + base[:8]])
    final = torch.randn(1, seq.shape[1], tiny.model.config.hidden_size)
    head = VocabHead(tiny.model.get_output_embeddings(), tiny.vocab_size)
    batch = Batch(
        ids=seq,
        features={"final": final},
        valid=torch.ones_like(seq, dtype=torch.bool),
        answer=torch.ones_like(seq, dtype=torch.bool),
        teacher=head.sub_logits(final).softmax(-1).detach(),
    )
    net = lookahead.new_net(lookahead.architecture(tiny.model.config))
    result = fn(net, batch, head, **kwargs)
    result.loss.backward()
    assert net.proj.weight.grad is not None and len(result.losses) == 1


def test_unknown_names_are_one_line_errors_with_a_suggestion(tiny):
    with pytest.raises(SpecbenchError, match=r"unknown drafter 'eagel' \(did you mean 'eagle'\?\)"):
        make_drafter("eagel", tiny)
    with pytest.raises(SpecbenchError, match=r"unknown drafter type 'ngram'.*choose from: medusa, eagle, eagle3, mtp"):
        registry.get("ngram", trained=True)
    with pytest.raises(SpecbenchError, match="already registered"):
        catalogue.register(catalogue.get("medusa"))


@pytest.mark.parametrize("name", ["medusa", "eagle", "eagle3", "mtp", "eagle3.1", "semi-ar", "parallel-tree"])
def test_each_trained_type_owns_building_loading_and_training(tiny, name):
    from specbench.training.objectives import objective

    drafter_type = registry.get(name)
    assert drafter_type.trained and drafter_type.name == name and drafter_type.summary
    assert drafter_type.params() == ["checkpoint", "seed"]
    arch = drafter_type.architecture(tiny.model.config)
    net = drafter_type.new_net(arch)
    assert net.architecture() == arch
    fn, kwargs = objective(name)
    assert callable(fn) and (("steps" in kwargs) == (drafter_type.unrolled_steps is not None))
    assert registry.get("ngram").trained is False and registry.get("ngram").params() == ["n_min", "n_max"]


def test_the_engine_never_imports_training_cli_measure_or_analysis():
    forbidden = ("specbench.training", "specbench.cli", "specbench.measure", "specbench.analysis")
    for path in (ROOT / "specbench" / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not name.startswith(forbidden), f"{path.relative_to(ROOT)} imports {name}"
