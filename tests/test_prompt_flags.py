"""`--prompts` and an adaptive sweep's `--max-prompts`: both say how many prompts a workload gets.

Given both with different values, the sweep refuses in one line (exit 2) rather than let one silently cap the
other (`--prompts 8` turned `--max-prompts 16` into a single look). A workload count below an adaptive plan's
max_prompts (from the sweep file or `--prompts` alone) is honoured, and said in a note with the looks it leaves.
"""

from __future__ import annotations

from specbench.measure.grid.flags import SweepFlags
from specbench.measure.grid.sweep import build_spec, load_spec_file
from specbench.measure.grid.sweep_spec import capped_workloads
from tests.cli_helpers import assert_user_error, invoke


def test_contradictory_prompt_flags_are_refused_in_one_line(tmp_path):
    result = invoke(
        "sweep", "sweeps/demo.yaml", "--prompts", 8, "--max-prompts", 16, "--dry-run", "--out", tmp_path / "out"
    )
    assert_user_error(result, "--prompts 8 and --max-prompts 16 contradict each other", "--fixed-grid")
    assert not (tmp_path / "out").exists()


def test_equal_flags_and_one_flag_alone_are_fine():
    raw = load_spec_file("sweeps/demo.yaml")
    same = build_spec(SweepFlags(prompts=16, max_prompts=16).over(raw), where="flags")
    assert same.adaptive.max_prompts == 16 and all(w.count == 16 for w in same.workloads)
    assert capped_workloads(same) == []  # the count equals the cap: nothing to say
    alone = build_spec(SweepFlags(max_prompts=16).over(raw), where="flags")
    assert alone.adaptive.max_prompts == 16 and capped_workloads(alone) == []


def test_a_count_below_max_prompts_is_honoured_and_said():
    spec = build_spec(SweepFlags(prompts=8).over(load_spec_file("sweeps/demo.yaml")), where="flags")
    notes = capped_workloads(spec)
    assert len(notes) == 3 and notes[0].startswith("humaneval: its prompt count 8")
    assert all("below max_prompts 48: 1 look at 8 prompts" in n for n in notes)
    fixed = build_spec(
        SweepFlags(prompts=8, until_decided=False).over(load_spec_file("sweeps/demo.yaml")), where="flags"
    )
    assert fixed.adaptive is None and capped_workloads(fixed) == []
