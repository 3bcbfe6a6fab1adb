"""`specbench run`: one prompt through the speculative engine, with its metrics."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specbench.catalogue.drafters import TARGET_ONLY
from specbench.cli.shell.params import bounded
from specbench.cli.views.render import console as make_console
from specbench.cli.views.render import plain, print_run_report
from specbench.engine.drafters.param_values import check_param_values
from specbench.errors import SpecbenchError
from specbench.safe_files import json_ready, read_text_file

EPILOG = """Examples:

  specbench run --prompt "Write a haiku about GPUs" --drafter ngram --gamma 4 --baseline

  specbench run --drafter-model smollm2-135m-exit8 --gamma 3 --tree 3x2x1 --prompt "Explain KV caches"

  specbench run --dtype auto --baseline --prompt "Write a binary search in Python"

  specbench run --target qwen2.5-coder-1.5b --drafter-model qwen2.5-coder-0.5b --gamma 5 \\
      --prompt-file task.txt --temperature 0.7 --top-p 0.9 --json
"""


def run(
    prompt: str = typer.Option(None, "--prompt", "-p", help="The user message (or raw text with --no-chat)."),
    prompt_file: Path = typer.Option(None, "--prompt-file", help="Read the prompt from a file."),
    target: str = typer.Option("smollm2-135m", "--target", "-t", help="Target model: alias, .gguf, folder or hub id."),
    drafter: str = typer.Option(
        None,
        "--drafter",
        "-d",
        help="ngram, draft-model or none (default: draft-model if --drafter-model, else ngram).",
    ),
    drafter_model: str = typer.Option(None, "--drafter-model", help="Model for the draft-model drafter."),
    drafter_param: list[str] = typer.Option([], "--drafter-param", help="Drafter parameter KEY=VALUE (repeatable)."),
    gamma: int = typer.Option(
        4, "--gamma", "-g", callback=bounded("gamma"), help="Draft tokens per round, or tree depth (0: target only)."
    ),
    tree: str = typer.Option(
        "chain", "--tree", help="Draft shape: chain, 3x2x1, paths:FILE, @NAME or dynamic:topk=K,nodes=N."
    ),
    temperature: float = typer.Option(
        0.0, "--temperature", callback=bounded("temperature"), help="0 = greedy, else 0.001 to 100."
    ),
    top_p: float = typer.Option(
        1.0, "--top-p", callback=bounded("top_p"), help="Nucleus sampling cut, applied to target and drafter alike."
    ),
    top_k: int = typer.Option(0, "--top-k", callback=bounded("top_k"), help="Top-k cut (0 = none)."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", "-n", callback=bounded("max_new_tokens")),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed")),
    baseline: bool = typer.Option(False, "--baseline", help="Also run target-only decoding and report the speedup."),
    chat: bool = typer.Option(True, "--chat/--no-chat", help="Apply the tokenizer's chat template."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Always generate --max-new-tokens tokens."),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or auto."),
    kernels: str = typer.Option(
        "auto", "--kernels", help="Verification kernels: auto (Triton on CUDA), triton, torch."
    ),
    compile: bool = typer.Option(
        False, "--compile", help="torch.compile the decode/verify steps (CUDA graphs on GPU)."
    ),
    dtype: str = typer.Option(
        "fp32",
        "--dtype",
        help="fp32, bf16, fp16, or auto: the fastest lossless dtype and "
        "weight layout measured on this CPU (cached per machine and model).",
    ),
    layout: str = typer.Option(
        None,
        "--layout",
        help="CPU weight layout: auto (measured on this CPU) or one of "
        "mixed, row-major weight-first, column-major, row-major, row-major two-row, "
        "onednn-packed, onednn-packed two-row (default: the dtype's default).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (text + metrics) instead of tables."),
):
    """Generate from one prompt with speculative decoding and show tokens/s, α, τ and the time split."""
    from specbench.backends.own_engine import run_prompt  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.engine.cpu.layout_probe import parse_layout_setting  # lazy: loads torch
    from specbench.engine.sampling import SamplingParams  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.engine.tree import tree_depth_limit  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.measure.grid.sweep import parse_params  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.models.resolve import dtype_setting  # lazy: loads torch

    depth = tree_depth_limit(tree)  # a bad shape fails before any model loads
    if depth is not None and gamma > depth and drafter != TARGET_ONLY:
        raise SpecbenchError(
            f"tree '{tree}' drafts at most {depth} deep: --gamma {gamma} would run as γ = {depth} "
            f"(give --gamma {depth} or less)"
        )
    if prompt_file is not None and prompt is not None:
        raise SpecbenchError("give the prompt once: --prompt TEXT or --prompt-file FILE, not both")
    parse_layout_setting(layout, "--layout")
    dtype = dtype_setting(dtype, "--dtype")
    if prompt_file is not None:
        prompt = read_text_file(prompt_file, "prompt file")  # size-limited UTF-8 text
    if prompt is None or not prompt.strip():
        raise SpecbenchError("empty prompt: give --prompt TEXT or --prompt-file FILE")
    if drafter is None:
        drafter = "draft-model" if drafter_model else "ngram"

    params = parse_params(drafter_param, drafter)
    if drafter_model:
        params["model"] = drafter_model
    if drafter == TARGET_ONLY:
        gamma = 0
    else:
        params = check_param_values(drafter, params, "run")
    sampling = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p)
    with make_console(stderr=True, wide=False).status(plain("starting")) as spinner:  # transient; silent off a tty
        report = run_prompt(
            target=target,
            drafter=drafter,
            params=params,
            gamma=gamma,
            tree=tree,
            kernels=kernels,
            compile=compile,
            sampling=sampling,
            prompt=prompt,
            max_new_tokens=max_new_tokens,
            seed=seed,
            baseline=baseline,
            chat=chat,
            stop_at_eos=not ignore_eos,
            device=device,
            dtype=dtype,
            layout=layout,
            status=lambda message: spinner.update(plain(message)),
        )
    if json_out:
        typer.echo(json.dumps(json_ready(report), indent=2, allow_nan=False))  # NaN -> null: strict JSON
    else:
        print_run_report(report)


def register(app: typer.Typer) -> None:
    app.command("run", epilog=EPILOG)(run)
