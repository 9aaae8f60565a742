"""Which models the study compares, by family, size and variant, and the figures that follows from.

Kept apart from the plotting code: the workflow reads it while building the DAG,
which must not pay for importing matplotlib and seaborn.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

FIRST_APPENDIX_FIGURE = 5


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


def appendix_pairs(models: pd.DataFrame) -> list[tuple[str, str]]:
    """(family, size) pairs in config order: one appendix figure each."""
    return list(dict.fromkeys(zip(models["family"], models["size"], strict=True)))


def figure_names(models: pd.DataFrame) -> list[str]:
    """Every figure the study draws, for this set of models."""
    n = len(appendix_pairs(models))
    return ["fig2", "fig3", "fig4"] + [f"fig{FIRST_APPENDIX_FIGURE + i}" for i in range(n)]
