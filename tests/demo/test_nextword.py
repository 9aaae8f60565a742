"""Known-truth checks of the nextword study on the demo's own outputs (issue 19).

The demo's Provo norms are draws from the text generator's exact next-word
distributions and the zoo models are trained on passages drawn from the same
generator (:mod:`unsure.zoo.corpus.nextword`), so a trained model must be closer to
the humans than the same model untrained. The untrained reference is built here,
not read from the outputs: the zoo model's own ``config.json`` initialised from the
zoo's seed for that model (:func:`unsure.zoo.seeds.model_seed`), exactly as the zoo builds
it before training, then sampled with the demo's settings (the scorer, ``n``, seed
and positions of the run) and scored by the same ``evaluate``. Against the demo run
on an untrained zoo the two are the same weights, and every comparison fails.

The appendix-B regression (ARD) needs per-position TVDs that vary with how hard a
position is; an untrained model is at TVD 1 everywhere and ARD prunes every
predictor, so at least one kept predictor and a positive R² are checked as well,
and so is the appendix-C effect (more samples, lower TVD), flat for an untrained model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from unsure.config import Model
from unsure.engine.hf import HFEngine
from unsure.engine.pretrained import TOKENIZER_FILES
from unsure.nextword.inference import chat_scorer, position_rows, sample_counts, sample_scorer
from unsure.nextword.metrics import evaluate
from unsure.zoo.seeds import model_seed

MARGIN = 0.03
"""How far below the untrained model's expected TVD a trained one must be. The mean over the
demo's 124 positions of a per-position TVD in [0, 1] has a standard error near 0.01 for a
trained model (untrained: near 0), so 0.03 is three of them."""


@pytest.fixture(scope="module")
def nextword(demo_results: Path) -> Path:
    folder = demo_results / "nextword"
    if not (folder / "scores" / "metrics.parquet").is_file():
        pytest.fail(f"{folder}/scores/metrics.parquet is missing: the demo did not run the nextword study")
    return folder


@pytest.fixture(scope="module")
def settings(nextword: Path) -> dict[str, Any]:
    """The config slice the results came from (``provenance.json``)."""
    path = nextword / "provenance.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: the demo writes it with the study's tables")
    return dict(json.loads(path.read_text(encoding="utf-8"))["settings"])


@pytest.fixture(scope="module")
def scores(nextword: Path) -> dict[str, pd.DataFrame]:
    names = ("positions", "human", "corpus", "splits", "metrics", "ard", "sample_size")
    return {name: pd.read_parquet(nextword / "scores" / f"{name}.parquet") for name in names}


def _runs(settings: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(model, mode, system name) of every sampled run, named as the workflow names them."""
    study, models = settings["study"], settings["models"]
    runs = []
    for model in study["models"]:
        temperatures = [f"t{t:g}" for t in study["temperatures"]]
        modes = list(study["chat_modes"]) if models[model]["instruct"] else temperatures
        runs += [(model, mode, model if mode == "t1" else f"{model}-{mode}") for mode in modes]
    return runs


def _untrained_twin(folder: Path, seed: int, out: Path) -> Path:
    """The zoo model in ``folder`` as the zoo initialises it, before any training."""
    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name in TOKENIZER_FILES:
            shutil.copyfile(path, out / path.name)
    return out


def _expected_tvd(engine: HFEngine, mode: str, n: int, study: dict[str, Any], scores: dict[str, pd.DataFrame]) -> float:
    """The run's expected TVD to all human responses, sampled as the workflow samples it."""
    seed, max_new = int(study["seed"]), int(study["max_new_tokens"])
    if mode == "single" or mode == "list":
        score = chat_scorer(engine, mode=mode, n=n, seed=seed, max_new_tokens=max_new)
    else:
        score = sample_scorer(engine, n=n, temperature=float(mode[1:]), seed=seed, max_new_tokens=max_new)
    counts, _ = sample_counts([score(position_rows(scores["positions"]))])
    table = evaluate(counts, scores["human"], scores["corpus"], scores["splits"], name="untrained")
    return float(table["expected_tvd_human"].mean())


def test_trained_models_are_closer_to_humans_than_untrained(
    demo_results: Path, settings: dict[str, Any], scores: dict[str, pd.DataFrame], tmp_path: Path
) -> None:
    study, zoo_settings = settings["study"], settings["zoo"]
    if zoo_settings is None:
        pytest.fail("the nextword study's models are not zoo models: nothing to compare with an untrained one")
    trained = scores["metrics"].groupby("estimator")["expected_tvd_human"].mean()
    torch.set_num_threads(1)
    report, failures = [], []
    for model, mode, system in _runs(settings):
        entry = Model.model_validate(settings["models"][model])
        name = entry.zoo_name
        if name is None:
            continue
        folder = demo_results.parent / entry.id
        twin = _untrained_twin(folder, model_seed(int(zoo_settings["seed"]), name), tmp_path / name)
        engine = HFEngine(str(twin), dtype="float32", device="cpu", instruct=entry.instruct)
        n = study["n_samples_large"] if model in study["large_models"] else study["n_samples"]
        untrained = _expected_tvd(engine, mode, int(n), study, scores)
        report.append(f"{system}: trained {trained[system]:.3f}, untrained {untrained:.3f}")
        if not trained[system] < untrained - MARGIN:
            failures.append(system)
    assert report, "no sampled run of a zoo model in the demo"
    assert not failures, "expected TVD not below the untrained model's: " + "; ".join(report)


def test_hard_contexts_regression_keeps_a_predictor(nextword: Path, scores: dict[str, pd.DataFrame]) -> None:
    """Appendix B: with a trained model the TVD varies with the context's difficulty (human entropy, the
    oracle's own TVD, ...), so ARD keeps some predictor; untrained, every TVD is 1 and all are pruned."""
    ard = scores["ard"]
    notes = json.loads((nextword / "scores" / "analysis_notes.json").read_text(encoding="utf-8"))
    kept = ard.loc[~ard["pruned"], "feature"].tolist()
    assert kept, f"ARD pruned every predictor (R² {notes['ard']['r2']:.3f})"
    assert notes["ard"]["r2"] > 0.05, f"ARD R² {notes['ard']['r2']:.3f} with predictors {kept}"


def test_more_samples_give_lower_tvd(scores: dict[str, pd.DataFrame]) -> None:
    """Appendix C: a model's sample-based estimate gets closer to the humans as it draws more samples
    (a trained model's samples land on human words; an untrained model's never do, at any size)."""
    by_size = scores["sample_size"].groupby("n")["expected_tvd"].mean().sort_index()
    assert by_size.iloc[0] - by_size.iloc[-1] > MARGIN, by_size.round(3).to_dict()
