"""The study's figure: risk-coverage curves per benchmark."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure


def risk_coverage_figure(curves: pd.DataFrame) -> Figure:
    """Fig. 2: error among answered instances as coverage grows; one panel per model and benchmark.

    ``curves`` is :func:`unsure.decisionrisk.evaluate.risk_coverage_curves`.
    Lower is better; every curve ends at the model's overall error rate.
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
        drawstyle="steps-post",
        height=2.4,
        aspect=1.15,
        facet_kws={"sharey": False, "margin_titles": True},
        errorbar=None,
    )
    grid.set_axis_labels("coverage (share answered)", "risk (error among answered)")
    grid.set_titles(row_template="{row_name}", col_template="{col_name}")
    grid.set(xlim=(0, 1))
    fig: Figure = grid.figure
    return fig
