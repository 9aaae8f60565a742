"""One uncertainty profile per model: every study's headline numbers side by side.

A model that two or more studies run gets, from each of them, the numbers the
study leads with, read from the outputs the study already writes (no inference
runs again): each study's room returns them as a tidy frame (``headline`` in
``unsure.riskscores.tables``, ``unsure.nextword.tables``,
``unsure.labelbias.tables``, ``unsure.decisionrisk.tables`` and
``unsure.subgroups.tables``), one row per (model, measure, setting) with the
protocol the number was computed under. This module only hands each room its
files, combines the frames, rank-correlates the studies' calibration measures
across models and draws the figure; what a file holds and which numbers lead
stays in the room.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from scipy import stats

from unsure.config import Protocol
from unsure.decisionrisk.tables import headline as decisionrisk_headline
from unsure.labelbias.tables import headline as labelbias_headline
from unsure.nextword.tables import headline as nextword_headline
from unsure.report import save_figure, write_table
from unsure.riskscores.tables import headline as riskscores_headline
from unsure.subgroups.tables import headline as subgroups_headline

log = logging.getLogger(__name__)

HEADLINE_COLUMNS = ("model", "study", "measure", "setting", "value", "protocol", "better", "calibration")
"""What every study's ``headline`` returns: ``better`` is ``lower`` or ``higher``; ``calibration``
marks the measures that compare a model's probabilities with frequencies (the ones correlated)."""
TABLE_COLUMNS = ["model", "study", "measure", "setting", "protocol", "value", "better"]
CORRELATION_COLUMNS = ["measure_a", "measure_b", "n_models", "models", "rho", "p_value"]
MIN_MODELS = 2
"""Fewest models a rank correlation is computed on (with two it is ±1: do both orders agree)."""


def read_headlines(
    files: Mapping[str, Sequence[str]],
    protocols: Mapping[str, Protocol],
    *,
    nextword_models: Sequence[str],
    stand_ins: Collection[str],
) -> list[pd.DataFrame]:
    """Each study's headline frame, read by its own room from the files ``files`` names for it (study
    -> paths, in the order its ``headline`` takes them), in ``files``' order. ``protocols``: each
    study's ``protocol``; ``nextword_models``: the models behind nextword's systems;
    ``stand_ins``: the subgroups sources read from generated files."""
    counts = {"riskscores": 1, "nextword": 1, "labelbias": 1, "decisionrisk": 2, "subgroups": 1}
    frames = []
    for study, paths in files.items():
        if study not in counts:
            raise ValueError(f"no headline numbers known for study {study!r}")
        if len(paths) != counts[study]:
            raise ValueError(f"{study}: its headline reads {counts[study]} file(s), got {list(paths)}")
        protocol = protocols[study]
        if study == "riskscores":
            frames.append(riskscores_headline(paths[0], protocol=protocol))
        elif study == "nextword":
            frames.append(nextword_headline(paths[0], nextword_models, protocol=protocol))
        elif study == "labelbias":
            frames.append(labelbias_headline(paths[0], protocol=protocol))
        elif study == "decisionrisk":
            frames.append(decisionrisk_headline(paths[0], paths[1], protocol=protocol))
        else:
            frames.append(subgroups_headline(paths[0], protocol=protocol, stand_ins=stand_ins))
    return frames


def combine(frames: Iterable[pd.DataFrame], models: Sequence[str]) -> pd.DataFrame:
    """The headline frames of the studies, stacked, for ``models`` only, ordered by study and measure
    (as the frames give them), then model (as given), then setting.

    Every frame must have :data:`HEADLINE_COLUMNS`, one study each and finite values: a study whose
    numbers were read wrongly fails here, naming it, rather than in the figure.
    """
    parts = []
    for frame in frames:
        missing = [c for c in HEADLINE_COLUMNS if c not in frame.columns]
        studies = sorted(set(frame["study"])) if "study" in frame.columns else []
        if missing:
            raise ValueError(f"headline of {studies or 'a study'}: no column(s) {missing}")
        if len(studies) > 1:
            raise ValueError(f"one headline frame holds several studies: {studies}")
        bad = frame[~np.isfinite(frame["value"].astype(float))]
        if len(bad):
            first = bad.iloc[0]
            raise ValueError(
                f"{first['study']}: {first['measure']} of {first['model']} ({first['setting']}) is not finite"
            )
        wrong = sorted(set(frame["better"]) - {"lower", "higher"})
        if wrong:
            raise ValueError(f"{studies}: better must be 'lower' or 'higher', got {wrong}")
        parts.append(frame[list(HEADLINE_COLUMNS)])
    if not parts:
        return pd.DataFrame(columns=list(HEADLINE_COLUMNS))
    stacked = pd.concat(parts, ignore_index=True)
    for col in ("model", "study", "measure", "setting", "protocol", "better"):
        stacked[col] = stacked[col].astype(str)
    stacked["value"] = stacked["value"].astype(float)
    stacked["calibration"] = stacked["calibration"].astype(bool)
    out = stacked[stacked["model"].isin(list(models))]
    measures = list(dict.fromkeys(zip(out["study"], out["measure"], strict=True)))
    settings = list(dict.fromkeys(out["setting"]))
    order = pd.DataFrame(
        {
            "q": [measures.index(k) for k in zip(out["study"], out["measure"], strict=True)],
            "m": out["model"].map({m: i for i, m in enumerate(models)}),
            "s": out["setting"].map({s: i for i, s in enumerate(settings)}),
        },
        index=out.index,
    )
    return out.loc[order.sort_values(["q", "m", "s"], kind="stable").index].reset_index(drop=True)


def by_model(profile: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """The profile read one model at a time (the table's order): ``models``' order, then as combined."""
    rank = profile["model"].map({m: i for i, m in enumerate(models)})
    return profile.loc[rank.sort_values(kind="stable").index].reset_index(drop=True)


def measure_label(study: str, measure: str) -> str:
    """How a measure is named across studies: ``riskscores: ECE, numeric``."""
    return f"{study}: {measure}"


def model_means(profile: pd.DataFrame) -> pd.DataFrame:
    """Per model and measure the mean over its settings (tasks, benchmarks, systems): one number
    per model and measure, as the figure marks it and the correlations use it."""
    keys = ["model", "study", "measure", "protocol", "better", "calibration"]
    return profile.groupby(keys, sort=False)["value"].agg(["mean", "size"]).reset_index()


def calibration_correlations(profile: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rank correlation (``scipy.stats.spearmanr``) between every two calibration measures,
    across the models that have both (each model's mean over settings).

    ``n_models`` and ``models`` say what each coefficient rests on; with fewer than
    :data:`MIN_MODELS` models, or a measure equal for all of them, ``rho`` is empty. The p-value is
    the test of no association; it needs a handful of models to mean anything.
    """
    means = model_means(profile[profile["calibration"]])
    means = means.assign(label=[measure_label(s, m) for s, m in zip(means["study"], means["measure"], strict=True)])
    labels = list(dict.fromkeys(means["label"]))
    wide = means.pivot_table(index="model", columns="label", values="mean", sort=False)
    rows = []
    for a, b in combinations(labels, 2):
        both = wide[[a, b]].dropna()
        rho = p = float("nan")
        if len(both) >= MIN_MODELS and both[a].nunique() > 1 and both[b].nunique() > 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # two models: scipy warns that p is undefined
                result = stats.spearmanr(both[a], both[b])
            rho, p = float(result.statistic), float(result.pvalue)
        rows.append(
            {"measure_a": a, "measure_b": b, "n_models": len(both), "models": ", ".join(map(str, both.index)),
             "rho": rho, "p_value": p}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=CORRELATION_COLUMNS)


# --------------------------------------------------------------------------------------- figure

DOT = "0.45"
"""The grey of a setting's dot."""


def _measure_panel(ax: Axes, rows: pd.DataFrame, models: Sequence[str], colour: str) -> None:
    """One measure: each model's mean over settings (a diamond, with its value), and a small grey dot
    per setting where it has several; models top to bottom, a model the study did not run says so."""
    settings = list(dict.fromkeys(rows["setting"]))
    offsets = dict(zip(settings, np.linspace(-0.22, 0.22, len(settings)) if len(settings) > 1 else [0.0], strict=True))
    lo, hi = float(rows["value"].min()), float(rows["value"].max())
    pad = (hi - lo) * 0.08 or max(abs(hi) * 0.1, 0.05)
    ax.set_xlim(lo - pad, hi + pad)
    for i, model in enumerate(models):
        mine = rows[rows["model"] == model]
        if mine.empty:
            ax.text(0.5, i, "not in this study", transform=ax.get_yaxis_transform(), ha="center", va="center",
                    fontsize=7, color="0.6", style="italic")  # fmt: skip
            continue
        mean = float(mine["value"].mean())
        if len(mine) > 1:
            ax.scatter(
                mine["value"], i + mine["setting"].map(offsets), color=DOT, s=14, alpha=0.8, linewidths=0, zorder=2
            )
            label = f"{mean:.3g}"
        else:  # one number: say which setting it is (the best mitigation, the benchmark, ...)
            label = f"{mean:.3g} · {mine['setting'].iloc[0]}"
        ax.scatter([mean], [i], marker="D", s=46, color=colour, edgecolor="black", linewidths=0.6, zorder=3)
        right = mean > lo + 0.6 * (hi - lo)  # a label that would leave the panel goes to the left
        ax.annotate(label, (mean, i), xytext=(-5 if right else 5, 6), textcoords="offset points", fontsize=7,
                    ha="right" if right else "left", zorder=4,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8})  # fmt: skip
    ax.set_ylim(len(models) - 0.5, -0.5)
    ax.set_yticks(range(len(models)), list(models))
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.grid(axis="x", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelsize=7)


def _correlation_panel(ax: Axes, correlations: pd.DataFrame) -> None:
    """The calibration measures' Spearman coefficients as a matrix, each cell with its n."""
    labels = list(dict.fromkeys([*correlations["measure_a"], *correlations["measure_b"]]))
    k = len(labels)
    rho = np.full((k, k), np.nan)  # the diagonal left blank
    n: dict[tuple[int, int], int] = {}
    for _, row in correlations.iterrows():
        i, j = labels.index(row["measure_a"]), labels.index(row["measure_b"])
        rho[i, j] = rho[j, i] = row["rho"]
        n[(i, j)] = n[(j, i)] = int(row["n_models"])
    masked = np.ma.masked_invalid(rho)
    cmap = sns.color_palette("vlag", as_cmap=True).with_extremes(bad="white")
    image = ax.imshow(masked, cmap=cmap, vmin=-1, vmax=1)
    for i in range(k):
        for j in range(k):
            if i == j:
                text = ""
            elif np.isnan(rho[i, j]):
                text = f"too few\nn={n[(i, j)]}"
            else:
                text = f"{rho[i, j]:+.2f}\nn={n[(i, j)]}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    short = [label.replace(": ", ":\n", 1) for label in labels]
    ax.set_xticks(range(k), short, fontsize=7, rotation=30, ha="right")
    ax.set_yticks(range(k), short, fontsize=7)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="Spearman ρ")
    ax.set_title("Calibration measures across models:\nSpearman ρ, n = models in both", fontsize=9)


def _legend_panel(ax: Axes, studies: Mapping[str, str], n_models: int) -> None:
    ax.axis("off")
    handles = [
        Line2D([], [], ls="", marker="o", color=DOT, markersize=4, label="one setting (task, benchmark, system)")
    ]
    for study, colour in studies.items():
        label = f"{study}: mean over settings"
        handles.append(Line2D([], [], ls="", marker="D", color=colour, markeredgecolor="black", label=label))
    title = f"{n_models} models in two or more studies"
    ax.legend(handles=handles, loc="upper left", frameon=False, fontsize=8, title=title, title_fontsize=8)


def profile_figure(profile: pd.DataFrame, correlations: pd.DataFrame, models: Sequence[str]) -> Figure:
    """One panel per study measure (models on the y axis, in ``models``' order), then the rank
    correlations of the calibration measures and a legend."""
    measures = list(dict.fromkeys(zip(profile["study"], profile["measure"], strict=True)))
    if not measures:
        fig, ax = plt.subplots(figsize=(5, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no model with numbers from two or more studies", ha="center", va="center")
        return fig
    studies = list(dict.fromkeys(s for s, _ in measures))
    colours = {s: to_hex(c) for s, c in zip(studies, sns.color_palette("deep", len(studies)), strict=True)}
    ncols = min(4, len(measures))
    nrows = math.ceil(len(measures) / ncols)
    row_height = (0.42 if len(models) <= 8 else 0.28) * len(models) + 1.3
    k = len(set(correlations["measure_a"]) | set(correlations["measure_b"]))
    bottom = 1.0 * k + 1.8 if k else 1.6
    fig = plt.figure(figsize=(3.6 * ncols + 1.2, row_height * nrows + bottom), layout="constrained")
    # two subfigures, so that the matrix's labels and colour bar do not widen the panels' columns
    subfigures = fig.subfigures(2, 1, height_ratios=[row_height * nrows, bottom])
    assert isinstance(subfigures, np.ndarray)  # two of them, as an array
    top, low = subfigures
    axes = top.subplots(nrows, ncols, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= len(measures):
            ax.axis("off")
            continue
        study, measure = measures[index]
        rows = profile[(profile["study"] == study) & (profile["measure"] == measure)]
        _measure_panel(ax, rows, models, colours[study])
        if index % ncols:
            ax.tick_params(axis="y", labelleft=False)
        protocol = ", ".join(sorted(set(rows["protocol"])))
        ax.set_title(f"{study}\n{measure}", fontsize=9, color=colours[study], fontweight="bold", loc="left")
        ax.set_xlabel(f"{rows['better'].iloc[0]} is better · protocol: {protocol}", fontsize=7)
    corr, legend = low.subplots(1, 2, width_ratios=[3, 2])
    if k:
        _correlation_panel(corr, correlations)
    else:
        corr.axis("off")
        corr.text(0, 0.5, "fewer than two calibration measures: no correlation", fontsize=8)
    _legend_panel(legend, colours, len(models))
    fig.suptitle("Uncertainty profile per model: each study's headline numbers", fontsize=12)
    return fig


# ----------------------------------------------------------------------------------- the outputs


def write_profile(
    frames: Iterable[pd.DataFrame],
    models: Sequence[str],
    *,
    tables: str | os.PathLike[str],
    figures: str | os.PathLike[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Combine the studies' headline frames for ``models``, then write ``tables/profile``,
    ``tables/correlations`` (CSV, Markdown, LaTeX) and ``figures/profile`` (PNG, PDF)."""
    profile = combine(frames, models)
    shown = [m for m in models if m in set(profile["model"])]
    correlations = calibration_correlations(profile)
    per_model = profile.groupby("model", sort=False)["study"].nunique()
    log.info(
        "profile of %d models (%s); studies per model: %s",
        len(shown),
        ", ".join(sorted(set(profile["study"]))),
        ", ".join(f"{m} {per_model[m]}" for m in shown),
    )
    if missing := [m for m in models if m not in shown]:
        log.warning("no headline numbers of %s in any study's outputs", ", ".join(missing))
    write_table(
        by_model(profile, models)[TABLE_COLUMNS],
        Path(tables) / "profile",
        caption="Headline numbers of each study per model (models in two or more studies)",
        float_format="{:.4g}",
    )
    write_table(
        correlations,
        Path(tables) / "correlations",
        caption="Spearman rank correlation of the calibration measures across the models that have both",
        float_format="{:.3g}",
    )
    save_figure(profile_figure(profile, correlations, shown), Path(figures) / "profile")
    return profile, correlations
