"""Which models the study compares, by family, size and variant, and the figures that follow from it.

Kept apart from the plotting code: the workflow reads it while building the DAG,
which must not pay for importing matplotlib and seaborn.

The figures follow the paper's numbering. Figs. 2-4 draw one family (the
paper's Llama-2, ``studies.labelbias.figure_family``): 2 the metrics of each
of its models without mitigation, 3 each mitigation method per model, 4 all
tasks vs the tasks with semantically equivalent labels. The appendix then
gives every other family, in config order, a Fig. 2 (from Fig. 5 on), then a
Fig. 3 (the paper: 5 Mistral, 6 Falcon, 7 Mistral, 8 Falcon). Three more
figures pool every family as the study's first views did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

FIRST_APPENDIX_FIGURE = 5

KINDS = ("models", "methods", "subsets", "models_pooled", "methods_pooled", "subsets_pooled")
"""What a figure draws: metrics per model without mitigation (Fig. 2), per method and model
(Fig. 3), all vs semantically-equivalent-label tasks per model (Fig. 4), and the three views
pooled over every family."""


@dataclass(frozen=True)
class FigureSpec:
    """One figure: its file name, what it draws, for which family (None: every family) and its caption."""

    name: str
    kind: str
    family: str | None
    caption: str


def model_table(
    models: list[str], instruct: Mapping[str, bool], families: Mapping[str, tuple[str, str]]
) -> pd.DataFrame:
    """``model, family, size, variant`` per model; a model without a family entry is its own family."""
    rows = []
    for name in models:
        family, size = families.get(name, (name, "-"))
        rows.append(
            {"model": name, "family": family, "size": size, "variant": "instruct" if instruct[name] else "base"}
        )
    return pd.DataFrame(rows, columns=["model", "family", "size", "variant"])


def main_family(models: pd.DataFrame, figure_family: str | None) -> str | None:
    """The family of Figs. 2-4: ``figure_family`` when given, else the first model's (None without models)."""
    families = list(dict.fromkeys(models["family"]))
    if figure_family is None:
        return str(families[0]) if families else None
    if figure_family not in families:
        raise ValueError(
            f"studies.labelbias.figure_family: {figure_family!r} is not the family of any of the study's models "
            f"(studies.labelbias.families gives {families})"
        )
    return figure_family


def figure_lineup(models: pd.DataFrame, figure_family: str | None = None) -> list[FigureSpec]:
    """Every figure the study draws for this set of models, in the paper's numbering (see module doc)."""
    main = main_family(models, figure_family)
    others = [str(f) for f in dict.fromkeys(models["family"]) if f != main]
    specs = [
        FigureSpec("fig2", "models", main, "fig2"),
        FigureSpec("fig3", "methods", main, "fig3"),
        FigureSpec("fig4", "subsets", main, "fig4"),
    ]
    for i, family in enumerate(others):
        specs.append(FigureSpec(f"fig{FIRST_APPENDIX_FIGURE + i}", "models", family, "fig_family_models"))
    for i, family in enumerate(others):
        n = FIRST_APPENDIX_FIGURE + len(others) + i
        specs.append(FigureSpec(f"fig{n}", "methods", family, "fig_family_methods"))
    specs += [
        FigureSpec("fig2_all_families", "models_pooled", None, "fig2_all_families"),
        FigureSpec("fig3_all_models", "methods_pooled", None, "fig3_all_models"),
        FigureSpec("fig4_all_families", "subsets_pooled", None, "fig4_all_families"),
    ]
    return specs


def figure_names(models: pd.DataFrame, figure_family: str | None = None) -> list[str]:
    """Every figure the study draws, for this set of models."""
    return [spec.name for spec in figure_lineup(models, figure_family)]
