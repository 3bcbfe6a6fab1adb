"""`specbench export-drafter --format vllm`: the shipped SmolLM2 heads in vLLM's layout (names and
config keys of vLLM 0.32's loaders), the EAGLE-1 bias fold is exact, and MTP is refused in one line."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from specbench.engine.drafters import make_drafter
from specbench.errors import SpecbenchError
from specbench.training.vllm_export import export_drafter, write_export


@pytest.fixture(scope="module")
def exported(smollm2, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    out = {}
    for kind in ("eagle", "eagle3", "medusa"):
        drafter = make_drafter(kind, smollm2)
        report = write_export(kind, drafter, smollm2, root / kind)
        out[kind] = (
            report,
            json.loads((root / kind / "config.json").read_text()),
            load_file(str(root / kind / "model.safetensors")),
            drafter,
        )
    return out


def test_eagle3_layout(exported, smollm2):
    report, config, tensors, drafter = exported["eagle3"]
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["num_hidden_layers"] == 1
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 15, 27]
    assert tensors["fc.weight"].shape == (576, 3 * 576)
    assert {
        "midlayer.hidden_norm.weight",
        "midlayer.input_layernorm.weight",
        "norm.weight",
        "midlayer.self_attn.q_proj.weight",
    } <= set(tensors)
    ids = drafter.head.ids
    assert config["draft_vocab_size"] == ids.numel() == tensors["lm_head.weight"].shape[0]
    assert torch.equal(torch.arange(ids.numel()) + tensors["d2t"], ids)  # vLLM: target id = draft id + d2t
    lm = smollm2.model.get_output_embeddings().weight
    assert torch.allclose(tensors["lm_head.weight"], lm[ids].float())
    assert report["speculative_config"]["method"] == "eagle3"


def test_medusa_layout(exported, smollm2):
    _, config, tensors, drafter = exported["medusa"]
    assert config["model_type"] == "medusa" and config["num_heads"] == 4 and config["original_lm_head"]
    assert config["truncated_vocab_size"] == tensors["token_map"].numel() == tensors["lm_head.weight"].shape[0]
    assert config["vocab_size"] == 49152 and config["medusa_fc_bias"]
    assert {f"blocks.{h}.layers.0.{w}" for h in range(4) for w in ("weight", "bias")} <= set(tensors)
    assert torch.equal(tensors["blocks.2.layers.0.weight"], drafter.heads[2][0].linear.weight.float())


def _layer(config: LlamaConfig, weights: dict) -> LlamaDecoderLayer:
    layer = LlamaDecoderLayer(config, layer_idx=0)
    state = {k[len("layers.0.") :]: v for k, v in weights.items() if k.startswith("layers.0.")}
    state["input_layernorm.weight"] = torch.ones(config.hidden_size)
    missing, unexpected = layer.load_state_dict(state, strict=False)
    assert not unexpected and not missing
    layer.input_layernorm = torch.nn.Identity()  # EAGLE's layer 0 has no input norm (vLLM does the same)
    return layer.eval()


def test_eagle_layout_and_exact_bias_fold(exported):
    report, config, tensors, drafter = exported["eagle"]
    assert config["architectures"] == ["EagleLlamaForCausalLM"] and config["attention_bias"] is True
    assert "fc.bias" not in tensors and tensors["fc.weight"].shape == (576, 1152)
    assert any("full vocabulary" in note for note in report["notes"])
    sd = {k: v.float() for k, v in drafter.net.state_dict().items()}
    plain = LlamaConfig(**{**config, "attention_bias": False})
    biased = LlamaConfig(**config)
    torch.manual_seed(0)
    e, f = torch.randn(1, 7, 576), torch.randn(1, 7, 576)
    position_ids = torch.arange(7)[None]
    cos_sin = LlamaRotaryEmbedding(plain)(e, position_ids)
    mask = torch.full((7, 7), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        z = torch.cat((e, f), -1) @ sd["fc.weight"].T
        reference = _layer(plain, sd)(
            z + sd["fc.bias"], attention_mask=mask, position_ids=position_ids, position_embeddings=cos_sin
        )
        folded = _layer(biased, tensors)(z, attention_mask=mask, position_ids=position_ids, position_embeddings=cos_sin)
    reference = reference[0] if isinstance(reference, tuple) else reference
    folded = folded[0] if isinstance(folded, tuple) else folded
    assert torch.allclose(reference, folded, atol=1e-4, rtol=1e-4)


def test_mtp_and_unknown_format_are_one_line(tmp_path):
    with pytest.raises(SpecbenchError, match="'mtp' cannot be exported to vLLM: vLLM's MTP runs"):
        export_drafter("mtp", tmp_path / "x")
    with pytest.raises(SpecbenchError, match="unknown export format"):
        export_drafter("eagle", tmp_path / "x", fmt="onnx")
