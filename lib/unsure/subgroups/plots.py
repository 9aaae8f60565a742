"""The paper's figures, as functions from summaries to matplotlib figures.

* ``fig1``: DT and EB estimates with their 95% intervals and the truth, for a
  handful of subgroups from small to large (one repetition, one model).
* ``fig2``: MSE of SR and EB relative to DT, per dataset and model.
* ``fig3``: average subgroup MSE per method, small against large subgroups.
* ``fig4``: coverage against width of the DT and robust EB intervals.
* ``fig7``: the tabular (ACS) source: MSE ratios for accuracy, Brier score
  and cross-entropy.

The bar figures take ``seed`` (the study's config seed), so seaborn's bootstrap
intervals are the same each time they are drawn.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from unsure.report import save_figure
from unsure.subgroups.tables import size_class, summarise

PALETTE = {
    "DT": "#4c72b0",
    "SR": "#55a868",
    "EB": "#dd8452",
    "Lasso": "#8172b3",
    "EB-paper": "#c44e52",
    "EB-corrected": "#937860",
}


def _empty(message: str) -> Figure:
    fig, ax = plt.subplots(figsize=(5, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    return fig


def fig1(estimates: pd.DataFrame, *, count: int = 8, rep: int = 0) -> Figure:
    """Estimates and intervals of DT and EB against the truth for ``count`` subgroups of one model."""
    est = estimates[
        (estimates["rep"] == rep) & (estimates["design"] == "proportional") & (estimates["metric"] == "accuracy")
    ]
    if est.empty:
        return _empty("no proportional accuracy estimates")
    model = sorted(est["model"].astype(str).unique())[0]
    est = est[est["model"].astype(str) == model]
    units = est[est["method"] == "DT"].sort_values(["n", "subgroup"]).reset_index(drop=True)
    pick = units.iloc[np.unique(np.linspace(0, len(units) - 1, min(count, len(units))).round().astype(int))]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(pick) + 1.2))
    labels = []
    for i, (_, unit) in enumerate(pick.iterrows()):
        rows = est[(est["dataset"] == unit["dataset"]) & (est["subgroup"] == unit["subgroup"])]
        for method, dy in (("DT", -0.15), ("EB", 0.15)):
            r = rows[rows["method"] == method].iloc[0]
            # EB's interval is centred at the EBCI shrinkage, which can differ from the point estimate
            ax.hlines(i + dy, r["lo"], r["hi"], color=PALETTE[method], lw=2)
            ax.plot(r["estimate"], i + dy, "o", color=PALETTE[method], label=method if i == 0 else None)
        ax.plot(unit["truth"], i, "kx", markersize=8, label="truth" if i == 0 else None)
        labels.append(f"{unit['subgroup']} (n={int(unit['n'])})")
    ax.set_yticks(range(len(pick)), labels)
    ax.set_xlabel("accuracy")
    ax.set_title(f"{model}: DT (Wilson) and EB (robust EBCI), repetition {rep}")
    ax.legend(loc="best", fontsize="small")
    return fig


def fig2(um: pd.DataFrame, *, seed: int = 0) -> Figure:
    """MSE ratio of SR and EB to DT per dataset and model (proportional draws, accuracy)."""
    sub = um[(um["design"] == "proportional") & (um["metric"] == "accuracy")]
    if sub.empty:
        return _empty("no proportional accuracy results")
    s = summarise(sub, ["source", "dataset", "model"])
    s = s[s["method"].isin(["SR", "EB"])].assign(cell=lambda d: d["dataset"] + "\n" + d["model"])
    grid = sns.catplot(
        data=s,
        x="cell",
        y="ratio",
        hue="method",
        col="source",
        kind="bar",
        sharex=False,
        palette=PALETTE,
        hue_order=["SR", "EB"],
        height=3.2,
        aspect=1.3,
        seed=seed,
    )
    for ax in grid.axes.flat:
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
        ax.set_xlabel("")
    grid.set_ylabels("MSE / MSE of DT")
    fig: Figure = grid.figure
    return fig


def fig3(um: pd.DataFrame, small_n: int, *, seed: int = 0) -> Figure:
    """Average subgroup MSE per method, small against large subgroups (proportional, accuracy)."""
    sub = um[(um["design"] == "proportional") & (um["metric"] == "accuracy")]
    if sub.empty:
        return _empty("no proportional accuracy results")
    sub = sub.assign(size=size_class(sub, small_n).to_numpy())
    s = summarise(sub, ["source", "size"])
    s["size"] = pd.Categorical(s["size"], ["small", "large"])
    grid = sns.catplot(
        data=s,
        x="size",
        y="mse",
        hue="method",
        col="source",
        kind="bar",
        palette=PALETTE,
        hue_order=["DT", "SR", "EB", "Lasso"],
        height=3.2,
        aspect=1.0,
        seed=seed,
    )
    grid.set_ylabels("subgroup MSE (mean over subgroups)")
    grid.set_xlabels("subgroup size")
    grid.figure.suptitle(f"small: at most {small_n} rows drawn (proportional draws, accuracy)", y=1.03)
    fig: Figure = grid.figure
    return fig


def fig4(um: pd.DataFrame, alpha: float) -> Figure:
    """Coverage against width of DT and robust EB intervals, per source, design, dataset and model.

    The other protocol's EB (``EB-paper`` or ``EB-corrected``) is plotted beside the chosen one.
    """
    sub = um[(um["metric"] == "accuracy") & um["method"].isin(["DT", "EB", "EB-paper", "EB-corrected"])]
    if sub.empty:
        return _empty("no interval results")
    s = summarise(sub, ["source", "design", "dataset", "model"])
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    sns.scatterplot(data=s, x="width", y="coverage", hue="method", style="design", palette=PALETTE, ax=ax, s=45)
    ax.axhline(1 - alpha, color="k", lw=0.8, ls="--")
    ax.set_xlabel("mean interval width")
    ax.set_ylabel("coverage (mean over subgroups)")
    ax.legend(fontsize="small", bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def fig7(um: pd.DataFrame, source: str = "riskscores", *, seed: int = 0) -> Figure:
    """Tabular source: MSE ratio to DT of SR, EB and Lasso for accuracy, Brier score and cross-entropy."""
    sub = um[(um["source"] == source) & (um["design"] == "proportional")]
    if sub.empty:
        return _empty(f"no results for source {source!r}")
    s = summarise(sub, ["dataset", "model", "metric"])
    s = s[s["method"] != "DT"].assign(panel=lambda d: d["dataset"] + " · " + d["model"])
    grid = sns.catplot(
        data=s,
        x="metric",
        y="ratio",
        hue="method",
        col="panel",
        kind="bar",
        palette=PALETTE,
        hue_order=["SR", "EB", "Lasso"],
        order=["accuracy", "brier", "cross_entropy"],
        height=3.2,
        aspect=1.1,
        seed=seed,
    )
    for ax in grid.axes.flat:
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
    grid.set_titles("{col_name}")
    grid.set_ylabels("MSE / MSE of DT")
    fig: Figure = grid.figure
    return fig


def write_figures(
    um: pd.DataFrame,
    estimates: pd.DataFrame,
    outdir: str | os.PathLike[str],
    *,
    small_n: int,
    alpha: float,
    seed: int = 0,
) -> None:
    """Draw fig1, fig2, fig3, fig4 and fig7 (PNG and PDF) under ``outdir``; ``seed`` seeds the bootstraps."""
    sns.set_theme(style="whitegrid", font_scale=0.9)
    figures: dict[str, Callable[[], Figure]] = {
        "fig1": lambda: fig1(estimates),
        "fig2": lambda: fig2(um, seed=seed),
        "fig3": lambda: fig3(um, small_n, seed=seed),
        "fig4": lambda: fig4(um, alpha),
        "fig7": lambda: fig7(um, seed=seed),
    }
    for name, draw in figures.items():
        save_figure(draw(), Path(outdir) / name)
