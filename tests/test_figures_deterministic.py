"""Every study's figures are the same bytes each time they are drawn from the same inputs (issue 30).

Rebuilding one figure redrew nextword's ``appB_predictors.png`` (33,091 pixels
changed) and ``appF_finetune.png`` (2,773) from unchanged inputs: their
bootstrap intervals were drawn from an unseeded generator. Here figures of
every study are drawn twice, in two processes with different hash seeds, from
the same small frames shaped like the real inputs, and every PNG and PDF must
match byte for byte; the PDFs carry no creation or modification date. Each
study's seaborn estimates (bar, line and regression plots: the ones that can
bootstrap) are among them; figures of the same kind are left out to keep the
test short.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SEED = 7


def _nextword(out: Path) -> None:
    from unsure.nextword import plots

    rng = np.random.default_rng(0)
    n = 60
    hardness = pd.DataFrame(
        {
            "human_entropy": rng.uniform(0, 3, n),
            "model_entropy": rng.uniform(0, 3, n),
            "tvd_oracle_oracle": rng.uniform(0, 1, n),
            "context_length": rng.integers(1, 40, n),
            "tvd_model_oracle": rng.uniform(0, 1, n),
        }
    )
    losses = pd.DataFrame(
        [
            {"epoch": e, "fold": f, "split": s, "loss": float(rng.uniform(2, 5))}
            for f in range(2)
            for s in ("train", "held_out")
            for e in range(3)
        ]
    )
    fold_tvds = pd.DataFrame(
        [
            {"text_id": 1, "word_num": w, "system": system, "fold": f, "tvd": float(rng.uniform(0, 1))}
            for f in range(2)
            for system in ("base", "fine-tuned", "oracle")
            for w in range(25)
        ]
    )
    plots.write_figures(
        {
            "appB_predictors": plots.app_predictors(hardness, seed=SEED),
            "appF_finetune": plots.app_finetune(losses, fold_tvds, seed=SEED),
        },
        out,
    )


def _riskscores(out: Path) -> None:
    from unsure.report import save_figure
    from unsure.riskscores import plots

    rng = np.random.default_rng(1)
    instruct = {"tiny-llama": False, "tiny-llama-chat": True}
    tasks = ["ACSIncome", "ACSEmployment"]
    metrics = pd.DataFrame(
        [
            {"model": m, "task": t, "prompting": p, "ece": rng.uniform(0, 0.3), "auc": rng.uniform(0.5, 0.9)}
            | {"r_bias": rng.uniform(-0.2, 0.2)}
            for m in instruct
            for t in tasks
            for p in ("multiple_choice", "numeric")
        ]
    )
    evidence = pd.DataFrame(
        [
            {"model": m, "task": t, "n_features": k, "auc": rng.uniform(0.5, 0.9), "ece": rng.uniform(0, 0.3)}
            for m in [*instruct, "xgboost"]
            for t in tasks[:1]
            for k in (2, 4, 6)
        ]
    )
    save_figure(plots.fig2(metrics, instruct, seed=SEED), out / "fig2")
    save_figure(plots.evidence_figure(evidence, ["auc"], "Increasing evidence", instruct, seed=SEED), out / "figA8")


def _subgroups(out: Path) -> None:
    from unsure.report import save_figure
    from unsure.subgroups import plots
    from unsure.subgroups.tables import unit_metrics

    rng = np.random.default_rng(2)
    rows = []
    for rep in range(3):
        for design in ("proportional", "fixed"):
            for dataset in ("d1", "d2"):
                for g in range(6):
                    n = 5 + 6 * g
                    truth = rng.uniform(0.3, 0.9)
                    for metric in ("accuracy",):
                        for method in ("DT", "SR", "EB", "Lasso"):
                            est = float(np.clip(truth + rng.normal(0, 0.3 / np.sqrt(n)), 0, 1))
                            half = 1.0 / np.sqrt(n)
                            rows.append(
                                {"rep": rep, "design": design, "metric": metric, "dataset": dataset, "task": dataset}
                                | {"model": "m1", "subgroup": f"g{g}", "method": method, "rows": 100, "n": n}
                                | {"truth": truth, "estimate": est, "lo": est - half, "hi": est + half}
                            )
    um = unit_metrics(pd.DataFrame(rows), "riskscores")
    save_figure(plots.fig2(um, seed=SEED), out / "fig2")
    save_figure(plots.fig3(um, 15, seed=SEED), out / "fig3")


def _labelbias(out: Path) -> None:
    from unittest import mock

    from unsure.labelbias import plots
    from unsure.labelbias.lineup import figure_lineup, model_table

    models = model_table(
        ["tiny-llama", "tiny-llama-chat", "tiny-gpt2"],
        {"tiny-llama": False, "tiny-llama-chat": True, "tiny-gpt2": False},
        {"tiny-llama": ("tiny-llama", "-"), "tiny-llama-chat": ("tiny-llama", "-")},
    )
    rng = np.random.default_rng(3)
    rows = []
    for model in models["model"]:
        for task in ("t1", "t2"):
            for k in (0, 2, 4):
                for s in range(1 if k == 0 else 2):
                    for method in ("none", "cc", "dc", "looc"):
                        if method == "looc" and k == 0:
                            continue
                        values = rng.uniform(0.1, 0.9, 5)
                        rows.append(
                            {"model": model, "task": task, "k": k, "set": s, "method": method}
                            | dict(
                                zip(
                                    ["accuracy", "macro_f1", "macro_f1_paper", "rsd", "bias_score"], values, strict=True
                                )
                            )
                        )
    first = figure_lineup(models, "tiny-llama")[:1]  # fig2 stands for the rest: each is a seconds-long grid
    with mock.patch.object(plots, "figure_lineup", lambda *_: first):
        drawn = plots.write_figures(pd.DataFrame(rows), models, {"t1"}, out, figure_family="tiny-llama", seed=SEED)
    assert drawn == ["fig2"]


def _decisionrisk(out: Path) -> None:
    from unsure.decisionrisk.metrics import risk_coverage
    from unsure.decisionrisk.plots import risk_coverage_figure
    from unsure.report import save_figure

    rng = np.random.default_rng(4)
    parts = []
    for benchmark in ("anli",):
        for rule in ("MaxConf", "ConfStd"):
            curve = risk_coverage(rng.uniform(0, 1, 40), rng.uniform(0, 1, 40) < 0.6)
            parts.append(curve.assign(benchmark=benchmark, model="tiny-llama (logit)", rule=rule))
    save_figure(risk_coverage_figure(pd.concat(parts, ignore_index=True)), out / "fig2")


def draw_all(out: Path) -> None:
    """Draw the figures of every study under ``out/<study>/`` (PNG and PDF)."""
    for study, draw in [
        ("nextword", _nextword),
        ("riskscores", _riskscores),
        ("subgroups", _subgroups),
        ("labelbias", _labelbias),
        ("decisionrisk", _decisionrisk),
    ]:
        (out / study).mkdir(parents=True)
        draw(out / study)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_study_draws_the_same_bytes_twice(tmp_path: Path) -> None:
    runs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"run{hash_seed}"
        env = os.environ | {"PYTHONHASHSEED": hash_seed, "MPLBACKEND": "Agg"}
        code = f"import sys; sys.path.insert(0, {str(REPO / 'tests')!r}); from pathlib import Path; "
        code += f"from test_figures_deterministic import draw_all; draw_all(Path({str(out)!r}))"
        runs.append((out, subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)))
    for _, proc in runs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    first, second = (_files(out) for out, _ in runs)
    studies = {name.split(os.sep)[0] for name in first}
    assert studies == {"nextword", "riskscores", "subgroups", "labelbias", "decisionrisk"}
    assert sorted(first) == sorted(second)
    assert all(name.endswith((".png", ".pdf")) for name in first)
    assert {n for n in first if n.endswith(".png")} == {n[:-4] + ".png" for n in first if n.endswith(".pdf")}
    differ = [name for name in first if first[name] != second[name]]
    assert differ == [], f"drawn twice from the same inputs, these differ: {differ}"
    for name, data in first.items():
        if name.endswith(".pdf"):
            assert b"/CreationDate" not in data and b"/ModDate" not in data, name
        else:
            assert b"tIME" not in data, name
