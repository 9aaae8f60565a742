"""The uncertainty profile (issue 31, item 7): each study's headline numbers per model, combined,
rank-correlated and drawn, from small files in each study's own output format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import jobs, snakemake

from unsure.decisionrisk.tables import headline as decisionrisk_headline
from unsure.labelbias.tables import headline as labelbias_headline
from unsure.nextword.tables import _system_of
from unsure.nextword.tables import headline as nextword_headline
from unsure.profile import (
    HEADLINE_COLUMNS,
    calibration_correlations,
    combine,
    profile_figure,
    read_headlines,
    write_profile,
)
from unsure.report import save_figure
from unsure.riskscores.tables import headline as riskscores_headline
from unsure.subgroups.tables import headline as subgroups_headline

# ------------------------------------------------------------------ the studies' files, in small


def _riskscores(path: Path, a: str = "m-a", b: str = "m-b") -> Path:
    rows = [
        {"model": m, "task": t, "prompting": p, "auc": auc, "ece": ece}
        for m, t, p, auc, ece in [
            (a, "ACSIncome", "multiple_choice", 0.80, 0.10),
            (a, "ACSIncome", "numeric", 0.70, 0.20),
            (a, "ACSMobility", "multiple_choice", 0.60, 0.30),
            (a, "ACSMobility", "numeric", 0.65, 0.25),
            (b, "ACSIncome", "multiple_choice", 0.90, 0.05),
            (b, "ACSIncome", "numeric", 0.85, np.nan),  # an unscored run: left out
            ("xgboost", "ACSIncome", "supervised", 0.95, 0.01),  # a baseline, no language model
        ]
    ]
    frame = pd.DataFrame(rows).assign(n=80.0, brier=0.2, accuracy=0.7)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path)
    return path


def _nextword(path: Path, a: str = "m-a", b: str = "m-b") -> Path:
    systems = {a: 0.70, f"{a}-t0.5": 0.72, f"{b}-single": 0.90, f"{b}-list": 0.85, f"{a}-ft": 0.69, "file": 0.5}
    table = pd.DataFrame(
        {
            "metric": ["ECE (corpus word)", "expected TVD (all responses)", "positions"],
            **{s: [0.1, v, 100.0] for s, v in systems.items()},
            "human": [0.1, 0.0, 100.0],
            "oracle": [0.1, 0.27, 100.0],
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


def _labelbias(path: Path, a: str = "m-a", b: str = "m-b") -> Path:
    rows = [
        # subset, model, k, method, rsd, bias_score
        ("all", a, 0, "none", 0.90, 0.10),
        ("all", a, 2, "none", 0.80, 0.20),
        ("all", a, 0, "cc", 0.50, 0.09),
        ("all", a, 2, "looc", 0.30, 0.07),  # ties with DC at k = 2: DC comes first
        ("all", a, 2, "dc", 0.30, 0.05),
        ("interchangeable", a, 2, "cc", 0.01, 0.01),  # another subset: not the profile's
        ("all", b, 0, "none", 0.60, 0.30),
        ("all", b, 0, "dc", 0.40, 0.15),
    ]
    frame = pd.DataFrame(rows, columns=["subset", "model", "k", "method", "rsd", "bias_score"])
    frame = frame.assign(family="f", size="1L", variant="base", accuracy=0.5, macro_f1=0.4, macro_f1_paper=0.4)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.assign(n_tasks=6).to_csv(path, index=False)
    return path


def _decisionrisk(dir_: Path, a: str = "m-a", b: str = "m-b") -> tuple[Path, Path]:
    t1 = [
        # benchmark, model, method, trained_on, rule, in_domain
        ("anli", "enc", "softmax", "WQ", "DwD", 0.99),  # the encoder: no generative model
        ("anli", a, "loglik", "WQ", "DwD", 0.81),
        ("anli", a, "loglik", "NQ", "DwD", 1.00),  # NQ overfits: not the profile's
        ("anli", a, "loglik", "WQ", "ConfStd", 0.50),
        ("piqa", a, "loglik", "WQ", "DwD", 0.66),
        ("anli", b, "loglik", "WQ", "DwD", 0.79),
        ("anli", b, "verbal", "WQ", "DwD", 0.80),  # log-likelihoods first
    ]
    t2 = [
        # model, method, rule, trained_on, benchmark, rrr
        (a, "loglik", "DwD", "WQ", "anli", 0.6),
        (a, "loglik", "DwD", "WQ", "piqa", np.nan),  # no abstention: no ratio
        (b, "loglik", "DwD", "WQ", "anli", 0.8),
    ]
    dir_.mkdir(parents=True, exist_ok=True)
    first = pd.DataFrame(t1, columns=["benchmark", "model", "method", "trained_on", "rule", "in_domain"])
    first.assign(out_of_domain=0.5).to_csv(dir_ / "table1.csv", index=False)
    second = pd.DataFrame(t2, columns=["model", "method", "rule", "trained_on", "benchmark", "rrr"])
    second.assign(sensitivity=0.7, specificity=0.3).to_csv(dir_ / "table2.csv", index=False)
    return dir_ / "table1.csv", dir_ / "table2.csv"


def _subgroups(path: Path, a: str = "m-a", b: str = "m-b") -> Path:
    rows = []
    for model, source in [(a, "labelbias"), (b, "labelbias"), (a, "decisionrisk")]:
        for subgroup, dt, eb in [("g1", 0.02, 0.01), ("g2", 0.04, 0.01)]:
            for method, mse in [("DT", dt), ("EB", eb), ("SR", 0.5)]:
                rows.append(
                    {"source": source, "design": "proportional", "metric": "accuracy", "dataset": "d",
                     "task": "t", "model": model, "subgroup": subgroup, "method": method, "mse": mse,
                     "coverage": 0.95, "width": 0.3}
                )  # fmt: skip
    # another design: not the profile's
    rows.append({**rows[0], "design": "equal-10", "mse": 9.0})
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def _files(root: Path, a: str = "m-a", b: str = "m-b") -> dict[str, list[str]]:
    """Each study's files at the paths the workflow gives them, under ``root``, with models ``a`` and ``b``."""
    res = root / "results"
    return {
        "riskscores": [str(_riskscores(res / "riskscores" / "scores" / "metrics.parquet", a, b))],
        "nextword": [str(_nextword(res / "nextword" / "tables" / "table1.csv", a, b))],
        "labelbias": [str(_labelbias(res / "labelbias" / "tables" / "summary.csv", a, b))],
        "subgroups": [str(_subgroups(res / "subgroups" / "scores" / "unit_metrics.parquet", a, b))],
        "decisionrisk": [str(p) for p in _decisionrisk(res / "decisionrisk" / "tables", a, b)],
    }


def _values(frame: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    return {(r.model, r.measure, r.setting): r.value for r in frame.itertuples()}


# ------------------------------------------------------------------ each room's headline numbers


def test_riskscores_headline_is_auc_and_ece_per_task_and_prompting(tmp_path: Path) -> None:
    got = riskscores_headline(_riskscores(tmp_path / "m.parquet"), protocol="paper")
    assert list(got.columns) == list(HEADLINE_COLUMNS)
    values = _values(got)
    assert values[("m-a", "AUC, multiple choice", "ACSMobility")] == 0.60
    assert values[("m-a", "ECE, numeric", "ACSIncome")] == 0.20
    assert ("m-b", "ECE, numeric", "ACSIncome") not in values and ("m-b", "AUC, numeric", "ACSIncome") in values
    assert "xgboost" not in set(got["model"])
    assert set(got["protocol"]) == {"paper"}
    assert set(got.loc[got["calibration"], "measure"]) == {"ECE, multiple choice", "ECE, numeric"}
    assert dict(zip(got["measure"].str[:3], got["better"], strict=True)) == {"AUC": "higher", "ECE": "lower"}


def test_nextword_headline_maps_systems_to_models() -> None:
    models = ["gpt2", "gpt2-large", "chat"]
    assert _system_of("gpt2", models) == ("gpt2", "sampling, T=1")
    assert _system_of("gpt2-large", models) == ("gpt2-large", "sampling, T=1")
    assert _system_of("gpt2-large-t0.5", models) == ("gpt2-large", "sampling, T=0.5")
    assert _system_of("gpt2-ft", models) == ("gpt2", "fine-tuned")
    assert _system_of("chat-list", models) == ("chat", "chat, list")
    assert _system_of("chatgpt", models) is None  # a pre-collected file, no model's


def test_nextword_headline_is_expected_tvd_to_humans(tmp_path: Path) -> None:
    got = nextword_headline(_nextword(tmp_path / "table1.csv"), ["m-a", "m-b"], protocol="corrected")
    assert _values(got) == {
        ("m-a", "expected TVD to humans", "sampling, T=1"): 0.70,
        ("m-a", "expected TVD to humans", "sampling, T=0.5"): 0.72,
        ("m-b", "expected TVD to humans", "chat, single"): 0.90,
        ("m-b", "expected TVD to humans", "chat, list"): 0.85,
        ("m-a", "expected TVD to humans", "fine-tuned"): 0.69,
    }
    assert got["calibration"].all() and set(got["better"]) == {"lower"}


def test_labelbias_headline_compares_the_best_mitigation_with_none_at_its_k(tmp_path: Path) -> None:
    got = labelbias_headline(_labelbias(tmp_path / "summary.csv"), protocol="corrected")
    assert _values(got) == {
        ("m-a", "BiasScore, no mitigation", "k=2"): 0.20,
        ("m-a", "BiasScore, best mitigation", "DC, k=2"): 0.05,
        ("m-a", "RSD, no mitigation", "k=2"): 0.80,
        ("m-a", "RSD, best mitigation", "DC, k=2"): 0.30,
        ("m-b", "BiasScore, no mitigation", "k=0"): 0.30,
        ("m-b", "BiasScore, best mitigation", "DC, k=0"): 0.15,
        ("m-b", "RSD, no mitigation", "k=0"): 0.60,
        ("m-b", "RSD, best mitigation", "DC, k=0"): 0.40,
    }
    assert set(got.loc[got["calibration"], "measure"]) == {"BiasScore, no mitigation"}


def test_decisionrisk_headline_is_dwd_on_wq_from_log_likelihoods(tmp_path: Path) -> None:
    got = decisionrisk_headline(*_decisionrisk(tmp_path), protocol="paper")
    assert _values(got) == {
        ("m-a", "risk-adjusted accuracy, DwD (WQ)", "anli"): 0.81,
        ("m-a", "risk-adjusted accuracy, DwD (WQ)", "piqa"): 0.66,
        ("m-b", "risk-adjusted accuracy, DwD (WQ)", "anli"): 0.79,
        ("m-a", "composite risk (RRR), DwD (WQ)", "anli"): 0.6,
        ("m-b", "composite risk (RRR), DwD (WQ)", "anli"): 0.8,
    }
    assert not got["calibration"].any()


def test_subgroups_headline_is_eb_over_dt_mse_per_source(tmp_path: Path) -> None:
    got = subgroups_headline(_subgroups(tmp_path / "um.parquet"), protocol="paper", stand_ins=["decisionrisk"])
    values = _values(got)
    assert values.keys() == {
        ("m-a", "MSE of EB / MSE of DT", "labelbias"),
        ("m-b", "MSE of EB / MSE of DT", "labelbias"),
        ("m-a", "MSE of EB / MSE of DT", "decisionrisk (generated stand-in)"),
    }
    assert all(v == pytest.approx(0.01 / 0.03) for v in values.values())  # each subgroup counts once


def test_subgroups_headline_leaves_out_a_ratio_over_a_zero_dt_error(tmp_path: Path) -> None:
    """The CI shadow's subgroups are drawn whole: DT's error is 0 and EB's over it is no number."""
    path = _subgroups(tmp_path / "um.parquet")
    um = pd.read_parquet(path)
    um.loc[(um["model"] == "m-b") & (um["method"] == "DT"), "mse"] = 0.0
    um.to_parquet(path)
    got = subgroups_headline(path, protocol="paper", stand_ins=[])
    assert set(got["model"]) == {"m-a"} and np.isfinite(got["value"]).all()


# ------------------------------------------------------------------ combination and correlation


def _frame(study: str, rows: list[tuple[str, str, str, float]], *, calibration: bool = False) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": m, "study": study, "measure": q, "setting": s, "value": v, "protocol": "corrected",
             "better": "lower", "calibration": calibration}
            for m, q, s, v in rows
        ]
    )  # fmt: skip


def test_combine_keeps_the_given_models_in_study_then_model_order() -> None:
    one = _frame("one", [("b", "x", "s1", 1.0), ("a", "x", "s2", 2.0), ("a", "x", "s1", 3.0), ("c", "x", "s1", 4.0)])
    two = _frame("two", [("a", "y", "s", 5.0), ("b", "y", "s", 6.0)])
    got = combine([one, two], ["a", "b"])
    assert list(zip(got["study"], got["model"], got["setting"], strict=True)) == [
        ("one", "a", "s1"),
        ("one", "a", "s2"),
        ("one", "b", "s1"),
        ("two", "a", "s"),
        ("two", "b", "s"),
    ]
    assert got["value"].tolist() == [3.0, 2.0, 1.0, 5.0, 6.0]


def test_combine_names_the_study_of_a_bad_frame() -> None:
    with pytest.raises(ValueError, match=r"one: x of a \(s\) is not finite"):
        combine([_frame("one", [("a", "x", "s", float("nan"))])], ["a"])
    with pytest.raises(ValueError, match=r"headline of \['one'\]: no column\(s\) \['protocol'\]"):
        combine([_frame("one", [("a", "x", "s", 1.0)]).drop(columns="protocol")], ["a"])


def test_calibration_correlations_are_spearman_over_the_models_with_both() -> None:
    ece = _frame(
        "rs",
        [("a", "ECE", "t1", 0.1), ("a", "ECE", "t2", 0.3), ("b", "ECE", "t1", 0.4), ("c", "ECE", "t1", 0.3),
         ("d", "ECE", "t1", 0.5)],
        calibration=True,
    )  # fmt: skip
    # means: a 0.2, b 0.4, c 0.3, d 0.5 -> ranks 1, 3, 2, 4
    tvd = _frame("nw", [("a", "TVD", "s", 1.0), ("b", "TVD", "s", 2.0), ("c", "TVD", "s", 3.0), ("d", "TVD", "s", 4.0)],
                 calibration=True)  # fmt: skip
    lone = _frame("lb", [("a", "Bias", "k", 0.1), ("e", "Bias", "k", 0.2)], calibration=True)
    auc = _frame("rs", [("a", "AUC", "t1", 0.9), ("b", "AUC", "t1", 0.1)])  # not a calibration measure
    profile = combine([ece, auc, tvd, lone], ["a", "b", "c", "d", "e"])
    got = calibration_correlations(profile).set_index(["measure_a", "measure_b"])
    assert set(got.index) == {("rs: ECE", "nw: TVD"), ("rs: ECE", "lb: Bias"), ("nw: TVD", "lb: Bias")}
    pair = got.loc[("rs: ECE", "nw: TVD")]
    assert pair["n_models"] == 4 and pair["models"] == "a, b, c, d"
    assert pair["rho"] == pytest.approx(1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)))  # 0.8
    assert 0 < pair["p_value"] < 1
    assert got.loc[("rs: ECE", "lb: Bias"), "n_models"] == 1 and np.isnan(got.loc[("rs: ECE", "lb: Bias"), "rho"])


# ------------------------------------------------------------------ the outputs


def test_profile_is_written_from_the_studies_files_and_drawn_the_same_twice(tmp_path: Path) -> None:
    files = _files(tmp_path)
    protocols = dict.fromkeys(files, "corrected")
    frames = read_headlines(files, protocols, nextword_models=["m-a", "m-b"], stand_ins=["decisionrisk"])  # type: ignore[arg-type]
    profile, correlations = write_profile(
        frames, ["m-a", "m-b"], tables=tmp_path / "out" / "tables", figures=tmp_path / "out" / "figures"
    )
    for name in ("tables/profile.csv", "tables/profile.md", "tables/profile.tex", "tables/correlations.csv",
                 "figures/profile.png", "figures/profile.pdf"):  # fmt: skip
        assert (tmp_path / "out" / name).is_file(), name
    table = pd.read_csv(tmp_path / "out" / "tables" / "profile.csv")
    assert table["model"].tolist() == sorted(table["model"])  # one model at a time, in the given order
    assert table.groupby("model")["study"].nunique().to_dict() == {"m-a": 5, "m-b": 5}
    assert set(table["protocol"]) == {"corrected"}
    assert len(correlations) == 6  # ECE x2, TVD, BiasScore: four calibration measures
    again = tmp_path / "again"
    save_figure(profile_figure(profile, correlations, ["m-a", "m-b"]), again)
    assert again.with_suffix(".png").read_bytes() == (tmp_path / "out" / "figures" / "profile.png").read_bytes()


@pytest.mark.workflow
def test_the_profile_rule_reads_the_studies_outputs_of_the_demo(checkout: Path) -> None:
    """Rule ``profile`` (part of ``all``) on the demo config, its inputs the studies' output files
    (small ones here): the models in two or more studies, each with numbers from every study that
    runs it, under the demo's protocols, the subgroups numbers marked as generated stand-ins."""
    _files(checkout, "tiny-llama-chat", "tiny-llama")
    dry = snakemake("-n", "all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert jobs(dry.stdout)["profile"] == 1
    run = snakemake(
        "results/profile/figures/profile.png", "--configfile", "config/demo.yaml", "-c1", "--allowed-rules", "profile",
        cwd=checkout,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    out = checkout / "results" / "profile"
    table = pd.read_csv(out / "tables" / "profile.csv")
    studies = table.groupby("model", sort=False)["study"].agg(lambda s: sorted(set(s))).to_dict()
    # tiny-llama is no nextword model of the demo: its nextword system here is no model's
    assert studies == {
        "tiny-llama": ["decisionrisk", "labelbias", "riskscores", "subgroups"],
        "tiny-llama-chat": ["decisionrisk", "labelbias", "nextword", "riskscores", "subgroups"],
    }
    demo = yaml.safe_load((checkout / "config" / "demo.yaml").read_text())["studies"]
    assert dict(zip(table["study"], table["protocol"], strict=True)) == {
        s: demo[s]["protocol"] for s in studies["tiny-llama-chat"]
    }
    assert table.loc[table["study"] == "subgroups", "setting"].str.endswith("(generated stand-in)").all()
    assert (out / "tables" / "correlations.md").is_file() and (out / "figures" / "profile.pdf").is_file()
