"""The decisionrisk demo, end to end on a small config: Calibrator rows per injection function in
Tables 1 and 2, cross-fitted training confidences, the reproduction ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_helpers import copy_workflow, install_demo_zoo, snakemake, untrained

from unsure.decisionrisk.crossfit import FULL, instance_ids

pytestmark = pytest.mark.workflow

INJECTIONS = {"NQ", "WQ", "NRA"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_zoo: dict[str, Path]) -> Path:
    """The demo's decisionrisk study on one benchmark, one generative model and 2 folds (about 2 minutes)."""
    root = copy_workflow(tmp_path_factory.mktemp("decisionrisk") / "repo")
    config = untrained(yaml.safe_load((root / "config" / "demo.yaml").read_text()))
    config["studies"]["decisionrisk"].update(
        models=["tiny-llama"], benchmarks=["piqa"], n_train=60, n_val=20, crossfit_folds=2, forest={"trees": 10}
    )
    (root / "test.yaml").write_text(yaml.safe_dump(config))
    install_demo_zoo(root, demo_zoo, config)
    run = snakemake("decisionrisk_all", "--configfile", "test.yaml", "--cores", "2", cwd=root, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root / "results" / "decisionrisk"


def test_tables_carry_calibrator_rows_per_injection_function(demo: Path) -> None:
    t1 = pd.read_csv(demo / "tables" / "table1.csv")
    t2 = pd.read_csv(demo / "tables" / "table2.csv")
    for model in ("tiny-bert", "tiny-llama"):
        assert set(t1.loc[(t1["rule"] == "Calibrator") & (t1["model"] == model), "trained_on"]) == INJECTIONS
        assert set(t2.loc[(t2["rule"] == "Calibrator") & (t2["model"] == model), "trained_on"]) == INJECTIONS
    ledger = pd.read_csv(demo / "tables" / "reproduction.csv")
    cell = ledger[(ledger["table"] == "table1") & (ledger["rule"] == "Calibrator") & (ledger["trained_on"] == "NQ")
                  & (ledger["metric"] == "in_domain") & (ledger["benchmark"] == "piqa")]  # fmt: skip
    assert cell["printed"].tolist() == [0.95] and cell["corrected"].notna().all()
    assert ledger["difference"].str.contains("crossfit").all()


def test_no_training_row_is_scored_by_an_encoder_that_saw_it(demo: Path) -> None:
    rows = pd.read_parquet(demo / "instances" / "piqa.parquet")
    scores = pd.read_parquet(demo / "scores" / "encoder" / "piqa.parquet").merge(rows, on="row_id")
    assert len(scores) == len(rows)
    train = scores[scores["split"] == "train"]
    assert (scores.loc[scores["split"] == "val", "fold"] == FULL).all()
    assert set(train["fold"]) == {0, 1}
    assert (train.groupby(instance_ids(train).to_numpy())["fold"].nunique() == 1).all()
    summary = json.loads((demo / "scores" / "encoder" / "piqa_training.json").read_text())["crossfit"]
    originals = train[train["injection"] == "none"]
    assert summary["full"]["instances"] == len(originals) == 60
    for fold in (0, 1):  # each fold's encoder was fine-tuned on exactly the other fold's instances
        assert summary[f"fold-{fold}"]["instances"] == int((originals["fold"] != fold).sum())
    assert (demo / "figures" / "fig2.png").stat().st_size > 0
