"""The paper's figures, from the metric frame and the per-row scores (seaborn).

Base and instruct models are paired by name: an instruct model pairs with the
base model whose name is the longest prefix of its own (``gemma-2b`` and
``gemma-2b-it``, ``tiny-llama`` and ``tiny-llama-chat``). Legends name models
as ``<key> (base)`` / ``<key> (instruct)`` and the baselines as LR and XGBoost;
group names are wrapped at word boundaries, never cut. Reliability curves use 10
quantile score bins, as the paper's figures 3, 6, A4 and A5 do. Every figure
with a seaborn estimate takes ``seed`` (the study's config seed), so its bootstrap
intervals are the same each time it is drawn.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import numpy.typing as npt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from unsure.riskscores.metrics import Strategy, calibration_points, ece, sce_differences

PROMPTING = {"multiple_choice": "multiple-choice", "numeric": "numeric", "supervised": "supervised"}
BASELINE_LABELS = {"logistic_regression": "LR", "xgboost": "XGBoost"}
METRIC_NAMES = {"auc": "ROC AUC", "ece": "ECE", "score_std": "score standard deviation"}
REFERENCE = "xgboost"
"""The supervised reference drawn beside LLM score distributions (figures 5 and A3)."""
REFERENCE_COLOR = "tab:green"
sns.set_theme(style="whitegrid", context="paper")


def model_label(model: str, instruct: Mapping[str, bool]) -> str:
    """A legend name: the baselines' short names, else the key with base / instruct."""
    if model in BASELINE_LABELS:
        return BASELINE_LABELS[model]
    if model not in instruct:
        return model
    return f"{model} ({'instruct' if instruct[model] else 'base'})"


def wrap(text: object, width: int = 24) -> str:
    """``text`` on lines of at most ``width`` characters, broken between words only."""
    return textwrap.fill(str(text), width, break_long_words=False, break_on_hyphens=False)


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


def _eval(scores: pd.DataFrame, task: str, prompting: str | None = None) -> pd.DataFrame:
    """The evaluation rows of ``task`` (of one prompting kind)."""
    keep = (scores["task"] == task) & (scores["split"] == "eval")
    if prompting is not None:
        keep &= scores["prompting"] == prompting
    return scores[keep]


def _change(metrics: pd.DataFrame, metric: str, models: Sequence[str]) -> pd.DataFrame:
    """Per model and task: metric(numeric) - metric(multiple choice)."""
    wide = metrics[metrics["model"].isin(models)].pivot_table(
        index=["model", "task"], columns="prompting", values=metric
    )
    if not {"multiple_choice", "numeric"} <= set(wide.columns):
        return pd.DataFrame(columns=["model", "task", "change"])
    return (wide["numeric"] - wide["multiple_choice"]).rename("change").reset_index()


def fig2(metrics: pd.DataFrame, instruct: Mapping[str, bool], *, seed: int = 0) -> Figure:
    """ECE change from multiple-choice to numeric prompting, per instruct model and task."""
    change = _change(metrics, "ece", [m for m, chat in instruct.items() if chat])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if change.empty:
        _empty(ax, "needs instruct models and both prompting kinds")
    else:
        change["model"] = change["model"].map(lambda m: model_label(m, instruct))
        sns.barplot(change, x="task", y="change", hue="model", ax=ax, seed=seed)
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="", ylabel="ECE(numeric) − ECE(multiple-choice)", title="Numeric prompting changes calibration")
    return fig


def _curve(
    ax: Axes,
    y: npt.ArrayLike,
    s: npt.ArrayLike,
    label: str,
    *,
    strategy: Strategy = "quantile",
    intervals: bool = False,
    color: object = None,
) -> None:
    """A reliability curve in 10 score bins; with ``intervals``, each bin's 95% Wilson interval."""
    pts = calibration_points(y, s, strategy=strategy)
    if intervals:
        err = np.clip(np.vstack([pts["positive_rate"] - pts["lower"], pts["upper"] - pts["positive_rate"]]), 0, None)
        ax.errorbar(pts["score"], pts["positive_rate"], yerr=err, marker="o", ms=3, capsize=2, label=label, color=color)
    else:
        ax.plot(pts["score"], pts["positive_rate"], marker="o", ms=4, label=label, color=color)


def _calibration_axes(ax: Axes, title: str) -> None:
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="risk score (mean in bin)", ylabel="fraction positive", title=title)


def fig3(scores: pd.DataFrame, instruct: Mapping[str, bool], task: str) -> Figure:
    """Calibration curves (10 quantile bins) of base vs instruct models, one column per prompting kind."""
    kinds = [k for k in ("multiple_choice", "numeric") if k in set(scores["prompting"])]
    model_pairs = pairs(instruct) or [(m, m) for m in instruct]
    ncols = max(len(kinds), 1)
    fig, axes = plt.subplots(len(model_pairs), ncols, figsize=(4.2 * ncols, 3.8 * len(model_pairs)), squeeze=False)
    ev = _eval(scores, task)
    for r, pair in enumerate(model_pairs):
        for c, kind in enumerate(kinds):
            ax = axes[r, c]
            _calibration_axes(ax, f"{task}, {PROMPTING[kind]}")
            for m in dict.fromkeys(pair):
                g = ev[(ev["model"] == m) & (ev["prompting"] == kind)]
                if len(g):
                    _curve(ax, g["label"], g["p_hat"], model_label(m, instruct))
            ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def fig4(metrics: pd.DataFrame, task: str, instruct: Mapping[str, bool] | None = None, *, seed: int = 0) -> Figure:
    """Confidence bias R_bias per model (positive: over-confident), one bar per prompting kind."""
    rows = metrics[metrics["task"] == task].copy()
    rows["model"] = rows["model"].map(lambda m: model_label(m, instruct or {}))
    rows["prompting"] = rows["prompting"].map(lambda k: PROMPTING.get(k, k))
    fig, ax = plt.subplots(figsize=(7, 3.8))
    sns.barplot(rows, x="model", y="r_bias", hue="prompting", ax=ax, seed=seed)
    ax.axhline(0, color="black", lw=0.8)
    ax.set(xlabel="", ylabel="R_bias (confidence − accuracy)", title=f"Confidence bias on {task}")
    ax.legend(title="prompting", fontsize=7)
    ax.tick_params(axis="x", rotation=30)
    for tick in ax.get_xticklabels():
        tick.set_horizontalalignment("right")
    fig.tight_layout()
    return fig


def _hist(ax: Axes, y: npt.ArrayLike, s: npt.ArrayLike, label: str, **style: object) -> None:
    """A density histogram (20 bins on [0, 1]) labelled with the scores' ECE."""
    s = np.asarray(s, dtype=np.float64)
    if not len(s):
        return
    ax.hist(s, bins=np.linspace(0, 1, 21), density=True, label=f"{label}, ECE {ece(y, s):.2f}", **style)  # type: ignore[arg-type]


def _reference_hist(ax: Axes, ev: pd.DataFrame) -> None:
    ref = ev[ev["model"] == REFERENCE]
    _hist(ax, ref["label"], ref["p_hat"], BASELINE_LABELS[REFERENCE], histtype="step", lw=1.8, color=REFERENCE_COLOR)


def fig5(scores: pd.DataFrame, instruct: Mapping[str, bool], task: str) -> Figure:
    """Multiple-choice score distributions of base vs instruct pairs, with XGBoost's as reference."""
    model_pairs = pairs(instruct) or [(m, m) for m in instruct]
    fig, axes = plt.subplots(1, len(model_pairs), figsize=(4.4 * len(model_pairs), 3.6), squeeze=False)
    ev = _eval(scores, task, "multiple_choice")
    ref = _eval(scores, task, "supervised")
    for ax, pair in zip(axes[0], model_pairs, strict=True):
        for m in dict.fromkeys(pair):
            g = ev[ev["model"] == m]
            _hist(ax, g["label"], g["p_hat"], model_label(m, instruct), alpha=0.55)
        _reference_hist(ax, ref)
        ax.set(xlim=(0, 1), xlabel="risk score", ylabel="density", title=f"{task}, multiple-choice")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def subgroup_names(groups: pd.Series, row_ids: pd.Series, *, n_groups: int = 3, min_rows: int = 10) -> list[str]:
    """The ``n_groups`` largest groups among ``row_ids`` with at least ``min_rows`` rows (the paper:
    the three race categories best represented in the data)."""
    counts = row_ids.drop_duplicates().map(groups).value_counts()
    return [str(g) for g in counts[counts >= min_rows].index[:n_groups]]


def worst_offenders(gaps: Mapping[tuple[str, str], Mapping[str, float]], names: Sequence[str], k: int = 2) -> list[str]:
    """The ``k`` models whose score gap between the shown groups spans most (the paper's figure 6
    shows "the worst offenders in terms of subgroup-specific score bias"); ``gaps`` is keyed by
    (model, prompting)."""
    spread: dict[str, float] = {}
    for (model, _), per_group in gaps.items():
        values = [per_group[n] for n in names if n in per_group]
        if len(values) >= 2:
            spread[model] = max(spread.get(model, 0.0), max(values) - min(values))
    return sorted(spread, key=lambda m: -spread[m])[:k]


def subgroup_calibration(
    scores: pd.DataFrame,
    groups: pd.Series,
    task: str,
    column: str,
    models: Sequence[str],
    instruct: Mapping[str, bool],
    *,
    gaps: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
    intervals: bool = False,
    n_groups: int = 3,
    title: str | None = None,
) -> Figure:
    """Figures 6, A4 and A5: a calibration curve (10 quantile bins) per group of ``column``
    (``groups``: row id -> group name; the ``n_groups`` largest), one row per model and one
    column per prompting kind; with ``intervals``, 95% Wilson intervals per bin."""
    ev = _eval(scores, task)
    kinds = [k for k in ("multiple_choice", "numeric") if k in set(ev["prompting"])]
    names = subgroup_names(groups, ev["row_id"], n_groups=n_groups)
    colors = dict(zip(names, sns.color_palette(n_colors=max(len(names), 1)), strict=False))
    models = [m for m in models if m in set(ev["model"])]
    per_row = 2 if len(models) > 4 else 1  # the paper config's 17 models: two per row, not a 17-row strip
    nrows, ncols = max(-(-len(models) // per_row), 1), max(len(kinds), 1) * per_row
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 4.0 * nrows), squeeze=False)
    if not models or not kinds or not names:
        _empty(axes[0, 0], f"needs LLM scores and groups of {column} with 10+ evaluation rows")
    for ax in axes.flat[len(models) * len(kinds) :]:
        ax.set_axis_off()
    for i, m in enumerate(models):
        for k, kind in enumerate(kinds):
            ax = axes[i // per_row, (i % per_row) * len(kinds) + k]
            g = ev[(ev["model"] == m) & (ev["prompting"] == kind)]
            here = g["row_id"].map(groups).astype(str)
            _calibration_axes(ax, f"{model_label(m, instruct)}\n{task}, {PROMPTING[kind]}")
            for name in names:
                sel = (here == name).to_numpy()
                if not sel.any():
                    continue
                gap = (gaps or {}).get((m, kind), {}).get(name)
                if gap is None:
                    note = ""
                elif name == names[0] and gap == 0:  # the gap's reference: the largest group
                    note = "\n(gap reference)"
                else:
                    note = f"\n(gap {gap:+.2f})"
                label = f"{wrap(name)}{note} n={int(sel.sum())}"
                _curve(ax, g["label"][sel], g["p_hat"][sel], label, intervals=intervals, color=colors[name])
            ax.legend(fontsize=6, loc="upper left", title=column, title_fontsize=6)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def sce_reference_pairs(scores: pd.DataFrame, groups: pd.Series, task: str) -> list[tuple[str, str]]:
    """Figure A6's comparisons ``(A, B)``: each of the three largest groups against B, the one of
    them with the lowest positive rate (on ACSIncome: Black, as in the paper)."""
    ev = _eval(scores, task).drop_duplicates("row_id")
    names = subgroup_names(groups, ev["row_id"])
    if len(names) < 2:
        return []
    rate = ev.groupby(ev["row_id"].map(groups).astype(str))["label"].mean()
    reference = min(names, key=lambda n: (rate.get(n, np.inf), names.index(n)))
    return [(a, reference) for a in names if a != reference]


def figA6(scores: pd.DataFrame, groups: pd.Series, task: str, instruct: Mapping[str, bool], *, seed: int = 0) -> Figure:
    """Differences in signed calibration error between groups, ``SCE_A - SCE_B`` (the paper's
    figure A6), per LLM and prompting kind: positive is an undue score advantage of group A."""
    comparisons = sce_reference_pairs(scores, groups, task)
    ev = _eval(scores, task)
    ev = ev[ev["model"].isin(list(instruct))]
    records = []
    for (m, kind), g in ev.groupby(["model", "prompting"], sort=False):
        for (a, b), delta in sce_differences(g["label"], g["p_hat"], g["row_id"].map(groups), comparisons).items():
            records.append(
                {"model": model_label(m, instruct), "prompting": PROMPTING[kind], "pair": (a, b), "delta": delta}
            )
    frame = pd.DataFrame(records)
    fig, axes = plt.subplots(1, max(len(comparisons), 1), figsize=(5 * max(len(comparisons), 1), 4), squeeze=False)
    if frame.empty:
        _empty(axes[0, 0], "needs LLM scores and two groups with 10+ evaluation rows")
    for ax, (a, b) in zip(axes[0], comparisons, strict=False):
        here = frame[frame["pair"] == (a, b)].reset_index(drop=True)
        sns.barplot(here, x="model", y="delta", hue="prompting", ax=ax, seed=seed)
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="", ylabel="ΔSCE = SCE(A) − SCE(B)")
        ax.set_title(f"A: {wrap(a, 40)}\nB: {wrap(b, 40)}", fontsize=8)
        ax.tick_params(axis="x", rotation=30)
        for tick in ax.get_xticklabels():
            tick.set_horizontalalignment("right")
        ax.legend(title="prompting", fontsize=7)
    fig.tight_layout()
    return fig


def change_heatmap(
    metrics: pd.DataFrame, metric: str, models: Sequence[str], title: str, instruct: Mapping[str, bool] | None = None
) -> Figure:
    """figA1 / figA2: metric(numeric) − metric(multiple choice) for every model and task."""
    change = _change(metrics, metric, models)
    fig, ax = plt.subplots(
        figsize=(1.4 * max(change["task"].nunique(), 2) + 3, 0.45 * max(change["model"].nunique(), 2) + 1.5)
    )
    if change.empty:
        _empty(ax, "needs both prompting kinds")
    else:
        grid = change.pivot(index="model", columns="task", values="change").reindex(
            index=[m for m in models if m in set(change["model"])]
        )
        grid.index = [model_label(m, instruct or {}) for m in grid.index]
        sns.heatmap(
            grid, annot=True, fmt=".2f", center=0, cmap="vlag", ax=ax, cbar_kws={"label": "numeric − multiple-choice"}
        )
        ax.set(xlabel="", ylabel="", title=title)
    fig.tight_layout()
    return fig


def figA3(scores: pd.DataFrame, task: str, instruct: Mapping[str, bool] | None = None) -> Figure:
    """Numeric-prompting score distributions per model, with XGBoost's as reference."""
    ev = _eval(scores, task, "numeric")
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    if ev.empty:
        _empty(ax, "needs numeric prompting")
        return fig
    for m, g in ev.groupby("model", sort=False):
        _hist(ax, g["label"], g["p_hat"], model_label(str(m), instruct or {}), histtype="step", lw=1.2)
    _reference_hist(ax, _eval(scores, task, "supervised"))
    ax.set(xlim=(0, 1), xlabel="verbalised probability", ylabel="density", title=f"Numeric risk scores on {task}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _labelled(frame: pd.DataFrame, instruct: Mapping[str, bool] | None) -> pd.DataFrame:
    # one file per (model, task) concatenated repeats index labels, which seaborn cannot align
    # once a model's all-NaN values (every answer unparsed) are dropped
    out = frame.reset_index(drop=True)
    out["model"] = out["model"].map(lambda m: model_label(m, instruct or {}))
    return out


def evidence_figure(
    evidence: pd.DataFrame,
    metrics: Sequence[str],
    title: str,
    instruct: Mapping[str, bool] | None = None,
    *,
    seed: int = 0,
) -> Figure:
    """figA8: metrics against the number of features given, one line per model; a star marks
    the full feature set."""
    tasks = list(dict.fromkeys(evidence["task"])) if not evidence.empty else []
    fig, axes = plt.subplots(
        len(metrics), max(len(tasks), 1), figsize=(4.8 * max(len(tasks), 1), 3.4 * len(metrics)), squeeze=False
    )
    if not tasks:
        _empty(axes[0, 0], "no increasing-evidence analysis configured")
    for c, task in enumerate(tasks):
        here = _labelled(evidence[evidence["task"] == task], instruct)
        for r, metric in enumerate(metrics):
            ax = axes[r, c]
            sns.lineplot(here, x="n_features", y=metric, hue="model", marker="o", ax=ax, seed=seed)
            full = here[here["n_features"] == here["n_features"].max()]
            ax.scatter(full["n_features"], full[metric], marker="*", s=140, color="black", zorder=3)
            ax.set(xlabel="number of features (least important first)", ylabel=METRIC_NAMES.get(metric, metric))
            ax.set_title(f"{title}: {task}")
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figA7(evidence: pd.DataFrame, instruct: Mapping[str, bool] | None = None) -> Figure:
    """Score distributions as evidence grows (the paper's figure A7): one row per model and task,
    one column per feature set, the scores of label-0 and label-1 rows stacked."""
    if evidence.empty or "scores" not in evidence.columns:
        fig, ax = plt.subplots(figsize=(6, 3))
        _empty(ax, "no increasing-evidence scores (configure studies.riskscores.evidence)")
        return fig
    runs = list(dict.fromkeys(zip(evidence["model"], evidence["task"], strict=True)))
    steps = sorted(set(evidence["n_features"]))
    fig, axes = plt.subplots(len(runs), len(steps), figsize=(2.9 * len(steps), 2.6 * len(runs)), squeeze=False)
    bins = np.linspace(0, 1, 21)
    for r, (model, task) in enumerate(runs):
        rows = evidence[(evidence["model"] == model) & (evidence["task"] == task)].set_index("n_features")
        previous: list[str] = []
        for c, k in enumerate(steps):
            ax = axes[r, c]
            if k not in rows.index:
                _empty(ax, "not run")
                continue
            row = rows.loc[k]
            s, y = np.asarray(row["scores"], dtype=np.float64), np.asarray(row["labels"])
            keep = np.isfinite(s)
            ax.hist([s[keep & (y == 0)], s[keep & (y == 1)]], bins=bins, stacked=True, label=["Y = 0", "Y = 1"])
            features = str(row["features"]).split(",")
            added = [f for f in features if f not in previous]
            previous = features
            summary = f"AUC {row['auc']:.2f}, σ {row['score_std']:.2f}"
            ax.set_title(f"{k} features (+{', '.join(added)})\n{summary}", fontsize=7)
            ax.set(xlim=(0, 1), xlabel="risk score" if r == len(runs) - 1 else "")
            if c == 0:
                ax.set_ylabel(f"{wrap(model_label(model, instruct or {}), 20)}\n{task}\nrows", fontsize=7)
            ax.tick_params(labelsize=6)
        axes[r, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return fig


def figA9(importance: pd.DataFrame, instruct: Mapping[str, bool] | None = None, *, seed: int = 0) -> Figure:
    """Permutation importance (AUC drop) of each feature, per model, for each analysed task."""
    tasks = list(dict.fromkeys(importance["task"])) if not importance.empty else []
    fig, axes = plt.subplots(1, max(len(tasks), 1), figsize=(6 * max(len(tasks), 1), 4.5), squeeze=False)
    if not tasks:
        _empty(axes[0, 0], "no feature-importance analysis configured")
    for ax, task in zip(axes[0], tasks, strict=False):
        here = _labelled(importance[importance["task"] == task], instruct)
        sns.barplot(here, y="feature", x="auc_drop", hue="model", ax=ax, seed=seed)
        ax.set(xlabel="drop in ROC AUC when permuted", ylabel="", title=f"Feature importance: {task}")
    fig.tight_layout()
    return fig
