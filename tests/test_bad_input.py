"""The bad-input catalogue: every way a user can hand the workflow something wrong.

Each :class:`Case` makes one bad input (config, data file, model entry,
tokenizer) under a fresh directory, meets it at the boundary where a user
would (the function a rule's script calls), and says what must come of it:
an error of the project's own making whose message names the offending key,
file, column, row, model or label, or, where the science allows an answer
(an undefined metric, an empty subgroup), an explicit NA and a warning that
says why. In every error case the innermost frame of the traceback is the
project's own code, never a library's. A file system that refuses a write (a
read-only ``results/``, an immutable folder, a full disk) is simulated by the
errno it raises, at ``os.open``/``os.mkdir`` or at pyarrow's write: chmod
cannot show it to root, and a test must not fill a real disk.

Bad inputs already caught by other test files at the same boundary are listed
in :data:`ELSEWHERE` rather than repeated; a test keeps those references alive.

The workflow-level cases at the end run the real Snakemake CLI on a throwaway
copy: a broken config or a corrupted input after a successful run changes no
existing result, and a download rule that meets an HTML page, a truncated zip,
an empty body or a dropped connection leaves no file behind and succeeds once
the server is fixed. Config files that Snakemake reads (and would evaluate, for
a YTE template) before any code of the workflow runs are met through ``unsure
run`` (``unsure.run``), which reads them first, and in the Snakefile, which
reads ``config/config.yaml`` before Snakemake's loader does.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import io
import json
import logging
import os
import re
import shutil
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, copy_workflow, snakemake, untrained

from unsure import sources
from unsure.config import ConfigError, load_config, read_default_config
from unsure.download import LocalCopyError
from unsure.nextword.data import read_norms, read_samples
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.metrics import UndefinedMetricWarning
from unsure.riskscores.tables import metrics_frame
from unsure.riskscores.tasks import BASE_COLUMNS, FOLKTABLES, read_person_zip, task_rows
from unsure.riskscores.text import UnmappedCode
from unsure.subgroups.features import read_and_prepare
from unsure.subgroups.schema import InputError

LIB = REPO / "lib" / "unsure"
HTML = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>gone</body></html>\n"
LATIN1 = "Caf\xe9 cr\xe8me".encode("latin-1")  # not UTF-8


# --------------------------------------------------------------------------- shared inputs


class Kit:
    """Valid inputs of every kind, built on first use and shared by the cases (which copy before breaking)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @functools.cached_property
    def acs(self) -> tuple[Path, Path]:
        """A generated Census state zip and the data dictionary."""
        from unsure.generate.acs import write_data_dictionary, write_state_zip

        write_state_zip(self.root / "csv_pca.zip", state="CA", year=2018, n_rows=300, seed=1)
        write_data_dictionary(self.root / "dictionary.csv", year=2018)
        return self.root / "csv_pca.zip", self.root / "dictionary.csv"

    @functools.cached_property
    def dictionary(self) -> Any:
        from unsure.riskscores.dictionary import read_dictionary

        return read_dictionary(self.acs[1])

    @functools.cached_property
    def sni(self) -> Path:
        """A generated SNI raw directory (``tasks/``, ``tasks.txt``)."""
        from unsure.generate import sni

        sni.write_tasks(self.root / "sni", n_tasks=2, instances_per_task=60, seed=0)
        return self.root / "sni"

    @functools.cached_property
    def piqa(self) -> Path:
        """Generated PIQA files in the official layout."""
        from unsure.generate.mcqa import write_benchmark

        write_benchmark(self.root / "piqa", benchmark="piqa", n_train=10, n_val=10, seed=0)
        return self.root / "piqa"

    @functools.cached_property
    def instances(self) -> pd.DataFrame:
        """A generated per-instance input of the subgroups study (six SNI-like tasks, two models)."""
        from unsure.subgroups.generate import generate

        return generate("labelbias", ["m-a", "m-b"], rows=600, subgroups=6, seed=0).instances

    @functools.cached_property
    def letters_model(self) -> Path:
        """A tiny GPT-2 whose BPE vocabulary has letters only: no digits, no unknown token."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=60, special_tokens=["<s>", "</s>"])
        tok.train_from_iterator(["answer yes no the cat sat on a mat"] * 5, trainer)
        return _tiny_lm(self.root / "letters", tok, bos_token="<s>", eos_token="</s>")

    @functools.cached_property
    def words_model(self) -> Path:
        """A tiny GPT-2 with a five-word vocabulary and an unknown token for everything else."""
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = {"[UNK]": 0, "</s>": 1, "answer": 2, "yes": 3, "no": 4}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        return _tiny_lm(self.root / "words", tok, unk_token="[UNK]", eos_token="</s>")


def _tiny_lm(root: Path, tokenizer: Any, **special: str) -> Path:
    """Save a randomly initialised one-layer GPT-2 for ``tokenizer`` where ``from_pretrained`` finds it."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special)
    eos = fast.eos_token_id
    config = GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=16, n_layer=1, n_head=2,
        bos_token_id=fast.bos_token_id if fast.bos_token_id is not None else eos, eos_token_id=eos,
    )  # fmt: skip
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(root)
    fast.save_pretrained(root)
    return root


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    return Kit(tmp_path_factory.mktemp("kit"))


# --------------------------------------------------------------------------- making bad inputs


def _demo() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((REPO / "config" / "demo.yaml").read_text(encoding="utf-8"))
    return untrained(raw)


def _config(tmp: Path, edit: Callable[[dict[str, Any]], object]) -> Path:
    """The demo config with one edit, written as a YAML file."""
    raw = _demo()
    edit(raw)
    path = tmp / "broken.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def _yaml_text(tmp: Path, text: str) -> Path:
    path = tmp / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _load(tmp: Path, edit: Callable[[dict[str, Any]], object]) -> object:
    return load_config(_config(tmp, edit))


def _yte(tmp: Path) -> str:
    """A YTE template whose evaluation creates ``tmp/pwned`` (Snakemake's loader evaluates it)."""
    return f'__use_yte__: true\nseed: ?__import__("pathlib").Path(r"{tmp / "pwned"}").touch() or 0\n'


def _a_file(path: Path) -> str:
    """``path`` made an (empty) file, as a string for a config value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return str(path)


def _rezip_without(src: Path, dest: Path, column: str) -> Path:
    """A copy of a Census zip whose person CSV lacks ``column``."""
    with zipfile.ZipFile(src) as zf:
        (member,) = zf.namelist()
        frame = pd.read_csv(zf.open(member), dtype=str)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, frame.drop(columns=column).to_csv(index=False))
    return dest


def _rezip_with_text_cell(src: Path, dest: Path, column: str, row: int, text: str) -> Path:
    """A copy of a Census zip with ``text`` in ``column`` of record ``row`` (0-based)."""
    with zipfile.ZipFile(src) as zf:
        (member,) = zf.namelist()
        frame = pd.read_csv(zf.open(member), dtype=str)
    frame.loc[row, column] = text
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, frame.to_csv(index=False))
    return dest


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _copy_dir(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _scores(labels: list[int], p_hat: list[float]) -> pd.DataFrame:
    """Per-row scores of one run in ``riskscores_metrics``' input schema (all evaluation rows)."""
    n = len(labels)
    return pd.DataFrame(
        {"model": "m", "task": "ACSIncome", "prompting": "numeric", "row_id": [f"r{i}" for i in range(n)],
         "split": "eval", "label": labels, "p_hat": p_hat}
    )  # fmt: skip


def _acs_export(
    kit: Kit, race: float = 99.0, row_ids: tuple[str, str] = ("r0", "r1"), p_hat: tuple[float, float] = (0.2, 0.7)
) -> object:
    """The riskscores rows and scores handed to the subgroups study (race and sex in the dictionary's words)."""
    from unsure.riskscores.tables import subgroups_instances

    rows = pd.DataFrame({"task": "ACSIncome", "row_id": list(row_ids), "text": "- Age is: 30 years old.",
                         "RAC1P": [1.0, race], "SEX": [1.0, 2.0], "AGEP": [30.0, 40.0]})  # fmt: skip
    return subgroups_instances(rows, _scores([0, 1], list(p_hat)), kit.dictionary)


def _acs_feature_not_in_dictionary(kit: Kit, tmp: Path) -> object:
    from unsure.riskscores.text import frame_text

    rows = pd.DataFrame({"AGEP": [30.0], "HOBBY": [2.0]})
    return frame_text(rows, ["AGEP", "HOBBY"], kit.dictionary)


def _norms(tmp: Path, data: bytes) -> object:
    return read_norms(_write(tmp / "Provo_Corpus-Predictability_Norms.csv", data))


def _sni_task(kit: Kit, tmp: Path, change: Callable[[dict[str, Any]], object] | None, data: bytes | None) -> object:
    from unsure.labelbias.tasks import read_task, task_names

    name = task_names(kit.sni)[0]
    path = tmp / f"{name}.json"
    if data is None:
        raw = json.loads((kit.sni / "tasks" / f"{name}.json").read_text(encoding="utf-8"))
        assert change is not None
        change(raw)
        data = json.dumps(raw).encode()
    return read_task(_write(path, data))


def _sni_listing(kit: Kit, tmp: Path) -> object:
    from unsure.labelbias.tasks import select_tasks, task_names

    raw = _copy_dir(kit.sni, tmp / "sni")
    (raw / "tasks.txt").write_text(f"{task_names(kit.sni)[0]}\n../../../home/user/secret\n", encoding="utf-8")
    return select_tasks(raw, n_eval=10, n_heldout=4, n_pool=8, min_eval_instances=5, max_labels=49, seed=0)


def _piqa(kit: Kit, tmp: Path, data: bytes | Callable[[bytes], bytes]) -> object:
    from unsure.decisionrisk.data import load_benchmark

    raw = _copy_dir(kit.piqa, tmp / "piqa")
    items = raw / "valid.jsonl"
    items.write_bytes(data(items.read_bytes()) if callable(data) else data)
    return load_benchmark(raw, "piqa", "val")


def _drop_key_on_line(text: bytes, line: int, key: str) -> bytes:
    lines = text.decode().splitlines()
    record = json.loads(lines[line - 1])
    del record[key]
    lines[line - 1] = json.dumps(record)
    return ("\n".join(lines) + "\n").encode()


def _subgroups_file(kit: Kit, tmp: Path, frame: pd.DataFrame) -> object:
    path = tmp / "study" / "sni_instances.parquet"
    path.parent.mkdir()
    frame.to_parquet(path, index=False)
    options = {"embedding_dim": 4, "max_clusters": 4, "min_cluster_rows": 20, "min_intersection_rows": 20, "seed": 0}
    return read_and_prepare(path, "labelbias", **options)


def _subgroups_equal_design_too_big(kit: Kit, tmp: Path) -> object:
    """Equal draws of 150 rows need subgroups of 600 rows; the generated ones have 600 rows in all."""
    from unsure.subgroups.estimators import SRSettings
    from unsure.subgroups.evaluate import EvaluationSettings, evaluate
    from unsure.subgroups.features import prepare

    prepared = prepare(kit.instances, "labelbias", embedding_dim=4, max_clusters=4, min_cluster_rows=20,
                       min_intersection_rows=20, seed=0)  # fmt: skip
    settings = EvaluationSettings(
        repetitions=1, equal_sizes=(10, 150), sr=SRSettings(trees=(5,), depths=(1,)), lasso_lambdas=3
    )
    estimates, _, _ = evaluate(prepared, settings)
    return estimates


def _empty_subgroups_are_na(estimates: Any) -> bool:
    designs = set(estimates["design"].astype(str))
    return "equal-10" in designs and "equal-150" not in designs


def _estimator_empty_unit(kit: Kit, tmp: Path) -> object:
    from unsure.subgroups.estimators import unit_stats

    return unit_stats(np.array([1.0, 0.0, 1.0]), np.array([0, 0, 1]), 3, binary=True)


def _labelbias_gold_not_in_labels(kit: Kit, tmp: Path) -> object:
    from unsure.labelbias.tables import task_metrics

    probs = pd.DataFrame(
        {"task": "t1", "k": 0, "set": 0, "method": "none", "kind": "eval", "row_id": ["i1", "i2", "i3"],
         "gold": ["yes", "maybe", "no"], "pred": ["yes", "no", "no"],
         "probs": [[0.9, 0.1], [0.3, 0.7], [0.2, 0.8]]}
    )  # fmt: skip
    return task_metrics(probs, {"t1": ("no", "yes")})


def _importance_one_class(kit: Kit, tmp: Path) -> object:
    from unsure.riskscores.analysis import permutation_importance

    calls: list[int] = []

    def score(rows: pd.DataFrame) -> np.ndarray:
        calls.append(len(rows))
        return np.linspace(0.1, 0.9, len(rows))

    rows = pd.DataFrame({"AGEP": [20.0, 30.0, 40.0, 50.0], "SEX": [1.0, 2.0, 1.0, 2.0], "label": 0})
    out = permutation_importance(score, rows, ["AGEP", "SEX"], seed=0)
    assert calls == [4], "rows of one class must not cost a scoring pass per feature"
    return out


def _engine(model: Path) -> Any:
    from unsure.engine.hf import HFEngine

    return HFEngine(str(model), device="cpu")


def _choice(model: Path, options: tuple[str, ...]) -> object:
    from unsure.engine import ChoiceRequest

    return _engine(model).choice_probs([ChoiceRequest("answer", options)])


def _numeric(model: Path, prompt: str) -> object:
    from unsure.engine import NumericRequest

    return _engine(model).numeric([NumericRequest(prompt)])


def _broken_model(kit: Kit, tmp: Path, breaking: Callable[[Path], object]) -> object:
    """A copy of the words model (folder ``broken``) with ``breaking`` done to it, loaded as a rule loads it."""
    folder = _copy_dir(kit.words_model, tmp / "broken")
    breaking(folder)
    return _engine(folder)


def _set_model_type(folder: Path, kind: str) -> None:
    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    raw["model_type"] = kind
    (folder / "config.json").write_text(json.dumps(raw), encoding="utf-8")


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


HUB_ID = "unsure-tests/no-such-model"
"""A hub id no hub cache holds."""


def _closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused at once)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hub_model(*, offline: bool, endpoint: str | None = None) -> object:
    """Load :data:`HUB_ID` with the hub offline (``HF_HUB_OFFLINE=1``, as read at import) or at
    ``endpoint``; it must fail within seconds, not after a minute of retries."""
    from huggingface_hub import constants

    from unsure.engine.hf import HFEngine  # imported before the clock starts

    start = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
                mp.delenv(name, raising=False)
            if offline:
                mp.setenv("HF_HUB_OFFLINE", "1")
            mp.setattr(constants, "HF_HUB_OFFLINE", offline)
            if endpoint is not None:
                mp.setattr(constants, "ENDPOINT", endpoint)
                mp.setenv("NO_PROXY", "127.0.0.1,localhost")
            return HFEngine(HUB_ID, device="cpu")
    finally:
        assert time.monotonic() - start < 15, (
            f"loading a hub id the hub cannot serve took {time.monotonic() - start:.0f} s"
        )


@contextlib.contextmanager
def _refusing(folder: Path, code: int) -> Iterator[None]:
    """The file system refuses, with errno ``code``, to create anything under ``folder``: a read-only
    mount (EROFS) or an immutable folder (EPERM), which chmod cannot show to root."""

    def refuse(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if Path(os.fsdecode(path)).is_relative_to(folder):
                raise OSError(code, os.strerror(code), os.fsdecode(path))
            return real(path, *args, **kwargs)

        return call

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "open", refuse(os.open))
        mp.setattr(os, "mkdir", refuse(os.mkdir))
        yield


@contextlib.contextmanager
def _full_disk(after: int = 0) -> Iterator[None]:
    """Parquet writes fail as pyarrow's do on a full disk (errno 28, no file named), after ``after`` of them."""
    real = pd.DataFrame.to_parquet
    written = [0]

    def to_parquet(frame: pd.DataFrame, path: Any, *args: Any, **kwargs: Any) -> Any:
        if written[0] >= after:
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        written[0] += 1
        return real(frame, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pd.DataFrame, "to_parquet", to_parquet)
        yield


def _write_refused(tmp: Path, code: int, *, existing: str) -> object:
    """Write an output under ``results/`` while the file system refuses writes under ``existing``."""
    from unsure.io import write_parquet

    (tmp / existing).mkdir(parents=True)
    with _refusing(tmp / existing, code):
        write_parquet(tmp / "results" / "riskscores" / "scores.parquet", pd.DataFrame({"a": [1]}))
    return None


def _log_refused(tmp: Path) -> object:
    """A job opens its log under a read-only ``results/``."""
    from unsure.logs import logged

    (tmp / "results").mkdir()
    with _refusing(tmp / "results", errno.EROFS), logged(tmp / "results" / "logs" / "job.log"):
        pass
    return None


def _shard_on_a_full_disk(tmp: Path) -> object:
    """A shard of three chunks whose third chunk meets a full disk: the two finished chunks stay."""
    from unsure.engine.shards import run_shard

    rows = pd.DataFrame({"row_id": [f"r{i}" for i in range(6)], "text": "a"})
    out = tmp / "results" / "shard0.parquet"
    try:
        with _full_disk(after=2):
            return run_shard(rows, lambda c: c[["row_id"]].assign(v=1.0), out, shard=0, n_shards=1, chunk_rows=2,
                             fingerprint={"scorer": "constant"})  # fmt: skip
    finally:
        kept = sorted(p.name for p in out.with_name(out.name + ".chunks").glob("chunk-*.parquet"))
        assert kept == ["chunk-000000.parquet", "chunk-000001.parquet"], f"finished chunks lost: {kept}"


def _truncated_shard(tmp: Path) -> object:
    from unsure import io as unsure_io

    path = tmp / "results" / "shard0.parquet"
    path.parent.mkdir()
    pd.DataFrame({"row_id": [f"r{i}" for i in range(50)], "p": 0.5}).to_parquet(path)
    _truncate(path, 300)
    return unsure_io.read_parquet(path)


# --------------------------------------------------------------------------- the catalogue


@dataclass(frozen=True)
class Case:
    """One bad input: ``call`` makes it under a fresh directory and meets it at the user's boundary.

    Expected: ``error`` raised with every string of ``names`` in its message;
    or (``error`` None) a ``warning`` (a warning class, or ``"log"`` for a
    logged one) whose message holds ``names``, and ``na(result)`` true.
    """

    id: str
    call: Callable[[Kit, Path], object]
    names: tuple[str, ...]
    error: type[Exception] | None = ValueError
    warning: type[Warning] | str | None = None
    na: Callable[[Any], bool] | None = None


CASES = [
    # ---------------------------------------------------------------- config
    Case("config-unknown-key-in-model-entry",
         lambda k, t: _load(t, lambda c: c["models"]["tiny-gpt2"].update(trust_remote=True)),
         ("config key models.tiny-gpt2.trust_remote: unknown key",), ConfigError),
    Case("config-wrong-type-list-for-mapping",
         lambda k, t: _load(t, lambda c: c.update(models=["tiny-gpt2"])),
         ("config key models: Input should be a valid dictionary",), ConfigError),
    Case("config-wrong-type-text-for-number",
         lambda k, t: _load(t, lambda c: c["studies"]["subgroups"].update(alpha="5%")),
         ("config key studies.subgroups.alpha", "'5%'"), ConfigError),
    Case("config-yaml-syntax-error",
         lambda k, t: load_config(_yaml_text(t, "seed: 0\nstudies: {subgroups: [unclosed\n")),
         ("broken.yaml:3:1: not a valid config file (line 3, column 1)", "expected ',' or ']'"), ConfigError),
    Case("config-yaml-python-tag",
         lambda k, t: load_config(_yaml_text(t, "seed: !!python/object/apply:os.system ['touch pwned']\n")),
         ("broken.yaml:1:7: not a valid config file",
          "the Python tag !!python/object/apply:os.system is refused"), ConfigError),
    Case("config-yte-template", lambda k, t: load_config(_yaml_text(t, _yte(t))),
         ("broken.yaml:1:1: not a valid config file", "__use_yte__ is refused",
          "a YTE template runs Python code"), ConfigError),
    Case("config-not-utf8",
         lambda k, t: load_config(_write(t / "broken.yaml", b'seed: 0\nzoo: {seed: "' + LATIN1 + b'"}\n')),
         ("broken.yaml: not UTF-8", "byte 0xe9 at byte offset 24 (line 2)"), ConfigError),
    Case("config-file-missing", lambda k, t: load_config(t / "nope.yaml"),
         ("nope.yaml: no such config file",), ConfigError),
    Case("config-default-file-missing", lambda k, t: read_default_config(t),
         ("config/config.yaml: no such config file", "without --configfile", "pass --configfile FILE"),
         ConfigError),
    Case("config-key-given-twice",
         lambda k, t: load_config(_yaml_text(t, "models:\n  m: {id: gpt2}\n  m: {id: gpt2-xl}\n")),
         ("broken.yaml:3:3", "key 'm' is given twice", "line 3"), ConfigError),
    Case("config-top-level-not-a-mapping",
         lambda k, t: load_config(_yaml_text(t, "- seed\n- models\n")),
         ("broken.yaml: the config must be a mapping",), ConfigError),
    Case("model-name-absolute-path",
         lambda k, t: _load(t, lambda c: c["models"].update({"/abs": {"id": "gpt2", "gpus": 0}})),
         ("config key models./abs", "should match pattern"), ConfigError),
    Case("model-name-climbing-path",
         lambda k, t: _load(t, lambda c: c["models"].update({"a/../../b": {"id": "gpt2", "gpus": 0}})),
         ("config key models.a/../../b", "should match pattern"), ConfigError),
    Case("study-model-name-with-path",
         lambda k, t: _load(t, lambda c: c["studies"]["nextword"].update(models=["../x"])),
         ("config key studies.nextword.models[0]", "'../x'"), ConfigError),
    Case("custom-task-name-with-path",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(
             custom_tasks={"../x": {"based_on": "ACSIncome"}}, tasks=["ACSIncome", "../x"])),
         ("config key studies.riskscores.custom_tasks.../x", "should match pattern"), ConfigError),
    Case("sni-task-name-with-path-in-config",
         lambda k, t: _load(t, lambda c: c["data"]["sni"].update(tasks=["/etc/passwd"])),
         ("config key data.sni.tasks[0]", "'/etc/passwd'"), ConfigError),
    Case("unknown-model-as-encoder",
         lambda k, t: _load(t, lambda c: c["studies"]["decisionrisk"].update(encoder="bert-huge")),
         ("studies.decisionrisk.encoder: unknown model 'bert-huge'",), ConfigError),
    Case("unknown-model-in-analysis-list",
         lambda k, t: _load(t, lambda c: c["studies"]["nextword"].update(biased_models=["gpt-9"])),
         ("biased_models[0]: 'gpt-9' is not in studies.nextword.models",), ConfigError),
    Case("model-listed-twice-in-a-study",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(models=["tiny-llama", "tiny-llama"])),
         ("config key studies.riskscores", "'tiny-llama' listed more than once"), ConfigError),
    Case("task-listed-twice",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(tasks=["ACSIncome", "ACSIncome"])),
         ("config key studies.riskscores", "tasks: 'ACSIncome' listed more than once"), ConfigError),
    Case("custom-task-shadows-a-folktables-task",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(
             custom_tasks={"ACSIncome": {"based_on": "ACSIncome", "filters": ["ST=6"]}})),
         ("custom_tasks: ACSIncome is a folktables task name",), ConfigError),
    Case("empty-model-list",
         lambda k, t: _load(t, lambda c: c["studies"]["decisionrisk"].update(models=[])).active_studies(),
         ("studies.decisionrisk.models is empty: `all` skips the decisionrisk study",), None, "log",
         lambda active: "decisionrisk" not in active and "riskscores" in active),
    Case("empty-task-list",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(tasks=[])),
         ("config key studies.riskscores.tasks", "at least 1 item"), ConfigError),
    Case("empty-temperature-list",
         lambda k, t: _load(t, lambda c: c["studies"]["nextword"].update(temperatures=[])),
         ("config key studies.nextword.temperatures", "at least 1 item"), ConfigError),
    Case("sample-sizes-above-the-samples",
         lambda k, t: _load(t, lambda c: c["studies"]["nextword"].update(n_samples=10, sample_sizes=[5, 40])),
         ("studies.nextword", "sample_sizes: 40 is above n_samples (10)"), ConfigError),
    Case("api-settings-on-a-local-model",
         lambda k, t: _load(t, lambda c: c["models"]["tiny-gpt2"].update(timeout_s=5)),
         ("config key models.tiny-gpt2", "timeout_s: only for backend 'openai'"), ConfigError),
    Case("request-cache-is-a-file",
         lambda k, t: _load(t, lambda c: c.update(request_cache=_a_file(t / "cache"))),
         ("config key request_cache: ", "cache is a file, not a folder"), ConfigError),
    Case("request-cache-under-a-file",
         lambda k, t: _load(t, lambda c: c.update(request_cache=str(Path(_a_file(t / "results")) / "cache"))),
         ("config key request_cache: ", "results/cache: ", "results is a file, not a folder"), ConfigError),
    Case("riskscores-n-train-below-threshold-rows",
         lambda k, t: _load(t, lambda c: c["studies"]["riskscores"].update(n_train=5, threshold_rows=20)),
         ("config key studies.riskscores: n_train (5) is not above threshold_rows (20)",
          "raise studies.riskscores.n_train or lower studies.riskscores.threshold_rows"), ConfigError),
    Case("mirror-without-download",
         lambda k, t: _load(t, lambda c: c["data"]["provo"].update(mirror="http://mirror.example/provo")),
         ("config key data.provo", "mirror is only used by source 'download'"), ConfigError),
    # ---------------------------------------------------------------- riskscores data (ACS PUMS)
    Case("acs-person-file-missing-column",
         lambda k, t: read_person_zip(
             _rezip_without(k.acs[0], t / "csv_pca.zip", "PINCP"), ["AGEP", "PINCP"]),
         ("csv_pca.zip: the person file lacks column(s) PINCP",)),
    Case("acs-non-numeric-cell",
         lambda k, t: read_person_zip(
             _rezip_with_text_cell(k.acs[0], t / "csv_pca.zip", "AGEP", 6, "forty"), ["AGEP", "PINCP"]),
         ("csv_pca.zip: column AGEP holds 1 non-numeric cell(s), the first 'forty' on line 8",)),
    Case("acs-n-eval-takes-the-whole-population",
         lambda k, t: task_rows(read_person_zip(k.acs[0], list(BASE_COLUMNS)), FOLKTABLES["ACSIncome"],
                                n_train=100, n_eval=10**6, seed=0),
         ("task ACSIncome: studies.riskscores.n_eval (1000000) takes the whole population", "lower n_eval")),
    Case("acs-zip-is-an-html-page",
         lambda k, t: read_person_zip(
             _write(t / "csv_pca.zip", HTML), ["AGEP"]),
         ("csv_pca.zip: not a readable Census zip",)),
    Case("acs-zip-truncated",
         lambda k, t: read_person_zip(
             _write(t / "csv_pca.zip", k.acs[0].read_bytes()[:2000]), ["AGEP"]),
         ("csv_pca.zip: not a readable Census zip",)),
    Case("acs-code-absent-from-dictionary", lambda k, t: _acs_export(k),
         ("column 'RAC1P': code '99' is not in the data dictionary",), UnmappedCode),
    Case("riskscores-scores-of-rows-not-in-the-task", lambda k, t: _acs_export(k, 1.0, ("r0", "x9")),
         ("m / ACSIncome: 1 scored rows are not in the task's rows", "row_id 'r1'")),
    Case("riskscores-nan-score-handed-to-subgroups", lambda k, t: _acs_export(k, 1.0, p_hat=(0.2, np.nan)),
         ("1 NaN scores (unparsed answers) left out of the subgroups study's input",), None, "log",
         lambda f: list(f["row_id"]) == ["r0"]),
    Case("acs-feature-absent-from-dictionary",
         _acs_feature_not_in_dictionary, ("column 'HOBBY'", "dictionary.csv"), UnmappedCode),
    Case("acs-dictionary-is-an-html-page",
         lambda k, t: read_dictionary(
             _write(t / "PUMS_Data_Dictionary_2018.csv", HTML)),
         ("PUMS_Data_Dictionary_2018.csv, line 1", "malformed data dictionary row")),
    # ---------------------------------------------------------------- nextword data (Provo)
    Case("provo-norms-empty-file", lambda k, t: _norms(t, b""),
         ("Provo_Corpus-Predictability_Norms.csv: not a readable CSV file",)),
    Case("provo-norms-html-page", lambda k, t: _norms(t, HTML),
         ("Provo_Corpus-Predictability_Norms.csv", "missing column(s) Text_ID")),
    Case("provo-local-copy-is-an-html-page",
         lambda k, t: sources.obtain(
             sources.provo_norms(), t / "out" / "norms.csv",
             local_dir=_write(t / "copy" / "Provo_Corpus-Predictability_Norms.csv", HTML).parent),
         ("Provo_Corpus-Predictability_Norms.csv", "data.provo.local_dir", "HTML page titled '404 Not Found'"),
         LocalCopyError),
    Case("nextword-samples-at-no-studied-position",
         lambda k, t: read_samples(
             _write(t / "samples.jsonl", b'{"text_id": 9, "word_num": 2, "samples": ["cat"]}\n'),
             known=pd.DataFrame({"text_id": [1, 1, 2], "word_num": [2, 3, 2]})),
         ("samples.jsonl: no sample at any studied position (3 positions of passages 1..2)",)),
    Case("nextword-samples-not-utf8",
         lambda k, t: read_samples(
             _write(t / "samples.jsonl", b'{"text_id": 1, "word_num": 2, "samples": ["' + LATIN1 + b'"]}\n')),
         ("samples.jsonl: not UTF-8 text",)),
    # ---------------------------------------------------------------- labelbias data (SNI)
    Case("sni-task-missing-key", lambda k, t: _sni_task(k, t, lambda raw: raw.pop("Instances"), None),
         ("not an SNI task file", "'Instances'")),
    Case("sni-task-empty-file", lambda k, t: _sni_task(k, t, None, b""),
         (".json: not an SNI task file (JSONDecodeError",)),
    Case("sni-task-not-utf8", lambda k, t: _sni_task(k, t, None, b'{"Definition": ["' + LATIN1 + b'"]}'),
         (".json: not an SNI task file (not UTF-8 text",)),
    Case("sni-task-list-names-a-path", _sni_listing,
         ("tasks.txt, line 2", "'../../../home/user/secret' is not a task name")),
    Case("labelbias-gold-label-absent-from-task", _labelbias_gold_not_in_labels,
         ("task 't1', row_id 'i2'", "gold label 'maybe' is not in the task's label set ['no', 'yes']")),
    # ---------------------------------------------------------------- decisionrisk data (MCQA)
    Case("mcqa-item-missing-key", lambda k, t: _piqa(k, t, lambda b: _drop_key_on_line(b, 4, "sol2")),
         ("valid.jsonl, line 4: missing key 'sol2'",)),
    Case("mcqa-empty-file", lambda k, t: _piqa(k, t, b""), ("valid.jsonl: no instances",)),
    Case("mcqa-not-utf8", lambda k, t: _piqa(k, t, b'{"goal": "' + LATIN1 + b'"}\n'), ("valid.jsonl: not UTF-8",)),
    Case("mcqa-html-page", lambda k, t: _piqa(k, t, HTML), ("valid.jsonl, line 1: not valid JSON",)),
    # ---------------------------------------------------------------- subgroups input
    Case("subgroups-input-missing-column", lambda k, t: _subgroups_file(k, t, k.instances.drop(columns="text")),
         ("sni_instances.parquet (source 'labelbias'): missing column(s) text",), InputError),
    Case("subgroups-design-with-empty-subgroups", _subgroups_equal_design_too_big,
         ("design equal-150, dataset 'sni'", "6 of 6 subgroups are empty", "fewer than 600 rows", "(NA)"),
         None, "log", _empty_subgroups_are_na),
    Case("subgroups-estimator-unit-without-rows", _estimator_empty_unit, ("unit 2 has no observations",)),
    # ---------------------------------------------------------------- metrics inputs
    Case("riskscores-single-class-evaluation-set",
         lambda k, t: metrics_frame(
             _scores([1, 1, 1, 1], [0.2, 0.6, 0.7, 0.9])),
         ("m / ACSIncome / numeric: AUC is undefined (every label is 1)",), None, UndefinedMetricWarning,
         lambda m: bool(np.isnan(m.loc[0, "auc"]) and np.isfinite(m.loc[0, ["ece", "brier", "accuracy"]]).all())),
    Case("riskscores-nan-scores",
         lambda k, t: metrics_frame(
             _scores([0, 1, 0, 1], [0.2, np.nan, 0.7, np.nan])),
         ("m / ACSIncome / numeric: 2 of 4 evaluation scores", "are NaN", "row_id 'r1', 'r3'", "n_unparsed"),
         None, "log", lambda m: bool(m.loc[0, "n_unparsed"] == 2 and m.loc[0, "n"] == 2)),
    Case("riskscores-scores-outside-the-unit-interval",
         lambda k, t: metrics_frame(
             _scores([0, 1, 0], [0.2, 1.5, -0.1])),
         ("m / ACSIncome / numeric: 2 of 3 scores (p_hat) are outside [0, 1]", "row_id 'r1', 'r2'")),
    Case("riskscores-importance-single-class", _importance_one_class,
         ("permutation importance: AUC is undefined (every label is 0)",), None, UndefinedMetricWarning,
         lambda m: bool(m["auc_drop"].isna().all() and list(m["feature"]) == ["AGEP", "SEX"])),
    # ---------------------------------------------------------------- tokenizers and models
    Case("local-model-path-that-does-not-exist", lambda k, t: _engine(t / "resources" / "models" / "gone"),
         ("resources/models/gone': no such local folder", "hub id has the form 'org/name'"), FileNotFoundError),
    Case("tokenizer-without-digit-tokens", lambda k, t: _numeric(k.letters_model, "answer 0."),
         ("letters: the vocabulary has no digit tokens for numeric answers",)),
    Case("tokenizer-cannot-spell-the-options", lambda k, t: _choice(k.letters_model, ("1", "2")),
         ("letters: continuation ' 1' encodes to no tokens",)),
    Case("tokenizer-maps-the-options-to-unknown", lambda k, t: _choice(k.words_model, ("maybe", "perhaps")),
         ("words: continuation ' maybe'", "unknown token '[UNK]'")),
    Case("model-hub-id-while-offline", lambda k, t: _hub_model(offline=True),
         (f"model '{HUB_ID}'", "HF_HUB_OFFLINE is set and the hub cache", "does not hold it",
          f"hf download {HUB_ID}", "local folder"), RuntimeError),
    Case("model-hub-unreachable", lambda k, t: _hub_model(offline=False, endpoint=f"http://127.0.0.1:{_closed_port()}"),
         (f"model '{HUB_ID}': the Hugging Face hub (http://127.0.0.1:", "is unreachable (connection refused)",
          "set HF_HUB_OFFLINE=1"), RuntimeError),
    Case("model-config-not-json",
         lambda k, t: _broken_model(k, t, lambda m: (m / "config.json").write_text("{model_type: gpt2}")),
         ("broken/config.json is not valid JSON (Expecting property name enclosed in double quotes: line 1, "
          "column 2)",), RuntimeError),
    Case("model-config-unknown-model-type", lambda k, t: _broken_model(k, t, lambda m: _set_model_type(m, "gpt9")),
         ("broken/config.json has model_type 'gpt9', which transformers", "does not know", "trust_remote_code"),
         RuntimeError),
    Case("model-folder-without-weights",
         lambda k, t: _broken_model(k, t, lambda m: (m / "model.safetensors").unlink()),
         ("broken holds no weights (model.safetensors or pytorch_model.bin)",), RuntimeError),
    Case("model-weights-truncated",
         lambda k, t: _broken_model(k, t, lambda m: _truncate(m / "model.safetensors", 4000)),
         ("broken/model.safetensors is not a readable safetensors file", "4000 bytes", "truncated or corrupt"),
         RuntimeError),
    # ---------------------------------------------------------------- the file system under results/
    Case("results-read-only", lambda k, t: _write_refused(t, errno.EROFS, existing="results"),
         ("cannot write", "results/riskscores/scores.parquet: ", "/results is on a read-only file system",
          "remount it read-write"), OSError),
    Case("results-read-only-at-the-job-log", lambda k, t: _log_refused(t),
         ("cannot write", "results/logs/job.log: ", "/results is on a read-only file system"), OSError),
    Case("output-folder-immutable", lambda k, t: _write_refused(t, errno.EPERM, existing="results/riskscores"),
         ("cannot write", "results/riskscores/scores.parquet: ", "does not permit writing in",
          "/results/riskscores (is it immutable?", "lsattr -d"), OSError),
    Case("disk-full-under-a-shard", lambda k, t: _shard_on_a_full_disk(t),
         ("cannot write", "shard0.parquet.chunks/chunk-000002.parquet: no space left on the device of",
          "df -h", "2 finished chunk(s) of this shard kept in", "a rerun resumes there"), OSError),
    Case("shard-output-truncated", lambda k, t: _truncated_shard(t),
         ("results/shard0.parquet: not a readable parquet file, truncated or corrupt",
          "delete it and rerun: the job that writes it runs again")),
    # ---------------------------------------------------------------- nextword samples (again)
    Case("nextword-samples-that-normalise-to-nothing",
         lambda k, t: read_samples(
             _write(t / "samples.jsonl", b'{"text_id": 1, "word_num": 2, "samples": ["...", "!"]}\n'),
             known=pd.DataFrame({"text_id": [1, 1, 2], "word_num": [2, 3, 2]})),
         ("samples.jsonl: no word in any sample",
          "all 2 sample(s) of the 1 record(s) at studied positions are punctuation or white space",
          "the first '...' on line 1")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    if case.error is not None:
        with pytest.raises(case.error) as err:
            case.call(kit, tmp_path)
        message = str(err.value)
        for name in case.names:
            assert name in message, f"{name!r} not in the message:\n{message}"
        innermost = Path(err.traceback[-1].path).resolve()
        assert innermost.is_relative_to(LIB), f"raised from {innermost}, not from the project's code"
        assert not (tmp_path / "pwned").exists()
        return
    assert case.na is not None
    if case.warning == "log":
        with caplog.at_level(logging.WARNING, logger="unsure"):
            result = case.call(kit, tmp_path)
        messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    else:
        assert isinstance(case.warning, type)
        with pytest.warns(case.warning) as record:
            result = case.call(kit, tmp_path)
        messages = [str(w.message) for w in record if issubclass(w.category, case.warning)]
    assert any(all(name in m for name in case.names) for m in messages), f"no warning naming {case.names}: {messages}"
    assert case.na(result), f"the result does not hold the expected NA:\n{result}"


def test_the_catalogue_is_large_and_distinct() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 20


ELSEWHERE = {
    "provo norms missing a column": "tests/test_nextword_data.py::test_missing_column_is_named",
    "unmapped ACS code in a row's text": "tests/test_riskscores_data.py::test_an_unmapped_code_names_column_and_code",
    "unknown config key, wrong type, unknown model": "tests/test_config.py::test_bad_config_names_the_key",
    "model name '../etc'": "tests/test_config.py::test_model_name_must_be_path_safe",
    "too few GPUs for a model's weights": (
        "tests/test_model_sizes.py::test_too_few_gpus_is_a_config_error_naming_model_estimate_and_need"
    ),
    "subgroups input columns and values": "tests/test_subgroups_inputs.py::test_bad_inputs_name_file_column_and_row",
    "subgroups input that is not parquet": "tests/test_subgroups_inputs.py::test_unreadable_file_is_named",
    "MCQA labels that do not line up": "tests/test_decisionrisk_data.py::test_loader_errors_name_the_file",
    "downloads: HTML, truncated, empty, dropped": "tests/test_download.py::test_fetch_failure_leaves_dest_alone",
    "slug of '..' and absolute paths": "tests/test_paths_io.py::test_slug_is_one_safe_component",
    "an API answering with an HTML page": (
        "tests/test_engine_api.py::test_an_html_page_is_not_taken_for_a_reply_without_choices"
    ),
}
"""Bad inputs tested at the same boundary by other test files (not repeated here)."""


@pytest.mark.parametrize("where", sorted(ELSEWHERE.values()))
def test_cases_tested_elsewhere_still_exist(where: str) -> None:
    path, name = where.split("::")
    assert re.search(rf"^def {name}\(", (REPO / path).read_text(encoding="utf-8"), re.MULTILINE), where


# --------------------------------------------------------------------------- workflow: nothing overwritten

SUBGROUPS_TINY = {
    "repetitions": 2,
    "equal_sizes": [10],
    "sr_trees": [10],
    "sr_depths": [1],
    "generated_rows": 600,
    "generated_subgroups": 6,
    "max_clusters": 4,
    "lasso_lambdas": 5,
    "inputs": {"labelbias": "study/instances.parquet", "decisionrisk": "generated", "riskscores": "generated"},
}
TARGETS = ("results/subgroups/scores/labelbias_units.parquet", "results/subgroups/scores/decisionrisk_units.parquet")


def _write_config(checkout: Path, name: str, edit: Callable[[dict[str, Any]], object]) -> str:
    raw = _demo()
    edit(raw)
    (checkout / name).write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return name


def _subgroups_config(raw: dict[str, Any]) -> None:
    raw["studies"]["subgroups"].update(SUBGROUPS_TINY)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout in which two sources of the subgroups study (one a user's file) were prepared."""
    from unsure.subgroups.generate import generate

    checkout = copy_workflow(tmp_path_factory.mktemp("finished") / "repo")
    (checkout / "study").mkdir()
    data = generate("labelbias", ["llm-a", "llm-b"], rows=600, subgroups=6, seed=3).instances
    data.to_parquet(checkout / "study" / "instances.parquet", index=False)
    config = _write_config(checkout, "good.yaml", _subgroups_config)
    run = snakemake(*TARGETS, "--configfile", config, "--cores", "2", cwd=checkout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return checkout


@pytest.fixture
def rerun(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished checkout (file times kept, so Snakemake sees it as up to date)."""
    return Path(shutil.copytree(finished, tmp_path / "repo", symlinks=True))


@pytest.mark.workflow
def test_a_broken_config_after_a_run_changes_no_result(rerun: Path) -> None:
    before = _digests(rerun / "results")

    def broken(raw: dict[str, Any]) -> None:
        _subgroups_config(raw)
        raw["studies"]["subgroups"]["repetition"] = 5  # a typo of repetitions

    config = _write_config(rerun, "broken.yaml", broken)
    result = snakemake(*TARGETS, "--configfile", config, "--cores", "1", cwd=rerun)
    assert result.returncode != 0
    assert "config key studies.subgroups.repetition: unknown key" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "site-packages" not in result.stdout + result.stderr
    assert _digests(rerun / "results") == before


@pytest.mark.workflow
def test_a_corrupted_input_fails_its_first_reader_and_keeps_other_results(rerun: Path) -> None:
    results = rerun / "results"
    before = _digests(results)
    study = rerun / "study" / "instances.parquet"
    study.write_bytes(study.read_bytes()[:400])  # cut off mid-file, as by a full disk or a killed copy
    later = time.time() + 5
    os.utime(study, (later, later))
    config = _write_config(rerun, "good.yaml", _subgroups_config)
    result = snakemake(*TARGETS, "--configfile", config, "--cores", "1", "--keep-going", cwd=rerun)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "study/instances.parquet (source 'labelbias'): cannot read it as parquet" in output
    assert re.search(r"Error in rule subgroups_prepare", output)
    failed = {"subgroups/scores/labelbias_rows.parquet", "subgroups/scores/labelbias_units.parquet",
              "subgroups/logs/prepare/labelbias.log"}  # fmt: skip
    after = _digests(results)
    assert {k: v for k, v in after.items() if k not in failed} == {k: v for k, v in before.items() if k not in failed}
    for name in failed - {"subgroups/logs/prepare/labelbias.log"}:  # the failed job's outputs: gone, never half-written
        assert name not in after or after[name] == before[name]
    log = (results / "subgroups" / "logs" / "prepare" / "labelbias.log").read_text(encoding="utf-8")
    assert "cannot read it as parquet" in log


# --------------------------------------------------------------------------- workflow: download faults


class _Mirror(BaseHTTPRequestHandler):
    """Serves the one ACS state zip in a chosen way: ``good``, ``html``, ``truncated`` or ``empty``."""

    mode: ClassVar[str] = "good"
    body: ClassVar[bytes] = b""

    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean."""

    def do_GET(self) -> None:
        if not self.path.endswith("/csv_pca.zip"):
            self.send_error(404)
        else:
            body = {"good": self.body, "html": HTML, "truncated": self.body[: len(self.body) // 2], "empty": b""}
            ctype = "text/html; charset=utf-8" if self.mode == "html" else "application/zip"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body[self.mode])))
            self.end_headers()
            self.wfile.write(body[self.mode])


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    from unsure.generate.acs import write_state_zip

    write_state_zip(tmp_path / "served.zip", state="CA", year=2018, n_rows=200, seed=4)
    _Mirror.body = (tmp_path / "served.zip").read_bytes()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Mirror)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/acs"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.workflow
def test_a_failed_download_leaves_no_file_and_a_rerun_fetches_it(
    checkout: Path, mirror: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    config = _write_config(
        checkout, "download.yaml", lambda c: c["data"]["acs"].update(source="download", states=["CA"], mirror=mirror)
    )
    target = checkout / "resources" / "data" / "acs" / "raw" / "2018" / "1-Year" / "csv_pca.zip"
    rel = str(target.relative_to(checkout))
    log = checkout / "results" / "logs" / "data" / "acs_fetch_state" / "ca.log"
    for mode, reason in [
        ("html", "HTML page"),
        ("truncated", "not a readable zip archive"),
        ("empty", "the file is empty"),  # a dropped connection: tests/test_download.py, at the library level
    ]:
        _Mirror.mode = mode
        result = snakemake(rel, "--configfile", config, "--cores", "1", cwd=checkout)
        assert result.returncode != 0, mode
        assert "Error in rule acs_fetch_state" in result.stdout + result.stderr, mode
        assert f"could not download {mirror}/csv_pca.zip" in log.read_text(encoding="utf-8"), mode
        assert reason in log.read_text(encoding="utf-8"), mode
        assert not target.exists(), mode
        leftovers = list(target.parent.iterdir()) if target.parent.exists() else []
        assert leftovers == [], f"{mode}: {leftovers}"
    _Mirror.mode = "good"
    result = snakemake(rel, "--configfile", config, "--cores", "1", cwd=checkout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert target.read_bytes() == _Mirror.body
    with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as zf:
        assert zf.testzip() is None


@pytest.mark.workflow
def test_the_workflow_rejects_a_model_key_given_twice(checkout: Path) -> None:
    """Snakemake's own YAML loader keeps the last of two equal keys: ``tiny-llama`` ran on
    GPT-2's weights. The workflow reads every config file again with the project's loader."""
    lines = (REPO / "config" / "demo.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
    at = lines.index("models:\n") + 1
    name = lines[at].split(":")[0].strip()
    doubled = [*lines[: at + 1], lines[at + 1].replace(lines[at + 1].split(":")[0].strip(), name, 1), *lines[at + 2 :]]
    (checkout / "doubled.yaml").write_text("".join(doubled), encoding="utf-8")
    result = snakemake("-n", "--configfile", "doubled.yaml", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"key {name!r} is given twice" in out and "doubled.yaml" in out and f"line {at + 2}" in out, out


# --------------------------------------------------------------------------- workflow: config files, `unsure run`

# Snakemake reads every --configfile while parsing its command line, before any code of the
# workflow runs: its loader evaluates YTE templates and reports a syntax error, a Python tag
# or a Latin-1 byte without file or line. `unsure run` (unsure.run) reads the same files with
# the project's loader first; these cases meet it where a user does, in process (no Snakemake
# is started: os.execvp would fail the test).

RUN_CASES: dict[str, tuple[dict[str, bytes], list[str], tuple[str, ...]]] = {
    "yaml-syntax-error": (
        {"bad.yaml": b"seed: 0\nstudies: {subgroups: [unclosed\n"},
        ["--configfile", "bad.yaml"],
        ("bad.yaml:3:1: not a valid config file (line 3, column 1)",),
    ),
    "python-tag": (
        {"bad.yaml": b"seed: !!python/object/apply:os.system ['touch pwned']\n"},
        ["--configfiles", "bad.yaml"],
        ("bad.yaml:1:7", "the Python tag !!python/object/apply:os.system is refused"),
    ),
    "latin-1-byte": (
        {"bad.yaml": b'seed: 0\nzoo: {seed: "' + LATIN1 + b'"}\n'},
        ["--configfile=bad.yaml"],
        ("bad.yaml: not UTF-8: byte 0xe9 at byte offset 24 (line 2)",),
    ),
    "missing-configfile": ({}, ["all", "--configfile", "nope.yaml"], ("nope.yaml: no such config file",)),
    "missing-default-config": (
        {},
        ["all", "-d", "elsewhere"],
        ("elsewhere/config/config.yaml: no such config file", "pass --configfile FILE (config/demo.yaml"),
    ),
    "second-file-names-the-key": (
        {"over.yaml": b"studies: {riskscores: {n_train: 5}}\n"},
        ["--configfile", "demo.yaml", "over.yaml"],
        ("demo.yaml, over.yaml: invalid config", "config key studies.riskscores: n_train (5) is not above"),
    ),
    "default-config-with-request-cache-a-file": (
        {"run/results/cache": b"", "run/config/config.yaml": b"request_cache: results/cache\n"},
        ["-d", "run"],
        ("config key request_cache: results/cache is a file, not a folder",),
    ),
    "config-override-on-the-command-line": (
        {"cache": b""},
        ["--configfile", "demo.yaml", "--config", "request_cache=cache"],
        ("config key request_cache: cache is a file, not a folder",),
    ),
}


@pytest.mark.parametrize("name", sorted(RUN_CASES))
def test_unsure_run_refuses_a_bad_config_without_starting_snakemake(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from unsure import run

    files, argv, names = RUN_CASES[name]
    shutil.copy(REPO / "config" / "demo.yaml", tmp_path / "demo.yaml")
    for rel, data in files.items():
        _write(tmp_path / rel, data)
    monkeypatch.chdir(tmp_path)

    def no_snakemake(*args: object) -> None:
        raise AssertionError(f"Snakemake was started: {args}")

    monkeypatch.setattr(os, "execvp", no_snakemake)
    assert run.main(["run", "-n", *argv]) == 2
    err = capsys.readouterr().err
    for part in names:
        assert part in err, f"{part!r} not in:\n{err}"
    assert err.startswith("unsure run: ") and "nothing was run" in err and "Traceback" not in err
    assert not (tmp_path / "pwned").exists()


def test_unsure_without_run_prints_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    from unsure import run

    assert run.main([]) == 2
    assert "usage: unsure run [snakemake arguments]" in capsys.readouterr().err
    assert run.main(["--help"]) == 0
    assert "usage: unsure run" in capsys.readouterr().out


def test_unsure_is_a_console_script() -> None:
    """``unsure run ...`` is what docs/configuration.md documents; ``python -m unsure.run`` is the same without it."""
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["unsure"] == "unsure.run:main"


def _run(*args: str, cwd: Path) -> Any:
    """``python -m unsure.run ARGS`` (``unsure run ARGS``) as a user runs it."""
    import subprocess
    import sys

    env = {**os.environ, "UNSURE_SLURM_PARTITION": "debug"}
    return subprocess.run(
        [sys.executable, "-m", "unsure.run", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.workflow
def test_unsure_run_refuses_a_yte_config_before_anything_evaluates_it(checkout: Path) -> None:
    (checkout / "bad.yaml").write_text(_yte(checkout), encoding="utf-8")
    result = _run("-n", "--configfile", "bad.yaml", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "bad.yaml:1:1: not a valid config file" in out and "__use_yte__ is refused" in out, out
    assert not (checkout / "pwned").exists(), "the YTE template was evaluated"


@pytest.mark.workflow
def test_unsure_run_runs_snakemake_on_a_good_config(checkout: Path) -> None:
    result = _run("-n", "--configfile", "config/demo.yaml", "config/untrained.yaml", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "This was a dry-run" in out and "unsure run:" not in out


@pytest.mark.workflow
def test_the_workflow_refuses_a_yte_default_config_before_snakemake_loads_it(checkout: Path) -> None:
    """Without --configfile the Snakefile loads config/config.yaml itself: it reads the file with the
    project's loader first, so a YTE template there is refused before Snakemake's loader runs it."""
    (checkout / "config" / "config.yaml").write_text(_yte(checkout), encoding="utf-8")
    result = snakemake("-n", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config/config.yaml:1:1: not a valid config file" in out and "__use_yte__ is refused" in out, out
    assert not (checkout / "pwned").exists(), "the YTE template was evaluated"


@pytest.mark.workflow
def test_the_workflow_stops_on_a_yte_configfile(checkout: Path) -> None:
    """Plain ``snakemake --configfile`` has evaluated the template (and dropped ``__use_yte__``)
    before the workflow runs; the workflow reads the file again and stops instead of running."""
    (checkout / "bad.yaml").write_text(_yte(checkout / "elsewhere"), encoding="utf-8")
    (checkout / "elsewhere").mkdir()
    result = snakemake("-n", "--configfile", "bad.yaml", cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "bad.yaml:1:1: not a valid config file" in out and "__use_yte__ is refused" in out, out


@pytest.mark.workflow
def test_a_missing_default_config_says_what_to_pass(checkout: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    result = snakemake("-n", "all", "--directory", str(tmp_path / "elsewhere"), cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config/config.yaml: no such config file" in out and "pass --configfile FILE" in out, out
    assert "Traceback" not in out


@pytest.mark.workflow
def test_an_empty_riskscores_study_is_skipped(checkout: Path) -> None:
    """``studies.riskscores.models: []`` (importance and evidence left at every model of the study):
    `all` skips the study with a warning, as any study without models, instead of an IndexError."""

    def empty(raw: dict[str, Any]) -> None:
        risk = raw["studies"]["riskscores"]
        risk["models"] = []
        for key in ("importance", "evidence"):
            risk[key].pop("models", None)

    config = _write_config(checkout, "empty.yaml", empty)
    result = snakemake("-n", "--configfile", config, cwd=checkout)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "studies.riskscores.models is empty: `all` skips the riskscores study" in out
    assert "riskscores_infer" not in out
