"""`specbench profile`: time the hardware side of speculation from architectures alone (random weights)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from specbench.analysis.cost.moe import moe_verify_table
from specbench.analysis.options import MAX_GAMMA
from specbench.bounds import int_list
from specbench.cli.shell.exit_codes import say
from specbench.cli.shell.params import bounded, folder_path
from specbench.cli.views.progress_lines import Steps
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import fmt, styled
from specbench.errors import SpecbenchError
from specbench.records.archive import set_aside_folder
from specbench.records.lock import LOCK_FILE, FolderLock, check_writable_folder
from specbench.records.profile_file import PROFILE_KIND, summary_frame, write_profile
from specbench.safe_files import json_ready, read_json

EPILOG = """Examples:

  specbench profile --target tiny-random-llama --drafter tiny-random-llama-draft --drafter ngram \\
      --device cpu --batch 1,4 --context 64,256 --verify-tokens 1..8 --out profiles/tiny-cpu

  specbench profile --target scripts/gpu_configs/llama-3.1-8b \\
      --drafter scripts/gpu_configs/llama-3.2-1b --drafter ngram --device cuda --dtype bf16 \\
      --batch 1,4,16,64 --context 512,2048 --verify-tokens 1..16 --out profiles/h100-llama8b

  specbench recommend results/mt-bench --cost-profile profiles/h100-llama8b --batch 1,8,32
"""


def profile_command(
    target: str = typer.Option(
        ..., "--target", "-t", help="Target architecture: alias, config.json, folder holding one, or hub id."
    ),
    drafter: list[str] = typer.Option(
        None, "--drafter", "-d", help="Drafter architecture (as --target) or 'ngram'; repeatable or comma separated."
    ),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or auto."),
    dtype: str = typer.Option("auto", "--dtype", help="fp32, bf16 or fp16 (auto: bf16 on CUDA, fp32 on CPU)."),
    batch: str = typer.Option("1,4,16,64", "--batch", help="Batch sizes, e.g. 1,4,16,64."),
    context: str = typer.Option("512,2048", "--context", help="Tokens already in the KV cache, e.g. 512,2048."),
    verify_tokens: str = typer.Option(
        f"1..{MAX_GAMMA}",
        "--verify-tokens",
        help="Tokens one verify forward checks per sequence (γ + 1 for a chain of γ), e.g. 1..16.",
    ),
    repeats: int = typer.Option(
        10, "--repeats", callback=bounded("profile.repeats"), help="Timed calls per cell (median and IQR over them)."
    ),
    warmup: int = typer.Option(
        3, "--warmup", callback=bounded("profile.warmup"), help="Untimed calls before each cell."
    ),
    kernels: str = typer.Option("auto", "--kernels", help="Verify attention: auto (Triton on CUDA), triton or torch."),
    threads: int = typer.Option(
        None,
        "--threads",
        callback=bounded("threads"),
        help="CPU threads for torch (on a shared, busy CPU one thread is often fastest).",
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed"), help="Seed of the random weights and tokens."),
    with_dense_twin: bool = typer.Option(
        False, "--dense-twin", help="MoE target: also time the dense shape of equal active parameters."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", parser=folder_path, help="Profile folder to write (run.json + profile.parquet)."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Overwrite an existing profile in --out (a sweep's results there are moved to old-sweep-SPECHASH/ in it).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the summary table's rows as JSON instead."),
):
    """Measure a cost profile: verify forwards per batch size, context and verify tokens; drafter steps; bandwidth.

    Architectures get random weights (no download): costs do not depend on the weights' values.
    Per cell: warm-up, device-synchronised repeats, median and IQR, memory, and the bandwidth
    bound (weight + KV bytes per forward ÷ time, as a share of the device's peak). Fit and use it
    with `specbench recommend RESULTS --cost-profile DIR`. Method and model: docs/profile.md.
    """

    from specbench.profile.profiler import (  # lazy: loads torch; keeps `specbench --help` fast
        ProfileGrid,
        measure_profile,
        plan_profile,
    )  # lazy: loads torch; keeps `specbench --help` fast

    grid = ProfileGrid(
        batches=int_list(batch, "batch", "--batch"),
        contexts=int_list(context, "context", "--context"),
        verify_tokens=int_list(verify_tokens, "verify_tokens", "--verify-tokens"),
        warmup=warmup,
        repeats=repeats,
    )
    drafters = [name.strip() for item in (drafter or []) for name in item.split(",") if name.strip()]

    check_writable_folder(out)  # a file, a read-only folder: refused before anything is measured
    if (out / "run.json").exists() and not force:
        raise SpecbenchError(f"{out} already holds a profile or results (run.json): choose another --out or --force")
    plan = plan_profile(
        target,
        drafters,
        device=device,
        dtype=dtype,
        grid=grid,
        kernels=kernels,
        seed=seed,
        with_dense_twin=with_dense_twin,
    )
    with FolderLock(out):  # one writer per folder until the command ends
        if (out / "run.json").exists() and not force:  # again, now that no one else writes there
            raise SpecbenchError(
                f"{out} already holds a profile or results (run.json): choose another --out or --force"
            )
        if threads:
            import torch  # lazy: loads torch; keeps `specbench --help` fast

            torch.set_num_threads(threads)
        with Steps("profile", total=plan.cells) as steps:  # a bar on a terminal, a line per cell when piped
            steps.say("measuring read bandwidth")

            def report(done: int, total: int, what: str) -> None:
                steps.update(done, what, total)

            profile = measure_profile(plan, report)
        set_aside_other_kind(out)
        write_profile(out, profile)
        if json_out:
            _print_profile_json(profile, out)
            return
        _print_profile(profile, out)


def set_aside_other_kind(out: Path) -> None:
    """--force over a folder of another kind (a sweep's results): its content moves to old-KIND-TAG/ in the
    folder (`specbench.records.archive.set_aside_folder`) instead of being overwritten; a profile is replaced."""
    try:
        info = read_json(out / "run.json", "results file")
    except SpecbenchError:
        info = None if not (out / "run.json").exists() else {"kind": "unreadable"}
    if info is None or (isinstance(info, dict) and info.get("kind") == PROFILE_KIND):
        return
    kind = str(info.get("kind") or "sweep") if isinstance(info, dict) else "unknown"
    tag = str(info.get("spec_hash") or info.get("created") or "earlier") if isinstance(info, dict) else "earlier"
    moved = set_aside_folder(out, kind, tag, keep=(LOCK_FILE,))
    say(f"specbench: note: --force: the {kind} that was in {out} is set aside in {moved}")


def profile_rows(profile) -> list[dict]:
    """The summary table's rows with the same columns (model, what, B, c, ms [IQR], ms at the most tokens, GB/s,
    peak, MiB)."""
    rows = []
    for _, r in summary_frame(profile).iterrows():
        rows.append(
            {
                "model": str(r["model"]),
                "what": str(r["measure"]),
                "B": int(r["batch"]),
                "c": int(r["context"]),
                "ms": float(r["ms_tokens_min"]),
                "iqr_ms": float(r["iqr_ms_tokens_min"]),
                "ms_tokens_max": float(r["ms_tokens_max"]) if r["tokens_max"] > r["tokens_min"] else None,
                "tokens_min": int(r["tokens_min"]),
                "tokens_max": int(r["tokens_max"]),
                "gb_s": float(r["gb_s"]),
                "peak": float(r["peak_fraction"]),
                "mib": float(r["memory_bytes"]) / 2**20,
            }
        )
    return rows


def _print_profile_json(profile, out: Path) -> None:

    info = profile.info
    typer.echo(
        json.dumps(
            json_ready(
                {
                    "out": str(out),
                    "device": info["device"]["device_name"],
                    "dtype": info["dtype"],
                    "peak_gb_s": info["bandwidth"]["peak_gb_s"],
                    "seconds": info["seconds"],
                    "load_average_start": info.get("load_average_start"),
                    "load_average_end": info.get("load_average_end"),
                    "skipped": info.get("skipped", []),
                    "rows": profile_rows(profile),
                }
            ),
            indent=2,
        )
    )


def _print_profile(profile, out: Path) -> None:
    console = wide_console()
    info = profile.info
    bandwidth = info["bandwidth"]
    peak = f"{bandwidth['peak_gb_s']:.0f} GB/s ({bandwidth['peak_source']})" if bandwidth["peak_gb_s"] else "unknown"
    grid = info["grid"]
    console.print(
        styled(("Cost profile", "bold"), f" on {info['device']['device_name']} · {info['dtype']} · peak {peak}")
    )
    table = Table(
        caption=f"ms: median of {grid['repeats']} calls [IQR] at the fewest tokens per sequence "
        f"(verify: 1) and at the most (verify: {max(grid['tokens'])} verify tokens); GB/s: "
        "(weight + KV bytes) ÷ time at the fewest; MiB: CUDA max allocated or CPU peak RSS"
    )
    for name in ("model", "what", "B", "c", "ms", "ms at most tokens", "GB/s", "peak", "MiB"):
        table.add_column(
            name,
            justify="left" if name in ("model", "what") else "right",
            overflow="fold" if name == "model" else "ellipsis",
        )
    for _, r in summary_frame(profile).iterrows():
        table.add_row(
            str(r["model"]),
            str(r["measure"]),
            str(r["batch"]),
            str(r["context"]),
            f"{r['ms_tokens_min']:.3f} [{r['iqr_ms_tokens_min']:.3f}]",
            f"{r['ms_tokens_max']:.3f}" if r["tokens_max"] > r["tokens_min"] else "-",
            fmt(r["gb_s"], 1),
            "-" if r["peak_fraction"] != r["peak_fraction"] else f"{100 * r['peak_fraction']:.0f}%",
            f"{r['memory_bytes'] / 2**20:.0f}",
        )
    console.print(table)
    if info.get("dense_twin"):
        _print_moe_verify(console, profile)
    for note in info.get("skipped", []):
        console.print(f"note: {note}", style="yellow")
    load = info.get("load_average_start")
    console.print(
        f"wrote {out} in {info['seconds']:.1f} s"
        + (f" (load average {load[0]:.2f} at start, {info['load_average_end'][0]:.2f} at end)" if load else "")
    )


def _print_moe_verify(console, profile) -> None:
    """t_verify(n) of the MoE target beside its dense twin (`specbench.analysis.cost.moe.moe_verify_table`)."""
    frame = moe_verify_table(profile)
    table = Table(
        caption="MoE ÷ dense: verify time of the MoE shape over its dense twin of equal active "
        "parameters; D: expected distinct experts per layer for the B·n tokens (uniform "
        "routing); model: dense + s·(D − D(B)), s fitted per (B, c)"
    )
    for name in ("B", "c", "n", "MoE ms", "dense ms", "MoE ÷ dense", "D", "model ms"):
        table.add_column(name, justify="right")
    for _, r in frame.iterrows():
        table.add_row(
            str(int(r["batch"])),
            str(int(r["context"])),
            str(int(r["verify_tokens"])),
            f"{r['moe_ms']:.3f}",
            f"{r['dense_ms']:.3f}",
            f"{r['ratio']:.2f}",
            f"{r['distinct_experts']:.1f}",
            f"{r['model_ms']:.3f}",
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("profile", epilog=EPILOG)(profile_command)
