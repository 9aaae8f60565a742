"""The study's figures (seaborn), each from plain data frames; :func:`write_figures` draws them all.

Every figure with a seaborn estimate takes ``seed`` (the study's config seed), so
its bootstrap intervals are the same each time it is drawn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from unsure.config import Protocol
from unsure.nextword.tables import ORACLE, top_words_frame
from unsure.report import save_figure


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_axis_off()


def fig1_top_words(
    human: pd.DataFrame,
    model: pd.DataFrame,
    positions: pd.DataFrame,
    picks: Sequence[tuple[int, int]],
    name: str,
    *,
    seed: int = 0,
) -> Figure:
    """Human vs model: the 15 most probable words at two contexts."""
    fig, axes = plt.subplots(1, len(picks), figsize=(6 * len(picks), 5), squeeze=False)
    contexts = positions.set_index(["text_id", "word_num"])["context"]
    for ax, pick in zip(axes[0], picks, strict=True):
        frame = top_words_frame({"human": human, name: model}, pick)
        order = frame.groupby("word")["prob"].max().sort_values(ascending=False).index[:15]
        frame = frame[frame["word"].isin(order)]
        sns.barplot(frame, y="word", x="prob", hue="system", order=list(order), ax=ax, orient="h", seed=seed)
        context = str(contexts.get(pick, ""))
        ax.set_title(("… " + context[-60:] if len(context) > 60 else context) + " ___", fontsize=9)
        ax.set_xlabel("probability")
    fig.suptitle("Top-15 next words: humans vs model")
    fig.tight_layout()
    return fig


def fig2_frame(tvds: pd.DataFrame, systems: Sequence[str], *, protocol: Protocol) -> pd.DataFrame:
    """What figure 2 plots per position: ``system, tvd`` for every system and the oracle.

    ``corrected``: everything against the target half of the first split (one
    yardstick for models and oracle). ``paper``, as the authors' figure: the
    models against all responses, the oracle half against the target half.
    """
    if protocol not in ("paper", "corrected"):
        raise ValueError(f"studies.nextword.protocol: unknown protocol {protocol!r}")
    frame = tvds[tvds["system"].isin([*systems, ORACLE])]
    if protocol == "corrected":
        column = pd.Series("tvd_target", index=frame.index)
    else:
        column = pd.Series("tvd_human", index=frame.index).where(frame["system"] != ORACLE, "tvd_target")
    values = [frame.at[i, c] for i, c in column.items()]
    return pd.DataFrame({"system": frame["system"].to_numpy(), "tvd": values})


def fig2_tvd_kde(tvds: pd.DataFrame, systems: Sequence[str], *, protocol: Protocol) -> Figure:
    """KDE of per-position TVD, every system and the oracle (what each is measured against: :func:`fig2_frame`)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    frame = fig2_frame(tvds, systems, protocol=protocol)
    sns.kdeplot(frame, x="tvd", hue="system", common_norm=False, clip=(0, 1), ax=ax, warn_singular=False)
    ax.set_xlabel(
        "TVD to the target half of the responses"
        if protocol == "corrected"
        else "TVD: models to all responses, oracle half to the target half"
    )
    ax.set_xlim(0, 1)
    ax.set_title("Per-position TVD: models vs the human oracle")
    fig.tight_layout()
    return fig


def fig3_ard(ard: pd.DataFrame) -> Figure:
    """ARD coefficients with 95 % credible intervals."""
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(ard) + 1.5))
    frame = ard.iloc[::-1].reset_index(drop=True)
    ax.errorbar(
        frame["coef"],
        range(len(frame)),
        xerr=[frame["coef"] - frame["lower"], frame["upper"] - frame["coef"]],
        fmt="o",
        capsize=3,
    )
    ax.set_yticks(range(len(frame)), frame["feature"])
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("coefficient (TVD per standard deviation / vs the reference POS)")
    ax.set_title("What makes a context hard (ARD regression)")
    fig.tight_layout()
    return fig


def fig4_groups(groups: pd.DataFrame, *, protocol: Protocol) -> Figure:
    """Histograms of TVD at the POS and meaning levels, model vs oracle (the model's reference: ``protocol``)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, level in zip(axes, ("POS", "meaning"), strict=True):
        frame = groups[groups["level"] == level]
        sns.histplot(
            frame,
            x="tvd",
            hue="system",
            bins=20,
            binrange=(0, 1),
            stat="probability",
            common_norm=False,
            element="step",
            ax=ax,
        )
        ax.set_title(f"{level} level")
        ax.set_xlabel(
            "TVD to the target half"
            if protocol == "corrected"
            else "TVD: model to all responses, oracle half to the target half"
        )
    fig.tight_layout()
    return fig


def app_predictors(hardness: pd.DataFrame, *, seed: int = 0) -> Figure:
    """Model-vs-oracle TVD against each numeric predictor of the ARD regression."""
    numeric = ["human_entropy", "model_entropy", "tvd_oracle_oracle", "context_length"]
    fig, axes = plt.subplots(1, len(numeric), figsize=(4 * len(numeric), 3.6), sharey=True)
    for ax, col in zip(axes, numeric, strict=True):
        sns.regplot(
            hardness,
            x=col,
            y="tvd_model_oracle",
            ax=ax,
            scatter_kws={"s": 6, "alpha": 0.4},
            line_kws={"color": "C1"},
            seed=seed,
        )
    axes[0].set_ylabel("TVD model vs target half")
    fig.tight_layout()
    return fig


def app_sample_size(study: pd.DataFrame, *, seed: int = 0) -> Figure:
    """MSE of per-position TVD from n samples against the full estimate (appendix C.1)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.pointplot(study, x="n", y="mse", errorbar="sd", ax=ax, seed=seed)
    ax.set_xlabel("samples per context")
    ax.set_ylabel("MSE of TVD vs all samples")
    ax.set_title("How many samples are enough")
    fig.tight_layout()
    return fig


def app_tokens(tokens: pd.DataFrame) -> Figure:
    """Token level: per-position TVD of each model and of the oracle (appendix D)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if tokens.empty:
        _empty(ax, "no token_models configured")
        return fig
    long = pd.concat(
        [
            tokens[["model", "tvd_model"]].rename(columns={"tvd_model": "tvd"}),
            tokens[["model", "tvd_oracle"]]
            .assign(model=tokens["model"] + " oracle")
            .rename(columns={"tvd_oracle": "tvd"}),
        ]
    )
    sns.kdeplot(long, x="tvd", hue="model", common_norm=False, clip=(0, 1), ax=ax, warn_singular=False)
    ax.set_xlabel("TVD over first tokens")
    ax.set_title("Token level")
    fig.tight_layout()
    return fig


def app_improvement(summary: pd.DataFrame, *, seed: int = 0) -> Figure:
    """Expected TVD after replacing k % of the model's distributions by oracle estimates (appendix E)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    sns.lineplot(
        summary, x="k", y="expected_tvd_mixed", hue="oracle_size", errorbar="sd", ax=axes[0], marker="o", seed=seed
    )
    for _, g in summary.groupby("oracle_size"):
        axes[0].axhline(g["expected_tvd_oracle"].mean(), ls="--", lw=0.8, color="grey")
    axes[0].set_ylabel("expected TVD")
    axes[0].set_xlabel("% of contexts replaced by oracle estimates")
    sns.lineplot(summary, x="k", y="wasserstein", hue="oracle_size", errorbar="sd", ax=axes[1], marker="o", seed=seed)
    axes[1].set_ylabel("Wasserstein distance to the oracle's TVDs")
    axes[1].set_xlabel("% of contexts replaced")
    fig.tight_layout()
    return fig


def app_finetune(losses: pd.DataFrame, fold_tvds: pd.DataFrame, *, seed: int = 0) -> Figure:
    """Loss curves per fold and held-out TVD before and after fine-tuning (appendix F)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    if losses.empty:
        _empty(axes[0], "no fine-tuning configured")
        _empty(axes[1], "no fine-tuning configured")
        return fig
    sns.lineplot(losses, x="epoch", y="loss", hue="fold", style="split", ax=axes[0], marker="o", seed=seed)
    axes[0].set_title("Language-modelling loss on the passages")
    sns.barplot(fold_tvds, x="fold", y="tvd", hue="system", ax=axes[1], errorbar=("ci", 95), seed=seed)
    axes[1].set_ylabel("expected TVD to the target half")
    axes[1].set_title("Held-out fold")
    fig.tight_layout()
    return fig


def fig5_biased_tvd(tvds: pd.DataFrame) -> Figure:
    """Histogram of per-position TVD to all responses: each biased estimator and the oracle (figure 5)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if tvds.empty:
        _empty(ax, "no biased_models configured")
        return fig
    sns.histplot(
        tvds, x="tvd_human", hue="system", stat="density", common_norm=False, binwidth=0.05, binrange=(0, 1), ax=ax
    )
    ax.set_xlabel("TVD to the distribution of all responses")
    ax.set_xlim(0, 1)
    ax.set_title("Biased estimator vs the human oracle (appendix A)")
    fig.tight_layout()
    return fig


def fig10_pos(hardness: pd.DataFrame) -> Figure:
    """Model-vs-oracle TVD per universal POS tag of the last context word (figure 10)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if "last_pos" not in hardness.columns or hardness.empty:
        _empty(ax, "no POS tags (pos_tagger: none)")
        return fig
    order = sorted(hardness["last_pos"].dropna().unique())
    sns.boxplot(hardness, x="last_pos", y="tvd_model_oracle", order=order, ax=ax, color="C0", fliersize=2)
    counts = hardness["last_pos"].value_counts()
    names = {".": "PUNCT"}  # the universal tagset's punctuation tag
    ax.set_xticks(range(len(order)), [f"{names.get(tag, tag)}\n(n={counts[tag]})" for tag in order], fontsize=8)
    ax.set_xlabel("universal POS tag of the last context word")
    ax.set_ylabel("TVD model vs target half")
    ax.set_ylim(-0.02, 1.02)  # boxes at 0 or 1 stay visible
    ax.set_title("TVD against the part of speech of the last context word")
    fig.tight_layout()
    return fig


def fig12_tvd_differences(differences: pd.DataFrame) -> Figure:
    """Density histogram of TVD(model, humans) - TVD(oracle, humans) per position, per system (figure 12)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if differences.empty:
        _empty(ax, "no systems")
        return fig
    sns.histplot(
        differences,
        x="difference",
        hue="system",
        stat="density",
        common_norm=False,
        binwidth=0.05,
        binrange=(-1, 1),
        element="step",
        ax=ax,
    )
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("TVD(model, all responses) − TVD(oracle, all responses)")
    ax.set_xlim(-1, 1)
    ax.set_title("Per-position TVD differences: model minus oracle")
    fig.tight_layout()
    return fig


def write_figures(figures: Mapping[str, Figure], out: str | os.PathLike[str]) -> None:
    """Save every figure as PNG and PDF under ``out`` and close it."""
    for name, fig in figures.items():
        save_figure(fig, Path(out) / name)
        plt.close(fig)
