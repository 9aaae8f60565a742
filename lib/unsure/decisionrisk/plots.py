"""The study's figure: risk-coverage curves per benchmark."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from collections.abc import Mapping

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure


def risk_coverage_figure(curves: pd.DataFrame, notes: Mapping[tuple[str, str], str] | None = None) -> Figure:
    """Fig. 2: error among answered instances as coverage grows; one panel per model and benchmark.

    ``curves`` is :func:`unsure.decisionrisk.tables.risk_coverage_curves`.
    Lower is better; every curve ends at the model's overall error rate. Only
    achievable points are drawn (instances with tied scores are answered
    together), joined by straight lines with a marker at each, so a rule whose
    scores are all tied shows a single point at coverage 1 rather than a step
    through coverages no threshold gives. A panel without curves (a model
    with no confidences on that benchmark, e.g. a chat model whose
    log-likelihoods the API does not give) carries a note saying so.
    ``notes`` maps (model label, benchmark) to a note printed above that panel,
    e.g. that a chat model's replies could not be parsed, so its curves come
    from uniform confidences and the prompt features alone.
    """
    if curves.empty:
        raise ValueError("no risk-coverage curves to draw")
    sns.set_theme(style="whitegrid", context="paper")
    grid = sns.relplot(
        data=curves,
        x="coverage",
        y="risk",
        hue="rule",
        col="benchmark",
        row="model",
        kind="line",
        marker="o",
        markersize=3,
        height=2.4,
        aspect=1.15,
        facet_kws={"sharey": False, "margin_titles": True},
        errorbar=None,
    )
    grid.set_axis_labels("coverage (share answered)", "risk (error among answered)")
    grid.set_titles(row_template="{row_name}", col_template="{col_name}")
    grid.set(xlim=(0, 1))
    for (model, benchmark), ax in grid.axes_dict.items():
        if not ax.lines:
            ax.text(0.5, 0.5, "no curves: no confidences\nfor this model here", ha="center", va="center",
                    transform=ax.transAxes, fontsize=7, color="0.4")  # fmt: skip
        note = (notes or {}).get((str(model), str(benchmark)))
        if note:  # above the panel (under a column title), where it hides no curve
            title = ax.get_title()
            ax.set_title(f"{title}\n{note}" if title else note, fontsize=7, color="0.2")
    fig: Figure = grid.figure
    return fig
