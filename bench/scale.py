"""What the paper-scale run costs: jobs, forward tokens, GPU-hours and wall time, computed.

    .venv/bin/python bench/scale.py [--configfile config/config.yaml] [--gpus 8] [--mfu-file docs/engine-gpu.json]
        [--mfu 0.5] [--peak-tflops 989]

So that a cluster request can be sized before the first job is sent. Each
input comes from where it is true:

* **Jobs** per rule and the GPUs each one asks for: the real DAG, from a
  Snakemake dry run (``-n --forceall``, run in the repository root; ``--dag``
  reads a saved dry-run listing instead).
* **Requests** per model: the configured sizes followed through each inference
  rule's own code (:func:`model_work` says, per rule, which engine requests the
  study's code sends and how many tokens each runs through the model). Data
  sizes the config does not pin are the published sizes of the datasets
  (named constants below, with their sources).
* **Tokens per request**: prompts built by the studies' own prompt builders
  from the raw data in ``resources/data`` (the demo's generated data, or the
  real downloads on a cluster checkout), counted with the zoo tokenizer
  (``resources/models/tiny-llama``, which learns the risk-score prompts' Census
  words and counts about what a real vocabulary does on them) or ``--tokenizer``,
  and never fewer than :data:`TOKENS_PER_WORD` per word; ``--tokens-per-word
  1.33`` gives the figure of a real vocabulary on plain English.

GPU time of a job = (2 x forward tokens + 6 x training tokens) x active
parameters / (MFU x peak FLOP/s), plus loading the weights; a job that spreads a
model over g GPUs (``accelerate``'s sequential ``device_map``) holds all g for
that time. The MFU of forward tokens is the one ``bench/gpu.py`` measured on a
GPU for the rule's request kind (:func:`request_kind`) at the measured model
shape nearest in parameters (``docs/engine-gpu.json``, or ``--mfu-file``);
training tokens, rules of a kind it does not time, and a checkout without that
file get :data:`MFU` (said in the output), and ``--mfu`` sets one for all.
Wall time on N GPUs is at least the GPU-hours over N and at least the longest
job. Loads no weights but the tokenizers; about 20 s on the
project's machine, most of it the dry run.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from unsure.config import ZOO_DIR, Config, ConfigError, Model, load_config
from unsure.engine import ContinuationRequest
from unsure.model_sizes import BYTES_PER_PARAM, MEMORY_OVERHEAD, gpus_needed, parameter_count, weights_gb

REPO = Path(__file__).resolve().parents[1]
STUDIES = ("riskscores", "nextword", "labelbias", "decisionrisk", "subgroups")

# --------------------------------------------------------------------------- assumptions

TOKENS_PER_WORD = 4 / 3
"""Floor on tokens per whitespace word (OpenAI's rule of thumb: a token is about 3/4 of an English word with a 50k
BPE; 32k-256k vocabularies are close to it). The zoo tokenizers are trained on the generated English and the
risk-score prompts: on the demo's generated sentences they give only ~1.0-1.2 tokens per word, on other real English
(the real Provo, SNI and benchmark files) more than a real tokenizer."""
CHAT_TOKENS = 32
"""Tokens a chat template adds around a user turn (Llama-3's header with a system prompt is about this; Gemma,
Mistral and ChatML add fewer)."""
MFU = 0.5
"""Model FLOP utilisation assumed where ``bench/gpu.py`` measured none (no ``--mfu-file``, training tokens, a rule
of a request kind it does not time). ``bench/engine.py`` measured 0.52-0.64 for multiple-choice risk scores and
0.58-0.70 for continuations on the project's 2-core CPU (43.7M-74M parameters); on one H200 the engine ran at 19%
(1B) and 46% (8B) for risk scores and below that for the other kinds (issue 28), so this is optimistic."""
MFU_FILE = "docs/engine-gpu.json"
ESTIMATE_FILE = "docs/scale-estimate.md"
"""Where the docs read the estimate for ``config/config.yaml`` (``--out``), so that no figure is pasted."""
"""``bench/gpu.py``'s record (relative to the repository root): MFU per request kind and model shape on one GPU."""
PEAK_TFLOPS = 989.0
"""H100 SXM, dense bf16."""
LOAD_GB_PER_S = 2.0
"""Reading safetensors from a cluster file system into GPU memory."""
TRAIN_FACTOR = 3
"""A training token costs forward + backward = 3 forward passes (an upper bound for LoRA and for fine-tuning the last
blocks only, whose backward skips most weight gradients; gradient checkpointing adds back about one forward)."""


# --------------------------------------------------------------------------- data sizes (not in the config)

ACS_POPULATION = {
    # folktables (Ding et al., NeurIPS 2021): task populations, ACS PUMS 2018 1-Year, all states
    "ACSIncome": 1_664_500,
    "ACSEmployment": 3_236_107,
    "ACSMobility": 620_937,
    "ACSTravelTime": 1_466_648,
    "ACSPublicCoverage": 1_138_289,
}
PROVO_PASSAGES = 55
PROVO_POSITIONS = 2_687
"""Provo Corpus predictability norms (Luke & Christianson 2018, OSF): 55 passages, 2,687 cloze positions."""
PROVO_RESPONSE_TYPES = 39_794
"""Distinct (position, response) pairs in the norms: the nextword fine-tuning examples (14.8 per position)."""
SNI_TASK_INSTANCES = (
    # Instances of the label-bias study's 279 SUPER-NATURALINSTRUCTIONS classification tasks
    # (schwartz-lab-NLP/label-bias, splits/classification_tasks/test_tasks_info.csv), sorted.
    *(400, 400, 433, 478, 496, 497, 498, 500, 500, 504, 592, 597, 629, 661, 683, 699, 709, 723, 732, 750, 773),
    *(793, 797, 814, 826, 874, 898, 926, 951, 975, 992, 993, 993, 994, 995, 995, 996, 996, 998, 998, 999, 999),
    *(999, 1000, 1000, 1000, 1000, 1000, 1000, 1029, 1036, 1065, 1079, 1100, 1135, 1160, 1200, 1219, 1337, 1341),
    *(1450, 1458, 1480, 1481, 1500, 1500, 1526, 1576, 1576, 1577, 1590, 1590, 1731, 1777, 1795, 1797, 1800, 1805),
    *(1818, 1825, 1879, 1883, 1883, 1917, 1924, 1948, 1964, 1969, 1970, 1985, 1995, 1996, 1998, 2000, 2053, 2076),
    *(2283, 2305, 2345, 2395, 2476, 2480, 2528, 2529, 2530, 2589, 2602, 2603, 2635, 2648, 2656, 2771, 2855, 2899),
    *(2925, 2946, 2948, 2997, 2997, 3000, 3000, 3009, 3022, 3079, 3154, 3158, 3169, 3174, 3229, 3354, 3429, 3482),
    *(3644, 3708, 3716, 3769, 3810, 3837, 3954, 3975, 3983, 3996, 3999, 4000, 4209, 4449, 4464, 4499, 4550, 4580),
    *(4795, 4837, 4875, 4899, 5000, 5016, 5035, 5060, 5193, 5199, 5200, 5299, 5318, 5376, 5476, 5527, 5565, 5680),
    *(5745, 5840, 5903, 5912, 5985, 5994, 5994, 5995, 5995, 5997, 6000, 6000, 6011, 6077, 6161, 6162, 6162, 6213),
    *(6356, 6369, 6370, 6384, 6385, 6392, 6395, 6401, 6430, 6448, 6478, 6486, 6490, 6490, 6491, 6491, 6491, 6492),
    *(6492, 6493, 6493, 6493, 6493, 6493, 6493, 6493, 6493, 6494, 6494, 6494, 6494, 6494, 6494, 6494, 6495, 6495),
    *(6495, 6496, 6497, 6497, 6497, 6498, 6498, 6498, 6498, 6498, 6499, 6499, 6499, 6499, 6499, 6499, 6499, 6499),
    *(6499,),
    *(6500,) * 38,
)
MCQA_SIZES = {
    # official (train, validation) instances and choices per instance: aNLI (ART, Bhagavatula et al. 2020),
    # HellaSwag (Zellers et al. 2019), PIQA (Bisk et al. 2020), Social IQa (Sap et al. 2019)
    "anli": (169_654, 1_532, 2),
    "hellaswag": (39_905, 10_042, 4),
    "piqa": (16_113, 1_838, 2),
    "siqa": (33_410, 1_954, 3),
}


class EstimateError(RuntimeError):
    """The estimate cannot be made; the message names the file, rule or model."""


# --------------------------------------------------------------------------- the DAG


@dataclass(frozen=True)
class Job:
    """One job of the dry run: its rule, wildcards and the GPUs it asks for."""

    rule: str
    wildcards: dict[str, str]
    gpus: int


def dry_run(configfile: Path, cwd: Path = REPO) -> tuple[str, float]:
    """The dry-run listing of every job of the config's DAG, and how long building it took (seconds)."""
    snakemake = Path(sys.executable).with_name("snakemake")
    exe = str(snakemake) if snakemake.exists() else shutil.which("snakemake")
    if exe is None:
        raise EstimateError("snakemake not found next to this Python or on PATH (use --dag FILE)")
    start = time.perf_counter()
    out = subprocess.run(
        [exe, "-n", "--forceall", "--nolock", "--configfile", str(configfile)],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise EstimateError(f"the dry run of {configfile} failed:\n{(out.stdout + out.stderr)[-3000:]}")
    return out.stdout + out.stderr, seconds


def job_counts(listing: str) -> dict[str, int]:
    """The "Job stats" table of a dry run: jobs per rule (as ``tests/workflow_helpers.jobs`` reads it)."""
    lines = listing.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("job ")), None)
    if start is None:
        raise EstimateError("the dry-run output has no job stats table")
    counts: dict[str, int] = {}
    for line in lines[start + 2 :]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) ([A-Za-z0-9_]+):$")


def parse_dag(listing: str) -> list[Job]:
    """Every job of a dry-run listing, checked against its job stats table."""
    jobs: list[Job] = []
    rule: str | None = None
    wildcards: dict[str, str] = {}
    gpus = 0
    for line in listing.splitlines():
        head = _RULE.match(line)
        if head:
            if rule is not None:
                jobs.append(Job(rule, wildcards, gpus))
            rule, wildcards, gpus = head.group(1), {}, 0
            continue
        text = line.strip()
        if rule is not None and text.startswith("wildcards: "):
            pairs = (item.partition("=") for item in text.removeprefix("wildcards: ").split(", "))
            wildcards = {key: value for key, _, value in pairs}
        elif rule is not None and text.startswith("resources: "):
            found = re.search(r"(?:^|, )gpu=(\d+)", text.removeprefix("resources: "))
            gpus = int(found.group(1)) if found else 0
    if rule is not None:
        jobs.append(Job(rule, wildcards, gpus))
    counts = job_counts(listing)
    parsed: dict[str, int] = defaultdict(int)
    for job in jobs:
        parsed[job.rule] += 1
    total = counts.pop("total", None)
    if dict(parsed) != counts or (total is not None and total != len(jobs)):
        raise EstimateError(f"the dry-run listing has {len(jobs)} jobs but its job stats say {total}: cannot parse it")
    return jobs


def study_of(rule: str) -> str:
    prefix = rule.split("_")[0]
    return prefix if prefix in STUDIES else "data, models"


# --------------------------------------------------------------------------- engine work per request


@dataclass(frozen=True)
class Measured:
    """Tokens the engine runs per unit of each request set (a row, a position, a context), counted by
    :func:`unsure.engine.plan_counters` on requests the studies' own request functions build from
    sampled rows: the engine's packing, shared prefixes and openings, batches and decoding steps."""

    tokens: dict[str, float]
    source: str = ""

    def __getitem__(self, key: str) -> float:
        return self.tokens[key]


Counter = Callable[..., np.ndarray]


def token_counter(tokenizer: Any, per_word: float | None = None) -> Counter:
    """``count(texts, special=True)``: tokens per text, at least :data:`TOKENS_PER_WORD` per word.

    With ``per_word``, exactly that many tokens per word instead (no tokenizer): the figure a real
    32k-256k vocabulary gives on real English, where the zoo tokenizers give about twice as many.
    """

    def count(texts: Iterable[str], special: bool = True) -> np.ndarray:
        texts = list(texts)
        words = np.array([len(t.split()) for t in texts], dtype=np.float64)
        if per_word is not None or not texts:
            return (per_word or 0.0) * words
        ids = tokenizer(texts, add_special_tokens=special)["input_ids"]
        return np.maximum(np.array([len(i) for i in ids], dtype=np.float64), TOKENS_PER_WORD * words)

    return count


@dataclass
class Planner:
    """Counts requests with the engine's planner, scaled so that their texts get :func:`token_counter`'s count."""

    tokenizer: Any
    per_word: float | None = None
    out: dict[str, float] = field(default_factory=dict)
    asked: dict[str, tuple[Sequence[Any], dict[str, Any], Any]] = field(default_factory=dict)
    """Per key the requests, the planner's settings and its counters (``tests/test_scale.py`` runs them)."""

    def __call__(self, key: str, requests: Sequence[Any], units: int, texts: Sequence[str], **kw: Any) -> None:
        from unsure.engine import plan_counters

        planned = plan_counters(requests, self.tokenizer, **kw)
        real = sum(len(i) for i in self.tokenizer(list(texts))["input_ids"])
        wanted = token_counter(self.tokenizer, self.per_word)(texts).sum()
        self.out[key] = planned.tokens * wanted / max(real, 1) / max(units, 1)
        self.asked[key] = (requests, kw, planned)


def _evenly(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """At most ``n`` rows spread evenly over the frame (the sample does not depend on file order tricks)."""
    if len(frame) <= n:
        return frame
    return frame.iloc[np.linspace(0, len(frame) - 1, n).astype(int)]


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise EstimateError(
            f"{path}: missing ({what}). Prompt lengths are measured on the raw data and the zoo tokenizers in "
            "resources/ (`make demo` builds them) or on what --data and --tokenizer name"
        )
    return path


def _risk(cfg: Config, data: Path, plan: Planner, sample: int) -> None:
    from unsure.riskscores.analysis import evidence_steps
    from unsure.riskscores.dictionary import read_dictionary
    from unsure.riskscores.prompts import Shot
    from unsure.riskscores.requests import choice_requests, numeric_requests
    from unsure.riskscores.tasks import FOLKTABLES, person_columns, read_person_zip, task_from_spec
    from unsure.riskscores.text import frame_text

    acs, study = cfg.data.acs, cfg.studies.riskscores
    raw = data / "acs" / "raw" / str(acs.year) / acs.horizon
    year_part = str(acs.year) if acs.horizon == "1-Year" else f"{acs.year - 4}-{acs.year}"
    dictionary = read_dictionary(_need(raw / f"PUMS_Data_Dictionary_{year_part}.csv", "ACS data dictionary"))
    zips = sorted(_need(raw, "ACS person files").glob("csv_p*.zip"), key=lambda p: p.stat().st_size)
    if not zips:
        raise EstimateError(f"{raw}: no ACS person zip (csv_p<state>.zip)")
    persons = read_person_zip(zips[0], person_columns(study.custom_tasks.values(), [study.subgroup_column]))
    both = study.both_orders
    asked = partial(choice_requests, year=acs.year, protocol="corrected")  # frame_text: the corrected words
    for name in study.tasks:
        spec = study.custom_tasks.get(name)
        task = task_from_spec(name, spec.model_dump() if spec else None, dictionary)
        rows = persons[task.population(persons)]
        if len(rows) < 10 and spec is not None and spec.based_on:  # a filter this state zip does not meet
            rows = persons[FOLKTABLES[spec.based_on].population(persons)]
        rows = _evenly(rows, sample)
        if rows.empty:
            raise EstimateError(f"{zips[0]}: no person record in task {name}'s population to build prompts from")
        texts = frame_text(rows, task.features, dictionary).tolist()
        shots = [Shot(texts[i % len(texts)], i % 2) for i in range(study.few_shot)]
        mc = asked(texts, task, both_orders=both, shots=shots)
        plan(f"risk/mc/{name}", mc, len(texts), [r.prompt for r in mc])
        numeric = numeric_requests(texts, task, year=acs.year, shots=shots, protocol="corrected")
        plan(f"risk/numeric/{name}", numeric, len(texts), [r.prompt for r in numeric])
        plain = asked(texts, task, both_orders=both)
        plan(f"risk/plain/{name}", plain, len(texts), [r.prompt for r in plain])
        few = rows.head(max(1, len(rows) // 4))  # a prompt per step and row: a quarter of the rows is plenty
        steps = [frame_text(few, f, dictionary).tolist() for f in evidence_steps(task.features)]
        evidence = [r for s in steps for r in asked(s, task, both_orders=both)]
        plan(f"risk/evidence/{name}", evidence, len(few) * len(steps), [r.prompt for r in evidence])


def _provo(cfg: Config, data: Path, plan: Planner, sample: int) -> None:
    from unsure.engine import TokenLogprobsRequest
    from unsure.nextword.data import read_norms
    from unsure.nextword.requests import list_requests, sampling_requests, support_requests

    study = cfg.studies.nextword
    norms = read_norms(_need(data / "provo" / "raw" / "Provo_Corpus-Predictability_Norms.csv", "Provo"))
    positions = _evenly(norms, sample)
    contexts, words = positions["context"].astype(str).tolist(), positions["corpus_word"].astype(str).tolist()
    ids, n = [str(i) for i in range(len(contexts))], len(contexts)
    # a sample draws its word and the token that ends it (the rest of the tree's rows are not shared here)
    drawn = 1 + math.ceil(np.mean([len(i) for i in plan.tokenizer([" " + w for w in words])["input_ids"]]))
    sampled = partial(sampling_requests, ids, contexts, seed=0, max_new_tokens=12)
    for key, k in (("", study.n_samples), ("_large", study.n_samples_large)):
        plan(f"provo/sample{key}", sampled(n=k), n, contexts, sample_tokens=drawn)
        plan(f"provo/single{key}", sampled(n=k, chat=str), n, contexts, sample_tokens=drawn)
    plan("provo/list", list_requests(contexts, n=study.n_samples, chat=str), n, contexts)
    nucleus = [r for p in study.nucleus for r in sampled(n=study.nucleus_samples, top_p=p)] + sampled(n=1, top_k=1)
    support = round(study.n_samples + len(study.nucleus) * study.nucleus_samples + 2 + PROVO_RESPONSE_TYPES
                    / PROVO_POSITIONS)  # fmt: skip  # at most every sample distinct, the corpus word, the responses
    scored = support_requests(contexts, [[w] * support for w in words])
    plan("provo/biased", [*nucleus, *scored], n, contexts, sample_tokens=drawn)
    pairs = [plan.tokenizer(c)["input_ids"] for c in contexts]
    plan("provo/tokens", [TokenLogprobsRequest(tuple(p), (0,)) for p in pairs], n, contexts)
    example = [ContinuationRequest(c, (" " + w,)) for c, w in zip(contexts, words, strict=True)]
    plan("provo/example", example, n, contexts)


def _sni(cfg: Config, data: Path, plan: Planner, sample: int) -> None:
    from unsure.labelbias.prompts import item_context
    from unsure.labelbias.requests import label_requests
    from unsure.labelbias.tasks import draw_instances, read_task, rejection, task_names

    lb = cfg.studies.labelbias
    root = _need(data / "sni" / "raw", "SNI tasks")
    ks = sorted({*lb.shots, *(lb.lora.shots if lb.lora.enabled else ())})
    contexts: dict[int, list[str]] = {k: [] for k in ks}
    labels: list[tuple[str, ...]] = []
    names = task_names(root)
    for name in [names[i] for i in sorted(set(np.linspace(0, len(names) - 1, min(len(names), 40)).astype(int)))]:
        task = read_task(_need(root / "tasks" / f"{name}.json", "an SNI task listed in tasks.txt"))
        needed = lb.min_eval_instances + lb.n_heldout + lb.n_pool
        if rejection(task, summary="", min_instances=needed, max_labels=lb.max_labels):
            continue
        drawn = draw_instances(task, n_eval=lb.n_eval, n_heldout=lb.n_heldout, n_pool=lb.n_pool, seed=lb.seed)
        pool = list(drawn.loc[drawn["split"] == "pool", ["input", "gold"]].itertuples(index=False, name=None))
        inputs = drawn.loc[drawn["split"] == "eval", "input"].head(max(1, sample // 10)).tolist()
        for k in ks:
            contexts[k] += [item_context(task.definition, pool, x, min(k, len(pool)), 0) for x in inputs]
        labels += [tuple(task.labels)] * len(inputs)
    if not labels:
        raise EstimateError(f"{root}: no task passes the label-bias filter with the config's sizes")
    for k, mine in contexts.items():  # the scorer's one pass scores both scorings: the EOS after each label
        plan(f"sni/{k}", label_requests(mine, labels, eos=True), len(mine), mine)
        plan(f"sni/train/{k}", label_requests(mine, [t[:1] for t in labels], eos=True), len(mine), mine)


def _mcqa(cfg: Config, data: Path, plan: Planner, encoder: Any, sample: int) -> None:
    from unsure.decisionrisk.data import load_benchmark
    from unsure.decisionrisk.requests import likelihood_requests, verbal_requests

    dr = cfg.studies.decisionrisk
    for b in dr.benchmarks:
        frame = _evenly(load_benchmark(_need(data / "mcqa" / "raw" / b, f"{b} files"), b, "val"), sample)
        prompts, choices = frame["prompt"].tolist(), [list(c) for c in frame["choices"]]
        texts = [" ".join([p, *c]) for p, c in zip(prompts, choices, strict=True)]
        plan(f"mcqa/{b}", likelihood_requests(prompts, choices), len(prompts), texts)
        verbal = verbal_requests(prompts, choices, chat=str, max_new_tokens=dr.verbal_max_new_tokens)
        plan(f"mcqa/verbal/{b}", verbal, len(prompts), [r.prompt for r in verbal])
        plan.out[f"mcqa/text/{b}"] = float(token_counter(plan.tokenizer, plan.per_word)(texts).mean())
        if encoder is not None:
            first = [p for p, cs in zip(prompts, choices, strict=True) for _ in cs]
            second = [c for cs in choices for c in cs]
            enc = encoder(first, second, truncation="longest_first", max_length=dr.finetune.max_length)
            per_row = np.array([len(i) for i in enc["input_ids"]]).reshape(len(prompts), -1).max(axis=1)
            plan.out[f"mcqa/pair/{b}"] = float(np.mean([per_row[i : i + 16].max() for i in range(0, len(per_row), 16)]))


def measure(
    cfg: Config,
    data: Path,
    tokenizer: Any,
    encoder_tokenizer: Any = None,
    *,
    sample: int = 200,
    per_word: float | None = None,
    source: str = "",
) -> Measured:
    """Engine tokens per unit of every configured study's requests, built from the raw data under ``data``."""
    return measure_with(Planner(tokenizer, per_word), cfg, data, encoder_tokenizer, sample=sample, source=source)


def measure_with(plan: Planner, cfg: Config, data: Path, encoder: Any, *, sample: int, source: str) -> Measured:
    """:func:`measure` into ``plan``, which keeps the requests it counted."""
    if cfg.studies.riskscores.models:
        _risk(cfg, data, plan, sample)
    if cfg.studies.nextword.models:
        _provo(cfg, data, plan, sample)
    if cfg.studies.labelbias.models:
        _sni(cfg, data, plan, sample)
    if cfg.studies.decisionrisk.models or cfg.studies.decisionrisk.encoder:
        _mcqa(cfg, data, plan, encoder, sample)
    return Measured(plan.out, source or str(data))


# --------------------------------------------------------------------------- requests per model


@dataclass(frozen=True)
class Work:
    """What the jobs of one rule for one model (and ``match``'s wildcard values) run through the model, in total.

    ``tokens`` go forward only; ``train_tokens`` forward and backward; ``loads``
    counts ``from_pretrained`` calls; API models count ``requests`` instead.
    """

    study: str
    rule: str
    model: str
    match: dict[str, str]
    tokens: float = 0.0
    train_tokens: float = 0.0
    loads: int = 0
    api: bool = False
    requests: float = 0.0
    kind: str | None = None
    """The request kind its tokens run as, where its rule runs more than one (else :data:`RULE_KINDS`)."""


def task_features(cfg: Config, task: str) -> tuple[str, ...]:
    """A riskscores task's features, without reading the data dictionary."""
    from unsure.riskscores.tasks import FOLKTABLES

    spec = cfg.studies.riskscores.custom_tasks.get(task)
    if spec is None:
        return tuple(FOLKTABLES[task].features)
    return tuple(spec.features or FOLKTABLES[str(spec.based_on)].features)


def _work(
    study: str, rule: str, model: str, match: dict[str, str], api: bool, tokens: float, requests: float, loads: int
) -> Work:
    if api:
        return Work(study, rule, model, match, api=True, requests=requests)
    return Work(study, rule, model, match, tokens=tokens, loads=loads)


def _riskscores(cfg: Config, M: Measured) -> list[Work]:
    from unsure.riskscores.analysis import evidence_steps

    study, out = cfg.studies.riskscores, []
    orders = 2 if study.both_orders else 1
    for m in study.models:
        entry = cfg.models[m]
        api, chat = entry.backend == "openai", CHAT_TOKENS if entry.instruct else 0
        first = True  # a job scores every task and prompting of its model and shard: one load per job
        for t in study.tasks:
            rows = min(study.n_eval, ACS_POPULATION.get(t, study.n_eval)) + study.threshold_rows
            for p in study.prompting:
                if p == "multiple_choice":
                    tokens, requests = rows * (M[f"risk/mc/{t}"] + chat), rows * orders
                else:  # chat APIs: one free-form reply
                    tokens, requests = (
                        rows * (M[f"risk/numeric/{t}"] + chat),
                        rows * (1 if entry.instruct else 2),
                    )
                loads, first = (study.shards if first else 0), False
                work = _work("riskscores", "riskscores_infer", m, {"rs_model": m}, api, tokens, requests, loads)
                out.append(replace(work, kind="numeric" if p == "numeric" else "risk_scores"))
            match = {"rs_model": m, "rs_task": t}
            if m in study.analysis_models("importance") and t in study.analysis_tasks("importance"):
                rows = min(study.importance.rows, study.n_eval) * (1 + len(task_features(cfg, t)))  # each permuted
                tokens = rows * (M[f"risk/plain/{t}"] + chat)
                out.append(_work("riskscores", "riskscores_importance", m, match, api, tokens, rows * orders, 1))
            if m in study.analysis_models("evidence") and t in study.analysis_tasks("evidence"):
                rows = min(study.evidence.rows, study.n_eval) * len(evidence_steps(task_features(cfg, t)))
                tokens = rows * (M[f"risk/evidence/{t}"] + chat)
                out.append(_work("riskscores", "riskscores_evidence", m, match, api, tokens, rows * orders, 1))
    return out


def _nextword(cfg: Config, M: Measured) -> list[Work]:
    study, out = cfg.studies.nextword, []
    positions = PROVO_POSITIONS * (len(study.passages) / PROVO_PASSAGES if study.passages else 1)
    for m in study.models:
        entry = cfg.models[m]
        api, large = entry.backend == "openai", "_large" if m in study.large_models else ""
        n = study.n_samples_large if large else study.n_samples
        calls = math.ceil(n / 128)  # the API's n is at most 128 per request
        modes = list(study.chat_modes) if entry.instruct else [f"t{t:g}" for t in study.temperatures]
        for mode in modes:
            if mode == "single":
                tokens, requests = positions * (M[f"provo/single{large}"] + CHAT_TOKENS), positions * calls
            elif mode == "list":
                tokens, requests = positions * (M["provo/list"] + CHAT_TOKENS), positions
            else:
                tokens, requests = positions * M[f"provo/sample{large}"], positions * calls
            match = {"model": m, "mode": mode}
            out.append(_work("nextword", "nextword_sample", m, match, api, tokens, requests, study.shards))
        if m in study.biased_models:
            tokens = positions * M["provo/biased"]
            out.append(_work("nextword", "nextword_biased", m, {"model": m}, api, tokens, 0, study.shards))
        if m in study.token_models:
            out.append(_work("nextword", "nextword_tokens", m, {"model": m}, api, positions * M["provo/tokens"], 0, 1))
    ft = study.finetune
    if ft.model is not None:
        share = (ft.passages[1] - ft.passages[0] + 1) / PROVO_PASSAGES
        examples, held_positions = PROVO_RESPONSE_TYPES * share, PROVO_POSITIONS * share / ft.folds
        for fold in range(ft.folds):
            train, held = examples * (ft.folds - 1) / ft.folds, examples / ft.folds
            per_example, match = M["provo/example"], {"fold": str(fold)}
            out.append(
                Work("nextword", "nextword_finetune", ft.model, match, loads=1,
                     tokens=(train + (ft.epochs + 1) * held) * per_example,  # the loss curves, no gradient
                     train_tokens=ft.epochs * train * per_example)
            )  # fmt: skip
            sample = M["provo/sample_large" if ft.n_samples == study.n_samples_large else "provo/sample"]
            tokens = 2 * held_positions * sample  # before and after
            out.append(Work("nextword", "nextword_finetune_sample", ft.model, match, tokens=tokens, loads=2))
    return out


def _labelbias(cfg: Config, M: Measured) -> list[Work]:
    from unsure.labelbias.prompts import variants

    study, out = cfg.studies.labelbias, []
    held, pool = study.n_heldout, study.n_pool
    kept = [n for n in SNI_TASK_INSTANCES if n >= study.min_eval_instances + held + pool]
    evals = [min(study.n_eval, n - held - pool) for n in kept]
    chat = CHAT_TOKENS if study.chat_template else 0

    def request(k: int) -> float:  # a context and its labels
        return M[f"sni/{k}"] + chat

    pairs = variants(study.shots, study.demonstration_sets)
    per_context = sum(evals) + len(kept) * (held + len(study.content_free_inputs) + study.domain_inputs)
    looc = len(kept) * sum(k * request(k) for k, _ in pairs)  # each demonstration left out once
    lora = study.lora
    lora_models = (list(lora.models) or list(study.models)) if lora.enabled else []
    for m in study.models:
        api = cfg.models[m].backend == "openai"
        tokens = per_context * sum(request(k) for k, _ in pairs) + looc
        requests = per_context * len(pairs) + len(kept) * sum(k for k, _ in pairs)
        out.append(_work("labelbias", "labelbias_infer", m, {"lb_model": m}, api, tokens, requests, study.shards))
        # the other protocol's DC and content-free contexts, rescored alone (and the few prompts the
        # token limit cuts, left out here); every prompt is also tokenised, on the CPU
        flipped = len(kept) * (study.domain_inputs + len(study.content_free_inputs))
        tokens, requests = flipped * sum(request(k) for k, _ in pairs), flipped * len(pairs)
        out.append(_work("labelbias", "labelbias_differences", m, {"lb_model": m}, api, tokens, requests, 1))
        if m not in lora_models:
            continue
        runs = [(k, s) for k in lora.shots for s in range(min(study.sets_of(k), lora.demonstration_sets))]

        def tuned(k: int) -> tuple[float, float]:  # scoring with the merged adapter; its training examples
            train = len(kept) * lora.epochs * lora.n_train * (M[f"sni/train/{k}"] + chat)
            return (sum(evals) + len(kept) * held) * request(k), train

        for i, (k, _) in enumerate(runs):  # a job fine-tunes its tasks under every (k, set): one base load
            tokens, train = tuned(k)
            loads = (lora.shards if i == 0 else 0) + len(kept)  # base + adapter per task and run
            match = {"lb_model": m}
            out.append(Work("labelbias", "labelbias_lora", m, match, tokens=tokens, train_tokens=train, loads=loads))
        # the LoRA differences flipped alone (unsure.labelbias.finetune.lora_flip_plan): every task fine-tuned
        # again and scored, the targets at the first run, the example selection at the first run of a set >= 1
        again = [k for k, _ in runs[:1]] + [k for k, s in runs if s >= 1][:1]
        if again:
            tokens, train = (sum(x) for x in zip(*(tuned(k) for k in again), strict=True))
            loads = sum(1 + len(kept) for _ in again)  # the base, then base + adapter per task, per flip
            out.append(Work("labelbias", "labelbias_lora_differences", m, {"lb_model": m}, tokens=tokens,
                            train_tokens=train, loads=loads))  # fmt: skip
    return out


def _decisionrisk(cfg: Config, M: Measured) -> list[Work]:
    study, out = cfg.studies.decisionrisk, []
    benchmarks = list(study.benchmarks) if study.encoder else []
    copies = 1 + len(study.injections)
    val = {b: min(study.n_val, MCQA_SIZES[b][1]) * copies for b in benchmarks}
    for m in study.models:
        entry = cfg.models[m]
        tokens = requests = 0.0
        for b in benchmarks:
            if entry.backend == "hf":
                tokens += val[b] * M[f"mcqa/{b}"]
            elif not entry.instruct:
                requests += val[b]  # completions with echo; chat APIs give no log-likelihoods
            if entry.instruct:  # a confidence per choice
                tokens += val[b] * (M[f"mcqa/verbal/{b}"] + CHAT_TOKENS)
                requests += val[b]
        api = entry.backend == "openai"
        match = {"model": m}
        out.append(_work("decisionrisk", "decisionrisk_generative", m, match, api, tokens, requests, study.shards))
    if study.encoder:
        for b in benchmarks:
            train, _, k = MCQA_SIZES[b]
            train, pair = min(study.n_train, train), M[f"mcqa/pair/{b}"]
            scored = (train + min(study.n_val, MCQA_SIZES[b][1])) * copies  # both splits, injected copies too
            train_tokens = study.finetune.epochs * train * k * pair
            match = {"benchmark": b}
            out.append(
                Work("decisionrisk", "decisionrisk_encoder", study.encoder, match, scored * k * pair, train_tokens, 2)
            )
        tokens = sum(  # every distinct prompt and choice, embedded once
            (min(study.n_train, MCQA_SIZES[b][0]) + min(study.n_val, MCQA_SIZES[b][1])) * M[f"mcqa/text/{b}"]
            for b in benchmarks
        )
        out.append(Work("decisionrisk", "decisionrisk_similarity", study.embedder, {}, tokens=tokens, loads=1))
    return out


def model_work(cfg: Config, measured: Measured) -> list[Work]:
    """Every inference and training rule's work, per model (and task, mode, k ...: whatever its jobs share)."""
    return [
        *_riskscores(cfg, measured),
        *_nextword(cfg, measured),
        *_labelbias(cfg, measured),
        *_decisionrisk(cfg, measured),
    ]


# --------------------------------------------------------------------------- costs


def parameters(cfg: Config, name: str) -> tuple[float, float]:
    """(total, active) parameters of a model by config name or by id (a hub id or zoo path: the embedder).

    Counted by :func:`unsure.model_sizes.parameter_count`, as the config's GPU check counts them.
    """
    entry = cfg.models.get(name) or Model(id=name, gpus=0)
    counted: tuple[float, float] | None = parameter_count(entry, cfg.zoo.models)
    if counted is None:
        raise EstimateError(
            f"no parameter count for model {name!r} (id {entry.id!r}): give its entry params: <billions> or add "
            "it to PARAMS in lib/unsure/model_sizes.py"
        )
    return counted


@dataclass(frozen=True)
class Cost:
    """One :class:`Work` on its DAG jobs: how many, GPUs each, and the hours one of them runs."""

    work: Work
    jobs: int
    gpus: int
    job_hours: float
    flops: float
    on: frozenset[str] = frozenset()
    """Its jobs (rule and wildcards): a job that runs several work items runs for the sum of their hours."""

    @property
    def gpu_hours(self) -> float:
        return self.jobs * self.gpus * self.job_hours


RULE_KINDS = {
    "riskscores_importance": "risk_scores",
    "riskscores_evidence": "risk_scores",
    "nextword_sample": "word_sampling",
    "nextword_biased": "word_sampling",
    "nextword_finetune_sample": "word_sampling",
    "nextword_tokens": "label_scores",
    "labelbias_infer": "label_scores",
    "labelbias_differences": "label_scores",
    "labelbias_lora": "label_scores",
    "labelbias_lora_differences": "label_scores",
    "decisionrisk_generative": "label_scores",
}
"""The request kind (``bench/gpu.py``'s names) whose MFU a rule's forward tokens run at; ``riskscores_infer``'s
work items name theirs (``risk_scores`` or ``numeric`` by prompting). Rules not named (fine-tuning, the encoders)
get :data:`MFU`."""


def request_kind(work: Work) -> str | None:
    """The request kind of a work item's forward tokens, or ``None`` where ``bench/gpu.py`` times none like it."""
    return work.kind or RULE_KINDS.get(work.rule)


@dataclass(frozen=True)
class Utilisation:
    """MFU per request kind and model shape as ``bench/gpu.py`` measured it, and :data:`MFU` where it did not.

    A model gets the figures of the measured shape nearest to it in (log) parameters.
    """

    mfu: dict[str, dict[str, float]]
    """Per shape (``1b``, ``8b``, ...), per request kind."""
    parameters: dict[str, float]
    """Per shape, its parameter count."""
    source: str
    device: str
    date: str
    peak_tflops: float
    """The matmul peak the MFU is a fraction of, measured on that device."""
    fallback: float = MFU

    @classmethod
    def read(cls, path: Path, *, source: str | None = None, fallback: float = MFU) -> Utilisation:
        """``bench/gpu.py``'s JSON record; fails naming the file when it is not one."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            mfu = {shape: {k: float(v) for k, v in kinds.items()} for shape, kinds in data["mfu"].items()}
            parameters = {shape: float(data["shapes"][shape]["parameters"]) for shape in mfu}
            device, date, peak = str(data["device"]), str(data["date"]), float(data["peak_tflops"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise EstimateError(f"{path}: not a bench/gpu.py record ({type(err).__name__}: {err})") from err
        if not mfu or any(v <= 0 for kinds in mfu.values() for v in kinds.values()):
            raise EstimateError(f"{path}: no positive MFU in its 'mfu' table")
        return cls(mfu, parameters, source or str(path), device, date, peak, fallback)

    def of(self, kind: str | None, parameters: float) -> float:
        """The MFU of forward tokens of ``kind`` on a model of ``parameters`` (active) parameters."""
        shapes = [s for s, kinds in self.mfu.items() if kind in kinds]
        if not shapes:
            return self.fallback
        size = max(parameters, 1.0)
        shape = min(shapes, key=lambda s: abs(math.log(size / self.parameters[s])))
        return self.mfu[shape][str(kind)]

    def describe(self) -> str:
        shapes = "; ".join(
            f"{s} ({self.parameters[s] / 1e9:.3g}B): " + ", ".join(f"{k} {v:.2f}" for k, v in kinds.items())
            for s, kinds in self.mfu.items()
        )
        return (
            f"MFU per request kind from `{self.source}` (bench/gpu.py on {self.device}, {self.date[:10]}, of its "
            f"measured {self.peak_tflops:.4g} TFLOP/s), the shape nearest in parameters: {shapes}; "
            f"{self.fallback:.2f} for training and other kinds"
        )


def utilisation(mfu: float | None, mfu_file: str, root: Path = REPO) -> tuple[float | Utilisation, str]:
    """What MFU the estimate uses, and a line saying so: ``--mfu`` when given, else ``bench/gpu.py``'s record in
    ``mfu_file`` (relative to ``root``), else :data:`MFU`."""
    if mfu is not None:
        return mfu, f"MFU {mfu:.2f} for every request kind (--mfu)"
    path = Path(mfu_file)
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        return MFU, (
            f"no {mfu_file} (bench/gpu.py writes it on a GPU): MFU {MFU:.2f} assumed for every request kind, "
            "not measured"
        )
    table = Utilisation.read(path, source=mfu_file)
    return table, f"MFU per request kind and model shape from {mfu_file}, measured on {table.device} ({table.date})"


def job_label(job: Job) -> str:
    """A job as the report names it: its rule and wildcards."""
    return f"`{job.rule}` ({', '.join(f'{k}={v}' for k, v in job.wildcards.items())})"


def costs(
    cfg: Config,
    work: Sequence[Work],
    jobs: Sequence[Job],
    *,
    mfu: float | Utilisation = MFU,
    peak_tflops: float = PEAK_TFLOPS,
    load_gb_per_s: float = LOAD_GB_PER_S,
) -> list[Cost]:
    """Each work item spread evenly over its DAG jobs; fails when the estimate and the DAG disagree."""
    by_rule: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_rule[job.rule].append(job)
    out, covered = [], set()
    for w in work:
        mine = [j for j in by_rule[w.rule] if all(j.wildcards.get(k) == v for k, v in w.match.items())]
        if not mine:
            raise EstimateError(
                f"the DAG has no {w.rule} job for {w.model} {w.match}: bench/scale.py's model_work no longer "
                "matches workflow/rules"
            )
        covered |= {id(j) for j in mine}
        total, active = (0.0, 0.0) if w.api else parameters(cfg, w.model)
        forward, train = 2 * active * w.tokens, 2 * TRAIN_FACTOR * active * w.train_tokens
        if isinstance(mfu, Utilisation):
            forward_mfu, train_mfu = mfu.of(request_kind(w), active), mfu.fallback
        else:
            forward_mfu = train_mfu = mfu
        seconds = (forward / forward_mfu + train / train_mfu) / (peak_tflops * 1e12)
        seconds += w.loads * 2 * total / (load_gb_per_s * 1e9)
        flops = forward + train
        on = frozenset(job_label(j) for j in mine)
        out.append(Cost(w, len(mine), max(j.gpus for j in mine), seconds / len(mine) / 3600, flops, on))
    stray = [j for j in jobs if j.gpus > 0 and id(j) not in covered]
    if stray:
        raise EstimateError(
            f"{len(stray)} GPU jobs have no estimate, e.g. {stray[0].rule} {stray[0].wildcards}: add the rule to "
            "model_work in bench/scale.py"
        )
    return out


# --------------------------------------------------------------------------- report


def _n(x: float) -> str:
    """A count in words a reader takes in at a glance: 1.2M, 34B."""
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}"


def _h(hours: float) -> str:
    return f"{hours:,.0f}" if hours >= 10 else f"{hours:.2g}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _tokens(costs: Iterable[Cost]) -> float:
    return sum(c.work.tokens + c.work.train_tokens for c in costs if not c.work.api)


def report(
    cfg: Config,
    configfile: str,
    jobs: Sequence[Job],
    cost: Sequence[Cost],
    measured: Measured,
    *,
    gpu_counts: Sequence[int],
    mfu: float | Utilisation,
    peak_tflops: float,
    dag_seconds: float | None = None,
    top: int = 10,
) -> str:
    """The Markdown tables: per study, per model, API models, CPU model work, wall time, memory check."""
    gpu = [c for c in cost if c.gpus > 0 and not c.work.api]
    gpu_hours = sum(c.gpu_hours for c in gpu)
    gpu_memory_gb = cfg.gpu_memory_gb
    built = f", dry run {dag_seconds:.1f} s" if dag_seconds is not None else ""
    used = mfu.describe() if isinstance(mfu, Utilisation) else f"MFU {mfu:.2f}"
    out = [
        f"Estimate for `{configfile}`: {len(jobs):,} jobs in the DAG{built}. {used}, {peak_tflops:g} TFLOP/s "
        f"and {gpu_memory_gb:g} GB per GPU; prompt lengths from {measured.source}.",
        "",
    ]
    rows: list[tuple[str, ...]] = []
    for study in [*STUDIES, "data, models"]:
        mine = [j for j in jobs if study_of(j.rule) == study]
        hours = sum(c.gpu_hours for c in gpu if c.work.study == study)
        tokens = _tokens(c for c in cost if c.work.study == study)
        rows.append((study, f"{len(mine):,}", f"{sum(j.gpus > 0 for j in mine):,}", _n(tokens), _h(hours)))
    n_gpu_jobs = sum(j.gpus > 0 for j in jobs)
    rows.append(("**total**", f"{len(jobs):,}", f"{n_gpu_jobs:,}", _n(_tokens(cost)), _h(gpu_hours)))
    out += ["**Per study**", "", _table(("study", "jobs", "GPU jobs", "model tokens", "GPU-hours"), rows), ""]

    by_model: dict[str, list[Cost]] = defaultdict(list)
    for c in gpu:
        by_model[c.work.model].append(c)
    rows = []
    ranked = sorted(by_model.items(), key=lambda kv: -sum(c.gpu_hours for c in kv[1]))
    for m, cs in ranked[:top]:
        total, active = parameters(cfg, m)
        size = f"{total / 1e9:.3g}B" + (f" ({active / 1e9:.3g}B active)" if active != total else "")
        hours = sum(c.gpu_hours for c in cs)
        share = f"{hours / gpu_hours:.0%}" if gpu_hours else "-"
        rows.append((m, size, str(max(c.gpus for c in cs)), _n(_tokens(cs)), _h(hours), share))
    rest = [c for _, cs in ranked[top:] for c in cs]
    if rest:
        hours = sum(c.gpu_hours for c in rest)
        share = f"{hours / gpu_hours:.0%}" if gpu_hours else "-"
        rows.append((f"{len(ranked) - top} more models", "", "", _n(_tokens(rest)), _h(hours), share))
    header = ("model", "parameters", "GPUs per job", "tokens", "GPU-hours", "share")
    out += ["**Top models by GPU-hours**", "", _table(header, rows), ""]

    api: dict[tuple[str, str], float] = defaultdict(float)
    for c in cost:
        if c.work.api:
            api[(c.work.model, c.work.study)] += c.work.requests
    if api:
        rows = [(m, s, _n(r)) for (m, s), r in sorted(api.items())]
        out += ["**API models** (no GPU; requests sent)", "", _table(("model", "study", "requests"), rows), ""]

    cpu = [c for c in cost if c.gpus == 0 and not c.work.api and c.flops]
    if cpu:
        rows = [(c.work.rule, c.work.model, _n(_tokens([c])), f"{c.flops / 1e12:,.0f}") for c in cpu]
        out += ["**Model work in jobs that ask for no GPU** (runs on CPU)", ""]
        out += [_table(("rule", "model", "tokens", "TFLOP"), rows), ""]

    per_job: dict[str, float] = defaultdict(float)
    job_gpus: dict[str, int] = defaultdict(int)
    for c in gpu:
        for label in c.on:
            per_job[label] += c.job_hours
            job_gpus[label] = max(job_gpus[label], c.gpus)
    longest = max(sorted(per_job), key=per_job.__getitem__, default=None)
    job_hours = per_job[longest] if longest else 0.0
    rows = []
    for n in gpu_counts:
        fits = all(c.gpus <= n for c in gpu)
        bound = _h(max(gpu_hours / n, job_hours)) if fits else "a job needs more GPUs"
        rows.append((str(n), _h(gpu_hours / n), _h(job_hours), bound))
    out += ["**Wall time** (hours; at least the larger of the two bounds)", ""]
    out += [_table(("GPUs", "GPU-hours / GPUs", "longest job", "wall time at least"), rows)]
    if longest:
        out += ["", f"Longest job: {longest}, {job_gpus[longest]} GPUs, {_h(job_hours)} h."]

    checks = []
    for name in sorted({c.work.model for c in gpu} & set(cfg.models)):
        total, _ = parameters(cfg, name)
        dtype, have = cfg.models[name].dtype, cfg.models[name].gpus
        need = gpus_needed(total, dtype, gpu_memory_gb)  # the config check's rule: fewer cannot load
        if need != have:
            gb, size = weights_gb(total, dtype), BYTES_PER_PARAM[dtype]
            checks.append(
                f"- `{name}`: {gb:.0f} GB ({size} bytes per parameter + {MEMORY_OVERHEAD - 1:.0%}) needs {need} x "
                f"{gpu_memory_gb:g} GB; config `gpus: {have}`"
            )
    out += ["", "**Memory check** (GPUs per job: estimate vs the config's `gpus`)", ""]
    out += checks or ["- every model's `gpus` matches the estimate"]
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--gpus", type=int, default=8, help="a cluster of this many GPUs (8, 32 and 64 are shown too)")
    parser.add_argument("--mfu", type=float, help=f"one MFU for every request kind (default: --mfu-file's, else {MFU})")
    parser.add_argument(
        "--mfu-file", default=MFU_FILE, help="bench/gpu.py's JSON record: MFU per request kind and model shape"
    )
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--load-gb-per-s", type=float, default=LOAD_GB_PER_S)
    parser.add_argument("--data", default="resources/data", help="raw data the prompts are built from")
    parser.add_argument("--tokenizer", default=f"{ZOO_DIR}/tiny-llama")
    parser.add_argument("--encoder-tokenizer", default=f"{ZOO_DIR}/tiny-bert")
    parser.add_argument("--sample", type=int, default=200, help="prompts measured per task or benchmark")
    parser.add_argument("--top", type=int, default=10, help="models listed by name in the per-model table")
    parser.add_argument(
        "--tokens-per-word", type=float, help="count this many tokens per word instead of the zoo tokenizer (e.g. 1.33)"
    )
    parser.add_argument("--dag", help="a saved `snakemake -n --forceall` listing instead of running the dry run")
    parser.add_argument("--out", help=f"also write the report to this file (the docs include {ESTIMATE_FILE})")
    args = parser.parse_args(argv)
    try:
        configfile = Path(args.configfile)
        cfg = load_config(configfile if configfile.is_absolute() else REPO / configfile)
        if args.dag:
            listing, seconds = Path(args.dag).read_text(encoding="utf-8"), None
        else:
            listing, seconds = dry_run(configfile)
        jobs = parse_dag(listing)
        mfu, said = utilisation(args.mfu, args.mfu_file)
        print(f"bench/scale.py: {said}", file=sys.stderr)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(_need(REPO / args.tokenizer, "zoo tokenizer")))
        encoder = AutoTokenizer.from_pretrained(str(_need(REPO / args.encoder_tokenizer, "zoo encoder tokenizer")))
        data = REPO / args.data
        demo = any((data / "sni" / "raw" / "tasks").glob("task*_unsure_*.json"))  # the SNI generator's task names
        zoo = args.tokenizer == parser.get_default("tokenizer")
        named = "the zoo tokenizer" if zoo else f"the tokenizer in `{args.tokenizer}`"
        counted = f"{args.tokens_per_word:g} tokens per word" if args.tokens_per_word else named
        source = f"`{args.data}` ({'the demo' if demo else 'downloaded'} data, {counted})"
        measured = measure(
            cfg, data, tokenizer, encoder, sample=args.sample, per_word=args.tokens_per_word, source=source
        )
        work = model_work(cfg, measured)
        cost = costs(cfg, work, jobs, mfu=mfu, peak_tflops=args.peak_tflops, load_gb_per_s=args.load_gb_per_s)
    except (ConfigError, EstimateError) as err:
        print(f"bench/scale.py: {err}", file=sys.stderr)
        return 2
    counts = sorted({args.gpus, 8, 32, 64})
    text = report(
        cfg,
        args.configfile,
        jobs,
        cost,
        measured,
        gpu_counts=counts,
        dag_seconds=seconds,
        top=args.top,
        mfu=mfu,
        peak_tflops=args.peak_tflops,
    )
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
