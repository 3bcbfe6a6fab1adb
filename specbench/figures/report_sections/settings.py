"""The report's engine settings: per recommendation, the settings each deployment engine takes."""

from __future__ import annotations

from specbench.catalogue import engines as catalogue_engines
from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, bullet_list, esc, paragraph, pre, scenario_name, section


def settings_section(data: PlotData) -> Html:
    parts = []
    for rec in data.recommendations:
        if rec.final is None:
            continue
        parts.append(Html(f"<h3>{esc(scenario_name(rec.keys))}: {esc(rec.final.describe())}</h3>"))
        for engine, setting in rec.settings.items():
            title = catalogue_engines.title(engine) + ("" if setting.supported else " (not fully expressible)")
            parts.append(Html(f"<h4>{esc(title)}</h4>"))
            parts.append(pre(setting.snippet) if setting.snippet else paragraph("no setting for this engine"))
            parts.append(bullet_list(setting.notes + [f"checked: {setting.checked}"]))
    if not parts:
        parts = [
            paragraph(
                "No configuration is recommended, so there is nothing to paste: serve the target "
                "model without speculation."
            )
        ]
    return section("settings", "Engine settings to paste", *parts)
