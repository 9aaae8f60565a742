"""From per-repetition estimates to per-unit metrics and the paper's tables.

``unit_metrics`` averages over repetitions: a unit's MSE is the mean of
``(estimate − truth)²``, its coverage the share of repetitions whose interval
holds the truth, its width the mean interval width. ``summarise`` then averages
units (each subgroup counts once) and divides every method's MSE by DT's in
the same cell: the ratios the paper reports. A unit is *small* when it drew at
most ``small_n`` rows under the proportional design.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.report import write_table
from unsure.subgroups.schema import CONTINUOUS_METRICS

log = logging.getLogger(__name__)

UNIT_KEYS = ["source", "design", "metric", "dataset", "task", "model", "subgroup", "method"]


def unit_metrics(estimates: pd.DataFrame, source: str) -> pd.DataFrame:
    """Per (design, metric, unit, method): ``rows, n, truth, mse, bias, coverage, width, reps``."""
    if estimates.empty:
        raise ValueError(f"source {source!r}: no estimates to summarise")
    est = estimates.assign(source=source)
    err = est["estimate"] - est["truth"]
    has = est["lo"].notna() & est["hi"].notna()
    est = est.assign(
        sq=err**2,
        err=err,
        covered=np.where(has, (est["lo"] <= est["truth"]) & (est["truth"] <= est["hi"]), np.nan),
        width=est["hi"] - est["lo"],
    )
    out = est.groupby(UNIT_KEYS, observed=True, sort=True).agg(
        rows=("rows", "first"),
        n=("n", "mean"),
        truth=("truth", "first"),
        mse=("sq", "mean"),
        bias=("err", "mean"),
        coverage=("covered", "mean"),
        width=("width", "mean"),
        reps=("rep", "nunique"),
    )
    out = out.reset_index()
    for col in UNIT_KEYS:
        out[col] = out[col].astype(str)
    return out


def size_class(um: pd.DataFrame, small_n: int) -> pd.Series:
    """``small`` (at most ``small_n`` rows drawn under the proportional design) or ``large``, per unit row."""
    prop = um[um["design"] == "proportional"].drop_duplicates(["source", "dataset", "model", "subgroup"])
    key = ["source", "dataset", "model", "subgroup"]
    n = um[key].merge(prop[[*key, "n"]], on=key, how="left")["n"].to_numpy()
    return pd.Series(np.where(n <= small_n, "small", "large"), index=um.index)


def summarise(um: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Average units within ``by`` + method: ``units`` (model × subgroup), ``subgroups`` (distinct
    subgroups of a dataset, the paper's G, whatever the number of models), ``mse, coverage, width``
    and ``ratio`` (MSE / DT's MSE)."""
    keys = [*by, "method"]
    pair = um["dataset"].astype(str) + "\x1f" + um["subgroup"].astype(str)
    out = (
        um.assign(_pair=pair)
        .groupby(keys, observed=True, sort=True)
        .agg(
            units=("mse", "size"),
            subgroups=("_pair", "nunique"),
            mse=("mse", "mean"),
            coverage=("coverage", "mean"),
            width=("width", "mean"),
        )
    )
    out = out.reset_index()
    dt = out[out["method"] == "DT"].set_index(list(by))["mse"].rename("mse_dt")
    out = out.join(dt, on=list(by))
    out["ratio"] = out["mse"] / out["mse_dt"]
    return out.drop(columns="mse_dt")


def _wide(summary: pd.DataFrame, by: list[str], columns: dict[tuple[str, str], str]) -> pd.DataFrame:
    """Pick (method, statistic) pairs of a summary into named columns, one row per ``by``."""
    values = ["mse", "ratio", "coverage", "width", "units", "subgroups"]
    wide = summary.pivot_table(index=by, columns="method", values=values)
    out = pd.DataFrame(index=wide.index)
    out["subgroups"] = wide[("subgroups", "DT")].astype(int)
    out["units"] = wide[("units", "DT")].astype(int)
    for (method, stat), name in columns.items():
        out[name] = wide[(stat, method)] if (stat, method) in wide.columns else np.nan
    return out.reset_index()


ERRORS = {("DT", "mse"): "MSE DT", ("SR", "ratio"): "SR/DT", ("EB", "ratio"): "EB/DT"}
INTERVALS = {
    ("DT", "coverage"): "coverage DT",
    ("EB", "coverage"): "coverage EB",
    ("DT", "width"): "width DT",
    ("EB", "width"): "width EB",
}
EB_PROTOCOLS = {
    (method, stat): f"{stat} {method}"
    for method in ("EB-paper", "EB-corrected")
    for stat in ("ratio", "coverage", "width")
}
"""The other protocol's EB (0/1 metrics), beside the chosen one; its ratio column reads ``ratio EB-paper``."""


def table1(um: pd.DataFrame, small_n: int) -> pd.DataFrame:
    """Table 1 analogue for the non-accuracy metrics: MSE ratios overall, small and large; intervals."""
    sub = um[(um["design"] == "proportional") & um["metric"].isin(CONTINUOUS_METRICS)]
    if sub.empty:
        return pd.DataFrame(columns=["source", "dataset", "model", "metric", "subgroups"])
    by = ["source", "dataset", "model", "metric"]
    out = _wide(summarise(sub, by), by, {**ERRORS, **INTERVALS})
    sub = sub.assign(size=size_class(sub, small_n).to_numpy())
    sizes = _wide(summarise(sub, [*by, "size"]), [*by, "size"], {("EB", "ratio"): "EB/DT"})
    for size in ("small", "large"):
        part = sizes[sizes["size"] == size].set_index(by)["EB/DT"].rename(f"EB/DT {size}")
        out = out.join(part, on=by)
    return out


MEDIAN = "median over datasets"
MEAN, SD = "mean over datasets", "sd over datasets"


def _over_datasets(table: pd.DataFrame, by: list[str], how: dict[str, str]) -> pd.DataFrame:
    """Rows summarising the per-dataset rows of ``table`` within ``by`` (without ``dataset``):
    ``how`` maps a row label (``dataset`` column) to a pandas reduction (``median``, ``mean``, ``std``).
    Counts are summed; every other numeric column is reduced."""
    numeric = [c for c in table.columns if c not in [*by, "dataset"] and pd.api.types.is_numeric_dtype(table[c])]
    counts = [c for c in ("subgroups", "units") if c in numeric]
    rows = []
    for label, reduce in how.items():
        part = table.groupby(by, sort=True)[[c for c in numeric if c not in counts]].agg(reduce)
        part[counts] = table.groupby(by, sort=True)[counts].sum()
        rows.append(part.reset_index().assign(dataset=label))
    return pd.concat(rows, ignore_index=True)


def table2(um: pd.DataFrame) -> pd.DataFrame:
    """Table 2: equal-size draws (accuracy), per source, dataset and ``n_g``; then, per source and
    ``n_g``, the median over datasets (the paper's Table 2 prints that median of SR/DT and EB/DT)."""
    sub = um[um["design"].str.startswith("equal-") & (um["metric"] == "accuracy")]
    sub = sub.assign(n_g=sub["design"].str.removeprefix("equal-").astype(int))
    by = ["source", "dataset", "n_g"]
    if sub.empty:
        return pd.DataFrame(columns=[*by, "subgroups"])
    out = _wide(summarise(sub, by), by, {**ERRORS, **INTERVALS, **EB_PROTOCOLS})
    absent = [c for c in EB_PROTOCOLS.values() if out[c].isna().all()]
    out = out.drop(columns=absent).sort_values(by).reset_index(drop=True)
    median = _over_datasets(out, ["source", "n_g"], {MEDIAN: "median"})
    return pd.concat([out, median[out.columns]], ignore_index=True)


TABLE3_SETTINGS = {"proportional": "prop. (min n_g = 10)", "equal-20": "n_g = 20, equal"}
"""The paper's Table 3 settings (design -> label); equal-size draws estimate accuracy only."""


def table3(um: pd.DataFrame, small_n: int) -> pd.DataFrame:
    """Table 3: EB against the structured (Lasso) regression, MSE ratios to DT (overall, small and
    large subgroups; the other protocol's EB beside, accuracy only), per setting (proportional draws,
    every metric; equal draws of 20, accuracy), source, dataset and metric; then the mean and
    standard deviation over datasets, as the paper prints."""
    cols = {("DT", "mse"): "MSE DT", ("EB", "ratio"): "EB/DT", ("Lasso", "ratio"): "Lasso/DT"}
    cols |= {("EB-paper", "ratio"): "EB-paper/DT", ("EB-corrected", "ratio"): "EB-corrected/DT"}
    by = ["source", "dataset", "metric"]
    parts = []
    for design, label in TABLE3_SETTINGS.items():
        sub = um[(um["design"] == design) & ((um["metric"] == "accuracy") | (design == "proportional"))]
        if sub.empty:
            continue
        out = _wide(summarise(sub, by), by, cols)
        if design == "proportional":
            sub = sub.assign(size=size_class(sub, small_n).to_numpy())
            sizes = _wide(summarise(sub, [*by, "size"]), [*by, "size"], cols)
            for size in ("small", "large"):
                part = sizes[sizes["size"] == size].set_index(by)[["EB/DT", "Lasso/DT"]].add_suffix(f" {size}")
                out = out.join(part, on=by)
        parts.append(out.assign(setting=label))
    if not parts:
        return pd.DataFrame(columns=["setting", *by, "subgroups"])
    per_dataset = pd.concat(parts, ignore_index=True)
    per_dataset = per_dataset[["setting", *[c for c in per_dataset.columns if c != "setting"]]]
    absent = [c for c in ("EB-paper/DT", "EB-corrected/DT") if per_dataset[c].isna().all()]
    per_dataset = per_dataset.drop(columns=absent)
    summary = _over_datasets(per_dataset, ["setting", "source", "metric"], {MEAN: "mean", SD: "std"})
    out = pd.concat([per_dataset, summary[per_dataset.columns]], ignore_index=True)
    # each setting's per-dataset rows, then its means, then its sds
    setting = out["setting"].map({label: i for i, label in enumerate(TABLE3_SETTINGS.values())})
    rank = 3 * setting + out["dataset"].map({MEAN: 1, SD: 2}).fillna(0)
    out = out.assign(_rank=rank).sort_values(["_rank", "source", "metric"], kind="stable")
    return out.drop(columns="_rank").reset_index(drop=True)


def separately_table(um: pd.DataFrame) -> pd.DataFrame:
    """ "LLMs benchmarked separately" (proportional draws, accuracy): SR and EB fitted on all of a
    dataset's models at once (the paper's setting) against fitted per model, MSE ratios to DT, per
    source and dataset, then the mean over datasets."""
    sub = um[(um["design"] == "proportional") & (um["metric"] == "accuracy")]
    cols = {
        ("DT", "mse"): "MSE DT",
        ("SR", "ratio"): "SR/DT",
        ("SR-separate", "ratio"): "SR/DT separately",
        ("EB", "ratio"): "EB/DT",
        ("EB-separate", "ratio"): "EB/DT separately",
    }
    by = ["source", "dataset"]
    if sub.empty or not (sub["method"] == "EB-separate").any():
        return pd.DataFrame(columns=[*by, "subgroups", "units", *cols.values()])
    out = _wide(summarise(sub, by), by, cols)
    mean = _over_datasets(out, ["source"], {MEAN: "mean"})
    return pd.concat([out, mean[out.columns]], ignore_index=True)


def loco_table(importance: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Leave-one-covariate-out importance of SR: MSE without each covariate group, relative to all."""
    rows = []
    for source, imp in importance.items():
        if imp.empty:
            continue
        unit = imp.groupby(["dataset", "model", "subgroup", "left_out"], observed=True)["sq_error"].mean()
        mse = unit.groupby("left_out", observed=True).mean()
        full = float(mse.get("none", np.nan))
        for left_out, value in mse.items():
            if left_out == "none":
                continue
            rows.append(
                {
                    "source": source,
                    "left out": str(left_out),
                    "SR MSE (all)": full,
                    "SR MSE (without)": float(value),
                    "increase %": 100 * (float(value) / full - 1) if full > 0 else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=["source", "left out", "SR MSE (all)", "SR MSE (without)", "increase %"])


CAPTIONS = {
    "table1": "Non-accuracy metrics (tabular sources, proportional draws): MSE of DT, MSE ratios of SR and EB "
    "to DT (overall, small and large subgroups), coverage and width of 95% intervals.",
    "table2": "Equal-size draws (accuracy): MSE of DT, MSE ratios of SR and EB to DT, coverage and width of "
    "95% DT (Wilson) and robust EB intervals.",
    "table3": "EB against structured (Lasso) regression: MSE ratios to DT per setting (proportional draws; "
    "equal draws of 20, accuracy) and dataset, with the mean and sd over datasets.",
    "separately": "LLMs benchmarked separately (proportional draws, accuracy): SR and EB fitted on all models of "
    "a dataset at once against per model, MSE ratios to DT.",
    "loco": "Leave-one-covariate-out importance of the synthetic regression (proportional draws, accuracy).",
}


def write_tables(
    um: pd.DataFrame, importance: dict[str, pd.DataFrame], outdir: str | os.PathLike[str], *, small_n: int
) -> dict[str, pd.DataFrame]:
    """Write table1, table2, table3, separately and loco (CSV, Markdown, LaTeX) under ``outdir``; return them."""
    tables = {
        "table1": table1(um, small_n),
        "table2": table2(um),
        "table3": table3(um, small_n),
        "separately": separately_table(um),
        "loco": loco_table(importance),
    }
    for name, frame in tables.items():
        write_table(frame, Path(outdir) / name, caption=CAPTIONS[name], float_format="{:.4g}")
    return tables


def headline(
    unit_metrics_path: str | os.PathLike[str],
    *,
    protocol: Protocol,
    stand_ins: Collection[str],
) -> pd.DataFrame:
    """EB's error against DT's on each model's per-instance results, read from
    ``scores/unit_metrics.parquet``: the study's number in the cross-study profile (:mod:`unsure.profile`).

    Per model and source: the mean subgroup MSE of EB over that of DT (accuracy, proportional
    draws; EB under ``protocol``'s variance), each subgroup counting once; below 1, shrinking
    towards the label-free regression beats the subgroup mean. ``stand_ins`` are the sources read
    from generated files (``studies.subgroups.inputs``: ``generated``): their rows carry the model's
    name but not its results, and their setting says so.
    """
    um = pd.read_parquet(unit_metrics_path)
    sub = um[(um["design"] == "proportional") & (um["metric"] == "accuracy")]
    columns = ["model", "study", "measure", "setting", "value", "protocol", "better", "calibration"]
    if sub.empty:
        return pd.DataFrame(columns=columns)
    eb = summarise(sub, ["source", "model"])
    eb = eb[eb["method"] == "EB"]
    out = pd.DataFrame(
        {
            "model": eb["model"].astype(str),
            "study": "subgroups",
            "measure": "MSE of EB / MSE of DT",
            "setting": [f"{s} (generated stand-in)" if s in stand_ins else str(s) for s in eb["source"]],
            "value": eb["ratio"].astype(float),
            "protocol": protocol,
            "better": "lower",
            "calibration": False,
        }
    )[columns]
    # no ratio where DT's error is 0 (every subgroup's rows drawn whole: the shadow's few rows)
    undefined = ~np.isfinite(out["value"])
    if undefined.any():
        log.warning(
            "profile: EB/DT error ratio undefined (DT's error 0) for %d of %d (model, source) pairs, left out: %s",
            int(undefined.sum()),
            len(out),
            ", ".join(f"{m} ({s})" for m, s in zip(out["model"][undefined], out["setting"][undefined], strict=True)),
        )
    return out[~undefined].reset_index(drop=True)
