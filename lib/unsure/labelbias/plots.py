"""The study's figures: performance, RSD and BiasScore against the number of demonstrations k.

Every point is a mean over tasks and demonstration sets with its standard
error. The lineup and numbering are :func:`unsure.labelbias.lineup.figure_lineup`'s:
the paper's Figs. 2-4 for one family (one line per model; Fig. 3 one panel row
per model, one line per method in the paper's colours), the appendix Figs. 5 on
for the other families, and three views pooled over every family. Each panel
names its metric on its y axis.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd
import seaborn as sns

from unsure.labelbias.lineup import FigureSpec, figure_lineup
from unsure.labelbias.tables import METHODS
from unsure.report import save_figure

METRIC_NAMES = {
    "accuracy": "accuracy",
    "macro_f1": "macro-F1",
    "macro_f1_paper": "macro-F1",
    "rsd": "RSD",
    "bias_score": "BiasScore",
}
METHOD_NAMES = {"none": "no mitigation", "cc": "CC", "dc": "DC", "looc": "LOOC", "lora": "LoRA"}
METHOD_COLORS = {
    "no mitigation": "black",
    "CC": "tab:orange",
    "DC": "tab:purple",
    "LOOC": "tab:cyan",
    "LoRA": "tab:green",
}
"""The paper's colours (§4.3: black, orange, purple, cyan, green)."""
ALL_TASKS = "all tasks"


def _long(per_task: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """One row per (model, task, k, set, method, metric), metrics and methods by their display names."""
    long = per_task.melt(
        id_vars=[c for c in per_task.columns if c not in METRIC_NAMES], value_vars=metrics, var_name="metric"
    )
    long["metric"] = long["metric"].map(METRIC_NAMES)
    long["method"] = long["method"].map(METHOD_NAMES)
    long["model group"] = long["family"] + " " + long["size"]
    return long


def _plot(data: pd.DataFrame, path: Path, title: str, metrics: list[str], *, seed: int, **kw: object) -> None:
    """Metrics in columns (``row`` in ``kw`` adds rows); every panel labels its y axis with its metric."""
    columns = [METRIC_NAMES[m] for m in metrics]
    grid = sns.relplot(
        data=data,
        x="k",
        y="value",
        col="metric",
        col_order=columns,
        kind="line",
        marker="o",
        errorbar="se",
        height=2.8,
        aspect=1.1,
        facet_kws={"sharey": False},
        seed=seed,
        **kw,
    )
    grid.set_titles(row_template="{row_name}", col_template="{col_name}")
    ks = sorted(data["k"].unique())
    for key, ax in grid.axes_dict.items():
        ax.set_ylabel(key[-1] if isinstance(key, tuple) else key)
        ax.set_xlabel("demonstrations k")
        ax.set_xticks(ks)
        ax.tick_params(labelleft=True, labelbottom=True)
    grid.tight_layout(w_pad=1.5, h_pad=1.5)  # room for the labels every panel now shows
    grid.figure.suptitle(title, y=1.03)
    save_figure(grid.figure, path)


def write_figures(
    per_task: pd.DataFrame,
    models: pd.DataFrame,
    subset: set[str],
    out_dir: str | os.PathLike[str],
    *,
    subset_name: str = "interchangeable labels",
    figure_family: str | None = None,
    f1_column: str = "macro_f1",
    seed: int = 0,
) -> list[str]:
    """Draw every figure of :func:`~unsure.labelbias.lineup.figure_lineup` into ``out_dir`` (PNG and PDF).

    ``per_task`` holds one label scoring; ``subset`` are the tasks Fig. 4 sets
    beside all tasks (called ``subset_name``); ``f1_column`` is the performance
    panel's macro-F1 (the authors': over gold labels only); ``seed`` seeds any
    bootstrap interval (the config's seed). Returns the names drawn.
    """
    out = Path(out_dir)
    sns.set_theme(style="whitegrid", context="paper")
    data = per_task.merge(models, on="model", how="left")
    specs = figure_lineup(models, figure_family)
    for spec in specs:
        _draw(spec, data, models, subset, out, subset_name=subset_name, f1_column=f1_column, seed=seed)
    return [spec.name for spec in specs]


def _draw(
    spec: FigureSpec,
    data: pd.DataFrame,
    models: pd.DataFrame,
    subset: set[str],
    out: Path,
    *,
    subset_name: str,
    f1_column: str,
    seed: int,
) -> None:
    paper_metrics = [f1_column, "rsd", "bias_score"]
    all_metrics = ["accuracy", f1_column, "rsd", "bias_score"]
    if spec.family is not None:
        data = data[data["family"] == spec.family]
    present = [METHOD_NAMES[m] for m in METHODS if m in set(data["method"])]  # LoRA: only where it ran
    palette = {m: METHOD_COLORS[m] for m in present}
    order = [m for m in models["model"] if m in set(data["model"])]
    variants = [v for v in ("base", "instruct") if v in set(data["variant"])]
    path = out / spec.name
    if spec.kind == "models":
        _plot(
            _long(data[data["method"] == "none"], paper_metrics),
            path,
            f"Performance and label bias of {spec.family} models",
            paper_metrics,
            hue="model",
            hue_order=order,
            style="variant",
            style_order=variants,
            seed=seed,
        )
    elif spec.kind == "methods":
        _plot(
            _long(data, paper_metrics),
            path,
            f"Label bias mitigation methods on {spec.family} models",
            paper_metrics,
            hue="method",
            hue_order=present,
            palette=palette,
            row="model",
            row_order=order,
            seed=seed,
        )
    elif spec.kind in ("subsets", "subsets_pooled"):
        metrics = ["rsd", "bias_score"] if spec.kind == "subsets" else all_metrics
        base = _long(data[data["method"] == "none"], metrics)
        chosen = base[base["task"].isin(subset)]
        both = pd.concat([base.assign(tasks=ALL_TASKS), chosen.assign(tasks=subset_name)], ignore_index=True)
        note = "" if len(chosen) else f" (no task with {subset_name} in this run)"
        tasks_order = [ALL_TASKS, subset_name] if len(chosen) else [ALL_TASKS]
        if spec.kind == "subsets":
            kw: dict[str, object] = {"hue": "model", "hue_order": order, "style": "tasks", "style_order": tasks_order}
            title = f"Label bias of {spec.family} models: all tasks vs {subset_name}{note}"
        else:
            kw = {"hue": "tasks", "hue_order": tasks_order, "style": "variant", "style_order": variants}
            title = f"All tasks vs {subset_name}, every family pooled{note}"
        _plot(both, path, title, metrics, seed=seed, **kw)
    elif spec.kind == "models_pooled":
        _plot(
            _long(data[data["method"] == "none"], all_metrics),
            path,
            "Performance and label bias of base and instruct models, every family",
            all_metrics,
            hue="model group",
            style="variant",
            style_order=variants,
            seed=seed,
        )
    elif spec.kind == "methods_pooled":
        _plot(
            _long(data, paper_metrics),
            path,
            "Mitigation methods, averaged over every model",
            paper_metrics,
            hue="method",
            hue_order=present,
            palette=palette,
            row="variant",
            row_order=variants,
            seed=seed,
        )
    else:
        raise ValueError(f"unknown figure kind {spec.kind!r} ({spec.name})")
