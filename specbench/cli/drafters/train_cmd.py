"""`specbench train-drafter`: train a drafter of any trained type in the registry (Medusa, EAGLE,
EAGLE-3, MTP, ...) by self-distillation."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.table import Table

from specbench.cli.shell.params import bounded, folder_path
from specbench.cli.views.progress_lines import Steps
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import plain
from specbench.engine.drafters import registry
from specbench.errors import SpecbenchError
from specbench.models.resolve import load_model

EPILOG = """Examples:

  specbench train-drafter --target smollm2-135m --type eagle --out drafters/my-eagle

  specbench train-drafter --type medusa --out /tmp/medusa --tokens 20000 --epochs 3 --max-minutes 20

  specbench run --drafter eagle --drafter-param checkpoint=drafters/my-eagle --gamma 4 --prompt "Hi"

Training prompts come from the train split of the workloads (ShareGPT keeps half its prompts for
training; MT-Bench and HumanEval are evaluation-only). The target's greedy answers and its hidden
states are cached once under $SPECBENCH_CACHE/drafter-data and shared by every drafter type.
"""


def train_drafter(
    kind: str = typer.Option(
        ..., "--type", help="A trained drafter type: medusa, eagle, eagle3, mtp, eagle3.1, semi-ar, parallel-tree, ..."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", parser=folder_path, help="Checkpoint folder to write (config.json + model.safetensors)."
    ),
    target: str = typer.Option("smollm2-135m", "--target", "-t", help="Target model: alias, .gguf, folder or hub id."),
    prompts: list[str] = typer.Option(
        ["sharegpt"], "--prompts", help="Workloads whose train split gives the prompts (repeatable)."
    ),
    tokens: int = typer.Option(
        40_000,
        "--tokens",
        callback=bounded("train.tokens"),
        help="Answer tokens of the target to train on (held-out included).",
    ),
    epochs: int = typer.Option(
        4, "--epochs", callback=bounded("train.epochs"), help="Passes over the training sequences."
    ),
    lr: float = typer.Option(
        1e-3, "--lr", callback=bounded("train.lr"), help="Peak learning rate (AdamW, warm-up then cosine decay)."
    ),
    max_minutes: float = typer.Option(
        None,
        "--max-minutes",
        callback=bounded("train.max_minutes"),
        help="Stop training after this long (still saves).",
    ),
    max_new_tokens: int = typer.Option(
        160, "--max-new-tokens", callback=bounded("max_new_tokens"), help="Answer length per training prompt."
    ),
    draft_vocab: int = typer.Option(
        8192,
        "--draft-vocab",
        callback=bounded("train.draft_vocab"),
        help="Draft vocabulary size (0: the full vocabulary).",
    ),
    steps: int = typer.Option(
        None, "--steps", callback=bounded("train.steps"), help="Unrolled training steps (default: eagle 1, eagle3 3)."
    ),
    heads: int = typer.Option(None, "--heads", callback=bounded("train.heads"), help="Medusa heads (default 4)."),
    modules: int = typer.Option(None, "--modules", callback=bounded("train.modules"), help="MTP modules (default 2)."),
    intermediate: int = typer.Option(
        None,
        "--intermediate",
        callback=bounded("train.intermediate"),
        help="MLP width of the drafter layer (default 768).",
    ),
    batch_tokens: int = typer.Option(
        4096, "--batch-tokens", callback=bounded("train.batch_tokens"), help="Padded positions per optimizer step."
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed")),
    device: str = typer.Option("cpu", "--device", help="cpu, cuda, cuda:N or auto."),
    threads: int = typer.Option(
        None, "--threads", callback=bounded("threads"), help="torch CPU threads (default: torch's choice)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing checkpoint in --out."),
):
    """Train a drafter for a target on the target's own answers to training prompts."""
    import torch  # lazy: `specbench --help` and the other commands must start without loading torch

    registry.get(kind, trained=True)  # an unknown type is a one-line error with a did-you-mean
    if (out / "config.json").exists() and not force:
        raise SpecbenchError(f"{out} already holds a checkpoint; pass --force to overwrite it")
    if out.exists() and not out.is_dir():
        raise SpecbenchError(f"--out {out} exists and is not a folder")
    from specbench.training.data import training_prompts  # lazy: the training package imports torch

    training_prompts(tuple(prompts), "train", 0)  # unknown or eval-only workloads fail before the model loads
    if threads:
        torch.set_num_threads(threads)

    from specbench.training.train import TrainOptions  # lazy: imports torch
    from specbench.training.train import train_drafter as run  # lazy: imports torch

    architecture = {"heads": heads, "modules": modules, "intermediate": intermediate}
    opts = TrainOptions(
        kind=kind,
        tokens=tokens,
        epochs=epochs,
        lr=lr,
        batch_tokens=batch_tokens,
        steps=steps,
        draft_vocab=draft_vocab,
        seed=seed,
        max_minutes=max_minutes,
        architecture={k: v for k, v in architecture.items() if v is not None},
    )
    args = sys.argv[sys.argv.index("train-drafter") + 1 :] if "train-drafter" in sys.argv else []
    command = " ".join(["specbench", "train-drafter", *(shlex.quote(a) for a in args)])
    with _Reporter() as reporter:
        reporter.note(f"loading target {target}")
        loaded = load_model(target, device=device)
        record = run(
            loaded,
            opts,
            out,
            workloads=tuple(prompts),
            max_new_tokens=max_new_tokens,
            command=command,
            on_event=reporter.event,
        )
    _summary(kind, out, record)


class _Reporter:
    """Progress of the three phases (`specbench.cli.views.progress_lines.Steps`: a bar on a terminal, a line per step
    when piped), with loss and held-out top-1 per head / step."""

    def __enter__(self):
        self.console = wide_console(stderr=True, wide=False)
        self.steps: Steps | None = None
        self.phase = ""
        self.last_eval = ""
        return self

    def __exit__(self, *exc):
        if self.steps is not None:
            self.steps.__exit__(*exc)
        return False

    def note(self, text: str) -> None:
        self.console.print(plain(text, "dim"))

    def _phase(self, name: str, total: int) -> Steps:
        if self.phase != name:
            if self.steps is not None:
                self.steps.__exit__(None, None, None)
            self.steps, self.phase = Steps(name, total=total).__enter__(), name
        return self.steps

    def event(self, e: dict) -> None:
        kind = e["event"]
        if kind == "phase":
            if e["phase"] == "generate":
                self.note(f"corpus: {e['folder']}")
            elif e["phase"] == "train":
                self.note(
                    f"training {e['parameters']:,} parameters on {e['train_sequences']} sequences, "
                    f"{e['heldout_sequences']} held out"
                )
            elif e["phase"] == "saved":
                self.note(f"wrote {e['folder']}")
        elif kind == "generate":
            self._phase("target answers (tokens)", e["total"]).update(
                min(e["done"], e["total"]), f"{e['prompts']} prompts"
            )
        elif kind == "features":
            self._phase("target features (sequences)", e["total"]).update(e["done"], "hidden states")
        elif kind == "step":
            self._phase("training (steps)", e["total"]).update(
                e["step"], f"epoch {e['epoch']} loss {e['loss']:.3f} {self.last_eval}"
            )
        elif kind == "eval":
            top1 = " ".join(f"{a:.2f}" for a in e["top1"])
            self.last_eval = f"held-out top-1 [{top1}]"
            self._phase("training (steps)", e["total"]).say(self.last_eval)
            self.console.print(
                f"step {e['step']:>5}: held-out loss {e['loss']:.3f}, top-1 per head/step "
                f"[{top1}] on {e['positions']} answer tokens"
            )


def _summary(kind: str, out: Path, record: dict) -> None:
    t = record["time"]
    table = Table(title=f"{kind} drafter -> {out}", show_header=False)
    table.add_row("held-out top-1 per head/step", ", ".join(f"{a:.3f}" for a in record["heldout"]["top1"]))
    table.add_row(
        "data",
        f"{record['data']['prompts']} prompts, {record['data']['answer_tokens']:,} answer tokens "
        f"({', '.join(record['data']['workloads'])}, split {record['data']['split']})",
    )
    table.add_row(
        "time",
        f"training {t['training_s']:.0f} s, features {t['features_s']:.0f} s, generation "
        f"{t['generation_s_of_the_corpus']:.0f} s (cached: {t['generation_s_this_run']:.0f} s this run)",
    )
    table.add_row("steps", f"{record['steps']} ({record['epochs_done']} epochs)")
    wide_console().print(table)


def register(app: typer.Typer) -> None:
    app.command("train-drafter", epilog=EPILOG)(train_drafter)
