"""The study's figures: performance, RSD and BiasScore against the number of demonstrations k.

Every point is a mean over tasks and demonstration sets with its standard
error. ``fig2``: base vs instruct models of each family and size; ``fig3``: each
mitigation method; ``fig4``: all tasks vs tasks whose labels are interchangeable
(A/B/C, 1/2/3); ``fig5`` onwards: one per (family, size), every method, base and
instruct side by side.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import seaborn as sns

from unsure.labelbias.evaluate import METHODS
from unsure.labelbias.lineup import FIRST_APPENDIX_FIGURE, appendix_pairs
from unsure.report import save_figure

METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "rsd": "RSD", "bias_score": "BiasScore"}
METHOD_NAMES = {"none": "no mitigation", "cc": "CC", "dc": "DC", "looc": "LOOC", "lora": "LoRA"}


def _long(per_task: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    long = per_task.melt(
        id_vars=[c for c in per_task.columns if c not in METRIC_NAMES], value_vars=metrics, var_name="metric"
    )
    long["metric"] = long["metric"].map(METRIC_NAMES)
    long["method"] = long["method"].map(METHOD_NAMES)
    long["model group"] = long["family"] + " " + long["size"]
    return long


def _plot(data: pd.DataFrame, path: Path, title: str, **kw: object) -> None:
    grid = sns.relplot(
        data=data,
        x="k",
        y="value",
        col="metric",
        kind="line",
        marker="o",
        errorbar="se",
        height=2.8,
        aspect=1.1,
        facet_kws={"sharey": False},
        **kw,
    )
    grid.set_titles(row_template="{row_name}", col_template="{col_name}")
    grid.set_axis_labels("demonstrations k", "")
    ks = sorted(data["k"].unique())
    for ax in grid.axes.flat:
        ax.set_xticks(ks)
    grid.figure.suptitle(title, y=1.03)
    save_figure(grid.figure, path)


def write_figures(
    per_task: pd.DataFrame,
    models: pd.DataFrame,
    interchangeable: set[str],
    out_dir: str | os.PathLike[str],
    *,
    subset_name: str = "interchangeable labels",
) -> None:
    """Draw every figure of :func:`figure_names` into ``out_dir`` (PNG and PDF); ``fig4`` compares
    all tasks with the tasks in ``interchangeable`` (called ``subset_name``)."""
    out = Path(out_dir)
    sns.set_theme(style="whitegrid", context="paper")
    data = per_task.merge(models, on="model", how="left")
    all_metrics = list(METRIC_NAMES)
    method_order = [METHOD_NAMES[m] for m in METHODS if m in set(data["method"])]
    base = _long(data[data["method"] == "none"], all_metrics)
    _plot(
        base,
        out / "fig2",
        "Performance and label bias of base and instruct models",
        hue="model group",
        style="variant",
        style_order=["base", "instruct"],
    )
    mitigation = _long(data, ["macro_f1", "rsd", "bias_score"])
    _plot(
        mitigation,
        out / "fig3",
        "Mitigation methods (all models)",
        hue="method",
        hue_order=method_order,
        row="variant",
        row_order=[v for v in ("base", "instruct") if v in set(data["variant"])],
    )
    subsets = pd.concat(
        [
            base.assign(tasks="all tasks"),
            base[base["task"].isin(interchangeable)].assign(tasks=subset_name),
        ]
    )
    _plot(
        subsets,
        out / "fig4",
        "All tasks vs tasks with semantically equivalent labels",
        hue="tasks",
        hue_order=["all tasks", subset_name],
        style="variant",
        style_order=["base", "instruct"],
    )
    for i, (family, size) in enumerate(appendix_pairs(models)):
        mine = data[(data["family"] == family) & (data["size"] == size)]
        _plot(
            _long(mine, all_metrics),
            out / f"fig{FIRST_APPENDIX_FIGURE + i}",
            f"{family} {size}: every method",
            hue="method",
            hue_order=method_order,
            row="variant",
            row_order=[v for v in ("base", "instruct") if v in set(mine["variant"])],
        )
