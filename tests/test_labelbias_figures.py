"""The figures in the paper's lineup: which family and models each draws, its panels and their labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from unsure.config import load_config
from unsure.labelbias import plots
from unsure.labelbias.lineup import figure_lineup, model_table

REPO = Path(__file__).resolve().parents[1]


def _models(config: str) -> tuple[pd.DataFrame, str | None]:
    cfg = load_config(REPO / "config" / config)
    lb = cfg.studies.labelbias
    table = model_table(
        list(lb.models),
        {m: cfg.models[m].instruct for m in lb.models},
        {m: (f.family, f.size) for m, f in lb.families.items()},
    )
    return table, lb.figure_family


def test_paper_config_numbers_the_figures_as_the_paper() -> None:
    """Figs. 2-4 Llama-2; 5 Mistral and 6 Falcon without mitigation; 7 Mistral and 8 Falcon per method."""
    models, family = _models("config.yaml")
    lineup = [(s.name, s.kind, s.family) for s in figure_lineup(models, family)]
    assert lineup == [
        ("fig2", "models", "Llama-2"),
        ("fig3", "methods", "Llama-2"),
        ("fig4", "subsets", "Llama-2"),
        ("fig5", "models", "Mistral"),
        ("fig6", "models", "Falcon"),
        ("fig7", "methods", "Mistral"),
        ("fig8", "methods", "Falcon"),
        ("fig2_all_families", "models_pooled", None),
        ("fig3_all_models", "methods_pooled", None),
        ("fig4_all_families", "subsets_pooled", None),
    ]


def test_demo_draws_its_stand_in_for_llama_2_by_the_config_key() -> None:
    models, family = _models("demo.yaml")
    assert family == "tiny-llama"
    specs = figure_lineup(models, family)
    assert [s.family for s in specs[:3]] == ["tiny-llama"] * 3
    assert [(s.name, s.family) for s in specs[3:5]] == [("fig5", "tiny-gpt2"), ("fig6", "tiny-gpt2")]
    with pytest.raises(ValueError, match=r"studies\.labelbias\.figure_family: 'Llama-2'"):
        figure_lineup(models, "Llama-2")


def _per_task(models: pd.DataFrame, lora: set[str]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for model in models["model"]:
        for task in ("t1", "t2", "t3"):
            for k in (0, 2, 4):
                for s in range(1 if k == 0 else 2):
                    for method in ("none", "cc", "dc", "looc", "lora"):
                        if (method == "looc" and k == 0) or (method == "lora" and model not in lora):
                            continue
                        m = rng.uniform(0.1, 0.9, 5)
                        rows.append(
                            {"model": model, "task": task, "k": k, "set": s, "method": method}
                            | dict(zip(["accuracy", "macro_f1", "macro_f1_paper", "rsd", "bias_score"], m, strict=True))
                        )
    return pd.DataFrame(rows)


def test_figures_draw_one_line_per_model_or_method_and_label_every_y_axis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    models, family = _models("config.yaml")
    per_task = _per_task(models, lora={"llama-2-7b", "llama-2-7b-chat", "mistral-7b", "mistral-7b-instruct"})
    drawn: dict[str, Figure] = {}

    def keep(fig: Figure, stem: str) -> list[Path]:
        drawn[Path(stem).name] = fig
        return []

    monkeypatch.setattr(plots, "save_figure", keep)
    names = plots.write_figures(
        per_task, models, {"t1"}, tmp_path, subset_name="sem. eq.", figure_family=family, f1_column="macro_f1_paper"
    )
    assert names == list(drawn)
    for name, fig in drawn.items():
        for ax in fig.axes:
            assert ax.get_ylabel() in {"accuracy", "macro-F1", "RSD", "BiasScore"}, (name, ax.get_title())
    llama = ["llama-2-7b", "llama-2-7b-chat", "llama-2-13b", "llama-2-13b-chat"]

    def legend(fig: Figure) -> list[str]:
        return [t.get_text() for t in fig.legends[0].get_texts()]

    # Fig. 2: three panels (the paper's a-c), one line per Llama-2 model
    assert [ax.get_ylabel() for ax in drawn["fig2"].axes] == ["macro-F1", "RSD", "BiasScore"]
    assert all(len(ax.get_lines()) >= 4 for ax in drawn["fig2"].axes)
    assert set(llama) <= set(legend(drawn["fig2"])) and "mistral-7b" not in legend(drawn["fig2"])
    # Fig. 3: a row per Llama-2 model, a line per method, in the paper's colours
    fig3 = drawn["fig3"]
    assert len(fig3.axes) == 4 * 3
    assert [ax.get_title() for ax in fig3.axes[::3]] == [f"{m} | macro-F1" for m in llama]
    colours = {t: h.get_color() for t, h in zip(legend(fig3), fig3.legends[0].legend_handles, strict=False)}
    assert colours["no mitigation"] == "black" and colours["LoRA"] == "tab:green"
    # Fig. 4: RSD and BiasScore, each model on all tasks and on the subset
    assert [ax.get_ylabel() for ax in drawn["fig4"].axes] == ["RSD", "BiasScore"]
    assert len(drawn["fig4"].axes[0].get_lines()) >= 8
    # the appendix: Mistral and Falcon, as the paper's Figs. 5-8
    assert {"mistral-7b", "mistral-7b-instruct"} <= set(legend(drawn["fig5"]))
    assert len(drawn["fig8"].axes) == 4 * 3  # four Falcon models
    assert "LoRA" in legend(drawn["fig7"]) and "LoRA" not in legend(drawn["fig8"])  # Falcon is not fine-tuned
    assert len(drawn["fig3_all_models"].axes) == 2 * 3  # the pooled view: base and instruct rows
