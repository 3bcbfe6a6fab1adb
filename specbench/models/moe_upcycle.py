"""A mixture-of-experts target built from a dense Llama-family model by sparse upcycling.

Real MoE checkpoints (Qwen3-30B-A3B, Mixtral, DeepSeek-V3) do not fit this machine, so the MoE
testbed is honest about what it is: every MLP of a loaded dense model becomes a layer of E experts
that are all *the same* dense MLP (one module, its tensors shared: no copies in memory), and a
router that is a fixed seeded random projection of the MLP's input,

    s = W_r x            W_r ∈ R^{E×H}, entries N(0, 1/H), drawn from ``seed`` and the layer index
    S = top_k(s)         the k experts a token selects (their ids are recorded)
    w_i = softmax(s_S)_i  i ∈ S, renormalised over the chosen experts: Σ_{i∈S} w_i = 1
    y = Σ_{i∈S} w_i · E_i(x).

Since E_i = E (the dense MLP) for every i, y = (Σ_{i∈S} w_i) · E(x) = E(x): the MoE model's output
equals the dense model's. In floating point Σ w_i may round to 1 − 2⁻²⁴ rather than 1, and k
separate products of the same E(x) would then differ from E(x) in the last bit, enough to flip a
near-tied greedy argmax. So the layer computes E(x) once per token and returns it unscaled — the
exact value of the mixture — while the routing is still computed from the hidden state and
recorded, so which experts a verification would touch is measured, not assumed. (The weights w
matter only for the value, which is E(x) whatever they are; they are not materialised.)

Routing depends on the tokens (through x), so a verify forward over k tokens touches the union
of their experts: between k_top and min(E, k·k_top) per layer — the cost ECOSPEC's drafting
minimises. `moe_layer_class` builds the layer module; `RoutingLog` keeps, per forward, each
layer's expert ids [B, T, k_top].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from specbench.errors import SpecbenchError


@dataclass
class RoutingLog:
    """The experts each token of the most recent forward selected, per layer.

    ``layers[i]`` is a [B, T, top_k] long tensor of expert ids for decoder layer i, overwritten by
    every forward (each MoE layer writes its own entry as the forward passes it)."""

    experts: int
    top_k: int
    expert_bytes: int  # weight bytes of one expert of one layer (the dense MLP's), at the model's dtype
    step_bytes: int = 0  # weight bytes one forward of this (dense-computed) model streams: every MLP once
    layers: dict = field(default_factory=dict)  # layer index -> [B, T, top_k] long expert ids
    routers: list = field(default_factory=list)  # per layer, the router [E, H] float32

    @property
    def hidden_size(self) -> int:
        return int(self.routers[0].shape[1]) if self.routers else 0

    def predict(self, features):
        """Expert ids [N, L, top_k] the routers give features [N, H] in every layer: the light expert
        predictor of expert-aware drafting (features from a drafter stand in for each layer's input)."""
        import torch

        x = features.float()
        return torch.stack([(x @ router.T).topk(self.top_k, dim=-1).indices for router in self.routers], dim=1)

    def record(self, layer: int, chosen) -> None:
        self.layers[layer] = chosen.detach()

    def distinct_per_layer(self) -> list[int]:
        """Distinct experts the last forward touched in each layer (the union over its tokens)."""
        return [int(self.layers[i].unique().numel()) for i in sorted(self.layers)]


@lru_cache(maxsize=1)
def moe_layer_class():
    """The `UpcycledMoE` module class (built on first use: importing this module loads no torch, so
    the model registry stays light for commands that never build a model)."""
    from torch import nn

    class UpcycledMoE(nn.Module):
        """E identical experts — the dense gated MLP, whose modules it holds (shared, not copied) — behind a
        seeded random top-k router. The modules keep the dense MLP's names (``mlp.gate_proj`` ...), so the
        model's parameters are named as the dense model's and drafter checkpoints trained on it apply."""

        def __init__(self, dense: nn.Module, router, top_k: int, layer: int, log: RoutingLog):
            super().__init__()
            self.gate_proj, self.up_proj, self.down_proj = dense.gate_proj, dense.up_proj, dense.down_proj
            self.act_fn = dense.act_fn
            self.register_buffer("router", router, persistent=False)  # [E, H] float32
            self.top_k = top_k
            self.layer = layer
            self.log = log

        def route(self, x):
            """Expert ids [B, T, top_k] that tokens x [B, T, H] select (highest router score first)."""
            scores = x.float() @ self.router.T  # [B, T, E]
            chosen = scores.topk(self.top_k, dim=-1).indices  # [B, T, top_k]
            self.log.record(self.layer, chosen)
            return chosen

        def expert(self, x):
            """E(x) = down(act(gate(x)) · up(x)), every expert's output (the dense MLP's, same operations)."""
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

        def forward(self, x):
            """Σ_{i∈S} w_i E_i(x) = E(x) (identical experts, Σ w = 1): computed once, exactly."""
            self.route(x)
            return self.expert(x)

    return UpcycledMoE


def router_weights(hidden: int, experts: int, seed: int, layer: int):
    """The fixed router of one layer, [E, H] float32 with N(0, 1/H) entries, from (seed, layer) alone."""
    import torch

    gen = torch.Generator().manual_seed(int(seed) * 100_003 + int(layer))
    return torch.randn(experts, hidden, generator=gen) / hidden**0.5


def mlp_bytes(mlp) -> int:
    return int(sum(p.numel() * p.element_size() for p in mlp.parameters()))


def forward_bytes(model) -> int:
    """Weight bytes one forward streams: every parameter once (shared tensors once), less an input
    embedding table that is not also the LM head (a forward gathers only a few of its rows)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    embed, head = model.get_input_embeddings().weight, model.get_output_embeddings()
    if head is None or head.weight is not embed:
        total -= embed.numel() * embed.element_size()
    return int(total)


def upcycle(model, *, experts: int, top_k: int, seed: int) -> RoutingLog:
    """Replace every decoder layer's MLP of a Llama-family ``model`` (in place) by an `UpcycledMoE`;
    returns the shared `RoutingLog`, also set as ``model.specbench_routing``."""
    if experts < 1 or not 1 <= top_k <= experts:
        raise SpecbenchError(
            f"an upcycled MoE needs experts >= 1 and 1 <= top_k <= experts, got experts={experts}, top_k={top_k}"
        )
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not all(hasattr(layer, "mlp") for layer in layers):
        raise SpecbenchError("sparse upcycling needs a decoder whose layers each have an 'mlp' (Llama family)")
    hidden = int(model.config.hidden_size)
    device = next(model.parameters()).device
    log = RoutingLog(
        experts=experts, top_k=top_k, expert_bytes=mlp_bytes(layers[0].mlp), step_bytes=forward_bytes(model)
    )
    for i, layer in enumerate(layers):
        router = router_weights(hidden, experts, seed, i).to(device)
        layer.mlp = moe_layer_class()(layer.mlp, router, top_k, i, log)
        log.routers.append(router)
    model.specbench_routing = log
    return log


def routing_log(model) -> RoutingLog | None:
    """The routing log of an upcycled model; None for a dense one."""
    return getattr(model, "specbench_routing", None)
