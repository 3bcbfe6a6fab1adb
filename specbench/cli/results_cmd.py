"""`specbench results show|merge`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import typer
from rich.table import Table
from rich.text import Text

from specbench.analysis.cost.predicted_speedup import predicted_by_scenario
from specbench.analysis.load.table import CLOSED_LOOP, LOAD_KEYS, load_keys
from specbench.analysis.recommendation.confirm_report import load_report
from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.recommendation.result import recommendation_lines
from specbench.analysis.verdicts.stopping_history import History, load_history
from specbench.analysis.verdicts.stopping_report import summary_lines
from specbench.backends import registry as backends
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.cli.shell.params import folder_path
from specbench.cli.views.adaptive import history_table
from specbench.cli.views.confirm import print_confirmation
from specbench.cli.views.render import console, fmt, milliseconds, plain, styled
from specbench.cli.views.render import console as wide_console
from specbench.errors import SpecbenchError
from specbench.records.merge import merge_folders
from specbench.records.store import load_records, load_run_info
from specbench.records.summary import (
    BASELINE_KEYS,
    LATENCY_COLUMNS,
    PERCENTILES,
    configuration_table,
    lossless_check,
)
from specbench.safe_files import json_ready, writing

results_app = typer.Typer(help="Inspect and combine results folders.", no_args_is_help=True)


@results_app.command("show")
def show(
    folder: Path = typer.Argument(..., help="A results folder (results/NAME)."),
    csv: Path = typer.Option(None, "--csv", help="Also write the summary table to this CSV file."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (the tables' rows, same keys) instead."),
):
    """One table per workload: α, τ, tokens/s and speedup for every drafter × γ, with prompt counts.

    Rows of mode 'replay' (sweeps with --mode replay|both) hold replayed acceptance and τ; their
    tokens/s and speedup are cost-model predictions, marked "pred": the speedup is the predicted one
    (acceptance × cost, the baseline modelled by the same cost fit), as `recommend` uses it. Live-vs-replay agreement:
    RESULTS/replay-summary.csv. "disturbed": live units timed under interference from other
    processes (timing protocol, docs/results-schema.md). Records of a serving backend (vllm,
    openai, vllm-server) add time to first token and inter-token latency at p50/p90/p99 over
    each row's requests, in ms (--json: always, in s).

    Example: specbench results show results/demo
    """

    if csv is not None:
        from specbench.measure.grid.validate import check_output_file  # lazy: loads torch; keeps --help fast

        check_output_file(csv, "--csv")  # before any work: not a directory, a writable place
    info = load_run_info(folder)
    records = load_records(folder)
    if records.empty:
        raise SpecbenchError(f"{folder} has no records yet")
    records, table = summary_table(records)
    levels = [k for k in LOAD_KEYS if k in table]
    if csv is not None:
        created = not csv.exists()  # a partial file is removed only when this command made it (never /dev/full)
        with writing(csv, "the CSV summary", remove=csv if created else None):  # a full disk: one line
            table.to_csv(csv, index=False)
    replayed = (records["mode"] == "replay").any()  # a mode column only where replayed rows exist
    several_t = records["temperature"].nunique() > 1
    history = load_history(folder)
    rows, recs = rows_and_verdicts(records, table, history)
    if json_out:
        head = {
            "sweep": info.get("sweep", {}).get("name", str(folder)),
            "target": info["sweep"]["target"],
            "device": info.get("device_name"),
            "dtype": info.get("dtype"),
            "records": len(records),
        }
        adaptive = {"adaptive": history.as_dict()} if history else {}
        confirmation = load_report(folder)
        if confirmation is not None:
            adaptive["confirmation"] = confirmation.as_dict()
        typer.echo(
            json.dumps(
                json_ready({**head, "rows": rows, "recommendations": [_recommendation(r) for r in recs], **adaptive}),
                indent=2,
            )
        )
        return
    out = console()
    sweep_spec = info["sweep"] if isinstance(info.get("sweep"), dict) else {}
    facts = [
        f"target {sweep_spec['target']}" if sweep_spec.get("target") else "target not recorded",
        info.get("device_name"),
        info.get("dtype"),
        f"{len(records)} records",
    ]  # a missing fact is left out
    out.print(styled((str(sweep_spec.get("name", folder)), "bold"), "".join(f" · {f}" for f in facts if f)))
    load_columns = {"concurrency": "in flight", "request_rate": "req/s"}
    columns = (
        ["γ"]
        + (["T"] if several_t else [])
        + [load_columns[k] for k in levels]
        + (["mode"] if replayed else [])
        + ["prompts", "α", "τ"]
        + (["vLLM MAL"] if served(records) else [])
        + ["tokens/s", "speedup", "greedy identical", "disturbed"]
    )
    if served(records):
        columns += ["TTFT ms p50/p90/p99", "ITL ms p50/p90/p99"]
    keys = {
        "γ": "gamma",
        "T": "temperature",
        "in flight": "concurrency",
        "req/s": "request_rate",
        "mode": "mode",
        "prompts": "prompts",
        "α": "alpha",
        "τ": "tau",
        "vLLM MAL": "mean_acceptance_length",
        "tokens/s": "tokens_per_s",
        "speedup": "speedup",
        "greedy identical": "greedy_identical",
        "disturbed": "disturbed_units",
        "TTFT ms p50/p90/p99": None,
        "ITL ms p50/p90/p99": None,
    }
    for workload in sorted({r["workload"] for r in rows}):
        body = []
        for r in (r for r in rows if r["workload"] == workload):
            cells = []
            for col in columns:
                v = r[keys[col]] if keys[col] else None
                if col in ("α",):
                    cells.append(fmt(v))
                elif col in ("τ", "vLLM MAL"):
                    cells.append(fmt(v, 2))
                elif col == "tokens/s":
                    cells.append(fmt(v, 1))
                elif col == "speedup":
                    cells.append(
                        "-" if v is None or v != v else fmt(v, 2) + "×" + (" pred" if r["mode"] == "replay" else "")
                    )
                elif col == "greedy identical":
                    cells.append("-" if v is None else f"{v:.0%}")
                elif col in ("T", "in flight", "req/s"):
                    cells.append("closed" if col == "req/s" and v == CLOSED_LOOP else f"{v:g}")
                elif col in LATENCY_CELLS:
                    cells.append(milliseconds([r[f"{LATENCY_CELLS[col]}_p{p}_s"] for p in PERCENTILES]))
                else:
                    cells.append(str(v))
            body.append((r["configuration"] + (" ★" if r.get("recommended") else ""), cells))
        t = Table(title=f"workload {workload}")
        # a narrow console wraps the configuration names and folds the latency triples, never a number
        t.add_column("configuration", overflow="fold")
        for i, col in enumerate(columns):
            widest = max([len(col)] + [len(cells[i]) for _, cells in body])
            latency = col in LATENCY_CELLS
            t.add_column(
                col,
                justify="left" if col == "mode" else "right",
                no_wrap=not latency,
                overflow="fold" if latency else "ellipsis",
                min_width=None if latency else widest,
            )
        for configuration, cells in body:
            t.add_row(configuration, *cells)
        out.print(t)
        for rec in (r for r in recs if r.keys["workload"] == workload):
            where = scenario_words(rec.keys)
            for line in recommendation_lines(rec):
                out.print(plain(f"{workload}{where}: {line}", "bold" if line.startswith("recommended") else ""))
    print_history(history, out)
    print_confirmation(load_report(folder), out, detail=False)


def rows_and_verdicts(records, table, history: History | None) -> tuple[list[dict], list]:
    """The rows `results show` prints (`show_rows`), each with ``recommended`` (the ★: the configuration its
    scenario's verdict recommends), and the verdicts; `sweep --json` ends with the same rows."""
    rows, recs = show_rows(records, table), verdicts_of(records, history)
    mark_recommended(rows, recs)
    return rows, recs


def verdicts_of(records, history: History | None) -> list:
    """The recommender's verdict per scenario (no bootstrap: a verdict rests on t-intervals; an adaptive sweep's
    looks as it planned them), so `results show` names the configuration `recommend` names; none where the
    records cannot be decided (no baseline, nothing speculative)."""
    plans = history.plans() if history else {}
    usable = records[pd.to_numeric(records["decode_tokens"], errors="coerce").fillna(0) > 0]
    try:
        return recommend(usable, n_boot=0, plans=plans)
    except SpecbenchError:
        return []


def scenario_words(keys: dict) -> str:
    """' · 4 in flight' for a scenario measured at one load of several; '' otherwise."""
    load = [f"{keys['concurrency']} in flight"] if "concurrency" in keys else []
    load += [f"{keys['request_rate']:g} req/s"] if keys.get("request_rate") not in (None, CLOSED_LOOP) else []
    return "".join(f" · {part}" for part in load)


def mark_recommended(rows: list[dict], recs: list) -> None:
    """``recommended`` on each row of the configuration its scenario's verdict recommends (the ★)."""
    chosen = {}
    for rec in recs:
        if rec.final is not None:
            load = (rec.keys.get("concurrency"), rec.keys.get("request_rate"))
            chosen[(rec.keys["workload"], *load)] = rec.final
    for row in rows:
        final = chosen.get((row["workload"], row.get("concurrency"), row.get("request_rate")))
        name = (
            None if final is None else final.drafter_label + ("" if final.tree == "chain" else f" · tree {final.tree}")
        )
        row["recommended"] = final is not None and (row["configuration"], row["gamma"]) == (name, final.gamma)


def _recommendation(rec) -> dict:
    return {
        **rec.keys,
        "headline": rec.headline(),
        "recommended": None
        if rec.final is None
        else {
            "drafter_label": rec.final.drafter_label,
            "tree": rec.final.tree,
            "gamma": rec.final.gamma,
            "schedule": rec.final.schedule,
            "speedup": rec.final.speedup,
            "lo": rec.final.lo,
            "hi": rec.final.hi,
        },
        "flat_range": rec.flat_range,
        "lines": recommendation_lines(rec),
    }


def print_history(history: History | None, out) -> None:
    """An adaptive sweep's stopping history: the look-by-look table and one line per workload."""
    if not history:
        return
    out.print(history_table(history))
    for line in summary_lines(history):
        out.print(Text(line))


def summary_table(records):
    """(records, table): one row per configuration × workload (× load level — concurrency, request rate — where a
    folder holds several), with the greedy-identity share and, for replayed rows, the predicted speedup."""
    levels = load_keys(records)  # serving backends
    if "concurrency" in levels:
        records = records.assign(concurrency=records["concurrency"].fillna(1).astype(int))
    if "request_rate" in levels:
        records = records.assign(request_rate=records["request_rate"].astype(float).fillna(CLOSED_LOOP))
    table = configuration_table(records, by=levels or None)
    check = lossless_check(records)
    table = table.merge(check, how="left", on=[c for c in check.columns if c in table.columns and c != "identical"])
    return records, with_predicted_speedups(records, table)


PREDICTED_KEYS = BASELINE_KEYS + ["drafter_label", "tree", "gamma"]  # a scenario, then a configuration in it


def with_predicted_speedups(records, table):
    """Replayed rows' speedup: the predicted one (acceptance × cost, baseline modelled by the same
    cost fit; `specbench.analysis.cost.predicted_speedup`), with its interval in speedup_lo / speedup_hi.

    Dividing a replayed row's modelled tokens/s by the baseline measured over all prompts would mix
    a model with timings taken at other moments (the baselines of non-calibration prompts).
    """
    if "mode" not in table or not (table["mode"] == "replay").any():
        return table
    predicted = predicted_by_scenario(records)
    if predicted.empty:
        return table
    predicted = predicted[PREDICTED_KEYS + ["predicted", "lo", "hi"]].assign(mode="replay")
    table = table.merge(predicted, how="left", on=PREDICTED_KEYS + ["mode"])
    use = table["predicted"].notna()
    table.loc[use, "speedup"] = table.loc[use, "predicted"]
    return table.rename(columns={"lo": "speedup_lo", "hi": "speedup_hi"}).drop(columns="predicted")


LATENCY_CELLS = {"TTFT ms p50/p90/p99": "ttft", "ITL ms p50/p90/p99": "itl"}


def served(records) -> bool:
    """Whether a serving backend (not specbench's own engine) measured any of the records: a backend whose entry
    measures requests in flight, or one this installation does not know (records without the column: the default's)."""
    if "backend" not in records:
        return False
    one_at_a_time = backends.names(concurrent=False)
    return bool((~records["backend"].fillna(backends.DEFAULT).isin(one_at_a_time)).any())


def show_rows(records, table) -> list[dict]:
    """The rows `results show` prints, as plain dicts (the --json output): one per configuration × workload."""
    disturbed = {}
    levels = [k for k in LOAD_KEYS if k in table]
    keys = ["workload", "drafter_label", "tree", "gamma", "temperature", "mode"] + levels
    if "timing_ok" in records:
        bad = records[~records["timing_ok"].fillna(True).astype(bool)]
        disturbed = bad.groupby(keys).size().to_dict() if len(bad) else {}
    rows = []
    order = ["workload", "temperature", "drafter_label", "tree", "gamma", "mode"] + levels
    for r in table.sort_values(order).itertuples():
        is_replay = r.mode == "replay"
        label = "target only" if r.drafter == TARGET_ONLY else r.drafter_label
        label += "" if r.tree == "chain" else f" · tree {r.tree}"
        identical = (
            None if r.temperature > 0 or r.gamma == 0 or is_replay or r.identical != r.identical else float(r.identical)
        )  # NaN: no pair of non-empty outputs to compare
        rows.append(
            {
                "workload": r.workload,
                "configuration": label,
                "gamma": int(r.gamma),
                "temperature": float(r.temperature),
                "mode": r.mode,
                "prompts": int(r.n_prompts),
                "alpha": float(r.alpha),
                "tau": float(r.tau),
                "mean_acceptance_length": float(r.mean_acceptance_length),
                "tokens_per_s": float(r.tokens_per_s),
                "speedup": float(r.speedup),
                **_interval(r),
                "greedy_identical": identical,
                "disturbed_units": int(disturbed.get(tuple(getattr(r, k) for k in keys), 0)),
                **{c: float(getattr(r, c)) for c in LATENCY_COLUMNS},
                **({"concurrency": int(r.concurrency)} if "concurrency" in levels else {}),
                **({"request_rate": float(r.request_rate)} if "request_rate" in levels else {}),
            }
        )
    return rows


def _interval(row) -> dict:
    """speedup_lo / speedup_hi where the row has a predicted interval (replayed rows)."""
    lo, hi = getattr(row, "speedup_lo", None), getattr(row, "speedup_hi", None)
    if lo is None or lo != lo:
        return {}
    return {"speedup_lo": float(lo), "speedup_hi": float(hi)}


@results_app.command("merge")
def merge(
    folders: list[Path] = typer.Argument(..., help="Results folders to combine (e.g. shards)."),
    out: Path = typer.Option(..., "--out", "-o", parser=folder_path, help="Folder to write the union to."),
    force: bool = typer.Option(False, "--force", help="Merge even if measured on different devices."),
):
    """Combine results folders of the same sweep (e.g. --shard runs) into one.

    Example: specbench results merge results/qwen-0 results/qwen-1 --out results/qwen
    """

    count = merge_folders(list(folders), out, force=force)
    wide_console().print(styled(("merged", "green"), f" {count} records -> {out}"))


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")
