"""The report's acceptance: fitted α̂ with intervals, goodness of fit and the measured τ per configuration."""

from __future__ import annotations

from specbench.figures.plot_data import PlotData, series_name
from specbench.figures.report import Html, interval, num, paragraph, row_series, section, table


def acceptance_section(data: PlotData) -> Html:
    if data.fits.empty:
        return section("acceptance", "Fitted acceptance", paragraph("No speculative records: nothing was fitted."))
    rows = [
        [
            r["workload"],
            row_series(r),
            num(r["temperature"], 2),
            r["gammas"],
            interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            num(r["alpha_observed"]),
            r["model"],
            num(r["decay"]),
            num(r["p_constant_vs_free"], 3),
            r["n_prompts"],
            r["trials"],
            "; ".join(x for x in (r["flag"], r["notes"]) if x),
        ]
        for _, r in data.fits.iterrows()
    ]
    fits = table(
        [
            "workload",
            "drafter",
            "T",
            "γ measured",
            "α̂ [95% CI]",
            "α observed",
            "model",
            "decay d",
            "p (constant vs per-position)",
            "prompts",
            "draft positions tested",
            "flags and notes",
        ],
        rows,
        {2, 4, 5, 7, 8, 9, 10},
    )
    parts = [
        paragraph(
            "α̂: maximum-likelihood α of the geometric model, pooled over γ (interval: prompt "
            "bootstrap, or exact binomial where stated). α observed: accepted ÷ drafted. The p-value "
            "tests constant α against one rate per draft position (see docs/fit.md).",
            "note",
        ),
        fits,
    ]
    if not data.goodness.empty:
        rows = [
            [
                r["workload"],
                row_series(r),
                r["gamma"],
                r["rounds"],
                num(r["tau_observed"]),
                num(r["tau_predicted"]),
                f"{r['residual']:+.3f}",
                num(r["z"], 2),
            ]
            for _, r in data.goodness.iterrows()
        ]
        parts += [
            Html("<h3>Goodness of fit: observed vs predicted τ</h3>"),
            paragraph(
                "Predicted over each round's own draft length; z = residual ÷ the model's standard "
                "error (rounds treated as independent, so |z| a little above 2 is not alarming).",
                "note",
            ),
            table(
                ["workload", "drafter", "γ", "rounds", "τ observed", "τ predicted", "residual", "z"],
                rows,
                {2, 3, 4, 5, 6, 7},
            ),
        ]
    if not data.category_fits.empty:
        rows = [
            [
                r["workload"],
                r["category"],
                row_series(r),
                interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
                num(r["alpha_observed"]),
                r["n_prompts"],
            ]
            for _, r in data.category_fits.iterrows()
        ]
        parts += [
            Html("<h3>α̂ by prompt category</h3>"),
            table(["workload", "category", "drafter", "α̂ [95% CI]", "α observed", "prompts"], rows, {3, 4, 5}),
        ]
    if not data.context_bins.empty:
        rows = [
            [
                r["workload"],
                series_name(r["drafter_label"], r["tree"]),
                r["gamma"],
                r["context_bin"],
                num(r["prompt_tokens"], 0),
                r["n_prompts"],
                interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
                num(r["alpha_observed"]),
                interval(r["tau"], r["tau_lo"], r["tau_hi"], 2),
            ]
            for _, r in data.context_bins.iterrows()
        ]
        parts += [
            Html("<h3>α̂ and τ by context length</h3>"),
            paragraph(
                "Long-context prompts: the same documents and tasks cut to each bin; prompt tokens is "
                "the bin's mean encoded prompt length.",
                "note",
            ),
            table(
                [
                    "workload",
                    "drafter",
                    "γ",
                    "bin",
                    "prompt tokens",
                    "prompts",
                    "α̂ [95% CI]",
                    "α observed",
                    "τ [95% CI]",
                ],
                rows,
                {2, 4, 5, 6, 7, 8},
            ),
        ]
    return section("acceptance", "Fitted acceptance", *parts)
