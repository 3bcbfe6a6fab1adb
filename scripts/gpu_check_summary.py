"""summary.md of a GPU check run (scripts/gpu_check.sh): environment, steps, outputs, profiles.

    python scripts/gpu_check_summary.py --out OUT --work WORK --steps STEPS_TSV --elapsed SECONDS

STEPS_TSV holds one ``name<TAB>result<TAB>seconds`` line per step; WORK holds each step's output
as ``NAME.out``; OUT holds the profile folders ``profile-1b`` and ``profile-8b`` and receives
``summary.md``. Works without CUDA too (the device line then says so), so it is tested on the CPU.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import torch

from specbench.analysis.cost.profile import fit_profile, markdown_summary, what_if
from specbench.measure.environment import git_commit, package_versions
from specbench.records.profile_file import load_profile

PROFILES = ("profile-1b", "profile-8b")
WHAT_IF_ALPHAS = (0.6, 0.8)
WHAT_IF_BATCHES = (1, 4, 16, 64)


def device_line() -> str:
    if not torch.cuda.is_available():
        return "- device: no CUDA device visible to torch"
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        driver = "?"
    props = torch.cuda.get_device_properties(0)
    return (
        f"- device: {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs, "
        f"driver {driver}, CUDA {torch.version.cuda}"
    )


def tail(work: Path, name: str, n: int) -> list[str]:
    path = work / f"{name}.out"
    text = path.read_text(errors="replace").splitlines() if path.exists() else ["(no output)"]
    return ["```"] + text[-n:] + ["```"]


def profile_section(folder: Path) -> list[str]:
    """A profile's tables, then what γ a constant acceptance would get per batch size and drafter."""
    if not (folder / "run.json").exists():
        return [f"{folder.name}: not measured (see the steps above)", ""]
    profile = load_profile(folder)
    lines = [markdown_summary(profile)]
    for drafter in profile.drafters:
        table = what_if(fit_profile(profile, drafter), list(WHAT_IF_ALPHAS), list(WHAT_IF_BATCHES), context=1024)
        lines += [
            f"What γ a constant acceptance α would get with drafter {drafter} (context 1024; speedup = "
            "E[tokens] · target-only round ÷ speculative round):",
            "",
            "| α | batch | best γ | speedup | at γ=1 | at γ=4 |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.alpha:g} | {r.batch} | {r.gamma} | {r.speedup:.2f}× | {r.speedup_gamma_1:.2f}× | "
            f"{r.speedup_gamma_4:.2f}× |"
            for r in table.itertuples()
        ]
        lines += [""]
    return lines


def summary(out: Path, work: Path, steps_file: Path, elapsed: int) -> str:
    steps = [line.split("\t") for line in steps_file.read_text().splitlines() if line] if steps_file.exists() else []
    versions = package_versions()
    lines = [
        "# specbench GPU check",
        "",
        device_line(),
        f"- python {versions['python']}, torch {versions['torch']}, transformers {versions['transformers']}, "
        f"triton {versions['triton']}; specbench commit {git_commit()}",
        f"- total {elapsed} s",
        "",
        "| step | result | seconds |",
        "|---|---|---:|",
    ]
    lines += [f"| {name} | {result} | {seconds} |" for name, result, seconds in steps]
    lines += ["", "## CUDA tests (pytest -m cuda)", ""] + tail(work, "cuda-tests", 8)
    lines += ["", "## Triton kernel tests on the GPU (tests/test_kernels.py)", ""] + tail(work, "kernel-tests", 8)
    lines += ["", "## Kernel benchmark (scripts/bench_kernels.py --quick)", ""] + tail(work, "kernel-bench", 60)
    lines += ["", "## GPU busy time per step of the own decoder (scripts/gpu_busy.py)", ""] + tail(work, "gpu-busy", 12)
    lines += ["", "## Energy per token (scripts/energy_check.py: NVML above idle power)", ""] + tail(work, "energy", 10)
    lines += ["", "## Cost profiles (random weights, bf16)", ""]
    for name in PROFILES:
        try:
            lines += profile_section(out / name)
        except Exception as exc:  # noqa: BLE001 — the summary must still be written
            lines += [f"({name} tables failed: {type(exc).__name__}: {exc})", ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--steps", type=Path, required=True)
    parser.add_argument("--elapsed", type=int, default=0)
    args = parser.parse_args()
    (args.out / "summary.md").write_text(summary(args.out, args.work, args.steps, args.elapsed))
    print(f"gpu_check: wrote {args.out / 'summary.md'}")


if __name__ == "__main__":
    main()
