"""Decision-risk metrics against hand-computed values, the RRR interval's coverage, rules and parsing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from unsure.decisionrisk.confidences import parse_verbal
from unsure.decisionrisk.infer import generative_scorer
from unsure.decisionrisk.metrics import (
    composite_risk,
    decision_accuracy,
    relative_risk_ratio,
    risk_coverage,
    significance_vs_random,
    stars,
)
from unsure.decisionrisk.requests import verbal_prompt
from unsure.decisionrisk.rules import ForestSettings, decide, features, fit_rules, tune_threshold
from unsure.decisionrisk.tables import (
    composite_risk_table,
    decision_risk_table,
    generative_confidences,
    subgroups_input,
    verbal_parse_table,
)
from unsure.engine import ReplyRequest, Unsupported
from unsure.subgroups.schema import validate_instances

# A small table: 10 original instances, dr and whether the selection is right.
DR = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0])
CORRECT = np.array([1, 1, 1, 1, 0, 0, 1, 0, 0, 0])


def test_composite_risk_by_hand() -> None:
    risk = composite_risk(DR, CORRECT)
    assert risk.sensitivity == pytest.approx(4 / 5)  # answered 4 of the 5 right ones
    assert risk.specificity == pytest.approx(3 / 5)  # abstained on 3 of the 5 wrong ones
    # P(wrong | answered) = 2/6, P(correct | abstained) = 1/4
    assert risk.rrr == pytest.approx((2 / 6) / (1 / 4))
    se = math.sqrt(1 / 2 - 1 / 6 + 1 / 1 - 1 / 4)
    assert risk.rrr_low == pytest.approx(4 / 3 * math.exp(-1.959963984540054 * se))
    assert risk.rrr_high == pytest.approx(4 / 3 * math.exp(1.959963984540054 * se))
    assert (risk.answered, risk.abstained) == (6, 4)


def test_relative_risk_ratio_without_abstentions_is_undefined() -> None:
    assert all(math.isnan(v) for v in relative_risk_ratio(3, 10, 0, 0))


def test_decision_accuracy_and_significance_by_hand() -> None:
    assert decision_accuracy([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.75)
    # P(X >= 8 | n = 10, p = 1/2) = (45 + 10 + 1) / 1024
    assert significance_vs_random(8, 10) == pytest.approx(56 / 1024)
    assert stars(56 / 1024) == "*" and stars(0.001) == "***" and stars(0.5) == ""
    with pytest.raises(ValueError, match="dr must be"):
        decision_accuracy([2, 0], [1, 0])


def test_risk_coverage_by_hand() -> None:
    curve = risk_coverage([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0])
    # ties (0.8) are answered together
    assert curve["coverage"].tolist() == [0.25, 0.75, 1.0]
    assert curve["risk"].tolist() == pytest.approx([0.0, 1 / 3, 0.5])


def test_rrr_interval_covers_the_true_ratio_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(0)
    p_wrong_answered, p_correct_abstained, n1, n2 = 0.3, 0.4, 200, 150
    truth = p_wrong_answered / p_correct_abstained
    reps = 4000
    a = rng.binomial(n1, p_wrong_answered, size=reps)
    c = rng.binomial(n2, p_correct_abstained, size=reps)
    hits = 0
    for ai, ci in zip(a, c, strict=True):
        _, low, high = relative_risk_ratio(int(ai), n1, int(ci), n2, level=0.95)
        hits += low <= truth <= high
    assert abs(hits / reps - 0.95) < 0.015  # the Monte Carlo error is about 0.0035


def test_threshold_maximises_accuracy() -> None:
    score = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.8])
    target = np.array([0, 0, 1, 0, 1, 1])
    t = tune_threshold(score, target)
    assert decision_accuracy(score >= t, target) == pytest.approx(5 / 6)


def _rows(n: int, rng: np.random.Generator, split: str) -> pd.DataFrame:
    """Original rows with peaked confidences and high similarities; injected ones flat and low."""
    rows = []
    for i in range(n):
        for inj in ("none", "NQ", "WQ"):
            answerable = inj == "none"
            conf = rng.dirichlet([8, 1, 1] if answerable else [3, 3, 3])
            sims = rng.uniform(0.6, 0.9, 3) if answerable else rng.uniform(0.0, 0.3, 3)
            rows.append(
                {"row_id": f"{split}-{i}-{inj}", "split": split, "injection": inj, "answerable": answerable,
                 "prompt": "" if inj == "NQ" else "q" * int(rng.integers(5, 50)),
                 "choices": ["a", "bb", "ccc"], "label": 0 if answerable else -1,
                 "category": None, "confidences": conf.tolist(), "similarities": sims.tolist()}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_rules_learn_to_abstain_on_injected_instances() -> None:
    rng = np.random.default_rng(1)
    train, val = features(_rows(80, rng, "train")), features(_rows(40, rng, "val"))
    assert (train.loc[train["injection"] == "NQ", "prompt_len"] == 0).all()
    assert train["answer_len"].tolist() == [
        len(c[p]) for c, p in zip(train["choices"], train["prediction"], strict=True)
    ]
    fitted = fit_rules(train, ["NQ", "WQ"], forest=ForestSettings(trees=30), seed=0, protocol="paper")
    out = decide(fitted, val).merge(val[["row_id", "injection", "answerable", "correct"]], on="row_id")
    out["model"], out["method"], out["benchmark"] = "m", "softmax", "b"
    table = decision_risk_table(out, ["NQ", "WQ"])
    best = table.set_index(["trained_on", "rule"])
    assert best.loc[("NQ", "DwD"), "in_domain"] > 0.9 and best.loc[("NQ", "DwD"), "in_domain_sig"] == "***"
    assert best.loc[("WQ", "ConfStd"), "in_domain"] > 0.75
    assert abs(best.loc[("NQ", "Random"), "in_domain"] - 0.5) < 0.2
    assert set(composite_risk_table(out)["rule"]) == {"Random", "ConfStd", "Calibrator", "DwD"}


def test_paper_calibrator_is_trained_per_injection_function() -> None:
    """As the paper (Calibrator_NQ, Calibrator_WQ, ...): original = 1 against injected = 0, per function."""
    rng = np.random.default_rng(2)
    train, val = features(_rows(60, rng, "train")), features(_rows(30, rng, "val"))
    keep = val[["row_id", "injection", "answerable", "correct"]]
    tables = {}
    for protocol in ("paper", "corrected"):
        fitted = fit_rules(train, ["NQ", "WQ"], forest=ForestSettings(trees=20), seed=0, protocol=protocol)
        out = decide(fitted, val).merge(keep, on="row_id").assign(model="m", method="softmax", benchmark="b")
        tables[protocol] = (decision_risk_table(out, ["NQ", "WQ"]), composite_risk_table(out))
    t1, t2 = tables["paper"]
    pairs = set(zip(t2["rule"], t2["trained_on"], strict=True))
    assert {("Calibrator", "NQ"), ("Calibrator", "WQ")} <= pairs
    assert not any(rule == "Calibrator" and on == "none" for rule, on in pairs)
    assert "Calibrator-correct" not in set(t2["rule"])
    calib = t1[t1["rule"] == "Calibrator"].set_index("trained_on")
    assert sorted(calib.index) == ["NQ", "WQ"]
    assert calib.loc["NQ", "in_domain"] > 0.9  # flat confidences of injected rows: it learns to abstain
    t1c, t2c = tables["corrected"]
    extra = t2c[t2c["rule"] == "Calibrator-correct"]
    assert set(extra["trained_on"]) == {"none"}
    assert set(t1c.loc[t1c["rule"] == "Calibrator-correct", "trained_on"]) == {"NQ", "WQ"}  # one row per setting
    assert {("Calibrator", "NQ"), ("Calibrator", "WQ")} <= set(zip(t2c["rule"], t2c["trained_on"], strict=True))


def test_verbal_prompt_and_parser() -> None:
    prompt = verbal_prompt("Which?", ["x", "y"])
    assert "A. x\nB. y" in prompt and "A: <number>, B: <number>" in prompt
    assert parse_verbal("A: 70\nB: 30", 2) == pytest.approx([0.7, 0.3])
    assert parse_verbal("A) 20%, B) 20%, C) 60%", 3) == pytest.approx([0.2, 0.2, 0.6])
    assert parse_verbal("A: 70", 2) is None  # B missing
    assert parse_verbal("A: 0 B: 0", 2) is None
    assert parse_verbal("A: 10 A: 20 B: 5", 2) is None
    assert parse_verbal("the answer is clear", 2) is None


def test_subgroups_input_follows_the_schema() -> None:
    instances = pd.DataFrame(
        {"row_id": ["h-0", "h-1", "h-0-NQ"], "benchmark": "hellaswag", "split": "val",
         "injection": ["none", "none", "NQ"], "prompt": ["p0", "p1", ""], "label": [0, 1, 0],
         "category": ["Cooking", "Dancing", "Cooking"]}
    )  # fmt: skip
    conf = pd.DataFrame(
        {"row_id": ["h-0", "h-1", "h-0-NQ"] * 2, "model": ["enc"] * 3 + ["llm"] * 3,
         "method": ["softmax"] * 3 + ["loglik"] * 3,
         "confidences": [[0.7, 0.3], [0.6, 0.4], [0.5, 0.5], [0.2, 0.8], [0.1, 0.9], [0.5, 0.5]]}
    )  # fmt: skip
    frame = validate_instances(subgroups_input(instances, conf), "decisionrisk")
    assert len(frame) == 4
    got = frame.set_index(["model", "row_id"])
    assert got.loc[("enc", "h-0"), "correct"] == 1 and got.loc[("enc", "h-1"), "correct"] == 0
    assert got.loc[("llm", "h-1"), "confidence"] == pytest.approx(0.9)
    assert got.loc[("llm", "h-0"), "category"] == "Cooking"


class _ChatAPI:
    """An engine without log-likelihoods whose replies are parseable for some rows only."""

    model_id = "chat-api"

    def continuation_scores(self, requests: object) -> list[object]:
        raise Unsupported("chat-api cannot score continuations")

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
        return f"<user>{user}</user>"

    def generate(self, requests: list[ReplyRequest]) -> list[str]:
        return ["A: 80\nB: 20" if "first" in r.prompt else "I am not sure." for r in requests]


def test_unparseable_replies_are_kept_uniform_and_counted() -> None:
    chunk = pd.DataFrame({"row_id": ["r0", "r1"], "prompt": ["first", "second"], "choices": [["x", "y"], ["x", "y"]]})
    scores = generative_scorer(_ChatAPI(), instruct=True, normalize=True, max_new_tokens=8)(chunk)  # type: ignore[arg-type]
    assert scores["loglik"].isna().all() and scores["parsed"].tolist() == [True, False]
    assert scores["verbal"].tolist() == [pytest.approx([0.8, 0.2]), [0.5, 0.5]]
    conf = generative_confidences("chat-api", scores)
    assert set(conf["method"]) == {"verbal"} and len(conf) == 2
    table = verbal_parse_table({"piqa": conf})
    assert table[["replies", "unparseable"]].iloc[0].tolist() == [2, 1]


def test_risk_coverage_figure_draws_achievable_points_only() -> None:
    """No steps through unachievable coverages; an all-tied rule is one point; an empty panel has a note."""
    from unsure.decisionrisk.plots import risk_coverage_figure

    ranked = risk_coverage([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0]).assign(rule="Ranked")
    tied = risk_coverage([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]).assign(rule="Tied")
    curves = pd.concat([ranked, tied], ignore_index=True).assign(benchmark="piqa", model="enc (softmax)")
    chat = ranked.assign(benchmark="siqa", model="chat (verbal)")
    fig = risk_coverage_figure(pd.concat([curves, chat], ignore_index=True))
    lines = [line for ax in fig.axes for line in ax.lines if np.asarray(line.get_xdata()).size]
    assert lines and all(line.get_drawstyle() == "default" for line in lines)
    xs = sorted(tuple(np.round(np.asarray(line.get_xdata(), dtype=np.float64), 6).tolist()) for line in lines)
    assert (1.0,) in xs  # the tied rule: coverage 1 only
    assert (0.25, 0.75, 1.0) in xs  # the ranked rule: the three achievable coverages
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if "no curves" in t.get_text()]
    assert len(notes) == 2  # enc on siqa and chat on piqa have no curves


def test_panel_of_unparseable_chat_replies_says_why() -> None:
    """A chat model whose replies could not be parsed has curves from uniform confidences: its panel says so."""
    from unsure.decisionrisk.plots import risk_coverage_figure
    from unsure.decisionrisk.tables import unparsed_notes

    scores = pd.DataFrame(
        {"row_id": ["a", "b", "c"], "loglik": [None] * 3, "verbal": [[0.5, 0.5]] * 3, "parsed": [False] * 3}
    )
    notes = unparsed_notes({"piqa": generative_confidences("chat", scores)})
    assert list(notes) == [("chat (verbal)", "piqa")] and notes[("chat (verbal)", "piqa")].startswith("all 3 replies")
    curve = risk_coverage([0.9, 0.5, 0.1], [1, 0, 1]).assign(rule="DwD (WQ)", benchmark="piqa")
    curves = pd.concat([curve.assign(model="chat (verbal)"), curve.assign(model="enc (softmax)")], ignore_index=True)
    fig = risk_coverage_figure(curves, notes)
    texts = [t.get_text() for ax in fig.axes for t in [*ax.texts, ax.title]]
    assert sum("unparseable" in t for t in texts) == 1
