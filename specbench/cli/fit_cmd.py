"""`specbench fit RESULTS_DIR`: acceptance fits, goodness of fit and cost coefficients."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from specbench.analysis.context_bins import fit_by_context_bin
from specbench.analysis.cost.round_cost import fit_group_costs
from specbench.analysis.fit import fit_acceptance, fits_frame, goodness_frame, load_results, positions_frame
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.cli.shell.params import bounded
from specbench.cli.views.online import online_frames, print_online
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import estimate, fmt, ms, plain, signed
from specbench.errors import SpecbenchError, did_you_mean
from specbench.records.store import COLUMNS
from specbench.safe_files import json_ready


def text_row(table, *cells) -> None:
    """Add a row whose cells are plain text (labels and tree specs may hold '[', which Rich would read as markup)."""

    table.add_row(*(plain(c) for c in cells))


def group_label(row) -> str:
    """A drafter label with its tree, e.g. 'draft-model(model=x) [3x2x1]' (chains: the label alone)."""
    tree = "" if row["tree"] == "chain" else f" [{row['tree']}]"
    schedule = row.get("schedule")
    schedule = "" if schedule is None or schedule != schedule or schedule == "fixed" else f" schedule {schedule}"
    return f"{row['drafter_label']}{tree}{schedule}"


def _print_tables(acceptance, positions, goodness, costs, by: list[str]) -> None:
    console = wide_console()
    many_targets = acceptance["target"].nunique() > 1
    table = Table(
        title="Acceptance: α by maximum likelihood (truncated geometric, pooled over γ)",
        caption="α̂ = accepted ÷ attempted draft positions; α obs = accepted ÷ drafted; "
        "model = what predictions use; "
        "flag = constant α rejected by the LRT against per-position rates",
    )
    columns = (
        (["target"] if many_targets else [])
        + ["workload"]
        + by
        + ["drafter", "T", "γ", "prompts", "rounds", "α̂ [95% CI]", "α obs", "model", "d", "p const", "flag / notes"]
    )
    for c in columns:
        table.add_column(c, overflow="fold")
    for _, r in acceptance.iterrows():
        cells = ([str(r["target"])] if many_targets else []) + [str(r["workload"])] + [str(r[b]) for b in by]
        cells += [
            group_label(r),
            fmt(r["temperature"], 2),
            r["gammas"],
            str(r["n_prompts"]),
            str(r["n_rounds"]),
            estimate(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            fmt(r["alpha_observed"]),
            r["model"],
            fmt(r["decay"]),
            fmt(r["p_constant_vs_free"], 3),
            "; ".join(x for x in (r["flag"], r["notes"]) if x),
        ]
        text_row(table, *cells)
    console.print(table)

    if not positions.empty:
        wanted = ("workload", *by, "drafter_label", "tree", "temperature", "target")
        keys = [c for c in acceptance.columns if c in positions.columns and c in wanted]
        depth = min(int(positions["position"].max()) + 1, 12)
        ptable = Table(title="Per-position acceptance α_i = P(i accepted | all before accepted), attempts in ()")
        ptable.add_column("group", overflow="fold")
        for i in range(depth):
            ptable.add_column(f"α_{i}", justify="right")
        for _, part in positions.groupby(keys, sort=False):
            first = part.iloc[0]
            name = " ".join([str(first["workload"]), *(str(first[b]) for b in by), group_label(first)])
            cells = [name]
            for i in range(depth):
                row = part[part["position"] == i]
                cells.append("" if row.empty else f"{row['alpha_i'].iloc[0]:.2f} ({row['attempts'].iloc[0]})")
            text_row(ptable, *cells)
        console.print(ptable)

    if not goodness.empty:
        gtable = Table(
            title="Goodness of fit: observed vs predicted τ (tokens per target forward) per γ",
            caption="predicted over each round's own draft length; z = residual ÷ model standard error "
            "(- where the model has no variance: α̂ = 1 or 0)",
        )
        for c in ["workload", *by, "drafter", "γ", "rounds", "τ observed", "τ predicted", "residual", "z"]:
            gtable.add_column(c, overflow="fold")
        for _, r in goodness.iterrows():
            text_row(
                gtable,
                str(r["workload"]),
                *[str(r[b]) for b in by],
                group_label(r),
                str(r["gamma"]),
                str(r["rounds"]),
                fmt(r["tau_observed"]),
                fmt(r["tau_predicted"]),
                signed(r["residual"]),
                fmt(r["z"], 2),
            )
        console.print(gtable)

    if not costs.empty:
        ctable = Table(
            title="Costs from recorded timings (batch 1)",
            caption="t(k): target forward over k = drafted + 1 tokens; c = draft step ÷ target step; "
            "ρ = share of rounds that drafted",
        )
        for c in [
            "workload",
            "drafter",
            "t(k) [ms]",
            "target step ms",
            "draft step ms",
            "c",
            "overhead ms",
            "ρ",
            "baseline tok/s",
            "notes",
        ]:
            ctable.add_column(c, overflow="fold")
        for _, r in costs.iterrows():
            if "verify_a_s" not in r or r.get("verify_a_s") != r.get("verify_a_s"):
                text_row(ctable, str(r["workload"]), group_label(r), *["-"] * 7, str(r["cost_notes"]))
                continue
            line = f"{ms(r['verify_a_s'])} + {ms(r['verify_b_s'], 3)}·k"
            if r["verify_model"] == "knee":
                line += f" + {ms(r['verify_b2_s'], 3)}·(k−{fmt(r['verify_knee'], 0)})₊"
            step = "per proposal " if r["model_free"] else ""
            text_row(
                ctable,
                str(r["workload"]),
                group_label(r),
                line,
                ms(r["target_step_s"]),
                f"{step}{ms(r['draft_step_s'])}",
                fmt(r["c"]),
                ms(r["overhead_s"]),
                fmt(r["propose_rate"], 2),
                fmt(r["baseline_tokens_per_s"], 1),
                str(r["cost_notes"] or ""),
            )
        console.print(ctable)


def _print_context_bins(table) -> None:
    """α̂ and τ per configuration and context-length bin (long-context records spanning several bins)."""
    if table.empty:
        return
    many_workloads = table["workload"].nunique() > 1
    ctable = Table(
        title="Acceptance by context length: α̂ and τ per context-length bin",
        caption="the same (document, task) pairs in every bin; prompt tokens = mean encoded prompt length",
    )
    for c in (["workload"] if many_workloads else []) + [
        "drafter",
        "T",
        "γ",
        "bin",
        "prompt tokens",
        "prompts",
        "α̂ [95% CI]",
        "α obs",
        "τ [95% CI]",
    ]:
        ctable.add_column(c, overflow="fold")
    for _, r in table.iterrows():
        text_row(
            ctable,
            *([str(r["workload"])] if many_workloads else []),
            group_label(r),
            fmt(r["temperature"], 2),
            str(r["gamma"]),
            str(r["context_bin"]),
            f"{r['prompt_tokens']:,.0f}",
            str(r["n_prompts"]),
            estimate(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            fmt(r["alpha_observed"]),
            estimate(r["tau"], r["tau_lo"], r["tau_hi"], 2),
        )
    wide_console().print(ctable)


def fit_command(
    results_dir: Path = typer.Argument(..., help="A results folder written by `specbench sweep`."),
    by: list[str] = typer.Option(
        [], "--by", help="Also split groups by this record column, e.g. category (MT-Bench categories). Repeatable."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (acceptance, positions, goodness_of_fit, costs)."),
    n_boot: int = typer.Option(
        N_BOOT,
        "--bootstrap",
        callback=bounded("bootstrap"),
        help="Bootstrap replicates over prompts for the α interval.",
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed"), help="Seed of the bootstrap."),
):
    """Fit the acceptance model and the cost model of a sweep's results.

    For every (target, drafter, tree, workload, temperature): α by maximum likelihood pooled over
    all γ with a prompt-bootstrap 95% interval, per-position acceptance α_i, a likelihood-ratio
    test of constant α against the per-position rates and a decaying fit α_i = α·d^i, observed vs
    predicted τ per γ, and the cost coefficients (verify time t(k) = a + b·k, draft step, c).
    Records of a long-context workload spanning several context-length bins add α̂ and τ per
    configuration and bin; a sweep with online adaptation adds α, τ and speedup per window of the
    stream and the recovery after each shift point (docs/strategies.md). Formulas: docs/fit.md.

    Examples:

      specbench fit results/demo

      specbench fit results/mt-bench --by category

      specbench fit results/demo --json > fit.json
    """

    groupable = [name for name, (kind, _) in COLUMNS.items() if not str(kind).startswith(("list", "large_list"))]
    for column in by:
        if column not in COLUMNS:
            raise SpecbenchError(f"--by: unknown column '{column}'{did_you_mean(column, groupable)}")
        if column not in groupable:
            raise SpecbenchError(
                f"--by: column '{column}' holds a list per record (every token or round), nothing "
                f"to group by; choose a column with one value per record, e.g. category"
            )
    records = load_results(results_dir)
    fits = fit_acceptance(records, by=by, n_boot=n_boot, seed=seed)
    acceptance, positions, goodness = fits_frame(fits), positions_frame(fits), goodness_frame(fits)
    costs = fit_group_costs(records)
    by_context = fit_by_context_bin(records, n_boot=n_boot, seed=seed)
    online = online_frames(records)  # online adaptation over a stream: windows and recovery after shifts
    if json_out:
        frames = {
            "acceptance": acceptance,
            "positions": positions,
            "goodness_of_fit": goodness,
            "costs": costs,
            "acceptance_by_context_bin": by_context,
            **online,
        }
        payload = {name: frame.to_dict("records") for name, frame in frames.items()}
        typer.echo(json.dumps(json_ready(payload), indent=2))
        return
    _print_tables(acceptance, positions, goodness, costs, list(by))
    _print_context_bins(by_context)
    print_online(online, wide_console())


def register(app: typer.Typer) -> None:
    app.command("fit")(fit_command)
