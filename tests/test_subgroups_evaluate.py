"""The evaluation protocol (draw sizes, determinism across workers) and the tables and figures it feeds."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.report import save_figure, write_table
from unsure.subgroups.estimators import SRSettings
from unsure.subgroups.evaluate import EvaluationSettings, Pool, evaluate, run_repetition
from unsure.subgroups.features import Prepared, prepare
from unsure.subgroups.generate import generate
from unsure.subgroups.plots import write_figures
from unsure.subgroups.reproduction import reproduction_table
from unsure.subgroups.schema import validate_instances
from unsure.subgroups.tables import (
    loco_table,
    separately_table,
    table1,
    table2,
    table3,
    unit_metrics,
    write_tables,
)

OPTIONS = {"embedding_dim": 6, "max_clusters": 6, "min_cluster_rows": 30, "min_intersection_rows": 20, "seed": 0}
PROTOCOL = EvaluationSettings(
    repetitions=3, equal_sizes=(10, 20), sr=SRSettings(trees=(10, 30), depths=(1, 2)), protocol="paper", seed=7
)


def _prepared(source: str, models: list[str], rows: int, subgroups: int) -> Prepared:
    data = generate(source, models, rows=rows, subgroups=subgroups, seed=0).instances
    return prepare(validate_instances(data, source), source, **OPTIONS)


@pytest.fixture(scope="module")
def labelbias() -> Prepared:
    return _prepared("labelbias", ["m-a", "m-b"], 2400, 16)


@pytest.fixture(scope="module")
def riskscores() -> Prepared:
    return _prepared("riskscores", ["xgboost"], 1500, 2)


@pytest.fixture(scope="module")
def results(labelbias: Prepared, riskscores: Prepared) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
    return {"labelbias": evaluate(labelbias, PROTOCOL), "riskscores": evaluate(riskscores, PROTOCOL)}


def test_proportional_draw_gives_the_smallest_large_subgroup_ten_rows(labelbias: Prepared) -> None:
    pool = Pool(labelbias)
    (n,) = pool.sizes("proportional", PROTOCOL)
    size = pool.datasets[0].group_rows
    anchor = size[size >= 50].min()
    assert n[size == anchor].min() == 10
    assert np.all(n[size >= 50] >= 10) and np.all(n >= 2) and np.all(n <= size)
    ratio = n[size >= 50] / size[size >= 50]
    assert ratio.max() - ratio.min() < 0.05  # proportional up to rounding


def test_equal_draws_drop_subgroups_under_four_times_n(labelbias: Prepared) -> None:
    pool = Pool(labelbias)
    (n,) = pool.sizes("equal-20", PROTOCOL)
    size = pool.datasets[0].group_rows
    np.testing.assert_array_equal(n, np.where(size >= 80, 20, 0))


def test_every_model_sees_the_same_drawn_instances(labelbias: Prepared) -> None:
    est, _, _ = run_repetition(Pool(labelbias), PROTOCOL, 0)
    dt = est[(est["method"] == "DT") & (est["design"] == "equal-10")]
    assert (dt["n"] == 10).all()
    per_model = dt.merge(labelbias.units.reset_index(drop=True).reset_index(names="unit"), on="unit")
    assert per_model.groupby("subgroup")["model"].nunique().eq(2).all()


def test_results_identical_for_any_worker_count(labelbias: Prepared) -> None:
    one = evaluate(labelbias, PROTOCOL, n_jobs=1)
    two = evaluate(labelbias, PROTOCOL, n_jobs=2)
    for a, b in zip(one, two, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_a_dataset_skipped_in_every_repetition_is_one_line_with_a_count(
    riskscores: Prepared, caplog: pytest.LogCaptureFixture
) -> None:
    """A dataset with fewer subgroups than folds was logged once per repetition (1000 lines a
    design at paper scale, and none in the job's log from parallel workers); now once per job."""
    protocol = dataclasses.replace(PROTOCOL, folds=30, repetitions=4)
    with caplog.at_level(logging.WARNING, logger="unsure.subgroups"):
        evaluate(riskscores, protocol)
    skips = [r.getMessage() for r in caplog.records if "folds" in r.getMessage()]
    assert skips == [
        f"design {design}, dataset {dataset!r}: fewer subgroups than folds (30) in 4 of 4 repetitions, skipped there"
        for design in ("proportional", "equal-10", "equal-20")
        for dataset in ("ACSIncome", "ACSPublicCoverage")
    ]


def test_estimates_cover_designs_metrics_and_methods(
    results: dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]],
) -> None:
    est, problems, importance = results["riskscores"]
    combos = set(map(tuple, est[["design", "metric"]].drop_duplicates().astype(str).to_numpy()))
    assert combos == {
        ("proportional", "accuracy"),
        ("proportional", "brier"),
        ("proportional", "cross_entropy"),
        ("equal-10", "accuracy"),
        ("equal-20", "accuracy"),
    }
    assert set(est["method"].astype(str)) == {"DT", "SR", "EB", "Lasso", "EB-corrected", "EB-separate", "SR-separate"}
    separate = est[est["method"].astype(str).str.endswith("-separate")]
    assert set(map(tuple, separate[["design", "metric"]].drop_duplicates().astype(str).to_numpy())) == {
        ("proportional", "accuracy")
    }
    assert set(est.loc[est["method"] == "EB-corrected", "metric"].astype(str)) == {"accuracy"}  # 0/1 only
    assert set(est["rep"]) == {0, 1, 2}
    assert {"a_hat", "mu2", "kappa", "lasso_lambda"} <= set(problems.columns)
    assert set(importance["left_out"]) == {"none", "embedding", "confidence", "model", "task"}
    assert {"dataset", "model", "subgroup", "rows"} <= set(est.columns)


def test_protocol_from_config_params() -> None:
    params = {"repetitions": 5, "equal_sizes": [10], "sr_trees": [5], "sr_depths": [2], "folds": 3}
    p = EvaluationSettings.from_params(params)
    assert p.repetitions == 5 and p.equal_sizes == (10,) and p.sr.trees == (5,) and p.sr.cv_folds == 3
    assert p.designs == ["proportional", "equal-10"]
    with pytest.raises(ValueError, match="unknown protocol parameter"):
        EvaluationSettings.from_params({"repetition": 5})


def test_tables_summarise_units_and_ratios(
    results: dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]],
) -> None:
    um = pd.concat([unit_metrics(r[0], s) for s, r in results.items()], ignore_index=True)
    t1, t2, t3 = table1(um, 15), table2(um), table3(um, 15)
    assert set(t1["metric"]) == {"brier", "cross_entropy"} and (t1["source"] == "riskscores").all()
    assert set(t2["n_g"]) == {10, 20}
    # the paper protocol's EB, with the corrected one beside it
    assert {"coverage EB", "coverage EB-corrected", "width EB-corrected", "ratio EB-corrected"} <= set(t2.columns)
    assert not {"coverage EB-paper"} & set(t2.columns)
    assert {"EB/DT", "Lasso/DT", "EB/DT small", "Lasso/DT large"} <= set(t3.columns)
    # a ratio is the mean unit MSE of the method over DT's, in the same cell
    cell = um[(um["source"] == "labelbias") & (um["design"] == "proportional")]
    ratio = cell.loc[cell["method"] == "EB", "mse"].mean() / cell.loc[cell["method"] == "DT", "mse"].mean()
    prop = t3[(t3["source"] == "labelbias") & (t3["setting"] == "prop. (min n_g = 10)")]
    assert prop.loc[~prop["dataset"].str.endswith("over datasets"), "EB/DT"].item() == pytest.approx(ratio)
    loco = loco_table({s: r[2] for s, r in results.items()})
    assert set(loco["left out"]) == {"embedding", "confidence", "model", "task"}


def test_outputs_are_written_in_every_format(
    tmp_path: Path, results: dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]
) -> None:
    um = pd.concat([unit_metrics(r[0], s) for s, r in results.items()], ignore_index=True)
    write_tables(um, {s: r[2] for s, r in results.items()}, tmp_path / "tables", small_n=15)
    write_figures(um, results["labelbias"][0], tmp_path / "figures", small_n=15, alpha=0.05)
    for name in ("table1", "table2", "table3", "separately", "loco"):
        for ext in ("csv", "md", "tex"):
            assert (tmp_path / "tables" / f"{name}.{ext}").stat().st_size > 0
    for name in ("fig1", "fig2", "fig3", "fig4", "fig7"):
        png = (tmp_path / "figures" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG")
        assert (tmp_path / "figures" / f"{name}.pdf").read_bytes().startswith(b"%PDF")
    assert not list(tmp_path.rglob(".*"))  # no temporary files left behind


def test_report_writers_are_atomic_and_reproducible(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    frame = pd.DataFrame({"name": ["a_b", "c"], "value": [0.123456, np.nan]})
    paths = write_table(frame, tmp_path / "t.csv", caption="A table.")
    assert [p.name for p in paths] == ["t.csv", "t.md", "t.tex"]
    assert "a\\_b" in (tmp_path / "t.tex").read_text() and "0.123" in (tmp_path / "t.md").read_text()
    assert pd.read_csv(tmp_path / "t.csv")["value"].iloc[0] == pytest.approx(0.123456)
    pdfs = []
    for i in range(2):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        save_figure(fig, tmp_path / f"f{i}")
        pdfs.append((tmp_path / f"f{i}.pdf").read_bytes())
    assert pdfs[0] == pdfs[1]


def test_each_dataset_is_fitted_on_its_own_units() -> None:
    """As the paper (each dataset analysed separately): another dataset's results do not move a dataset's
    SR, EB or Lasso estimates; "LLMs benchmarked separately" fits one model's units only."""
    prepared = _prepared("decisionrisk", ["m-a", "m-b"], 2400, 12)
    datasets = sorted(prepared.units["dataset"].astype(str).unique())
    assert len(datasets) >= 2
    rows = prepared.rows.copy()
    other = rows["dataset"].astype(str) == datasets[-1]
    rows.loc[other, "accuracy"] = 1 - rows.loc[other, "accuracy"]  # same draws (sizes), other outcomes
    protocol = EvaluationSettings(
        repetitions=1, equal_sizes=(), sr=SRSettings(trees=(10, 30), depths=(1, 2)), protocol="paper", seed=3
    )
    pool = Pool(prepared)
    runs = [run_repetition(p, protocol, 0) for p in (pool, Pool(Prepared(rows=rows, units=prepared.units)))]
    first = pool.units.index[pool.units["dataset"].astype(str) == datasets[0]]
    kept = [est[est["unit"].isin(first) & (est["metric"] == "accuracy")].reset_index(drop=True) for est, _, _ in runs]
    assert set(kept[0]["method"]) >= {"SR", "EB", "Lasso", "EB-separate", "SR-separate"}
    pd.testing.assert_frame_equal(kept[0], kept[1])
    problems = runs[0][1]
    per_problem = problems[problems["metric"] == "accuracy"].set_index("dataset")["units"]
    assert per_problem.to_dict() == pool.units.groupby(pool.units["dataset"].astype(str)).size().to_dict()


def test_tables_carry_the_papers_rows(results: dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]) -> None:
    """Table 2's median over datasets, Table 3's equal-20 setting with mean (sd) over datasets, the
    "LLMs benchmarked separately" analysis, subgroups counted as the paper's G, and the ledger."""
    um = pd.concat([unit_metrics(r[0], s) for s, r in results.items()], ignore_index=True)
    lb = um[(um["source"] == "labelbias") & (um["design"] == "equal-10") & (um["method"] == "DT")]
    t2 = table2(um)
    row = t2[(t2["source"] == "labelbias") & (t2["n_g"] == 10) & (t2["dataset"] != "median over datasets")]
    assert (
        row["subgroups"].item() == lb["subgroup"].nunique()
        and row["units"].item() == len(lb) == 2 * lb["subgroup"].nunique()
    )
    median = t2[t2["dataset"] == "median over datasets"].set_index(["source", "n_g"])
    per = t2[t2["dataset"] != "median over datasets"].groupby(["source", "n_g"])["EB/DT"].median()
    pd.testing.assert_series_equal(median["EB/DT"].sort_index(), per.sort_index(), check_names=False)
    t3 = table3(um, 15)
    assert set(t3["setting"]) == {"prop. (min n_g = 10)", "n_g = 20, equal"}
    assert set(t3.loc[t3["setting"] == "n_g = 20, equal", "metric"]) == {"accuracy"}
    assert {"mean over datasets", "sd over datasets"} <= set(t3["dataset"])
    assert "EB-corrected/DT" in t3.columns
    sep = separately_table(um)
    assert {"EB/DT", "EB/DT separately", "SR/DT separately"} <= set(sep.columns)
    assert (sep["EB/DT separately"] > 0).all()
    ledger = reproduction_table(t2, t3, protocol="paper", sources=["labelbias"])
    assert set(ledger["source"]) == {"labelbias"}
    cells = ledger.dropna(subset=["printed"])
    assert set(cells["table"]) == {"table2", "table3"}
    eb = cells[(cells["table"] == "table2") & (cells["metric"] == "EB/DT") & (cells["source"] == "labelbias")]
    assert eb["printed"].tolist() == [0.81, 0.84] and eb[["paper", "corrected"]].notna().all().all()
    assert eb["paper"].tolist() == median.loc["labelbias", "EB/DT"].tolist()
    assert eb["corrected"].tolist() == median.loc["labelbias", "ratio EB-corrected"].tolist()
    lasso = cells[(cells["table"] == "table3") & (cells["metric"] == "Lasso/DT")]
    assert set(lasso["printed"]) >= {0.68, 0.34, 0.73, 0.47}
