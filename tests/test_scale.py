"""bench/scale.py: jobs, tokens and GPU-hours of a config, checked on configs small enough to count by hand."""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from workflow_helpers import REPO

from unsure import model_sizes
from unsure.config import Config, ZooModel, load_config, parse_config

sys.path.insert(0, str(REPO / "bench"))
import scale

# ----------------------------------------------------------------------------- a hand-made config

HAND = {
    "models": {
        "m7": {"id": "mistralai/Mistral-7B-v0.1"},
        "chat-api": {"id": "gpt-4o-mini", "backend": "openai", "base_url": "https://api.example/v1",
                     "instruct": True, "gpus": 0},
    },
    "studies": {
        "riskscores": {
            "models": ["m7", "chat-api"],
            "tasks": ["ACSIncome"],
            "n_eval": 1000,
            "threshold_rows": 10,
            "shards": 2,
            "importance": {"models": ["m7"], "rows": 10},
            "evidence": {"models": [], "rows": 10},
        }
    },
}  # fmt: skip


class Every(dict[str, float]):
    """Engine tokens per unit of every request set, each ``value`` (riskscores' ``risk/<set>/...`` from ``risk``)."""

    def __init__(self, value: float = 10.0, **risk: float) -> None:
        super().__init__()
        self.value, self.risk = value, risk

    def __missing__(self, key: str) -> float:
        study, kind, *_ = key.split("/")
        return self.risk.get(kind, self.value) if study == "risk" else self.value


def lengths(cfg: Config, value: float = 10.0, **risk: float) -> scale.Measured:
    """What :func:`scale.measure` gives, each per-unit count ``value`` (riskscores' from ``risk`` when given)."""
    return scale.Measured(Every(value, **risk))


def listing(jobs: list[tuple[str, dict[str, str], int | None]]) -> str:
    """A dry-run listing in Snakemake's layout, with its job stats table."""
    out = ["Building DAG of jobs...", "Job stats:", "job    count", "---  -------"]
    counts: dict[str, int] = {}
    for rule, _, _ in jobs:
        counts[rule] = counts.get(rule, 0) + 1
    out += [f"{rule}    {n}" for rule, n in counts.items()] + [f"total    {len(jobs)}", ""]
    for rule, wildcards, gpus in jobs:
        out += ["[Sat Nov 21 11:47:37 2026]", f"{'localrule' if rule == 'all' else 'rule'} {rule}:"]
        out += ["    output: x", "    jobid: 1", "    reason: Forced execution"]
        if wildcards:
            out.append("    wildcards: " + ", ".join(f"{k}={v}" for k, v in wildcards.items()))
        out.append("    resources: tmpdir=/tmp" + (f", gpu={gpus}" if gpus is not None else ""))
        out += ["Shell command: None", ""]
    return "\n".join(out)


def hand_dag() -> list[tuple[str, dict[str, str], int | None]]:
    jobs: list[tuple[str, dict[str, str], int | None]] = []
    for model, gpus in (("m7", 1), ("chat-api", 0)):
        for shard in ("0", "1"):  # a job scores every task and prompting of its model and shard
            jobs.append(("riskscores_infer", {"rs_model": model, "rs_shard": shard}, gpus))
    jobs.append(("riskscores_importance", {"rs_model": "m7", "rs_task": "ACSIncome"}, 1))
    jobs.append(("riskscores_importance", {"rs_model": "xgboost", "rs_task": "ACSIncome"}, 0))
    jobs.append(("riskscores_evidence", {"rs_model": "xgboost", "rs_task": "ACSIncome"}, 0))
    jobs.append(("riskscores_metrics", {}, None))
    jobs.append(("all", {}, None))
    return jobs


def test_dry_run_listing_is_read_job_by_job_and_checked_against_its_stats() -> None:
    jobs = scale.parse_dag(listing(hand_dag()))
    assert len(jobs) == 9
    assert jobs[0] == scale.Job("riskscores_infer", {"rs_model": "m7", "rs_shard": "0"}, 1)
    assert [j.gpus for j in jobs if j.rule in ("riskscores_metrics", "all")] == [0, 0]
    broken = listing(hand_dag()).replace("riskscores_importance    2", "riskscores_importance    3")
    with pytest.raises(scale.EstimateError, match="cannot parse"):
        scale.parse_dag(broken)


def test_hand_made_config_tokens_and_gpu_hours_as_computed_by_hand() -> None:
    cfg = parse_config(HAND)
    work = scale.model_work(cfg, lengths(cfg, mc=100, numeric=90, plain=80, evidence=50))
    by = {(w.rule, w.model, w.kind): w for w in work}
    rows = 1000 + 10  # evaluation rows and the threshold rows
    mc = by[("riskscores_infer", "m7", "risk_scores")]
    # the engine's tokens per row (both option orders, as the planner counts them); a load per shard, counted
    # once for the job's every task and prompting
    assert mc.tokens == rows * 100 and mc.loads == 2 and not mc.api
    numeric = by[("riskscores_infer", "m7", "numeric")]
    assert numeric.tokens == rows * 90 and numeric.loads == 0
    assert by[("riskscores_importance", "m7", "risk_scores")].tokens == 10 * (1 + 10) * 80  # ACSIncome: 10 features
    assert by[("riskscores_infer", "chat-api", "risk_scores")].requests == rows * 2
    assert by[("riskscores_infer", "chat-api", "numeric")].requests == rows  # one free-form chat reply
    assert by[("riskscores_infer", "chat-api", "numeric")].tokens == 0
    assert len(work) == 5  # no evidence work: its model list is empty

    jobs = scale.parse_dag(listing(hand_dag()))
    cost = {(c.work.rule, c.work.model, c.work.kind): c for c in
            scale.costs(cfg, work, jobs, mfu=0.5, peak_tflops=100, load_gb_per_s=1)}  # fmt: skip
    c = cost[("riskscores_infer", "m7", "risk_scores")]
    seconds = 2 * 7.24e9 * 101_000 / (0.5 * 100e12) + 2 * (2 * 7.24e9 / 1e9)  # compute + two loads of 14.48 GB
    assert (c.jobs, c.gpus) == (2, 1)
    assert c.job_hours == pytest.approx(seconds / 2 / 3600)
    assert c.gpu_hours == pytest.approx(seconds / 3600)
    assert cost[("riskscores_infer", "chat-api", "numeric")].gpu_hours == 0

    text = scale.report(cfg, "hand.yaml", jobs, list(cost.values()), lengths(cfg), gpu_counts=[8], mfu=0.5,
                        peak_tflops=100)  # fmt: skip
    assert "80 GB per GPU" in text  # the config's gpu_memory_gb
    assert "| riskscores | 8 | 3 |" in text  # 4 inference, 2 importance, 1 evidence, 1 metrics job
    # the longest job: an m7 shard, its multiple-choice and numeric work together
    numeric_seconds = 2 * 7.24e9 * rows * 90 / (0.5 * 100e12)
    longest = (seconds + numeric_seconds) / 2 / 3600
    assert f"Longest job: `riskscores_infer` (rs_model=m7, rs_shard=0), 1 GPUs, {scale._h(longest)} h." in text
    assert "| gpt-4o-mini" not in text and "| chat-api | riskscores | 3.03k |" in text
    assert "every model's `gpus` matches" in text


def test_estimate_and_dag_must_agree() -> None:
    cfg = parse_config(HAND)
    work = scale.model_work(cfg, lengths(cfg))
    missing = [j for j in hand_dag() if j[0] != "riskscores_importance"]
    with pytest.raises(scale.EstimateError, match=r"no riskscores_importance job for m7"):
        scale.costs(cfg, work, scale.parse_dag(listing(missing)))
    extra = [*hand_dag(), ("labelbias_infer", {"lb_model": "m7", "lb_shard": "0"}, 1)]
    with pytest.raises(scale.EstimateError, match=r"1 GPU jobs have no estimate, e\.g\. labelbias_infer"):
        scale.costs(cfg, work, scale.parse_dag(listing(extra)))


def test_memory_check_and_parameter_table() -> None:
    assert scale.gpus_needed is model_sizes.gpus_needed and scale.parameter_count is model_sizes.parameter_count
    assert not {"PARAMS", "GPU_MEMORY_GB"} & set(vars(scale))  # one table, one memory setting (gpu_memory_gb)
    cfg = load_config(REPO / "config" / "config.yaml")
    assert scale.parameters(cfg, "mixtral-8x7b") == (46.7e9, 12.9e9)  # FLOPs use the active 12.9B
    for name, entry in cfg.models.items():  # every paper model has a size (API models excepted)
        if entry.backend == "hf":
            assert scale.parameters(cfg, name)[0] > 0
    with pytest.raises(scale.EstimateError, match="no parameter count for model 'x'"):
        scale.parameters(parse_config({"models": {"x": {"id": "org/unknown"}}}), "x")
    assert scale.parameters(parse_config({"models": {"x": {"id": "org/unknown", "params": 3}}}), "x") == (3e9, 3e9)
    assert scale.parameters(cfg, "sentence-transformers/nq-distilbert-base-v1")[0] == 0.066e9  # a hub id
    # asking for fewer GPUs than the estimate stops the config (tests/test_model_sizes.py); the report lists more
    raw: dict[str, Any] = {**HAND, "models": {**HAND["models"], "m7": {"id": "mistralai/Mistral-7B-v0.1", "gpus": 2}}}
    more = parse_config(raw)
    jobs = scale.parse_dag(listing(hand_dag()))
    cost = scale.costs(more, scale.model_work(more, lengths(more)), jobs)
    text = scale.report(more, "more.yaml", jobs, cost, lengths(more), gpu_counts=[8], mfu=0.5, peak_tflops=100)
    assert "- `m7`: 17 GB (2 bytes per parameter + 20%) needs 1 x 80 GB; config `gpus: 2`" in text


def test_token_counter_never_counts_fewer_than_the_word_floor() -> None:
    def one_token_each(texts: list[str], add_special_tokens: bool = True) -> dict[str, Any]:
        return {"input_ids": [[0] for _ in texts]}

    count = scale.token_counter(one_token_each)
    assert list(count(["a b c", "one two three four five six"])) == [4.0, 8.0]
    assert list(scale.token_counter(None, per_word=1.5)(["a b", "c"])) == [3.0, 1.5]


def test_demo_config_gets_work_for_every_rule_that_runs_a_model() -> None:
    cfg = load_config(REPO / "config" / "demo.yaml")
    work = scale.model_work(cfg, lengths(cfg))
    keys = {(w.rule, w.model, tuple(sorted(w.match.items()))) for w in work}
    assert ("nextword_sample", "tiny-gpt2", (("mode", "t0.5"), ("model", "tiny-gpt2"))) in keys
    assert ("nextword_sample", "tiny-llama-chat", (("mode", "list"), ("model", "tiny-llama-chat"))) in keys
    lora = [w for w in work if w.rule == "labelbias_lora"]
    # one job per (model, part) fine-tunes under every (k, set): k = 2, sets 0 and 1, the base loaded once
    assert [(w.model, w.match) for w in lora] == [("tiny-llama", {"lb_model": "tiny-llama"})] * 2
    # then the base merged with each task's adapter, per run
    assert lora[0].loads == 1 + lora[1].loads and lora[1].loads > 1
    flips = [w for w in work if w.rule == "labelbias_lora_differences"]
    assert [(w.model, w.match) for w in flips] == [("tiny-llama", {"lb_model": "tiny-llama"})]
    # two fine-tunings again (targets at set 0, examples at set 1), each of the lora job's size
    assert flips[0].train_tokens == pytest.approx(lora[0].train_tokens + lora[1].train_tokens)
    assert flips[0].tokens == pytest.approx(lora[0].tokens + lora[1].tokens)
    assert {w.rule for w in work} == {
        "riskscores_infer", "riskscores_importance", "riskscores_evidence", "nextword_sample", "nextword_biased",
        "nextword_tokens", "nextword_finetune", "nextword_finetune_sample", "labelbias_infer", "labelbias_lora",
        "labelbias_differences", "labelbias_lora_differences",
        "decisionrisk_generative", "decisionrisk_encoder", "decisionrisk_similarity",
    }  # fmt: skip
    assert all(w.tokens > 0 and not w.api for w in work)
    assert scale.parameters(cfg, "tiny-llama") == (12 * 2 * 64**2 + 4096 * 64,) * 2  # from the zoo spec


# ----------------------------------------------------------------------------- measuring prompts


@pytest.fixture(scope="module")
def generated_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small raw data in the workflow's layout, from the project's own generators."""
    from unsure.generate import acs, mcqa, provo, sni
    from unsure.rawdata import TASK_LIST

    root = tmp_path_factory.mktemp("data")
    raw = root / "acs" / "raw" / "2018" / "1-Year"
    raw.mkdir(parents=True)
    acs.write_state_zip(raw / "csv_pca.zip", state="CA", year=2018, n_rows=600, seed=0)
    acs.write_data_dictionary(raw / "PUMS_Data_Dictionary_2018.csv", year=2018)
    (root / "provo" / "raw").mkdir(parents=True)
    provo.write_norms(root / "provo" / "raw" / "Provo_Corpus-Predictability_Norms.csv", n_passages=2)
    names = sni.write_tasks(root / "sni" / "raw", n_tasks=3, instances_per_task=400)
    (root / "sni" / "raw" / TASK_LIST).write_text("".join(f"{n}\n" for n in names))
    for b in ("anli", "hellaswag", "piqa", "siqa"):
        mcqa.write_benchmark(root / "mcqa" / "raw" / b, benchmark=b, n_train=10, n_val=40)
    return root


def test_measured_tokens_follow_the_request_functions(generated_data: Path) -> None:
    from unsure.zoo.build import train_tokenizer, training_texts

    texts = training_texts(seed=0, n_sentences=1000)
    tok = train_tokenizer(ZooModel(architecture="llama", vocab_size=800, hidden_size=64, layers=1, heads=4), texts)
    enc = train_tokenizer(ZooModel(architecture="bert", vocab_size=800, hidden_size=64, layers=1, heads=4), texts)
    raw = load_config(REPO / "config" / "demo.yaml").model_dump(mode="json", exclude_none=True)
    raw["studies"]["riskscores"]["few_shot"] = 2
    cfg = parse_config(raw)
    got = scale.measure(cfg, generated_data, tok, enc, sample=30)
    floor = scale.measure(cfg, generated_data, tok, enc, sample=30, per_word=scale.TOKENS_PER_WORD)
    for task in cfg.studies.riskscores.tasks:  # shots; fewer features
        assert got[f"risk/mc/{task}"] > got[f"risk/plain/{task}"] > got[f"risk/evidence/{task}"] > 0
    ks = sorted({int(k.split("/")[1]) for k in got.tokens if k.startswith("sni/") and "train" not in k})
    assert ks == [0, 2, 4] and all(got[f"sni/{a}"] < got[f"sni/{b}"] for a, b in itertools.pairwise(ks))
    assert got["provo/sample"] > got["provo/tokens"] / 2 > 0  # the token level: a greedy pass, then the read
    assert got["provo/example"] >= floor["provo/example"] / 2
    for b in cfg.studies.decisionrisk.benchmarks:
        assert 0 < got[f"mcqa/pair/{b}"] <= cfg.studies.decisionrisk.finetune.max_length
        assert got[f"mcqa/verbal/{b}"] > got[f"mcqa/{b}"] / 2


EXACT = ("risk/", "sni/", "mcqa/", "provo/tokens", "provo/example")
"""The request sets whose counters a plan gives exactly (no replies or samples, which depend on the model)."""


def test_measured_requests_cost_what_the_engine_counts_running_them(
    generated_data: Path, tiny_models: dict[str, Path]
) -> None:
    from unsure.engine.hf import HFEngine

    cfg = load_config(REPO / "config" / "demo.yaml")
    engine = HFEngine(str(tiny_models["llama"]), token_budget=1 << 14)
    plan = scale.Planner(engine.tokenizer)
    scale.measure_with(plan, cfg, generated_data, None, sample=12, source="")
    method = {"ChoiceRequest": engine.choice_probs, "ContinuationRequest": engine.continuation_scores,
              "NumericRequest": engine.numeric, "TokenLogprobsRequest": engine.token_logprobs,
              "WordSamplingRequest": engine.sample_words, "ReplyRequest": engine.generate}  # fmt: skip
    kinds = set()
    for key, (requests, _, planned) in plan.asked.items():
        before = dataclasses.replace(engine.counters)
        for kind in dict.fromkeys(type(r).__name__ for r in requests):
            method[kind]([r for r in requests if type(r).__name__ == kind])
            kinds.add(kind)
        ran = [getattr(engine.counters, f) - getattr(before, f) for f in ("tokens", "forward_passes", "attended")]
        want = [planned.tokens, planned.forward_passes, planned.attended]
        if key.startswith(EXACT):
            assert ran == want, key
        else:  # replies at most their max_new_tokens; samples as the planner draws them, within a factor
            assert 0 < ran[0] <= want[0] * 1.5, key
    assert kinds == set(method)


def test_missing_data_names_the_file(tmp_path: Path) -> None:
    cfg = load_config(REPO / "config" / "demo.yaml")
    with pytest.raises(scale.EstimateError, match=r"PUMS_Data_Dictionary_2018\.csv: missing"):
        scale.measure(cfg, tmp_path, tokenizer=None)


# ----------------------------------------------------------------------------- against the real sources


def test_published_sizes_match_the_real_files(shared_data: Path) -> None:
    from unsure.decisionrisk.requests import MCQA_SIZES
    from unsure.labelbias.requests import SNI_TASK_INSTANCES
    from unsure.nextword.requests import PROVO_PASSAGES, PROVO_POSITIONS, PROVO_RESPONSE_TYPES

    info = pd.read_csv(shared_data / "sni" / "splits" / "classification_tasks" / "test_tasks_info.csv")
    assert tuple(sorted(info["# Instances"])) == SNI_TASK_INSTANCES
    cloze = pd.read_csv(shared_data / "provo" / "provo_human_cloze_long.csv")
    assert (cloze["text_id"].nunique(), len(cloze[["text_id", "word_num"]].drop_duplicates())) == (
        PROVO_PASSAGES,
        PROVO_POSITIONS,
    )
    assert len(cloze) == PROVO_RESPONSE_TYPES
    mcqa = shared_data / "mcqa"
    one_per_line = {  # validation labels, or items where only the items are here
        "piqa": mcqa / "piqa" / "valid-labels.lst",
        "siqa": mcqa / "socialiqa" / "dev-labels.lst",
        "anli": mcqa / "anli" / "anli_dev_HyKAS.jsonl",
        "hellaswag": mcqa / "hellaswag" / "hellaswag_val_labels_TEAM.lst",
    }
    for b, path in one_per_line.items():
        assert sum(bool(line.strip()) for line in path.read_text().splitlines()) == MCQA_SIZES[b][1], b


@pytest.mark.workflow
@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/demo.yaml"])
def test_the_real_dag_has_a_job_for_every_estimate_and_an_estimate_for_every_gpu_job(
    checkout: Path, configfile: str
) -> None:
    out, _ = scale.dry_run(Path(configfile), cwd=checkout)
    jobs = scale.parse_dag(out)
    cfg = load_config(checkout / configfile)
    cost = scale.costs(cfg, scale.model_work(cfg, lengths(cfg)), jobs)  # raises on any disagreement
    assert {c.work.rule for c in cost} >= {j.rule for j in jobs if j.gpus}
    assert (sum(c.gpu_hours for c in cost) > 0) == (configfile == "config/config.yaml")  # the demo asks for no GPU


# ----------------------------------------------------------------------------- MFU measured by bench/gpu.py


def gpu_record(path: Path) -> Path:
    """A record in bench/gpu.py's JSON layout (only the keys bench/scale.py reads, and a few more)."""
    record = {
        "device": "NVIDIA H200",
        "device_type": "cuda",
        "date": "2026-11-28T12:00:00+00:00",
        "peak_tflops": 784.0,
        "shapes": {"1b": {"parameters": 1.5e9, "workloads": {}}, "8b": {"parameters": 8.0e9, "workloads": {}}},
        "mfu": {
            "1b": {"risk_scores": 0.2, "label_scores": 0.04, "word_sampling": 0.015, "numeric": 0.1},
            "8b": {"risk_scores": 0.4, "label_scores": 0.25, "word_sampling": 0.1, "numeric": 0.35},
        },
    }
    path.write_text(json.dumps(record))
    return path


def test_mfu_per_request_kind_and_nearest_shape_from_the_gpu_record(tmp_path: Path) -> None:
    table = scale.Utilisation.read(gpu_record(tmp_path / "engine-gpu.json"))
    assert (table.device, table.peak_tflops) == ("NVIDIA H200", 784.0)
    assert table.of("risk_scores", 7.24e9) == 0.4 and table.of("risk_scores", 70e9) == 0.4  # nearest: 8b
    assert table.of("numeric", 1.2e9) == 0.1 and table.of("label_scores", 2.5e9) == 0.04  # 2.5B is nearer 1.5B
    assert table.of(None, 8e9) == scale.MFU and table.of("embeddings", 8e9) == scale.MFU
    demo = load_config(REPO / "config" / "demo.yaml")
    kinds = {w.rule: w.kind for w in scale.model_work(demo, lengths(demo))}  # each room names its rules' kinds
    assert kinds["nextword_sample"] == "word_sampling" and kinds["labelbias_lora"] == "label_scores"
    assert kinds["decisionrisk_encoder"] is None and kinds["nextword_finetune"] is None  # training, an encoder

    # the hand-made config: the 7.24B model's risk scores at 40%, numeric at 35%, instead of 50% for both
    cfg = parse_config(HAND)
    work = scale.model_work(cfg, lengths(cfg, mc=100, numeric=90, plain=80, evidence=50))
    jobs = scale.parse_dag(listing(hand_dag()))
    flat = {
        (c.work.rule, c.work.kind): c
        for c in scale.costs(cfg, work, jobs, mfu=0.5, peak_tflops=100, load_gb_per_s=1e9)
        if c.work.model == "m7"
    }
    measured = {
        (c.work.rule, c.work.kind): c
        for c in scale.costs(cfg, work, jobs, mfu=table, peak_tflops=100, load_gb_per_s=1e9)
        if c.work.model == "m7"
    }
    factors = {
        ("riskscores_infer", "risk_scores"): 0.5 / 0.4,
        ("riskscores_infer", "numeric"): 0.5 / 0.35,
        ("riskscores_importance", "risk_scores"): 0.5 / 0.4,
    }
    for key, factor in factors.items():
        assert measured[key].job_hours == pytest.approx(flat[key].job_hours * factor, rel=1e-6), key
    text = scale.report(cfg, "hand.yaml", jobs, list(measured.values()), lengths(cfg), gpu_counts=[8], mfu=table,
                        peak_tflops=100)  # fmt: skip
    assert "bench/gpu.py on NVIDIA H200, 2026-11-28, of its measured 784 TFLOP/s" in text
    assert "8b (8B): risk_scores 0.40, label_scores 0.25" in text and "0.50 for training and other kinds" in text


def test_mfu_source_is_said_and_falls_back_to_the_assumption_without_a_record(tmp_path: Path) -> None:
    mfu, said = scale.utilisation(None, "docs/engine-gpu.json", root=tmp_path)
    assert mfu == scale.MFU and "no docs/engine-gpu.json" in said and "0.50 assumed" in said
    gpu_record(tmp_path / "gpu.json")
    table, said = scale.utilisation(None, "gpu.json", root=tmp_path)
    assert isinstance(table, scale.Utilisation) and table.source == "gpu.json"
    assert (
        said
        == "MFU per request kind and model shape from gpu.json, measured on NVIDIA H200 (2026-11-28T12:00:00+00:00)"
    )
    assert scale.utilisation(0.3, "gpu.json", root=tmp_path) == (0.3, "MFU 0.30 for every request kind (--mfu)")
    (tmp_path / "bad.json").write_text('{"device": "x"}')
    with pytest.raises(scale.EstimateError, match=r"bad\.json: not a bench/gpu\.py record"):
        scale.utilisation(None, "bad.json", root=tmp_path)
