"""What the paper-scale run costs: jobs, forward tokens, GPU-hours and wall time, computed.

    .venv/bin/python bench/scale.py [--configfile config/config.yaml] [--gpus 8] [--mfu-file docs/engine-gpu.json]
        [--mfu 0.5] [--peak-tflops 989] [--tokenizer DIR | --tokens-per-word 1.33] [--dag FILE] [--out FILE]

So that a cluster request can be sized before the first job is sent. Each
input comes from where it is true:

* **Jobs** per rule and the GPUs each one asks for: the real DAG, from a
  Snakemake dry run (``-n --forceall``, run in the repository root; ``--dag``
  reads a saved dry-run listing instead).
* **Requests** per rule and model: each room says it next to the requests it
  builds (``rule_work`` in ``unsure.<study>.requests``: the configured sizes,
  and the datasets' published sizes the config does not pin, followed through
  the rule's code; :mod:`unsure.workload`).
* **Tokens per request**: the rooms' ``request_sets``, built by their own request
  functions from sampled rows of the raw data in ``resources/data`` (the demo's
  generated data, or the real downloads on a cluster checkout), counted by the
  engine's planner (:func:`unsure.engine.plan_counters`: its packing, shared
  prefixes, batches and decoding steps) with the zoo tokenizer
  (``resources/models/tiny-llama``) or ``--tokenizer``, and never fewer than
  :data:`TOKENS_PER_WORD` per word; ``--tokens-per-word 1.33`` gives the figure
  of a real vocabulary on plain English.

GPU time of a job = (2 x forward tokens + 6 x training tokens) x active
parameters / (MFU x peak FLOP/s), plus loading the weights; a job that spreads a
model over g GPUs (``accelerate``'s sequential ``device_map``) holds all g for
that time. The MFU of forward tokens is the one ``bench/gpu.py`` measured on a
GPU for the work's request kind at the measured model shape nearest in
parameters (``--mfu-file``); training tokens, kinds it does not time, and a
checkout without that file get :data:`MFU` (said in the output), and ``--mfu``
sets one for all. Wall time on N GPUs is at least the GPU-hours over N and at
least the longest job. Loads no weights but the tokenizers.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from unsure.config import ZOO_DIR, Config, ConfigError, Model, load_config
from unsure.decisionrisk import requests as decisionrisk
from unsure.labelbias import requests as labelbias
from unsure.model_sizes import BYTES_PER_PARAM, MEMORY_OVERHEAD, gpus_needed, parameter_count, weights_gb
from unsure.nextword import requests as nextword
from unsure.riskscores import requests as riskscores
from unsure.workload import EstimateError, RequestSet, Work, need

REPO = Path(__file__).resolve().parents[1]
STUDIES = ("riskscores", "nextword", "labelbias", "decisionrisk", "subgroups")
ROOMS = (riskscores, nextword, labelbias, decisionrisk)
"""The rooms whose rules run models: each says its ``request_sets`` and ``rule_work``."""

TOKENS_PER_WORD = 4 / 3
"""Floor on tokens per whitespace word (OpenAI's rule of thumb: a token is about 3/4 of an English word with a 50k
BPE; 32k-256k vocabularies are close to it). The zoo tokenizers are trained on the generated English and the
risk-score prompts: on the demo's generated sentences they give only ~1.0-1.2 tokens per word, on other real English
(the real Provo, SNI and benchmark files) more than a real tokenizer."""
MFU = 0.5
"""Model FLOP utilisation assumed where ``bench/gpu.py`` measured none (no ``--mfu-file``, training tokens, a
request kind it does not time). ``bench/engine.py`` measured 0.52-0.70 on the project's 2-core CPU; on one H200 the
engine ran at 19% (1B) and 46% (8B) for risk scores and below that for the other kinds (issue 28): optimistic."""
MFU_FILE = "docs/engine-gpu.json"
"""``bench/gpu.py``'s record (relative to the repository root): MFU per request kind and model shape on one GPU."""
ESTIMATE_FILE = "docs/scale-estimate.md"
"""Where the docs read the estimate for ``config/config.yaml`` (``--out``), so that no figure is pasted."""
PEAK_TFLOPS = 989.0
"""H100 SXM, dense bf16."""
LOAD_GB_PER_S = 2.0
"""Reading safetensors from a cluster file system into GPU memory."""
TRAIN_FACTOR = 3
"""A training token costs forward + backward = 3 forward passes (an upper bound for LoRA and for fine-tuning the last
blocks only, whose backward skips most weight gradients; gradient checkpointing adds back about one forward)."""


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
    command = [exe, "-n", "--forceall", "--nolock", "--configfile", str(configfile)]
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise EstimateError(f"the dry run of {configfile} failed:\n{(out.stdout + out.stderr)[-3000:]}")
    return out.stdout + out.stderr, time.perf_counter() - start


_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) ([A-Za-z0-9_]+):$")


def parse_dag(listing: str) -> list[Job]:
    """Every job of a dry-run listing, checked against its "Job stats" table (as ``tests/workflow_helpers.jobs``
    reads it)."""
    jobs: list[Job] = []
    lines = listing.splitlines()
    for line in lines:
        text = line.strip()
        if head := _RULE.match(line):
            jobs.append(Job(head.group(1), {}, 0))
        elif jobs and text.startswith("wildcards: "):
            pairs = (item.partition("=") for item in text.removeprefix("wildcards: ").split(", "))
            jobs[-1].wildcards.update({key: value for key, _, value in pairs})
        elif jobs and text.startswith("resources: "):
            found = re.search(r"(?:^|, )gpu=(\d+)", text.removeprefix("resources: "))
            jobs[-1] = Job(jobs[-1].rule, jobs[-1].wildcards, int(found.group(1)) if found else 0)
    start = next((i for i, line in enumerate(lines) if line.startswith("job ")), None)
    if start is None:
        raise EstimateError("the dry-run output has no job stats table")
    counts: dict[str, int] = {}
    for line in lines[start + 2 :]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
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


# --------------------------------------------------------------------------- engine tokens per unit


@dataclass(frozen=True)
class Measured:
    """Engine tokens per unit (a row, a position, a context) of each of the rooms' request sets."""

    tokens: dict[str, float]
    source: str = ""

    def __getitem__(self, key: str) -> float:
        return self.tokens[key]


def token_counter(tokenizer: Any, per_word: float | None = None) -> Callable[[Iterable[str]], np.ndarray]:
    """``count(texts)``: tokens per text, at least :data:`TOKENS_PER_WORD` per word; with ``per_word``, exactly
    that many per word instead (no tokenizer)."""

    def count(texts: Iterable[str]) -> np.ndarray:
        texts = list(texts)
        words = np.array([len(t.split()) for t in texts], dtype=np.float64)
        if per_word is not None or not texts:
            return (per_word or 0.0) * words
        ids = tokenizer(texts)["input_ids"]
        return np.maximum(np.array([len(i) for i in ids], dtype=np.float64), TOKENS_PER_WORD * words)

    return count


@dataclass
class Planner:
    """Counts request sets with the engine's planner, scaled so that their texts get :func:`token_counter`'s count."""

    tokenizer: Any
    per_word: float | None = None
    out: dict[str, float] = field(default_factory=dict)
    asked: dict[str, tuple[Sequence[Any], dict[str, Any], Any]] = field(default_factory=dict)
    """Per key the requests, the planner's settings and its counters (``tests/test_scale.py`` runs them)."""

    def __call__(self, s: RequestSet) -> None:
        from unsure.engine import plan_counters

        wanted = token_counter(self.tokenizer, self.per_word)(s.texts).sum()
        if s.value is not None or not s.requests:
            self.out[s.key] = s.value if s.value is not None else wanted / max(s.units, 1)
            return
        kw = {} if s.sample_tokens is None else {"sample_tokens": s.sample_tokens}
        planned = plan_counters(s.requests, self.tokenizer, **kw)
        real = sum(len(i) for i in self.tokenizer(list(s.texts))["input_ids"])
        self.out[s.key] = planned.tokens * wanted / max(real, 1) / max(s.units, 1)
        self.asked[s.key] = (s.requests, kw, planned)


def measure(
    cfg: Config, data: Path, tokenizer: Any, encoder: Any = None, *, sample: int = 200, per_word: float | None = None,
    source: str = "",
) -> Measured:  # fmt: skip
    """Engine tokens per unit of every configured room's request sets, built from the raw data under ``data``."""
    return measure_with(Planner(tokenizer, per_word), cfg, data, encoder, sample=sample, source=source)


def measure_with(plan: Planner, cfg: Config, data: Path, encoder: Any, *, sample: int, source: str = "") -> Measured:
    """:func:`measure` into ``plan``, which keeps the requests it counted."""
    for room in ROOMS:
        for s in room.request_sets(cfg, data, sample=sample, tokenizer=plan.tokenizer, encoder=encoder):
            plan(s)
    return Measured(plan.out, source or str(data))


def model_work(cfg: Config, measured: Measured) -> list[Work]:
    """Every inference and training rule's work, per model (and task, mode, fold ...: whatever its jobs share)."""
    return [w for room in ROOMS for w in room.rule_work(cfg, measured.tokens)]


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
                f"the DAG has no {w.rule} job for {w.model} {w.match}: the rule_work of unsure.{w.study}.requests "
                "no longer matches workflow/rules"
            )
        covered |= {id(j) for j in mine}
        total, active = (0.0, 0.0) if w.api else parameters(cfg, w.model)
        forward, train = 2 * active * w.tokens, 2 * TRAIN_FACTOR * active * w.train_tokens
        if isinstance(mfu, Utilisation):
            forward_mfu, train_mfu = mfu.of(w.kind, active), mfu.fallback
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
            "its room's rule_work (unsure.<study>.requests)"
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
    parser.add_argument("--mfu-file", default=MFU_FILE, help="bench/gpu.py's record: MFU per request kind and shape")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--tokenizer", default=f"{ZOO_DIR}/tiny-llama")
    parser.add_argument("--tokens-per-word", type=float, help="count this many tokens per word instead (e.g. 1.33)")
    parser.add_argument("--dag", help="a saved `snakemake -n --forceall` listing instead of running the dry run")
    parser.add_argument("--out", help=f"also write the report to this file (the docs include {ESTIMATE_FILE})")
    args = parser.parse_args(argv)
    try:
        configfile = Path(args.configfile)
        cfg = load_config(configfile if configfile.is_absolute() else REPO / configfile)
        listing, seconds = (Path(args.dag).read_text(encoding="utf-8"), None) if args.dag else dry_run(configfile)
        jobs = parse_dag(listing)
        mfu, said = utilisation(args.mfu, args.mfu_file)
        print(f"bench/scale.py: {said}", file=sys.stderr)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(need(REPO / args.tokenizer, "zoo tokenizer")))
        encoder = AutoTokenizer.from_pretrained(str(need(REPO / ZOO_DIR / "tiny-bert", "zoo encoder tokenizer")))
        data = REPO / "resources" / "data"
        demo = any((data / "sni" / "raw" / "tasks").glob("task*_unsure_*.json"))  # the SNI generator's task names
        zoo = args.tokenizer == parser.get_default("tokenizer")
        named = "the zoo tokenizer" if zoo else f"the tokenizer in `{args.tokenizer}`"
        counted = f"{args.tokens_per_word:g} tokens per word" if args.tokens_per_word else named
        source = f"`resources/data` ({'the demo' if demo else 'downloaded'} data, {counted})"
        measured = measure(cfg, data, tokenizer, encoder, per_word=args.tokens_per_word, source=source)
        cost = costs(cfg, model_work(cfg, measured), jobs, mfu=mfu, peak_tflops=args.peak_tflops)
    except (ConfigError, EstimateError) as err:
        print(f"bench/scale.py: {err}", file=sys.stderr)
        return 2
    counts = sorted({args.gpus, 8, 32, 64})
    text = report(cfg, args.configfile, jobs, cost, measured, gpu_counts=counts, dag_seconds=seconds, mfu=mfu,
                  peak_tflops=args.peak_tflops)  # fmt: skip
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
