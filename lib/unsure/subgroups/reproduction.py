"""The reproduction ledger of Fogliato et al.: the printed cells of the paper's LLM tables (Table 2,
equal-size draws; Table 3, EB against structured regression) beside ours under each protocol.

The protocols differ only in EB's variance of a 0/1 mean, and every run computes both EBs for
accuracy (``EB`` is the run's protocol, ``EB-paper`` / ``EB-corrected`` the other), so one run
fills both columns. The paper's Table 1 (BIG-bench, SQuAD2.0, TriviaQA) has no counterpart here.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from unsure.subgroups.tables import MEAN, MEDIAN, SD, TABLE3_SETTINGS

TABLE2 = {10: {"SR/DT": 0.90, "EB/DT": 0.81}, 20: {"SR/DT": 1.03, "EB/DT": 0.84}, 50: {"SR/DT": 1.52, "EB/DT": 0.86}}
"""Table 2: n_g -> median over datasets of the MSE ratio to DT."""
TABLE3 = {
    "proportional": {("EB/DT", MEAN): 0.62, ("EB/DT", SD): 0.14, ("Lasso/DT", MEAN): 0.68, ("Lasso/DT", SD): 0.34},
    "equal-20": {("EB/DT", MEAN): 0.64, ("EB/DT", SD): 0.15, ("Lasso/DT", MEAN): 0.73, ("Lasso/DT", SD): 0.47},
}
"""Table 3: design -> (column, statistic over datasets) -> printed value."""

DIFFERENCES = {
    "inputs": (
        "The paper's MC QA datasets and LLMs (Mistral-7B-Instruct, Gemma-2b, Phi-3-Mini, OpenLLaMA-3B) are not "
        "ours: each source is another study's per-instance results (or a generated stand-in), so a gap between "
        "the printed and our value does not measure an error."
    ),
    "binary_variance": (
        "EB's variance of a subgroup accuracy: Z(1 - Z)/n as the paper (protocol paper; zero, hence no shrinkage "
        "and a zero-width interval, when every drawn row agrees) or with the Laplace estimate (nZ + 1)/(n + 2) "
        "in place of Z (corrected). Both are computed in every run."
    ),
    "lasso_grid": (
        "The structured regression's lambda grid runs to 1e-4 lambda_max (the paper does not state its grid; "
        "stopping at 1e-2 lambda_max biased Table 3 against the Lasso). Same under both protocols."
    ),
}

COLUMNS = ["table", "source", "setting", "statistic", "metric", "printed", "paper", "corrected", "difference"]


def _eb(row: pd.Series, protocol: str, which: str, own: str, other: str) -> float:
    """EB's ratio (or coverage) under protocol ``which``: column ``own`` when it is the run's protocol,
    else ``other`` with ``{p}`` filled by ``which`` (the other protocol's EB, beside it)."""
    name = own if which == protocol else other.format(p=which)
    return float(row[name]) if name in row.index and pd.notna(row[name]) else float("nan")


def reproduction_table(
    table2: pd.DataFrame, table3: pd.DataFrame, *, protocol: str, sources: Collection[str]
) -> pd.DataFrame:
    """One row per printed cell and per source in ``sources`` (those of LLM multiple-choice results,
    which the paper's Tables 2 and 3 are about): ``printed``, ours under ``paper`` and ``corrected``,
    and the ``difference`` keys (:data:`DIFFERENCES`). EB's coverage of the equal-size draws (not
    printed: the paper's Figure 4 says most EB intervals cover at least 90%) is added for both protocols."""
    table2 = table2[table2["source"].isin(list(sources))] if "source" in table2 else table2
    table3 = table3[table3["source"].isin(list(sources))] if "source" in table3 else table3
    rows = []
    medians = table2[table2["dataset"] == MEDIAN] if "dataset" in table2 else table2.iloc[:0]
    for r in medians.to_dict("records"):
        row = pd.Series(r)
        printed = TABLE2.get(int(row["n_g"]), {})
        setting = f"n_g = {int(row['n_g'])}, equal"
        sr = float(row["SR/DT"])
        rows.append(["table2", row["source"], setting, "median", "SR/DT", printed.get("SR/DT", np.nan), sr, sr,
                     "inputs"])  # fmt: skip
        rows.append(["table2", row["source"], setting, "median", "EB/DT", printed.get("EB/DT", np.nan),
                     _eb(row, protocol, "paper", "EB/DT", "ratio EB-{p}"),
                     _eb(row, protocol, "corrected", "EB/DT", "ratio EB-{p}"),
                     "inputs; binary_variance"])  # fmt: skip
        rows.append(["table2", row["source"], setting, "median", "coverage EB", np.nan,
                     _eb(row, protocol, "paper", "coverage EB", "coverage EB-{p}"),
                     _eb(row, protocol, "corrected", "coverage EB", "coverage EB-{p}"),
                     "binary_variance"])  # fmt: skip
    for design, label in TABLE3_SETTINGS.items():
        part = table3[(table3["setting"] == label) & (table3["metric"] == "accuracy")] if len(table3) else table3
        for r in part[part["dataset"].isin([MEAN, SD])].to_dict("records"):
            row = pd.Series(r)
            stat = "mean" if row["dataset"] == MEAN else "sd"
            lasso = float(row["Lasso/DT"])
            rows.append(["table3", row["source"], label, stat, "Lasso/DT", TABLE3[design][("Lasso/DT", row["dataset"])],
                         lasso, lasso, "inputs; lasso_grid"])  # fmt: skip
            rows.append(["table3", row["source"], label, stat, "EB/DT", TABLE3[design][("EB/DT", row["dataset"])],
                         _eb(row, protocol, "paper", "EB/DT", "EB-{p}/DT"),
                         _eb(row, protocol, "corrected", "EB/DT", "EB-{p}/DT"),
                         "inputs; binary_variance"])  # fmt: skip
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["gap"] = out[protocol] - out["printed"]
    return out
