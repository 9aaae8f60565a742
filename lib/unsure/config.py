"""The typed experiment config: one source of truth for models, data, sizes and seeds.

``config/config.yaml`` (paper scale) and ``config/demo.yaml`` (the embedded
default) are parsed into :class:`Config` at every workflow start. Unknown keys,
wrong types, a study naming an undefined model or a shard count below one are
rejected before any job runs, and the error names the key path. The JSON schema
in ``workflow/schemas/config.schema.json`` is generated from these models
(``python -m unsure.config``), so the two never drift apart.

Resources (GPUs per job aside, which belong to the model) live in the
Snakemake profiles, not here.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from unsure.model_sizes import gpu_problems

log = logging.getLogger(__name__)

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)]
"""A name used as a path component: model names, zoo names."""

PositiveInt = Annotated[int, Field(ge=1)]
Protocol = Literal["paper", "corrected"]
"""Each study's ``protocol``: ``paper``, the authors' released code to the digit, or ``corrected``,
ours (``../shared/DESIGN.md``). The one declaration of the two words; every room takes this type."""
Seed = Annotated[int, Field(ge=0)]

ZOO_DIR = "resources/models"
"""Where the local model zoo is built; a model id under it names a zoo entry."""


class ConfigError(ValueError):
    """The config is invalid; the message names every offending key path."""


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- data


class DataSource(Strict):
    """Where a raw data source comes from.

    ``generated`` writes files in the real raw layout from a seeded generator,
    ``download`` fetches the real URLs (or ``mirror``'s copies), ``local`` takes a
    copy the user already has in ``local_dir`` (validated like a download).
    """

    source: Literal["generated", "download", "local"] = "generated"
    local_dir: str | None = None
    mirror: Annotated[str, Field(pattern=r"^https?://[^\s]+$")] | None = None
    """For ``download``: a base URL serving the files in ``local_dir``'s layout, fetched instead
    of the public URLs (an institutional mirror; tests point it at a loopback server)."""

    @model_validator(mode="after")
    def _local_needs_dir(self) -> DataSource:
        if self.source == "local" and not self.local_dir:
            raise ValueError("source 'local' needs local_dir: the directory holding the raw files")
        if self.mirror is not None and self.source != "download":
            raise ValueError(f"mirror is only used by source 'download', not {self.source!r}")
        return self


class AcsData(DataSource):
    """ACS PUMS person records (one Census zip per state) and the data dictionary."""

    year: Annotated[int, Field(ge=2014, le=2030)] = 2018
    horizon: Literal["1-Year", "5-Year"] = "1-Year"
    states: tuple[Annotated[str, Field(pattern=r"^[A-Z]{2}$")], ...] = Field(default=("CA",), min_length=1)
    generated_rows_per_state: PositiveInt = 2000


class ProvoData(DataSource):
    """The Provo Corpus predictability norms (cloze responses)."""

    generated_passages: PositiveInt = 6


class SniData(DataSource):
    """SUPER-NATURALINSTRUCTIONS task files and the official splits."""

    tasks: tuple[Name, ...] = ()
    """Tasks to download (empty: every task of the official default splits)."""
    ref: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")] = "master"
    """Git branch, tag or commit of allenai/natural-instructions to download from."""
    generated_tasks: PositiveInt = 6
    generated_instances_per_task: PositiveInt = 400


Benchmark = Literal["anli", "hellaswag", "piqa", "siqa"]


class McqaData(DataSource):
    """Multiple-choice benchmarks, training and validation splits."""

    benchmarks: tuple[Benchmark, ...] = Field(default=("anli", "hellaswag", "piqa", "siqa"), min_length=1)
    generated_train: PositiveInt = 300
    generated_val: PositiveInt = 200


class Data(Strict):
    """Every raw data source of the project."""

    acs: AcsData = AcsData()
    provo: ProvoData = ProvoData()
    sni: SniData = SniData()
    mcqa: McqaData = McqaData()


# ------------------------------------------------------------------------- models


CorpusStudy = Literal["riskscores", "nextword", "labelbias", "decisionrisk"]

DEFAULT_ZOO_EXAMPLES: dict[CorpusStudy, int] = {
    "riskscores": 18000,
    "nextword": 2000,
    "labelbias": 6000,
    "decisionrisk": 2400,
}
"""Per study, about what a 2-layer, 64-wide model needs to learn it (measured on the demo's zoo)."""


def _without_defaults(schema: dict[str, Any]) -> None:
    """Drop the properties' defaults from a section's JSON schema: Snakemake's ``validate``
    fills defaults inside every ``anyOf`` branch, also when the value is ``null``, and
    fails on ``None.setdefault`` (the model still applies them)."""
    for prop in schema.get("properties", {}).values():
        prop.pop("default", None)


class ZooTraining(Strict):
    """Brief training of the zoo's causal LMs on the generators' known truth (``unsure.zoo.training``).

    The zoo writes examples in each study's own request formats (``unsure.zoo.corpus``) with answers
    drawn from (or weighted by) the generator's true distributions, so the demo's figures
    can show the papers' effects and the demo checks can compare them with the truth.
    A zoo model learns the studies that run a ``models:`` entry built from it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_without_defaults)

    examples: dict[CorpusStudy, PositiveInt] = Field(
        default_factory=lambda: dict(DEFAULT_ZOO_EXAMPLES),
        min_length=1,
    )
    """Training examples per study (a study left out trains nothing)."""
    epochs: PositiveInt = 1
    learning_rate: Annotated[float, Field(gt=0, le=1)] = 3e-3
    batch_size: PositiveInt = 8
    warmup_steps: Annotated[int, Field(ge=0)] = 10


class ZooModel(Strict):
    """A small randomly initialised model of a real architecture, built locally.

    Its tokenizer is trained with ``tokenizers`` on text the project generates;
    the result is saved with ``save_pretrained`` under ``resources/models/<name>``
    and loaded back through the same ``from_pretrained`` path a hub id uses.
    """

    architecture: Literal["gpt2", "llama", "bert"] | None = None
    """The tokenizer family trained on generated text (``None`` with ``tokenizer`` or ``base``)."""
    base: Name | None = None
    """Another zoo model this one is instruction-tuned from, as real chat models are from their
    base models: it starts from that model's trained weights and tokenizer, gains the chat
    template and its tokens, and then trains on its own examples (``chat`` must be set; the
    sizes are the base's)."""
    tokenizer: str | None = None
    """A folder with a real model's tokenizer files and ``config.json`` (no weights): the
    model is that config's architecture at this entry's sizes, and keeps the real tokenizer
    byte for byte (vocabulary, special tokens, chat template); ``vocab_size`` is ignored."""
    model_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$")] | None = None
    """With ``tokenizer``: build this transformers ``model_type`` instead of the folder's
    ``config.json`` one (Mixtral's mixture of experts with Mistral's tokenizer: ``mixtral``),
    or in place of a ``config.json`` the folder lacks (``roberta`` from roberta-base's
    tokenizer files). The folder's vocabulary and special token ids are kept; an encoder type
    (``bert``, ``roberta``, ...) is built as a multiple-choice model."""
    vocab_size: Annotated[int, Field(ge=300, le=200_000)] = 4096
    hidden_size: PositiveInt = 64
    layers: PositiveInt = 2
    heads: PositiveInt = 4
    intermediate_size: PositiveInt | None = None
    max_positions: PositiveInt = 1024
    chat: bool = False
    """Give the tokenizer a chat template (an "instruct" variant)."""
    training: ZooTraining | None = None
    """This model's own training: it learns exactly the studies its ``examples`` name, whichever
    models run it (the shadow's served model learns the formats of the API requests it answers).
    ``None``: ``zoo.training``, on the studies that run a ``models:`` entry built from it."""

    @property
    def trains_tokenizer(self) -> bool:
        """Whether building it trains a tokenizer on generated text (a real tokenizer folder or a base
        model's tokenizer is kept)."""
        return self.architecture is not None

    @model_validator(mode="after")
    def _one_source_and_consistent(self) -> ZooModel:
        if sum(x is not None for x in (self.architecture, self.tokenizer, self.base)) != 1:
            raise ValueError(
                "a zoo model names exactly one of architecture (a trained tokenizer), tokenizer (a folder)"
                " or base (a zoo model it is instruction-tuned from)"
            )
        if self.base is not None:
            if not self.chat:
                raise ValueError(f"base: {self.base!r} is tuned into an instruct variant here, so set chat: true")
            # by value, not by which keys were given: the rule hands the whole dumped spec on
            sized = {k for k in VARIANT_KEEPS if getattr(self, k) != type(self).model_fields[k].default}
            if sized:
                raise ValueError(f"{', '.join(sorted(sized))}: a variant of base {self.base!r} keeps the base's")
        if self.model_type is not None and self.tokenizer is None:
            raise ValueError("model_type: only with tokenizer (a folder of real tokenizer files)")
        if self.tokenizer is not None and self.chat:
            raise ValueError("chat: a real tokenizer folder keeps its own chat template (or none)")
        if self.hidden_size % self.heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by heads {self.heads}")
        if self.chat and self.architecture == "bert":
            raise ValueError("chat templates are for causal LMs, not architecture 'bert'")
        return self


VARIANT_KEEPS = ("vocab_size", "hidden_size", "layers", "heads", "intermediate_size", "max_positions", "model_type")
"""What an instruct variant takes from its base model (setting one of them is an error)."""


class Zoo(Strict):
    """The local model zoo: built from a seed, byte-identical across builds."""

    seed: Seed = 0
    corpus_sentences: PositiveInt = 20_000
    models: dict[Name, ZooModel] = Field(default_factory=dict)
    training: ZooTraining | None = None
    """``None``: the models stay randomly initialised (the shadow run, tests of the loading path)."""

    @model_validator(mode="after")
    def _bases_exist(self) -> Zoo:
        for name, spec in self.models.items():
            if spec.base is None:
                continue
            base = self.models.get(spec.base)
            if base is None:
                raise ValueError(f"models.{name}.base: {spec.base!r} is not a zoo model ({', '.join(self.models)})")
            if base.base is not None or base.chat or base.architecture not in ("gpt2", "llama"):
                raise ValueError(
                    f"models.{name}.base: {spec.base!r} is not a causal base model the zoo trains its tokenizer for"
                    " (a gpt2 or llama entry without chat or base of its own)"
                )
        return self


class Model(Strict):
    """One model as the studies see it. Adding a model is one such entry.

    ``id`` is a Hugging Face hub id, a local path (``resources/models/<zoo
    name>`` for the zoo) or, for ``backend: openai``, the API's model name.
    """

    id: Annotated[str, Field(min_length=1)]
    backend: Literal["hf", "openai"] = "hf"
    kind: Literal["causal", "encoder"] = "causal"
    revision: str = "main"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """``auto``: bfloat16 on a GPU, float32 on a CPU."""
    instruct: bool = False
    chat_template: str | None = None
    """A Jinja chat template overriding the tokenizer's own (instruct models)."""
    gpus: Annotated[int, Field(ge=0, le=64)] = 1
    """GPUs one inference job asks for (0: a CPU); checked against the weights' memory (``gpu_memory_gb``)."""
    params: Annotated[float, Field(gt=0)] | None = None
    """Parameters in billions, for a Hugging Face model that ``unsure.model_sizes.PARAMS`` does not list
    (the ``gpus`` check and ``bench/scale.py`` use it)."""
    trust_remote_code: bool = False
    base_url: str | None = None
    """For ``backend: openai``: the OpenAI-compatible endpoint."""
    api_key_env: Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")] = "OPENAI_API_KEY"
    """Name of the environment variable holding the API key (never the key)."""
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    """For ``backend: openai``: seconds one API request may take before it is retried."""
    max_retries: Annotated[int, Field(ge=0, le=20)] = 4
    """For ``backend: openai``: retries of a request (timeouts, 408/409/429/5xx) before the job fails;
    a dead endpoint fails a job after about ``(max_retries + 1) * timeout_s`` seconds plus back-off."""

    @model_validator(mode="after")
    def _backend_fields(self) -> Model:
        if self.backend == "openai":
            if self.gpus:
                raise ValueError("an API model needs no GPUs: set gpus: 0")
            if self.kind != "causal":
                raise ValueError("an API model is a causal LM: kind must be 'causal'")
            if self.params is not None:
                raise ValueError("params is only for backend 'hf' (an API model's weights are not ours to hold)")
        else:
            defaults = {
                name: type(self).model_fields[name].default for name in ("base_url", "timeout_s", "max_retries")
            }
            given = sorted(name for name, default in defaults.items() if getattr(self, name) != default)
            if given:
                raise ValueError(f"{', '.join(given)}: only for backend 'openai'")
        return self

    def numbers_settings(self) -> dict[str, Any]:
        """The entry's settings that can change a number it computes (a result's cache key):
        not ``gpus`` (one GPU or several run the same operations; the device the job runs on
        joins the key where it runs, :func:`unsure.engine.identity.run_device`), ``params``, nor
        how an API is waited for, retried or authenticated."""
        return self.model_dump(exclude={"gpus", "params", "timeout_s", "max_retries", "api_key_env"})

    @property
    def zoo_name(self) -> str | None:
        """The zoo entry this model is built from, if its id is a zoo path."""
        parts = Path(self.id).parts
        if self.backend == "hf" and len(parts) == 3 and "/".join(parts[:2]) == ZOO_DIR:
            return parts[2]
        return None


# ------------------------------------------------------------------------ studies


def _repeated(values: tuple[str, ...]) -> list[str]:
    """Names listed more than once, in order of first repetition."""
    counts = Counter(values)
    return [v for v in counts if counts[v] > 1]


class Study(Strict):
    """What every study has: the models it runs and how its inference is sharded."""

    models: tuple[Name, ...] = ()
    shards: PositiveInt = 1
    seed: Seed = 0

    @model_validator(mode="after")
    def _models_once(self) -> Study:
        """A model listed twice would be run and counted twice in every summary."""
        twice = _repeated(self.models)
        if twice:
            raise ValueError(f"models: {', '.join(map(repr, twice))} listed more than once")
        return self


ACS_TASKS = ("ACSIncome", "ACSEmployment", "ACSMobility", "ACSTravelTime", "ACSPublicCoverage")
"""The folktables tasks the riskscores study knows by name."""

Column = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]
"""An ACS PUMS column name, upper case as in the Census files."""

Filter = Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*=(-?[0-9.]+|-?[0-9.]*\.\.-?[0-9.]*)$")]
"""A population filter: ``COLUMN=value`` or ``COLUMN=low..high`` (inclusive; one side may be empty)."""


class RiskTask(Strict):
    """A custom prediction task: a thresholded target, features, population filters and question texts.

    With ``based_on`` (a folktables task) every unset field is the base task's
    and ``filters`` are added to the base task's population filters, e.g. income
    among college graduates in California: ``{based_on: ACSIncome, filters:
    ["SCHL=21..24", "ST=6"]}``. Without it, ``target``, ``threshold`` and
    ``features`` are required and the question texts default to ones built
    from the target's data-dictionary label.
    """

    based_on: Literal["ACSIncome", "ACSEmployment", "ACSMobility", "ACSTravelTime", "ACSPublicCoverage"] | None = None
    target: Column | None = None
    op: Literal[">", ">=", "<", "<=", "==", "!="] | None = None
    """Label 1 when ``target <op> threshold`` (default ``>``)."""
    threshold: float | None = None
    features: tuple[Column, ...] | None = Field(default=None, min_length=1)
    filters: tuple[Filter, ...] = ()
    question: str | None = None
    """The multiple-choice question, e.g. "What is this person's estimated yearly income?"."""
    positive: str | None = None
    """The answer option of label 1."""
    negative: str | None = None
    """The answer option of label 0."""
    numeric_question: str | None = None
    """The verbalised-probability question, e.g. "What is the probability that ...?"."""

    @model_validator(mode="after")
    def _complete(self) -> RiskTask:
        if self.based_on is None:
            missing = [k for k in ("target", "threshold", "features") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"a task without based_on needs {', '.join(missing)}")
        return self


class RiskAnalysis(Strict):
    """Where an inference-heavy analysis (permutation importance, increasing evidence) runs."""

    tasks: tuple[str, ...] | None = None
    """Tasks analysed (``null``: every task of the study)."""
    models: tuple[Name, ...] | None = None
    """Models analysed (``null``: every model of the study); XGBoost always is."""
    rows: PositiveInt = 2000
    """Evaluation rows scored per task (the first ones of the evaluation split)."""


class Riskscores(Study):
    """LLMs as risk scores on ACS PUMS tasks (folktexts)."""

    protocol: Protocol = "corrected"
    """``paper``: the prompts folktexts builds (its header, ``Information:`` block, value words,
    questions and options; plain text for instruct models too) and its threshold rule (maximise
    balanced accuracy); ``corrected``: ours (Census dictionary words, questions from the Census
    questionnaire, chat templates for instruct models, threshold maximising accuracy). Both
    threshold rules and both ECE binnings are computed in every run and shown in
    ``tables/reproduction``."""
    tasks: tuple[str, ...] = Field(default=ACS_TASKS, min_length=1)
    """folktables task names and names under ``custom_tasks``."""
    custom_tasks: dict[Name, RiskTask] = Field(default_factory=dict)
    prompting: tuple[Literal["multiple_choice", "numeric"], ...] = Field(
        default=("multiple_choice", "numeric"), min_length=1
    )
    both_orders: bool = True
    """Average multiple-choice scores over both option orders (A/B swapped)."""
    few_shot: Annotated[int, Field(ge=0)] = 0
    """Solved examples from the training split before each question (balanced labels, order fixed by the seed)."""
    subgroup_column: Column = "RAC1P"
    """Column whose groups get their own calibration curves (figure 6)."""
    threshold_rows: PositiveInt = 200
    """Labelled training rows scored to fit the accuracy-maximising threshold."""
    n_train: PositiveInt = 1_500_000
    n_eval: PositiveInt = 160_000
    chunk_rows: PositiveInt = 256
    """Rows per checkpointed chunk of an inference shard."""
    importance: RiskAnalysis = RiskAnalysis()
    evidence: RiskAnalysis = RiskAnalysis()

    @model_validator(mode="after")
    def _names_resolve(self) -> Riskscores:
        problems = []
        twice = _repeated(self.tasks)
        if twice:
            problems.append(f"tasks: {', '.join(map(repr, twice))} listed more than once")
        overlap = sorted(set(self.custom_tasks) & set(ACS_TASKS))
        if overlap:
            problems.append(f"custom_tasks: {', '.join(overlap)} is a folktables task name; choose another name")
        for i, task in enumerate(self.tasks):
            if task not in ACS_TASKS and task not in self.custom_tasks:
                problems.append(f"tasks[{i}]: unknown task {task!r} (folktables tasks or a custom_tasks name)")
        for key in ("importance", "evidence"):
            analysis: RiskAnalysis = getattr(self, key)
            for i, task in enumerate(analysis.tasks or ()):
                if task not in self.tasks:
                    problems.append(f"{key}.tasks[{i}]: {task!r} is not one of this study's tasks")
            for i, model in enumerate(analysis.models or ()):
                if model not in self.models:
                    problems.append(f"{key}.models[{i}]: {model!r} is not one of this study's models")
        if self.n_train <= self.threshold_rows:
            problems.append(
                f"n_train ({self.n_train}) is not above threshold_rows ({self.threshold_rows}): the threshold "
                "is fitted on the first threshold_rows rows of the training split and LR and XGBoost train on "
                "the rest; raise studies.riskscores.n_train or lower studies.riskscores.threshold_rows"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def analysis_models(self, key: Literal["importance", "evidence"]) -> tuple[str, ...]:
        """The models an analysis runs (its own list, or every model of the study)."""
        analysis: RiskAnalysis = getattr(self, key)
        return self.models if analysis.models is None else analysis.models

    def analysis_tasks(self, key: Literal["importance", "evidence"]) -> tuple[str, ...]:
        """The tasks an analysis runs on (its own list, or every task of the study)."""
        analysis: RiskAnalysis = getattr(self, key)
        return self.tasks if analysis.tasks is None else analysis.tasks


class NextwordFinetune(Strict):
    """Appendix F: fine-tune a GPT-2-style model as a language model on Provo passages, k-fold over passages."""

    model: Name | None = None
    """The model fine-tuned (one of ``studies.nextword.models``; ``null``: no fine-tuning)."""
    passages: tuple[PositiveInt, PositiveInt] = (1, 40)
    """First and last passage (``text_id``) of the folds."""
    folds: Annotated[int, Field(ge=2)] = 4
    trainable_blocks: PositiveInt = 2
    """The last this many transformer blocks are trained (``protocol: corrected``) or only their
    LayerNorms and the final LayerNorm (``paper``, as the authors' script); all else is frozen."""
    learning_rate: Annotated[float, Field(gt=0)] = 5e-4
    adam_eps: Annotated[float, Field(gt=0)] = 1e-8
    batch_size: PositiveInt = 5
    epochs: PositiveInt = 10
    seed: Seed = 0
    warmup_steps: Annotated[int, Field(ge=0)] = 10
    """Linear learning-rate warm-up steps (then linear decay to 0), as the authors' script."""
    max_length: PositiveInt = 81
    """Passages are padded to this many tokens (the authors' value; a longer passage is kept whole)."""
    validation_passages: tuple[PositiveInt, PositiveInt] = (41, 55)
    """First and last passage of the validation loss (the authors: the passages after the folds)."""
    n_samples: PositiveInt = 1000
    """Samples per held-out context from the fine-tuned model and from the model before fine-tuning."""


class Nextword(Study):
    """Human vs model next-word distributions on the Provo Corpus."""

    n_samples: PositiveInt = 1000
    """Unbiased samples per context for the models not in ``large_models``."""
    n_samples_large: PositiveInt = 40
    large_models: tuple[Name, ...] = ()
    """Models sampled ``n_samples_large`` times per context (large and API models)."""
    temperatures: tuple[Annotated[float, Field(gt=0)], ...] = Field(default=(1.0, 0.5), min_length=1)
    """Sampling temperatures of the non-instruct models (1.0 is unbiased sampling)."""
    chat_modes: tuple[Literal["single", "list"], ...] = Field(default=("single", "list"), min_length=1)
    """Instruct models: one word per call, n calls (``single``) or one call asking for n words (``list``)."""
    max_new_tokens: PositiveInt = 12
    passages: tuple[PositiveInt, ...] = ()
    """Passages (``text_id``) studied; empty: all of them."""
    oracle_splits: PositiveInt = 20
    ece_bins: PositiveInt = 10
    protocol: Protocol = "corrected"
    """``paper``: Table 1 as the authors' code computes it (``unsure.nextword.paper``: ECE with 1.0 in no
    bin, raw corpus word, first-in-list ties, 20-vs-rest oracle with ``random.seed`` per position, last
    position dropped); ``corrected``: ours. Both are metric-level: the choice is which values Table 1 shows,
    and ``tables/reproduction`` (``unsure.nextword.reproduction.reproduction_table``) shows both per cell."""
    sample_files: dict[Name, Annotated[str, Field(min_length=1)]] = Field(default_factory=dict)
    """Pre-collected samples (JSON Lines, format in docs/studies/nextword.md) by system name; one more system each."""
    biased_models: tuple[Name, ...] = ()
    """Models whose biased estimator (appendix A) is computed (Hugging Face backend only)."""
    nucleus: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = (0.7, 0.8, 0.9)
    nucleus_samples: PositiveInt = 100
    """Samples per context and nucleus ``p`` added to the biased estimator's support."""
    token_models: tuple[Name, ...] = ()
    """Models compared at the token level (appendix D; Hugging Face backend only)."""
    improvement_ks: tuple[Annotated[int, Field(ge=0, le=100)], ...] = tuple(range(0, 101, 10))
    improvement_sizes: tuple[PositiveInt, ...] = (10, 20)
    improvement_seeds: PositiveInt = 10
    sample_sizes: tuple[PositiveInt, ...] = Field(default=(10, 20, 40, 100), min_length=1)
    """Subsample sizes of the sample-size study (appendix C.1); needs ``n_samples`` at least the largest."""
    sample_size_seeds: PositiveInt = 10
    pos_tagger: Literal["nltk", "generated"] = "nltk"
    """``nltk``: NLTK's averaged perceptron + universal tagset (downloaded, or ``nltk_data`` when set);
    ``generated``: a perceptron trained on the generated corpus with its known tags (demo only)."""
    nltk_data: str | None = None
    """A local folder holding NLTK's tagger data (instead of downloading it)."""
    word_vectors: Literal["word2vec-google-news-300", "generated"] = "word2vec-google-news-300"
    """Pretrained vectors (downloaded), or a small word2vec trained on the generated corpus (demo)."""
    word_vectors_path: str | None = None
    """A local copy of the pretrained vectors (word2vec binary format) instead of downloading them."""
    corpus_sentences: PositiveInt = 5000
    """Sentences of generated text the ``generated`` word2vec and tagger are trained on."""
    meaning_k_max: PositiveInt = 10
    finetune: NextwordFinetune = NextwordFinetune()

    @model_validator(mode="after")
    def _models_are_studied(self) -> Nextword:
        problems = []
        for key in ("large_models", "biased_models", "token_models"):
            for i, name in enumerate(getattr(self, key)):
                if name not in self.models:
                    problems.append(f"{key}[{i}]: {name!r} is not in studies.nextword.models")
        if self.finetune.model is not None and self.finetune.model not in self.models:
            problems.append(f"finetune.model: {self.finetune.model!r} is not in studies.nextword.models")
        first, last = self.finetune.passages
        if last - first + 1 < self.finetune.folds:
            problems.append(f"finetune.passages: {first}..{last} has fewer passages than folds ({self.finetune.folds})")
        if max(self.sample_sizes) > self.n_samples:
            problems.append(
                f"sample_sizes: {max(self.sample_sizes)} is above n_samples ({self.n_samples}): a subsample "
                "as large as the sample has no spread to measure"
            )
        clash = sorted(set(self.sample_files) & set(self.models))
        if clash:
            problems.append(f"sample_files: {clash[0]!r} is also a model name; give the file another name")
        if self.finetune.model is not None and f"{self.finetune.model}-ft" in self.sample_files:
            problems.append(
                f"sample_files: {self.finetune.model}-ft is the fine-tuned model's system (finetune.model); "
                "give the file another name"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class LabelbiasFamily(Strict):
    """Where a model sits in the figures: its family and size (base vs instruct comes from ``instruct``)."""

    family: Annotated[str, Field(min_length=1)]
    size: Annotated[str, Field(min_length=1)]


class LabelbiasLora(Strict):
    """Few-shot LoRA fine-tuning (peft): one adapter per model, task, k and demonstration set."""

    enabled: bool = True
    models: tuple[Name, ...] = ()
    """Models to fine-tune, among the study's (empty: every model of the study)."""
    shots: tuple[Annotated[int, Field(ge=0)], ...] = (0, 4, 8, 16)
    """Values of k whose context (definition + demonstrations) is used in training and evaluation."""
    demonstration_sets: PositiveInt = 3
    """The first this many demonstration sets of each k (k = 0 has one)."""
    shards: PositiveInt = 1
    """Jobs per (model, k, demonstration set); each fine-tunes the tasks that hash to it."""
    n_train: PositiveInt = 16
    """Pool examples (none of the context's demonstrations) to train on."""
    epochs: PositiveInt = 5
    rank: PositiveInt = 64
    alpha: PositiveInt = 16
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.0
    learning_rate: Annotated[float, Field(gt=0)] = 2e-4
    batch_size: PositiveInt = 1
    gradient_accumulation: PositiveInt = 8
    weight_decay: Annotated[float, Field(ge=0)] = 0.03
    max_grad_norm: Annotated[float, Field(gt=0)] = 0.3
    gradient_checkpointing: bool = False


class Labelbias(Study):
    """Label bias of LLM classifiers on SUPER-NATURALINSTRUCTIONS."""

    protocol: Protocol = "corrected"
    """``paper``: the authors' released code where it differs from ours (domain-context inputs
    built per input-template part, ``Input: .`` for an empty input, the paper's 18 tasks with
    semantically equivalent labels in Fig. 4, macro-F1 over gold labels, and the tables' and
    figures' headline label scoring ``' label' + EOS``, mean over its tokens); ``corrected``:
    ours. Both label scorings are computed in every run (one forward pass) and both shown in
    ``tables/reproduction``."""
    shots: tuple[Annotated[int, Field(ge=0)], ...] = Field(default=(0, 2, 4, 8, 16), min_length=1)
    demonstration_sets: PositiveInt = 3
    """Disjoint demonstration sets per k > 0, drawn in order from the pool (k = 0 has one)."""
    n_eval: PositiveInt = 1000
    """Evaluation instances per task (at most)."""
    n_heldout: PositiveInt = 32
    """Held-out instances per task for BiasScore."""
    n_pool: PositiveInt = 64
    """Instances per task for demonstrations and fine-tuning."""
    min_eval_instances: PositiveInt = 300
    """Task selection: instances left for evaluation after the held-out and pool draws."""
    max_labels: Annotated[int, Field(ge=2)] = 49
    """Task selection: most distinct outputs a classification task may have."""
    task_info: str | None = None
    """CSV of SNI task metadata (``Name``, ``Summary``; the study's ``full_task_info.csv``), whose
    summaries widen the candidate filter; null: names and categories of the task files alone."""
    input_templates: str | None = None
    """CSV of the study's per-task input templates (``task``, ``template`` with ``{INPUT}`` for each
    part; its ``classification_tasks.csv``), which domain-context inputs follow under ``protocol:
    paper``; tasks it lacks (matched by task number) get one part. Null: one part for every task."""
    content_free_inputs: tuple[str, ...] = Field(default=("N/A", "[MASK]", ""), min_length=1)
    """Contextual calibration's content-free inputs."""
    domain_inputs: PositiveInt = 20
    """Domain-context calibration: random-word inputs per task."""
    chat_template: bool = False
    """Send instruct models' prompts through their chat template (the study scores the plain prompt)."""
    max_prompt_tokens: PositiveInt = 2000
    """Under ``protocol: paper``, every prompt (scored or fine-tuned on) fits this many tokens of the
    model's tokenizer as the authors' collator makes it (their ``max_source_length``): demonstrations
    from the first that would overflow are dropped, and a prompt still too long is cut at its end.
    ``corrected`` never truncates."""
    figure_family: str | None = None
    """The family (``families``) drawn in Figs. 2-4, as the paper draws Llama-2 (the paper config:
    ``Llama-2``); the other families get the appendix figures (Figs. 5-8). Null: the first model's."""
    chunk_rows: PositiveInt = 64
    """Rows per checkpointed chunk of an inference shard."""
    subgroups_shots: Annotated[int, Field(ge=0)] = 0
    """k of the per-instance results handed to the subgroups study ..."""
    subgroups_set: Annotated[int, Field(ge=0)] = 0
    """... and its demonstration set."""
    families: dict[Name, LabelbiasFamily] = Field(default_factory=dict)
    """Family and size of each model, for the figures (default: the model's own name, size ``-``);
    entries for models the study does not run are ignored."""
    lora: LabelbiasLora = LabelbiasLora()

    @model_validator(mode="after")
    def _sizes_fit(self) -> Labelbias:
        problems = []
        if self.max_k * self.demonstration_sets > self.n_pool:
            problems.append(
                f"n_pool {self.n_pool} cannot hold {self.demonstration_sets} disjoint sets of k = {self.max_k}"
            )
        if self.subgroups_shots not in self.shots:
            problems.append(f"subgroups_shots {self.subgroups_shots} is not one of shots {list(self.shots)}")
        if self.subgroups_set >= self.sets_of(self.subgroups_shots):
            problems.append(f"subgroups_set {self.subgroups_set} does not exist for k = {self.subgroups_shots}")
        if self.lora.enabled:
            for k in self.lora.shots:
                if k not in self.shots:
                    problems.append(f"lora.shots: k = {k} is not one of shots {list(self.shots)}")
                elif k + self.lora.n_train > self.n_pool:
                    problems.append(f"lora: n_pool {self.n_pool} cannot hold k = {k} plus n_train {self.lora.n_train}")
            if self.lora.demonstration_sets > self.demonstration_sets:
                problems.append("lora.demonstration_sets exceeds demonstration_sets")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def max_k(self) -> int:
        return max(self.shots)

    def sets_of(self, k: int) -> int:
        """Demonstration sets of ``k`` shots (one for k = 0: there is nothing to vary)."""
        return 1 if k == 0 else self.demonstration_sets

    def lora_models(self) -> tuple[str, ...]:
        """The models LoRA fine-tunes (its own list, or every model of the study; none when it is off)."""
        return (self.lora.models or self.models) if self.lora.enabled else ()

    def lora_runs(self) -> list[tuple[int, int]]:
        """The (k, demonstration set) runs LoRA fine-tunes, in config order."""
        return [(k, s) for k in self.lora.shots for s in range(min(self.sets_of(k), self.lora.demonstration_sets))]


class Subgroups(Study):
    """Per-subgroup accuracy from few observations (EB and robust EB intervals).

    Its inputs are the per-instance results of other studies (schema in
    ``unsure.subgroups.schema``); ``models`` and ``shards`` are unused.
    """

    class SubgroupInputs(Strict):
        """Per-instance parquet file of each source study, or ``generated`` (known subgroup means)."""

        labelbias: Annotated[str, Field(min_length=1)] = "generated"
        decisionrisk: Annotated[str, Field(min_length=1)] = "generated"
        riskscores: Annotated[str, Field(min_length=1)] = "generated"

    repetitions: PositiveInt = 1000
    """Draws of evaluation rows (each estimated by every method)."""
    equal_sizes: tuple[PositiveInt, ...] = (10, 20, 50)
    """Rows per subgroup of the equal-size draws (subgroups with fewer than 4× as many dropped)."""
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    inputs: SubgroupInputs = SubgroupInputs()
    min_eval_rows: Annotated[int, Field(ge=2)] = 10
    """Rows the smallest subgroup with at least ``floor_subgroup_rows`` rows gets in a proportional draw."""
    floor_subgroup_rows: PositiveInt = 50
    small_subgroup: PositiveInt = 15
    """Subgroups drawing at most this many rows count as small."""
    min_intersection_rows: PositiveInt = 20
    """ACS race × sex × age-band cells with fewer instances are dropped."""
    max_clusters: Annotated[int, Field(ge=2)] = 12
    """Largest k tried when clustering question embeddings (k by silhouette score)."""
    min_cluster_rows: PositiveInt = 30
    """Clusters with fewer instances are merged into the nearest larger one."""
    embedding_dim: PositiveInt = 16
    """Dimension of the TF-IDF + SVD text embedding used when inputs carry no emb_* columns."""
    sr_trees: tuple[PositiveInt, ...] = Field(default=(25, 50, 100, 200), min_length=1)
    """Numbers of trees the synthetic regression's cross-validation chooses from."""
    sr_depths: tuple[PositiveInt, ...] = Field(default=(1, 2, 3), min_length=1)
    """Tree depths the synthetic regression's cross-validation chooses from."""
    sr_learning_rate: Annotated[float, Field(gt=0, le=1)] = 0.1
    folds: Annotated[int, Field(ge=2)] = 2
    """Cross-fitting folds (and cross-validation folds of the synthetic regression)."""
    lasso_lambdas: PositiveInt = 20
    """Length of the λ path of the structured (Lasso) regression."""
    protocol: Protocol = "corrected"
    """σ̂² of an accuracy: ``Z(1 − Z)/n`` as the paper (``paper``; zero, hence an unshrunk EB with a
    zero-width interval, when every sampled row agrees) or with Z̃ = (nZ + 1)/(n + 2) in place of Z
    (``corrected``, never zero). The other protocol's EB is reported beside it (``EB-paper`` /
    ``EB-corrected``)."""
    generated_rows: Annotated[int, Field(ge=500)] = 8000
    """Rows per dataset of a generated input."""
    generated_subgroups: Annotated[int, Field(ge=2)] = 40
    """Latent subgroups per dataset of a generated input (SNI tasks, activity categories, topics)."""
    threads: PositiveInt = 4
    """Worker processes of one evaluation job (rule ``subgroups_evaluate``'s threads), over which its
    repetitions run; the estimates do not depend on it. A job that asks for every core waits until
    all are free: the demo's 1 runs its jobs beside the zoo's training instead of after it."""


class Decisionrisk(Study):
    """Deciding when to answer: risk injection, decision rules, composite risk."""

    class Finetune(Strict):
        """Fine-tuning of the multiple-choice encoder on each benchmark's training split."""

        epochs: PositiveInt = 3
        learning_rate: Annotated[float, Field(gt=0, lt=1)] = 1e-5
        batch_size: PositiveInt = 16
        max_length: Annotated[int, Field(ge=8)] = 128
        """Tokens of one (prompt, choice) pair; longer pairs are cut."""
        warmup: Annotated[float, Field(ge=0, lt=1)] = 0.1
        """Share of the optimisation steps with a linearly rising learning rate."""

    class Forest(Strict):
        """The random forests of the Calibrator and DwD rules (scikit-learn)."""

        trees: PositiveInt = 200
        max_depth: PositiveInt | None = None
        min_samples_leaf: PositiveInt = 5

    encoder: Name | None = None
    """The multiple-choice encoder fine-tuned per benchmark (a ``kind: encoder`` model)."""
    injections: tuple[Literal["NQ", "WQ", "NRA"], ...] = Field(default=("NQ", "WQ", "NRA"), min_length=2)
    """Risk injection functions; out-of-domain accuracy needs at least two."""
    benchmarks: tuple[Benchmark, ...] = Field(default=("anli", "hellaswag", "piqa", "siqa"), min_length=1)
    n_train: PositiveInt = 1_000_000
    """Original training instances per benchmark (all when the split is smaller), seeded draw."""
    n_val: PositiveInt = 1_000_000
    """Original validation instances per benchmark (all when the split is smaller), seeded draw."""
    embedder: Annotated[str, Field(min_length=1)] = "sentence-transformers/nq-distilbert-base-v1"
    """Sentence-transformers model (hub id or local path) of DwD's prompt-choice similarities."""
    finetune: Finetune = Finetune()
    crossfit_folds: Annotated[int, Field(ge=2)] = 5
    """Folds of the training confidences: each training row is scored by an encoder fine-tuned
    without its instance (k fine-tunes on (k − 1)/k of the data, plus one on all of it for the
    validation rows), so the rules are not fitted on in-sample confidences."""
    forest: Forest = Forest()
    normalize_loglik: bool = True
    """Generative confidences: softmax of per-token mean (true) or summed (false) log-likelihoods."""
    verbal_max_new_tokens: PositiveInt = 48
    """Reply length of the chat models' confidence-per-choice prompt."""
    levels: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(default=(0.90, 0.95, 0.99), min_length=1)
    """Confidence levels of the significance marks against the Random rule."""
    rrr_level: Annotated[float, Field(gt=0, lt=1)] = 0.95
    """Confidence level of the relative risk ratio's interval."""
    chunk_rows: PositiveInt = 256
    """Rows per checkpointed chunk of a generative inference shard."""
    protocol: Protocol = "corrected"
    """``paper``: the paper's rules (Calibrator trained original-vs-injected per injection function);
    ``corrected``: the same plus ``Calibrator-correct``, a Calibrator of the selection's correctness."""


class Studies(Strict):
    riskscores: Riskscores = Riskscores()
    nextword: Nextword = Nextword()
    labelbias: Labelbias = Labelbias()
    subgroups: Subgroups = Subgroups()
    decisionrisk: Decisionrisk = Decisionrisk()


# ------------------------------------------------------------------------- config


class Config(Strict):
    """The whole experiment config (``config/config.yaml`` or ``config/demo.yaml``)."""

    seed: Seed = 0
    gpu_memory_gb: Annotated[float, Field(gt=0)] = 80.0
    """Memory of one GPU of the cluster (GB): each Hugging Face model's ``gpus`` must hold its weights
    (``unsure.model_sizes``; ``bench/scale.py`` uses the same figure)."""
    request_cache: str | None = "results/cache"
    """Folder of the request cache (relative to the working directory): finished rows of every
    sharded scoring job, kept per weights identity, request fingerprint and scorer code, so that a
    rerun (a grown ``n_eval``, a job marked incomplete by Ctrl-C) scores only rows not scored
    before (``unsure.engine.shards``). Under ``results/``, so that removing the results removes it;
    ``null`` turns it off: every job scores all its rows."""
    data: Data = Data()
    zoo: Zoo = Zoo()
    models: dict[Name, Model] = Field(default_factory=dict)
    studies: Studies = Studies()

    @field_validator("request_cache")
    @classmethod
    def _cache_is_a_folder(cls, value: str | None) -> str | None:
        """A file in the place of the cache folder (or of a folder above it) failed every scoring
        job with a bare NotADirectoryError; refused here, relative to the working directory."""
        if value is None:
            return value
        path = Path(value)
        for at in (path, *path.parents):
            if at.exists() and not at.is_dir():
                where = "" if at == path else f": {at}"
                raise ValueError(f"{value}{where} is a file, not a folder")
        return value

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        """Every model a study names is defined; every zoo path names a zoo entry."""
        problems: list[str] = []
        for name, model in self.models.items():
            zoo = model.zoo_name
            if zoo is not None and zoo not in self.zoo.models:
                problems.append(f"models.{name}.id: {model.id!r} is a zoo path but zoo.models has no entry {zoo!r}")
        for study_name in Studies.model_fields:
            study: Study = getattr(self.studies, study_name)
            for i, name in enumerate(study.models):
                if name not in self.models:
                    problems.append(f"studies.{study_name}.models[{i}]: unknown model {name!r} (not under models:)")
        encoder = self.studies.decisionrisk.encoder
        if encoder is not None:
            if encoder not in self.models:
                problems.append(f"studies.decisionrisk.encoder: unknown model {encoder!r} (not under models:)")
            elif self.models[encoder].kind != "encoder":
                problems.append(f"studies.decisionrisk.encoder: model {encoder!r} is not kind 'encoder'")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _gpus_hold_the_weights(self) -> Config:
        """Each GPU model's ``gpus`` holds its weights in its dtype, plus 20%, at ``gpu_memory_gb`` per GPU."""
        problems = gpu_problems(self.models, self.zoo.models, self.gpu_memory_gb)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def active_studies(self) -> list[str]:
        """The studies ``all`` builds: those with models to run (subgroups always; nextword also
        on pre-collected sample files alone). A study without any is skipped, with a warning,
        rather than failing deep inside a figure."""
        active = []
        for name in Studies.model_fields:
            study: Study = getattr(self.studies, name)
            files = name == "nextword" and bool(self.studies.nextword.sample_files)
            if study.models or files or name == "subgroups":
                active.append(name)
            else:
                log.warning("studies.%s.models is empty: `all` skips the %s study", name, name)
        return active

    def study_models(self, study: str) -> dict[str, Model]:
        """The models a study runs, by name, in config order."""
        names: tuple[str, ...] = getattr(self.studies, study).models
        return {name: self.models[name] for name in names}

    def zoo_training(self, zoo_name: str) -> ZooTraining | None:
        """The training settings of zoo model ``zoo_name``: its own, else ``zoo.training``."""
        return self.zoo.models[zoo_name].training or self.zoo.training

    def zoo_training_studies(self, zoo_name: str) -> list[CorpusStudy]:
        """The studies whose examples zoo model ``zoo_name`` is trained on: those its own
        ``training`` names, else those with ``zoo.training`` examples that run a model built
        from it (none without either)."""
        own = self.zoo.models[zoo_name].training
        if own is not None:
            return list(own.examples)
        if self.zoo.training is None:
            return []
        return [
            study
            for study in self.zoo.training.examples
            if any(m.zoo_name == zoo_name for m in self.study_models(study).values())
        ]


def _key_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def parse_config(raw: dict[str, Any]) -> Config:
    """Validate a raw config mapping into a :class:`Config`.

    Raises:
        ConfigError: naming the key path of every problem found.
    """
    try:
        return Config.model_validate(raw)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown key (check its spelling and level)"
            got = "" if e["type"] in ("extra_forbidden", "value_error", "missing") else f" (got {e['input']!r})"
            lines.append(f"  config key {_key_path(e['loc'])}: {msg}{got}")
        raise ConfigError("invalid config:\n" + "\n".join(lines)) from None


YTE_KEY = "__use_yte__"
"""The top-level key that makes Snakemake evaluate a config file as a YTE template (Python code)."""

_YAML_TAGS = "tag:yaml.org,2002:"


class _SafeLoaderNoRepeats(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects a key given twice in one mapping (PyYAML keeps the last silently),
    a top-level ``__use_yte__`` and any tag it has no plain-data constructor for, each at its line."""

    _root: yaml.Node | None = None
    """The document's top node: ``__use_yte__`` counts only there, as Snakemake's YTE reads it."""

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key == YTE_KEY and node is self._root:
                problem = (
                    f"{YTE_KEY} is refused: a YTE template runs Python code from the config file "
                    "(Snakemake evaluates it while loading); write plain values"
                )
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_undefined(self, node: yaml.Node) -> Any:
        """A ``!!python/...`` tag builds a Python object (``python/object/apply`` calls a function):
        say so, instead of PyYAML's "could not determine a constructor"."""
        tag = "!!" + node.tag.removeprefix(_YAML_TAGS) if node.tag.startswith(_YAML_TAGS) else node.tag
        if tag.startswith("!!python/"):
            problem = f"the Python tag {tag} is refused: a config holds plain values, never code"
        else:
            problem = f"the tag {tag} is not plain YAML data (mappings, lists, text, numbers, true/false, null)"
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


# the registry inherited from SafeLoader holds SafeConstructor's function, not the override
_SafeLoaderNoRepeats.add_constructor(None, _SafeLoaderNoRepeats.construct_undefined)


def _yaml_error(path: str | Path, err: yaml.YAMLError) -> ConfigError:
    """``path:line:column: ...``: where a YAML problem is, in the form editors jump to."""
    mark = getattr(err, "problem_mark", None)
    if not isinstance(err, yaml.MarkedYAMLError) or mark is None:
        return ConfigError(f"{path}: not a valid config file: {' '.join(str(err).split())}")
    line, column = mark.line + 1, mark.column + 1
    message = f"{path}:{line}:{column}: not a valid config file (line {line}, column {column}): {err.problem}"
    if err.context:
        start = err.context_mark
        message += f" ({err.context}" + (f" from line {start.line + 1}, column {start.column + 1})" if start else ")")
    return ConfigError(message)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a YAML config file: plain YAML data only, read without evaluating anything.

    Snakemake reads config files with a loader that keeps the last of two equal
    keys, evaluates YTE templates (``__use_yte__: true``) and reports a syntax
    error, a Python tag or a non-UTF-8 byte without file or line; this loader
    refuses each of them, naming the file and line.

    Raises:
        ConfigError: naming the file and line (or byte offset).
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a config file") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{path}: not UTF-8: byte 0x{data[err.start]:02x} at byte offset {err.start} (line {line}); "
            "save the file as UTF-8"
        ) from None
    try:
        raw = yaml.load(text, Loader=_SafeLoaderNoRepeats) or {}
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping at the top level")
    return raw


DEFAULT_CONFIG = "config/config.yaml"
"""The config the workflow reads when no ``--configfile`` names one (relative to its working directory)."""


def read_default_config(workdir: str | Path = ".") -> dict[str, Any]:
    """The raw mapping of :data:`DEFAULT_CONFIG` under ``workdir``, read before Snakemake's loader
    (which evaluates YTE templates) sees it; when it is missing, the error says what to pass instead.

    Raises:
        ConfigError: naming the file and what is wrong with it.
    """
    path = Path(workdir) / DEFAULT_CONFIG
    if not path.exists():
        raise ConfigError(
            f"{path}: no such config file (without --configfile the workflow reads {DEFAULT_CONFIG} in its "
            f"working directory, {Path(workdir).resolve()}); pass --configfile FILE (config/demo.yaml for "
            "the demo) or run in the checkout"
        )
    return read_config_file(path)


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file (:func:`read_config_file`, then :func:`parse_config`).

    Raises:
        ConfigError: naming the file (and line) or the key path of every problem.
    """
    return parse_config(read_config_file(path))


def json_schema() -> dict[str, Any]:
    """The JSON schema of the config, as committed in ``workflow/schemas``."""
    schema = Config.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged over it, as Snakemake merges ``--configfile`` files:
    mappings key by key (recursively), any other value of ``override`` (a list, a scalar,
    ``null``) replacing ``base``'s. Neither is changed."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_files(paths: Sequence[str | Path]) -> Config:
    """The config that ``--configfile`` ``paths`` (merged in order) give, checked as the workflow
    checks it. Snakemake's own loader reports a YAML syntax error without its file or line;
    this names both."""
    raw: dict[str, Any] = {}
    for path in paths:
        raw = deep_merge(raw, read_config_file(path))
    return parse_config(raw)


def main(argv: Sequence[str]) -> int:
    """``python -m unsure.config``: the JSON schema; ``python -m unsure.config FILE...``: check config files."""
    if not argv:
        sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
        return 0
    try:
        check_files(argv)
    except ConfigError as err:
        sys.stderr.write(f"{err}\n")
        return 1
    sys.stdout.write(f"{', '.join(argv)}: a valid config\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
