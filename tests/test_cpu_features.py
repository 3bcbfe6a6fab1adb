"""What the CPU can do (`specbench.engine.cpu.cpu_info`) and every path that asks it before building a layout or a
dtype: the probe's candidates, ``dtype: auto``, the default layout, a forced ``--layout``, a cached probe entry,
`apply_layout` and the packing itself. Each check runs on faked feature sets (AVX2 only, AVX2 with
AVX-NE-CONVERT, AVX-512 without BF16, AVX512-BF16, AMX, AMX-FP16, a torch without oneDNN), so that a machine of
one kind proves the other kinds' paths are guarded; the refusals are checked on every set, the builds only where
this machine can run them."""

from __future__ import annotations

import json

import pytest
import torch

from specbench.engine.cpu import layout_probe
from specbench.engine.cpu.cpu_info import CpuFeatures, assume_cpu_features, cpu_features, describe_cpu
from specbench.engine.cpu.layout_probe import (
    LayoutChoice,
    auto_dtypes,
    cache_file,
    check_cpu_settings,
    load_cached,
    probe_key,
    probe_layouts,
)
from specbench.engine.cpu.weight_layout import (
    COLUMN_MAJOR,
    DTYPE_NAMES,
    LAYOUTS,
    PACKED,
    PACKED_TWO_ROW,
    ROW_MAJOR_TWO_ROW,
    apply_layout,
    candidate_layouts,
    default_layout,
    layout_refusal,
    pack_for_onednn,
)
from specbench.errors import SpecbenchError
from tests.cli_helpers import assert_user_error, invoke

AVX2 = {"sse4_2", "avx", "avx2", "fma3", "f16c"}
AVX512 = AVX2 | {"avx512_f", "avx512_bw", "avx512_vl", "avx512_dq", "avx512_cd", "avx512_vnni"}
# name -> (flags, oneDNN in torch, the 16-bit dtypes oneDNN runs there)
FAKE_CPUS = {
    "AVX2 only (Zen 3)": (AVX2, True, set()),
    "AVX2 + AVX-NE-CONVERT (Sierra Forest)": (AVX2 | {"avx_vnni", "avx_ne_convert"}, True, {"bf16", "fp16"}),
    "AVX-512 without BF16 (Skylake-SP)": (AVX512, True, {"bf16"}),
    "AVX512-BF16 (Zen 4)": (AVX512 | {"avx512_bf16"}, True, {"bf16"}),
    "AMX (Sapphire Rapids)": (
        AVX512 | {"avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"},
        True,
        {"bf16", "fp16"},
    ),
    "AMX-FP16 (Granite Rapids)": (
        AVX512 | {"avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16"},
        True,
        {"bf16", "fp16"},
    ),
    "AVX-512, torch without oneDNN": (AVX512 | {"avx512_bf16"}, False, set()),
}
CASES = [pytest.param(name, id=name.split(" (")[0].replace(" ", "-")) for name in FAKE_CPUS]
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _fake(name: str) -> tuple[CpuFeatures, bool, set[str]]:
    flags, onednn, sixteen = FAKE_CPUS[name]
    return CpuFeatures.from_flags(flags, model=f"fake {name}", onednn=onednn), onednn, sixteen


def _packs(onednn: bool, sixteen: set[str], dtype: torch.dtype) -> bool:
    """What the fake CPU should allow: float32 packing wherever torch has oneDNN, 16 bits where its kernels run."""
    return onednn and (dtype == torch.float32 or DTYPE_NAMES[dtype] in sixteen)


def test_detected_features_are_torchs_own_answers():
    """The real machine: the flags are torch's (cpuinfo), the oneDNN answers torch's own queries, and the rule
    `from_flags` gives the same answers over the same flags (so a faked set is judged as torch would judge it)."""
    features = cpu_features()
    assert features.source in ("torch", "/proc/cpuinfo") and features.model
    rule = CpuFeatures.from_flags(features.flags, onednn=features.onednn)
    for name, query in (("onednn_bf16", "_is_mkldnn_bf16_supported"), ("onednn_fp16", "_is_mkldnn_fp16_supported")):
        if hasattr(torch.ops.mkldnn, query) and features.onednn:
            assert getattr(features, name) == getattr(torch.ops.mkldnn, query)(), name
        assert getattr(rule, name) == getattr(features, name), name
    assert features.model in describe_cpu()


@pytest.mark.parametrize("name", CASES)
def test_every_choice_asks_the_cpu_first(name):
    """On each faked CPU: the probe's candidates, ``dtype: auto``'s dtypes and the default layout are only
    what the CPU runs, and a packed layout is offered exactly where its kernels exist."""
    fake, onednn, sixteen = _fake(name)
    with assume_cpu_features(fake):
        assert cpu_features() is fake and fake.model in describe_cpu()
        for dtype in DTYPES:
            layouts = candidate_layouts(dtype)
            assert all(layout_refusal(layout, dtype) is None for layout in layouts), (name, dtype)
            assert (PACKED in layouts) == _packs(onednn, sixteen, dtype), (name, dtype)
            if dtype != torch.float32:
                native = DTYPE_NAMES[dtype] in sixteen and onednn
                assert (PACKED_TWO_ROW in layouts) == native and (COLUMN_MAJOR in layouts) == native, (name, dtype)
        assert ("fp16" in auto_dtypes()) == ("fp16" in sixteen and onednn)
        assert (default_layout(torch.bfloat16).name == ROW_MAJOR_TWO_ROW.name) == ("bf16" in sixteen and onednn)


@pytest.mark.parametrize("name", CASES)
def test_a_forced_layout_the_cpu_cannot_run_is_refused_naming_the_feature(name):
    """`check_cpu_settings` (sweeps, backend options, ``specbench run``) refuses a packed layout exactly where the
    CPU cannot run it for that dtype, in one line that names the missing feature."""
    fake, onednn, sixteen = _fake(name)
    with assume_cpu_features(fake):
        for dtype in DTYPES:
            for layout in (PACKED, PACKED_TWO_ROW):
                if _packs(onednn, sixteen, dtype):
                    check_cpu_settings("cpu", DTYPE_NAMES[dtype], layout.name, "run")
                    continue
                with pytest.raises(SpecbenchError) as refused:
                    check_cpu_settings("cpu", DTYPE_NAMES[dtype], layout.name, "run")
                message = str(refused.value)
                assert "\n" not in message and layout.name in message and fake.model in message
                feature = "oneDNN" if not onednn else ("AVX-512" if dtype == torch.bfloat16 else "AVX512-FP16")
                assert feature in message, message
            check_cpu_settings("cpu", DTYPE_NAMES[dtype], "row-major", "run")  # never refused


@pytest.mark.parametrize("name", CASES)
def test_a_cached_probe_entry_never_picks_what_the_cpu_cannot_run(name, tmp_path, monkeypatch):
    """A cache entry (written by another machine's torch, or by hand) naming a packed 16-bit layout is ignored
    on a CPU that cannot run it: the probe measures again instead."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path))
    fake, onednn, sixteen = _fake(name)
    with assume_cpu_features(fake):
        for dtype in DTYPES:
            key = probe_key("some-model", [DTYPE_NAMES[dtype]], 5, None)
            choice = LayoutChoice("auto", DTYPE_NAMES[dtype], PACKED, 5, "measured elsewhere")
            path = cache_file(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"key": key, "choice": choice.to_dict()}))
            cached = load_cached(key)
            assert (cached is not None) == _packs(onednn, sixteen, dtype), (name, dtype)
            # a layout renamed by hand but still packed is judged by what it does, not by its name
            data = choice.to_dict()
            data["layout"]["name"] = "row-major"
            path.write_text(json.dumps({"key": key, "choice": data}))
            assert (load_cached(key) is not None) == _packs(onednn, sixteen, dtype), (name, dtype)


@pytest.mark.parametrize("name", CASES)
def test_building_a_layout_the_cpu_cannot_run_is_refused_before_a_weight_moves(name):
    """`apply_layout`, `pack_for_onednn` and the probe with an explicit layout list refuse (one line, the
    missing feature) before any weight is re-stored; on this machine the builds it can run also succeed."""
    from specbench.models.resolve import load_model

    fake, onednn, sixteen = _fake(name)
    with assume_cpu_features(fake):
        for dtype in DTYPES:
            if _packs(onednn, sixteen, dtype):
                continue
            model = load_model("tiny-random-llama", dtype=DTYPE_NAMES[dtype]).model
            strides = [p.stride() for p in model.parameters()]
            with pytest.raises(SpecbenchError, match="needs"):
                apply_layout(model, LAYOUTS["onednn-packed two-row"])
            assert [p.stride() for p in model.parameters()] == strides
            assert not any(hasattr(m, "packed_weight") for m in model.modules())
            with pytest.raises(SpecbenchError, match="needs"):
                pack_for_onednn(torch.zeros(4, 4, dtype=dtype))
            from specbench.engine.decoder import NativeDecoder

            with pytest.raises(SpecbenchError, match="no layout to measure"):
                probe_layouts({DTYPE_NAMES[dtype]: NativeDecoder(model)}, 3, layouts={DTYPE_NAMES[dtype]: [PACKED]})


def test_this_machine_builds_every_layout_it_offers():
    """The other side, on the real CPU: every layout `candidate_layouts` offers builds, and its products run."""
    from specbench.models.resolve import load_model

    for dtype in DTYPES:
        model = load_model("tiny-random-llama", dtype=DTYPE_NAMES[dtype]).model
        ids = torch.randint(0, model.config.vocab_size, (1, 5))
        for layout in candidate_layouts(dtype):
            apply_layout(model, layout)
            with torch.no_grad():
                assert torch.isfinite(model(ids).logits.float()).all(), (dtype, layout.name)


@pytest.mark.parametrize("flags", [pytest.param(AVX2, id="AVX2"), pytest.param(AVX512, id="AVX-512")])
def test_run_and_sweep_refuse_a_packed_16bit_layout_in_one_line(flags, tmp_path):
    """`specbench run --dtype bf16 --layout onednn-packed` (an internal error before) and a sweep asking the same
    exit 2 with one line naming the feature on a CPU without it, before any model loads; fp16 likewise on an
    AVX-512 CPU without AVX512-FP16."""
    from tests.cli_helpers import TINY_SWEEP, write_sweep_yaml

    fake = CpuFeatures.from_flags(flags, model="fake CPU")
    dtype = "bf16" if flags == AVX2 else "fp16"
    feature = "AVX-512" if dtype == "bf16" else "AVX512-FP16"
    with assume_cpu_features(fake):
        result = invoke(
            "run",
            "--target",
            "tiny-random-llama",
            "--prompt",
            "hi",
            "--dtype",
            dtype,
            "--layout",
            "onednn-packed",
            "--max-new-tokens",
            2,
        )
        assert_user_error(result, "onednn-packed", feature, "fake CPU")
        sweep = write_sweep_yaml(
            tmp_path, TINY_SWEEP, dtype=dtype, layout="onednn-packed two-row", workloads=["mt-bench"]
        )
        result = invoke("sweep", sweep, "--dry-run")
        assert_user_error(result, "onednn-packed two-row", feature)


def test_layout_setting_is_checked_in_backend_options_too():
    """``backend_options: {layout: ...}`` of the own backend reaches the same check when the backend is built."""
    from specbench.backends.own_engine import OwnEngineBackend

    with assume_cpu_features(CpuFeatures.from_flags(AVX2, model="fake CPU")):
        with pytest.raises(SpecbenchError, match="AVX-512"):
            OwnEngineBackend(target="tiny-random-llama", device="cpu", dtype="bf16", layout="onednn-packed")
    monkey = layout_probe  # the probe module asks the same function (no copy of the rule of its own)
    assert monkey.layout_refusal is layout_refusal
