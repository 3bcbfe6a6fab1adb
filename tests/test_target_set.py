"""A sweep over several GGUF types of the target (`specbench.measure.run.target_set`): one part per type, merged.

* the expansion: ``quantization.target`` as a list of two or more types gives one part per type, each with one
  type and the same set mark; one type (or none) is an ordinary sweep; an adaptive plan is refused in one line;
* the merge: parts of one set merge although their spec hashes differ (each measured another target), and the
  merged records keep one scenario per target; folders of other sets, or unmarked ones, are refused as before;
* the merged folder is refused by `confirm` in one line naming a part to confirm instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.measure.run.target_set import target_parts
from specbench.records.identity import SET_KEY, check_together, identify
from specbench.records.merge import merge_folders
from specbench.records.store import load_records
from tests.synthetic_results import SyntheticDrafter, make_records, write_results

RAW = {
    "name": "q",
    "target": "smollm2-135m",
    "backend": {"name": "llamacpp-server"},
    "quantization": {"target": ["F16", "Q8_0"], "drafters": ["Q8_0", "Q2_K"]},
    "drafters": [{"type": "draft-model", "params": {"model": "smollm2-135m"}}],
    "gammas": [3],
    "workloads": [{"name": "humaneval", "count": 4}],
}


def test_two_target_types_are_two_parts_with_one_mark():
    parts = target_parts(RAW, "q.yaml")
    assert [p.kind for p in parts] == ["F16", "Q8_0"]
    assert [p.raw["quantization"]["target"] for p in parts] == ["F16", "Q8_0"]
    assert parts[0].raw["quantization"]["drafters"] == ["Q8_0", "Q2_K"]
    assert parts[0].mark == parts[1].mark and parts[0].mark["types"] == ["F16", "Q8_0"]
    assert RAW["quantization"]["target"] == ["F16", "Q8_0"]  # the caller's mapping is left as it was
    other = target_parts({**RAW, "gammas": [2]}, "q.yaml")
    assert other[0].mark["hash"] != parts[0].mark["hash"]  # another sweep is another set


@pytest.mark.parametrize("target", ["F16", ["F16"], ["F16", "f16"], None])
def test_one_target_type_is_an_ordinary_sweep(target):
    assert target_parts({**RAW, "quantization": {"target": target}}, "q.yaml") == []


def test_a_set_refuses_an_adaptive_plan_and_unknown_types_in_one_line():
    with pytest.raises(SpecbenchError, match="fixed grids, one per type"):
        target_parts({**RAW, "adaptive": {"max_prompts": 16}}, "q.yaml")
    with pytest.raises(SpecbenchError, match="quantization.target"):
        target_parts({**RAW, "quantization": {"target": ["F16", "Q9_X"]}}, "q.yaml")


def _part(folder: Path, kind: str, mark: dict | None, seed: int, ids_of: str | None = None) -> Path:
    """A part measured with the target at ``kind``; its unit ids carry ``ids_of`` (default: its own type)."""
    records = make_records([SyntheticDrafter(gammas=(3,))], n_prompts=4, max_new_tokens=16, seed=seed)
    for r in records:
        r["target"] = f"smollm2-135m@{kind}"
        r["unit_id"] = f"{ids_of or kind}-{r['unit_id']}"
    info = {"sweep": {"name": "q"}, "spec_hash": f"hash-{kind}", "device_name": "cpu"}
    if mark is not None:
        info[SET_KEY] = mark
    write_results(folder, records, info)
    return folder


def test_the_parts_of_one_set_merge_and_keep_a_scenario_per_target(tmp_path):
    mark = target_parts(RAW, "q.yaml")[0].mark
    parts = [_part(tmp_path / "targets" / k, k, mark, seed) for seed, k in enumerate(("F16", "Q8_0"))]
    count = merge_folders(parts, tmp_path)
    merged = load_records(tmp_path)
    assert count == len(merged) and set(merged["target"]) == {"smollm2-135m@F16", "smollm2-135m@Q8_0"}
    assert identify(tmp_path).info[SET_KEY] == mark
    with pytest.raises(SpecbenchError, match="confirm each target's own part.*targets/F16"):
        check_together("confirm", identify(tmp_path))


def test_folders_of_other_sets_or_without_a_mark_do_not_merge(tmp_path):
    mark = target_parts(RAW, "q.yaml")[0].mark
    other = target_parts({**RAW, "gammas": [2]}, "q.yaml")[0].mark
    a = _part(tmp_path / "a", "F16", mark, 0)
    for name, second in (("other set", other), ("no mark", None)):
        b = _part(tmp_path / name.replace(" ", "-"), "Q8_0", second, 1)
        with pytest.raises(SpecbenchError, match="different sweep specs"):
            merge_folders([a, b], tmp_path / f"out-{name.replace(' ', '-')}")


def test_units_of_two_target_types_have_distinct_ids_and_untyped_ids_stay():
    """The parts' units must not collide in the merge (it keeps one row per unit id); a sweep without a GGUF type
    adds nothing to its ids (the folders it already wrote resume)."""
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.grid.units import expand_units, load_workloads

    specs = [build_spec(part.raw, "q.yaml") for part in target_parts(RAW, "q.yaml")]
    ids = [{u.unit_id for u in expand_units(spec, load_workloads(spec))} for spec in specs]
    assert ids[0] and len(ids[0]) == len(ids[1]) and not ids[0] & ids[1]
    plain = build_spec({k: v for k, v in RAW.items() if k not in ("quantization", "backend")}, "q.yaml")
    units = expand_units(plain, load_workloads(plain))
    assert units and all(u.target_type is None for u in units)


def test_a_merge_refuses_one_unit_id_under_two_targets(tmp_path):
    mark = target_parts(RAW, "q.yaml")[0].mark
    a = _part(tmp_path / "a", "F16", mark, 0)
    b = _part(tmp_path / "b", "Q8_0", mark, 0, ids_of="F16")  # the same unit ids under the other target
    with pytest.raises(SpecbenchError, match="unit id\\(s\\) appear under different targets"):
        merge_folders([a, b], tmp_path / "out")
