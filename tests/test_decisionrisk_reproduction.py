"""The decisionrisk reproduction ledger: every printed cell of Tables 1 and 2 beside ours."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from unsure.decisionrisk.reproduction import DIFFERENCES, TABLE1, TABLE2, reproduction_table
from unsure.decisionrisk.rules import ForestSettings, decide, features, fit_rules
from unsure.decisionrisk.tables import composite_risk_table, decision_risk_table

INJECTIONS = ["NQ", "WQ", "NRA"]


def _rows(n: int, rng: np.random.Generator, split: str) -> pd.DataFrame:
    """Original rows with peaked confidences; injected ones flat."""
    rows = []
    for i in range(n):
        for inj in ("none", *INJECTIONS):
            answerable = inj == "none"
            rows.append(
                {"row_id": f"{split}-{i}-{inj}", "split": split, "injection": inj, "answerable": answerable,
                 "prompt": "" if inj == "NQ" else "q" * int(rng.integers(5, 50)), "choices": ["a", "bb"],
                 "label": int(rng.integers(2)) if inj != "NRA" else -1, "category": None,
                 "confidences": rng.dirichlet([8, 1] if answerable else [3, 3]).tolist(),
                 "similarities": rng.uniform(0.5, 0.9, 2).tolist()}
            )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("protocol", ["paper", "corrected"])
def test_ledger_sets_every_printed_cell_beside_ours(protocol: str) -> None:
    rng = np.random.default_rng(0)
    train, val = features(_rows(40, rng, "train")), features(_rows(20, rng, "val"))
    fitted = fit_rules(train, INJECTIONS, forest=ForestSettings(trees=10), seed=0, protocol=protocol)  # type: ignore[arg-type]
    keep = val[["row_id", "injection", "answerable", "correct"]]
    parts = []
    for benchmark in TABLE1:
        for model, method in (("enc", "softmax"), ("llm", "verbal")):
            out = decide(fitted, val).merge(keep, on="row_id")
            parts.append(out.assign(model=model, method=method, benchmark=benchmark))
    decisions = pd.concat(parts, ignore_index=True)
    t1, t2 = decision_risk_table(decisions, INJECTIONS), composite_risk_table(decisions)
    ledger = reproduction_table(t1, t2, encoder="enc", generative=[("llm", "verbal")], protocol=protocol)
    printed = ledger.dropna(subset=["printed"])
    assert len(printed) == 4 * 3 * 4 * 2 + len(TABLE2) * 3  # ChatGPT's cells: one stand-in here
    assert printed["paper"].notna().all() and (printed["paper"] == printed["corrected"]).all()
    cell = printed[(printed["table"] == "table1") & (printed["benchmark"] == "piqa") & (printed["rule"] == "Calibrator")
                   & (printed["trained_on"] == "NQ") & (printed["metric"] == "in_domain")]  # fmt: skip
    assert cell["printed"].tolist() == [0.950]
    ours = t1[
        (t1["benchmark"] == "piqa") & (t1["model"] == "enc") & (t1["rule"] == "Calibrator") & (t1["trained_on"] == "NQ")
    ]
    assert cell["paper"].tolist() == ours["in_domain"].tolist()
    calibrators = printed[(printed["table"] == "table2") & (printed["rule"] == "Calibrator")]
    assert set(calibrators["trained_on"]) == {"WQ", "NRA"} and set(calibrators["model"]) == {"enc"}
    chat = printed[printed["paper_model"] == "ChatGPT"]
    assert set(chat["model"]) == {"llm"} and set(chat["rule"]) == {"DwD"}
    keys = {k for d in ledger["difference"] for k in d.split("; ")}
    assert keys <= set(DIFFERENCES) and "crossfit" in keys
    extra = ledger[ledger["rule"] == "Calibrator-correct"]
    if protocol == "paper":
        assert extra.empty
    else:
        assert len(extra) and extra["printed"].isna().all() and extra["paper"].isna().all()
        assert extra["corrected"].notna().all()
