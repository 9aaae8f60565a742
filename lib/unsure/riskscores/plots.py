"""The paper's figures, from the metric frame and the per-row scores (seaborn).

Base and instruct models are paired by name: an instruct model pairs with the
base model whose name is the longest prefix of its own (``gemma-2b`` and
``gemma-2b-it``, ``tiny-llama`` and ``tiny-llama-chat``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from unsure.riskscores.metrics import calibration_points

PROMPTING = {"multiple_choice": "multiple-choice", "numeric": "numeric"}
METRIC_NAMES = {"auc": "ROC AUC", "ece": "ECE", "score_std": "score standard deviation"}
sns.set_theme(style="whitegrid", context="paper")


def pairs(instruct: Mapping[str, bool]) -> list[tuple[str, str]]:
    """(base, instruct) model pairs: the longest base-model name prefixing an instruct model's."""
    bases = [m for m, chat in instruct.items() if not chat]
    out = []
    for m, chat in instruct.items():
        if chat:
            match = max((b for b in bases if m.startswith(b)), key=len, default=None)
            if match is not None:
                out.append((match, m))
    return out


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_axis_off()


def _change(metrics: pd.DataFrame, metric: str, models: Sequence[str]) -> pd.DataFrame:
    """Per model and task: metric(numeric) - metric(multiple choice)."""
    wide = metrics[metrics["model"].isin(models)].pivot_table(
        index=["model", "task"], columns="prompting", values=metric
    )
    if not {"multiple_choice", "numeric"} <= set(wide.columns):
        return pd.DataFrame(columns=["model", "task", "change"])
    return (wide["numeric"] - wide["multiple_choice"]).rename("change").reset_index()


def fig2(metrics: pd.DataFrame, instruct: Mapping[str, bool]) -> Figure:
    """ECE change from multiple-choice to numeric prompting, per instruct model and task."""
    change = _change(metrics, "ece", [m for m, chat in instruct.items() if chat])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if change.empty:
        _empty(ax, "needs instruct models and both prompting kinds")
    else:
        sns.barplot(change, x="task", y="change", hue="model", ax=ax)
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="", ylabel="ECE(numeric) − ECE(multiple-choice)", title="Numeric prompting changes calibration")
    return fig


def _curve(ax: Axes, y: np.ndarray, s: np.ndarray, label: str) -> None:
    pts = calibration_points(y, s)
    ax.plot(pts["score"], pts["positive_rate"], marker="o", label=label)


def fig3(scores: pd.DataFrame, instruct: Mapping[str, bool], task: str) -> Figure:
    """Calibration curves of base vs instruct models, for each prompting kind."""
    kinds = [k for k in PROMPTING if k in set(scores["prompting"])]
    model_pairs = pairs(instruct) or [(m, m) for m in instruct]
    fig, axes = plt.subplots(
        len(model_pairs), max(len(kinds), 1), figsize=(4 * max(len(kinds), 1), 3.6 * len(model_pairs)), squeeze=False
    )
    ev = scores[(scores["task"] == task) & (scores["split"] == "eval")]
    for r, pair in enumerate(model_pairs):
        for c, kind in enumerate(kinds):
            ax = axes[r, c]
            ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
            for m in dict.fromkeys(pair):
                g = ev[(ev["model"] == m) & (ev["prompting"] == kind)]
                if len(g):
                    _curve(
                        ax,
                        g["label"].to_numpy(),
                        g["p_hat"].to_numpy(),
                        f"{m} ({'instruct' if instruct[m] else 'base'})",
                    )
            ax.set(
                xlim=(0, 1),
                ylim=(0, 1),
                xlabel="risk score",
                ylabel="fraction positive",
                title=f"{task}, {PROMPTING[kind]}",
            )
            ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def fig4(metrics: pd.DataFrame, task: str) -> Figure:
    """Confidence bias R_bias per model (positive: over-confident)."""
    rows = metrics[metrics["task"] == task]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    sns.barplot(rows, x="model", y="r_bias", hue="prompting", ax=ax)
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="", ylabel="R_bias (confidence − accuracy)", title=f"Confidence bias on {task}")
    ax.tick_params(axis="x", rotation=30)
    return fig


def _hist(ax: Axes, values: np.ndarray, label: str) -> None:
    ax.hist(values, bins=[i / 20 for i in range(21)], alpha=0.55, label=label, density=True)


def fig5(scores: pd.DataFrame, instruct: Mapping[str, bool], task: str) -> Figure:
    """Multiple-choice score distributions of base vs instruct pairs."""
    model_pairs = pairs(instruct) or [(m, m) for m in instruct]
    fig, axes = plt.subplots(1, len(model_pairs), figsize=(4.2 * len(model_pairs), 3.4), squeeze=False)
    ev = scores[(scores["task"] == task) & (scores["split"] == "eval") & (scores["prompting"] == "multiple_choice")]
    for ax, pair in zip(axes[0], model_pairs, strict=True):
        for m in dict.fromkeys(pair):
            _hist(ax, ev.loc[ev["model"] == m, "p_hat"].to_numpy(), m)
        ax.set(xlabel="risk score", ylabel="density", title=f"{task}, multiple-choice")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fig6(
    scores: pd.DataFrame, groups: pd.Series, task: str, column: str, gaps: Mapping[str, Mapping[str, float]]
) -> Figure:
    """Calibration curve of each subgroup (``groups``: row id -> group name), per model."""
    ev = scores[(scores["task"] == task) & (scores["split"] == "eval") & (scores["prompting"] == "multiple_choice")]
    models = list(dict.fromkeys(ev["model"]))
    fig, axes = plt.subplots(1, max(len(models), 1), figsize=(4.2 * max(len(models), 1), 3.8), squeeze=False)
    for ax, m in zip(axes[0], models, strict=False):
        g = ev[ev["model"] == m]
        names = g["row_id"].map(groups)
        big = names.value_counts()
        ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
        for name in big[big >= 10].index[:5]:  # the five largest groups with 10+ rows
            sel = names == name
            gap = gaps.get(m, {}).get(str(name))
            _curve(ax, g.loc[sel, "label"].to_numpy(), g.loc[sel, "p_hat"].to_numpy(),
                   f"{str(name)[:28]}" + (f" (gap {gap:+.2f})" if gap is not None else ""))  # fmt: skip
        ax.set(
            xlim=(0, 1), ylim=(0, 1), xlabel="risk score", ylabel="fraction positive", title=f"{m}: {task} by {column}"
        )
        ax.legend(fontsize=6, loc="upper left")
    if not models:
        _empty(axes[0, 0], "needs multiple-choice scores")
    fig.tight_layout()
    return fig


def change_heatmap(metrics: pd.DataFrame, metric: str, models: Sequence[str], title: str) -> Figure:
    """figA1 / figA2: metric(numeric) − metric(multiple choice) for every model and task."""
    change = _change(metrics, metric, models)
    fig, ax = plt.subplots(
        figsize=(1.4 * max(change["task"].nunique(), 2) + 2, 0.45 * max(change["model"].nunique(), 2) + 1.5)
    )
    if change.empty:
        _empty(ax, "needs both prompting kinds")
    else:
        grid = change.pivot(index="model", columns="task", values="change").reindex(
            index=[m for m in models if m in set(change["model"])]
        )
        sns.heatmap(
            grid, annot=True, fmt=".2f", center=0, cmap="vlag", ax=ax, cbar_kws={"label": "numeric − multiple-choice"}
        )
        ax.set(xlabel="", ylabel="", title=title)
    return fig


def figA3(scores: pd.DataFrame, task: str) -> Figure:
    """Numeric-prompting score distributions per model."""
    ev = scores[(scores["task"] == task) & (scores["split"] == "eval") & (scores["prompting"] == "numeric")]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if ev.empty:
        _empty(ax, "needs numeric prompting")
    else:
        sns.histplot(
            ev,
            x="p_hat",
            hue="model",
            bins=np.linspace(0, 1, 21),
            stat="density",
            common_norm=False,
            element="step",
            ax=ax,
        )
        ax.set(xlabel="verbalised probability", title=f"Numeric risk scores on {task}")
    return fig


def evidence_figure(evidence: pd.DataFrame, metrics: Sequence[str], title: str) -> Figure:
    """figA7 / figA8: metrics against the number of features given, one line per model."""
    tasks = list(dict.fromkeys(evidence["task"])) if not evidence.empty else []
    fig, axes = plt.subplots(
        len(metrics), max(len(tasks), 1), figsize=(4.2 * max(len(tasks), 1), 3.2 * len(metrics)), squeeze=False
    )
    if not tasks:
        _empty(axes[0, 0], "no increasing-evidence analysis configured")
    for c, task in enumerate(tasks):
        for r, metric in enumerate(metrics):
            ax = axes[r, c]
            # one file per (model, task) concatenated repeats index labels, which seaborn cannot
            # align once a model's all-NaN values (every answer unparsed) are dropped
            here = evidence[evidence["task"] == task].reset_index(drop=True)
            sns.lineplot(here, x="n_features", y=metric, hue="model", marker="o", ax=ax)
            ax.set(xlabel="number of features", ylabel=METRIC_NAMES.get(metric, metric), title=f"{title}: {task}")
    fig.tight_layout()
    return fig


def figA9(importance: pd.DataFrame) -> Figure:
    """Permutation importance (AUC drop) of each feature, per model, for each analysed task."""
    tasks = list(dict.fromkeys(importance["task"])) if not importance.empty else []
    fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(6 * max(len(tasks), 1), 4.5), squeeze=False)
    if not tasks:
        _empty(axes[0, 0], "no feature-importance analysis configured")
    for ax, task in zip(axes[0], tasks, strict=False):
        here = importance[importance["task"] == task].reset_index(drop=True)  # see evidence_figure
        sns.barplot(here, y="feature", x="auc_drop", hue="model", ax=ax)
        ax.set(xlabel="drop in ROC AUC when permuted", ylabel="", title=f"Feature importance: {task}")
    fig.tight_layout()
    return fig
