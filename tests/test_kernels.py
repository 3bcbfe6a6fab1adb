"""Triton kernels against their torch references, on ragged shapes.

On the CPU the kernels run under Triton's interpreter: run with ``TRITON_INTERPRET=1`` (as
``make test`` does). On a CUDA machine without the interpreter the same tests run on the GPU,
marked ``cuda`` (``pytest -m cuda tests/test_kernels.py``). Shapes are small: the interpreter
executes every program of the grid in Python.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from specbench.engine.decoder import NativeDecoder, TreeLayout
from specbench_kernels import rejection_sampling as rs
from specbench_kernels import tree_attention as ta
from specbench_kernels._triton import KernelUnavailable, interpreter_enabled, resolve_impl, triton_available
from specbench_kernels.rejection_sampling_reference import verify_sampling


def _kernel_devices():
    """Where the Triton kernels can run in this process, or one skipped case that says why not."""
    if not triton_available():
        return [pytest.param("cpu", marks=pytest.mark.skip(reason="triton is not installed"))]
    if interpreter_enabled():
        if type(ta._tree_attention_kernel).__name__ != "InterpretedFunction":
            return [
                pytest.param(
                    "cpu",
                    marks=pytest.mark.skip(
                        reason="TRITON_INTERPRET=1 was set after the kernels were imported; set it before starting pytest"
                    ),
                )
            ]
        return ["cpu"]
    if torch.cuda.is_available():
        return [pytest.param("cuda", marks=pytest.mark.cuda)]
    return [
        pytest.param(
            "cpu",
            marks=pytest.mark.skip(
                reason="no CUDA device and TRITON_INTERPRET is not set: run `TRITON_INTERPRET=1 pytest tests/test_kernels.py` "
                "to test the Triton kernels on the CPU"
            ),
        )
    ]


KERNEL_DEVICES = _kernel_devices()


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ================================================================================ tree attention
def _random_tree(nodes: int, gen: torch.Generator) -> torch.Tensor:
    """Ancestor mask [T, T] of a random tree whose nodes are numbered parents first."""
    parent = [-1] + [int(torch.randint(-1, i, (1,), generator=gen)) for i in range(1, nodes)]
    mask = torch.eye(nodes, dtype=torch.bool)
    for i in range(nodes):
        j = parent[i]
        while j >= 0:
            mask[i, j] = True
            j = parent[j]
    return mask


def _attention_inputs(
    bsz, heads, kv_heads, nodes, dim, lens, s_max, seed, per_seq_mask=False, chain=False, pad_value=1e4
):
    gen = _gen(seed)
    q = torch.randn(bsz, heads, nodes, dim, generator=gen)
    k = torch.randn(bsz, kv_heads, s_max, dim, generator=gen)
    v = torch.randn(bsz, kv_heads, s_max, dim, generator=gen)
    for b, length in enumerate(lens):  # padding past the nodes must never count
        k[b, :, length + nodes :] = pad_value
        v[b, :, length + nodes :] = pad_value
    if chain:
        mask = torch.ones(nodes, nodes, dtype=torch.bool).tril()
    elif per_seq_mask:
        mask = torch.stack([_random_tree(nodes, gen) for _ in range(bsz)])
    else:
        mask = _random_tree(nodes, gen)
    return q, k, v, torch.tensor(lens, dtype=torch.int32), mask


ATTENTION_CASES = {
    # name: (B, H, H_kv, T, D, prefix_lens, S_max, options)
    "gqa-ragged-shared-mask": (3, 4, 2, 5, 64, [7, 0, 37], 48, dict()),
    "mqa-per-seq-mask-3-splits": (2, 6, 1, 7, 32, [13, 29], 40, dict(per_seq_mask=True, num_splits=3)),
    "mha-single-node-d128": (1, 2, 2, 1, 128, [70], 75, dict(chain=True, num_splits=2)),
    "chain-many-blocks": (2, 4, 2, 19, 16, [33, 5], 60, dict(chain=True, block_n=16, num_splits=2)),
    "tree-default-splits": (2, 8, 2, 9, 64, [64, 3], 80, dict()),
}


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("case", list(ATTENTION_CASES))
def test_tree_attention_matches_reference_fp32(case, device):
    bsz, heads, kv_heads, nodes, dim, lens, s_max, opts = ATTENTION_CASES[case]
    opts = dict(opts)
    build = {key: opts.pop(key) for key in ("per_seq_mask", "chain") if key in opts}
    q, k, v, lens_t, mask = (
        t.to(device) for t in _attention_inputs(bsz, heads, kv_heads, nodes, dim, lens, s_max, seed=len(case), **build)
    )
    scale = 0.7 / dim**0.5
    ref = ta.tree_attention_reference(q, k, v, lens_t, mask, scale)
    out = ta.tree_attention_triton(q, k, v, lens_t, mask, scale, **opts)
    assert out.shape == (bsz, heads, nodes, dim) and out.dtype == q.dtype
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tree_attention_half_precision(dtype, device):
    q, k, v, lens, mask = _attention_inputs(2, 4, 2, 6, 64, [11, 26], 40, seed=5, pad_value=30.0)
    q, k, v, lens, mask = (t.to(device) for t in (q, k, v, lens, mask))
    out = ta.tree_attention_triton(q.to(dtype), k.to(dtype), v.to(dtype), lens, mask, num_splits=2)
    ref = ta.tree_attention_reference(*(t.to(dtype).float() for t in (q, k, v)), lens, mask)  # fp32 of the same inputs
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_tree_attention_engine_layout_views_and_unread_padding(device):
    """Strided views as the engine passes them; NaN past L_b + T is never read."""
    bsz, heads, kv_heads, nodes, dim, s_max = 2, 4, 2, 5, 32, 30
    gen = _gen(11)
    q_btd = torch.randn(bsz, nodes, heads, dim, generator=gen).to(device)  # the engine projects [B, T, H, D]
    q = q_btd.transpose(1, 2)  # [B, H, T, D], not contiguous
    layers = torch.randn(3, bsz, kv_heads, s_max + 8, dim, generator=gen).to(device)  # cache [L, B, H_kv, cap, D]
    k, v = layers[1, :, :, :s_max], layers[2, :, :, :s_max]  # strided views
    lens = torch.tensor([4, 21], device=device)
    k_clean, v_clean = k.clone(), v.clone()
    for b in range(bsz):
        k[b, :, lens[b] + nodes :] = float("nan")
        v[b, :, lens[b] + nodes :] = float("nan")
    mask = _random_tree(nodes, gen).to(device)
    out = ta.tree_attention_triton(q, k, v, lens, mask, num_splits=2)
    ref = ta.tree_attention_reference(q, k_clean, v_clean, lens, mask)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("tree", [True, False])
def test_tree_attention_reference_is_the_engine_attention(tree):
    """With one prefix length L for the batch, the reference equals NativeDecoder's mask + SDPA."""
    bsz, heads, kv_heads, nodes, dim, length = 2, 6, 2, 6, 16, 9
    q, k, v, _, mask = _attention_inputs(bsz, heads, kv_heads, nodes, dim, [length] * bsz, length + nodes + 4, seed=3)
    layout = TreeLayout(mask=mask, offsets=mask.sum(-1) - 1) if tree else None
    engine = SimpleNamespace(cache=SimpleNamespace(length=length), device=torch.device("cpu"), window=None)
    engine_mask = NativeDecoder._mask(engine, nodes, layout)  # [T, L + T]
    end = length + nodes
    expected = F.scaled_dot_product_attention(
        q, k[:, :, :end], v[:, :, :end], attn_mask=engine_mask, scale=0.2, enable_gqa=True
    )
    tree_mask = mask if tree else torch.ones(nodes, nodes, dtype=torch.bool).tril()
    got = ta.tree_attention_reference(q, k, v, length, tree_mask, scale=0.2)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_tree_attention_switch_and_checks(monkeypatch):
    q, k, v, lens, mask = _attention_inputs(2, 4, 2, 3, 16, [2, 5], 10, seed=1)
    assert resolve_impl("auto", q, k, v) == "torch"  # CPU tensors: never the interpreter
    torch.testing.assert_close(
        ta.tree_attention(q, k, v, lens, mask, impl="auto"), ta.tree_attention_reference(q, k, v, lens, mask)
    )
    with pytest.raises(ValueError, match="unknown kernel impl"):
        ta.tree_attention(q, k, v, lens, mask, impl="cuda")
    with pytest.raises(ValueError, match="boolean"):
        ta.tree_attention(q, k, v, lens, mask.float(), impl="torch")
    with pytest.raises(ValueError, match="multiple"):
        ta.tree_attention(q[:, :3], k, v, lens, mask, impl="torch")
    with pytest.raises(ValueError, match=r"\[T, T\] or \[B, T, T\]"):
        ta.tree_attention(q, k, v, lens, mask[:2, :2], impl="torch")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(KernelUnavailable):
        ta.tree_attention(q, k, v, lens, mask, impl="triton")


# ================================================================================ rejection sampling
def _sampling_inputs(bsz, k, vocab, seed, has_q=True, dtype=torch.float32, sharp=3.0):
    gen = _gen(seed)
    target = torch.softmax(sharp * torch.randn(bsz, k + 1, vocab, generator=gen), -1).to(dtype)  # [B, K+1, V]
    draft = torch.softmax(sharp * torch.randn(bsz, k, vocab, generator=gen), -1).to(dtype) if has_q else None
    if has_q:  # draft tokens drawn from the drafter, so that some are accepted
        tokens = torch.multinomial(draft.float().reshape(-1, vocab), 1, generator=gen).reshape(bsz, k)
    else:
        tokens = torch.randint(0, vocab, (bsz, k), generator=gen)
    uniform = torch.rand(bsz, k, generator=gen)  # [B, K]
    expo = torch.empty(bsz, vocab).exponential_(generator=gen)  # [B, V]
    return tokens, draft, target, uniform, expo


def _assert_same_verdict(inputs, device, **opts):
    inputs = [t.to(device) if t is not None else None for t in inputs]
    ref = verify_sampling(*inputs)
    got = rs.rejection_sampling_triton(*inputs, **opts)
    assert got.accepted.dtype == torch.int64 and got.next_token.dtype == torch.int64
    assert torch.equal(got.accepted, ref.accepted), (got.accepted, ref.accepted)
    assert torch.equal(got.next_token, ref.next_token), (got.next_token, ref.next_token)
    return got


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("has_q", [True, False], ids=["draft-probs", "one-hot"])
@pytest.mark.parametrize("k,vocab,splits", [(1, 1000, 1), (4, 1000, 3), (7, 333, 2)])
def test_rejection_sampling_matches_reference(k, vocab, splits, has_q, dtype, device):
    """Token for token, in every dtype: the kernel rounds each step as torch does."""
    inputs = _sampling_inputs(6, k, vocab, seed=k * vocab + has_q, has_q=has_q, dtype=dtype, sharp=1.0)
    _assert_same_verdict(inputs, device, num_splits=splits, block_v=128)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("has_q", [True, False], ids=["draft-probs", "one-hot"])
def test_rejection_sampling_every_acceptance_length(has_q, device):
    """Sequence b rejects exactly at position b (the last one accepts everything and takes a bonus)."""
    k, vocab = 4, 517
    tokens, draft, target, uniform, expo = _sampling_inputs(k + 1, k, vocab, seed=7, has_q=has_q)
    uniform.zero_()  # u = 0 accepts whenever p(x) > 0
    for b in range(k):
        x = tokens[b, b]
        if has_q:  # p(x) far below q(x), u just under 1: rejected
            target[b, b, x] = 0.1 * draft[b, b, x]
            target[b, b] /= target[b, b].sum()
        uniform[b, b] = 0.999
        uniform[b, b + 1 :] = 0.0
        if not has_q:
            target[b, b, x] = min(float(target[b, b, x]), 0.5)
            target[b, b] /= target[b, b].sum()
    got = _assert_same_verdict((tokens, draft, target, uniform, expo), device, num_splits=2, block_v=64)
    assert got.accepted.tolist() == list(range(k + 1))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_rejection_sampling_all_accepted_bonus(device):
    tokens, draft, target, uniform, expo = _sampling_inputs(3, 3, 300, seed=2)
    uniform.zero_()
    got = _assert_same_verdict((tokens, draft, target, uniform, expo), device, num_splits=2, block_v=32)
    assert got.accepted.tolist() == [3, 3, 3]


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("has_q", [True, False], ids=["draft-probs", "one-hot"])
def test_rejection_sampling_empty_residual_falls_back_to_p(has_q, device):
    """p = q at the rejected position leaves no residual mass: the draw is from p."""
    k, vocab = 2, 200
    tokens, draft, target, uniform, expo = _sampling_inputs(2, k, vocab, seed=4, has_q=has_q)
    uniform[:, 0] = 1.0  # u·q < p fails whenever q(x) >= p(x): a forced rejection at 0
    if has_q:
        target[:, 0] = draft[:, 0]
    else:
        target[:, 0] = 0.0
        target[torch.arange(2), 0, tokens[:, 0]] = 1.0  # one-hot p on the drafted token
    got = _assert_same_verdict((tokens, draft, target, uniform, expo), device, num_splits=3, block_v=32)
    assert got.accepted.tolist() == [0, 0]
    if not has_q:
        assert torch.equal(got.next_token, tokens[:, 0].to(got.next_token.device))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_rejection_sampling_no_draft_and_full_vocabulary(device):
    _assert_same_verdict(_sampling_inputs(3, 0, 97, seed=9), device, num_splits=2, block_v=16)  # K = 0
    _assert_same_verdict(
        _sampling_inputs(2, 2, 152064, seed=10, sharp=1.0), device, num_splits=2, block_v=8192
    )  # Qwen2.5 vocabulary


def test_rejection_sampling_switch_and_checks(monkeypatch):
    tokens, draft, target, uniform, expo = _sampling_inputs(2, 3, 50, seed=1)
    assert rs.rejection_sampling_reference is verify_sampling
    ref = verify_sampling(tokens, draft, target, uniform, expo)
    got = rs.rejection_sampling(tokens, draft, target, uniform, expo, impl="auto")  # CPU: the reference
    assert torch.equal(got.accepted, ref.accepted) and torch.equal(got.next_token, ref.next_token)
    with pytest.raises(ValueError, match="target_probs must be"):
        rs.rejection_sampling_triton(tokens, draft, target[:, :3], uniform, expo)
    with pytest.raises(ValueError, match="exponential must be"):
        rs.rejection_sampling_triton(tokens, draft, target, uniform, expo[:, :10])
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(KernelUnavailable):
        rs.rejection_sampling(tokens, draft, target, uniform, expo, impl="triton")


# ================================================================================ without triton
def test_kernels_import_without_triton():
    """The modules import with Triton missing; the torch path works and the Triton path says why not."""
    code = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None  # import triton -> ImportError
        import torch
        from specbench_kernels import tree_attention as ta, rejection_sampling as rs
        from specbench_kernels._triton import KernelUnavailable, triton_available
        assert not triton_available()
        q = torch.randn(1, 2, 2, 16); k = torch.randn(1, 1, 6, 16); m = torch.ones(2, 2, dtype=torch.bool).tril()
        ta.tree_attention(q, k, k, [3], m)
        try:
            ta.tree_attention(q, k, k, [3], m, impl="triton")
        except KernelUnavailable as exc:
            assert "triton" in str(exc)
        else:
            raise AssertionError("no error without triton")
        print("ok")
    """)
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
