"""Figures 5, 10 and 12 of Ilia & Aziz on known inputs: the numbers under them and the drawn figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.nextword import plots
from unsure.nextword.tables import biased_tvds, tvd_differences


def _tvds() -> pd.DataFrame:
    rows = [
        ("oracle", 1, 2, 0.25, 0.5),
        ("oracle", 1, 3, 0.5, 0.5),
        ("gpt2", 1, 2, 0.75, 0.8),
        ("gpt2", 1, 3, 0.25, 0.3),
        ("gpt2", 1, 4, 0.9, 0.9),  # no oracle here: not a difference
        ("bloom", 1, 2, 0.25, 0.3),
    ]
    return pd.DataFrame(rows, columns=["system", "text_id", "word_num", "tvd_human", "tvd_target"])


def test_tvd_differences_are_model_minus_oracle_per_position() -> None:
    diff = tvd_differences(_tvds(), ["gpt2", "bloom"])
    got = {(s, n): d for s, n, d in zip(diff["system"], diff["word_num"], diff["difference"], strict=True)}
    assert got == {("gpt2", 2): 0.5, ("gpt2", 3): -0.25, ("bloom", 2): 0.0}


def test_biased_tvds_against_all_responses() -> None:
    human = pd.DataFrame({"text_id": [1, 1, 1], "word_num": [2, 2, 3], "word": ["a", "b", "a"], "count": [3, 1, 4]})
    biased = pd.DataFrame(
        {"text_id": [1, 1], "word_num": [2, 2], "word": ["a", "c"], "logprob": [0.0, 0.0], "prob": [0.5, 0.5]}
    )
    splits = pd.DataFrame(
        {"seed": [0, 0], "text_id": [1, 1], "word_num": [2, 2], "word": ["a", "b"], "target": [2, 0], "oracle": [1, 1]}
    )
    out = biased_tvds({"gpt2": biased}, human, splits).set_index("system")
    # human at (1, 2): a 0.75, b 0.25; biased: a 0.5, c 0.5 -> TVD 0.5; oracle half a 0.5, b 0.5 -> 0.25
    assert out.loc["gpt2 (biased)", "tvd_human"] == pytest.approx(0.5)
    assert out.loc["oracle", "tvd_human"] == pytest.approx(0.25)
    assert set(out["word_num"]) == {2}  # only the positions the biased estimator covers


def test_figures_5_10_12_draw_and_say_what_they_show(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    hardness = pd.DataFrame(
        {"tvd_model_oracle": rng.uniform(0, 1, 40), "last_pos": rng.choice(["ADJ", "NOUN", "ADP"], 40)}
    )
    biased = pd.DataFrame({"system": ["m (biased)"] * 20 + ["oracle"] * 20, "tvd_human": rng.uniform(0, 1, 40)})
    figures = {
        "fig5": plots.fig5_biased_tvd(biased),
        "fig10": plots.fig10_pos(hardness),
        "fig12": plots.fig12_tvd_differences(tvd_differences(_tvds(), ["gpt2", "bloom"])),
    }
    fig10 = figures["fig10"].axes[0]
    assert [t.get_text().split("\n")[0] for t in fig10.get_xticklabels()] == ["ADJ", "ADP", "NOUN"]
    assert "POS" in fig10.get_xlabel() and "TVD" in fig10.get_ylabel()
    assert "−" in figures["fig12"].axes[0].get_xlabel()
    legend = figures["fig5"].axes[0].get_legend()
    assert legend is not None and {t.get_text() for t in legend.get_texts()} == {"m (biased)", "oracle"}
    empty = plots.fig5_biased_tvd(biased.iloc[0:0])
    assert "no biased_models" in empty.axes[0].texts[0].get_text()
    plots.write_figures(figures, tmp_path)
    assert all((tmp_path / f"{name}.{ext}").is_file() for name in figures for ext in ("png", "pdf"))


def test_fig2_measures_as_the_protocol_says() -> None:
    tvds = _tvds()
    corrected = plots.fig2_frame(tvds, ["gpt2"], protocol="corrected")
    paper = plots.fig2_frame(tvds, ["gpt2"], protocol="paper")
    # corrected: every system and the oracle against the target half
    assert corrected[corrected["system"] == "gpt2"]["tvd"].tolist() == [0.8, 0.3, 0.9]
    # paper: models against all responses, the oracle half against the target half
    assert paper[paper["system"] == "gpt2"]["tvd"].tolist() == [0.75, 0.25, 0.9]
    assert paper[paper["system"] == "oracle"]["tvd"].tolist() == [0.5, 0.5]
    assert "bloom" not in set(paper["system"])
    with pytest.raises(ValueError, match="unknown protocol"):
        plots.fig2_frame(tvds, ["gpt2"], protocol="other")  # type: ignore[arg-type]
    assert "all responses" in plots.fig2_tvd_kde(tvds, ["gpt2"], protocol="paper").axes[0].get_xlabel()


def test_fig4_under_paper_measures_the_model_against_all_responses() -> None:
    """Figure 4 as the authors: the model vs all responses, the oracle half vs the target half."""
    from unsure.nextword.semantic import train_tagger
    from unsure.nextword.tables import group_tvds

    positions = pd.DataFrame({"text_id": [1], "word_num": [3], "context": ["He saw the"]})
    human = pd.DataFrame({"text_id": [1] * 2, "word_num": [3] * 2, "word": ["dog", "cat"], "count": [3, 1]})
    splits = pd.DataFrame(
        {
            "seed": [0, 0],
            "text_id": [1, 1],
            "word_num": [3, 3],
            "word": ["dog", "cat"],
            "target": [2, 0],
            "oracle": [1, 1],
        }
    )
    model = pd.DataFrame({"text_id": [1], "word_num": [3], "word": ["dog"], "count": [4]})
    vectors = {"dog": np.array([1.0, 0.0]), "cat": np.array([0.9, 0.1])}
    tagger = train_tagger(200, seed=0)
    corrected = group_tvds(model, splits, positions, tagger=tagger, vectors=vectors, k_max=1)
    paper = group_tvds(model, splits, positions, tagger=tagger, vectors=vectors, k_max=1, human=human)
    word = {name: f[f["level"] == "word"].set_index("system")["tvd"] for name, f in (("c", corrected), ("p", paper))}
    assert word["c"]["model"] == pytest.approx(0.0)  # target half: dog only
    assert word["p"]["model"] == pytest.approx(0.25)  # all responses: dog 0.75, cat 0.25
    assert word["p"]["oracle"] == word["c"]["oracle"] == pytest.approx(0.5)  # oracle half vs target half either way
    assert "all responses" in plots.fig4_groups(paper, protocol="paper").axes[0].get_xlabel()
