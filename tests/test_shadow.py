"""The shadow of the paper config (``tools/shadow.py``): ``config/config.yaml`` unchanged but for
``config/shadow.yaml``, every model entry a tiny model of its family, the API models on the
loopback server, run to the last table and figure of every study.

CI runs the CI variant (``python tools/shadow.py --ci``): the same merged config with the
entries that differ only in size folded into one (:data:`FOLDED`), so that every study, every
prompting mode and every (family, tokenizer, instruct, backend, template) combination of the
paper config runs within CI's budget. The full variant (every entry) is docs/slurm.md's command.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shadow import (
    CI_SNI_TASKS,
    CI_STATES,
    OVERRIDE,
    PAPER,
    REPO,
    combination,
    leaf_paths,
    merged_config,
    read_yaml,
    served_zoo,
    shadow_config,
    snakemake_command,
)
from unsure.config import Config, deep_merge, parse_config

SHARED = REPO.parent / "shared" / "data"

STUDIES = ("riskscores", "nextword", "subgroups", "labelbias", "decisionrisk")

FOLDED = {
    # folded entry: the entry CI keeps (same family shadow, tokenizer, instruct, backend and
    # template; the paper's entries differ in size only, which a shadow cannot tell apart)
    "gemma-7b": "gemma-2b",
    "gemma-7b-it": "gemma-2b-it",
    "mixtral-8x22b": "mixtral-8x7b",
    "mixtral-8x22b-instruct": "mixtral-8x7b-instruct",
    "llama-3-70b": "llama-3-8b",
    "llama-3-70b-instruct": "llama-3-8b-instruct",
    "gpt2-large": "gpt2",
    "llama-2-13b": "llama-2-7b",
    "llama-2-13b-chat": "llama-2-7b-chat",
    "falcon-40b": "falcon-7b",
    "falcon-40b-instruct": "falcon-7b-instruct",
}
"""What CI folds together, and nothing else: the API models are families of their own
(gpt-4o-mini and gpt-3.5-turbo both run), as are Mistral and Mixtral (dense vs mixture of
experts, one tokenizer)."""


@pytest.fixture(scope="module")
def shared() -> Path:
    """The shadow's real tokenizers and SNI files live in ../shared/data."""
    for need in ("tokenizers", "sni", "nltk_data"):
        if not (SHARED / need).is_dir():
            pytest.skip(f"the shadow run needs {SHARED / need} (the real tokenizers and data beside the repository)")
    return SHARED


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(tree, Mapping) or key not in tree:
            return KeyError
        tree = tree[key]
    return tree


def test_deep_merge_merges_mappings_and_replaces_everything_else() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}
    override = {"a": {"c": [3], "g": None}, "e": "flat"}
    assert deep_merge(base, override) == {"a": {"b": 1, "c": [3], "g": None}, "d": "x", "e": "flat"}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}, "the inputs stay as they were"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_terminated_shadow_run_stops_snakemake_and_every_job(tmp_path: Path) -> None:
    """A CI timeout killed the shadow command while snakemake went on running jobs against a
    server that was gone; now its snakemake (here a shell with a job) stops with it."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(REPO / 'tools')!r})\n"
        "from shadow import _stream\n"
        "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(143))\n"
        f"_stream(['bash', '-c', 'sleep 300 & echo $! > {tmp_path}/job.pid; sleep 300'], dict(os.environ), "
        f"Path('{tmp_path}/log'))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    pid_file = tmp_path / "job.pid"
    for _ in range(200):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    job = int(pid_file.read_text())
    assert _alive(job)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    for _ in range(100):
        if not _alive(job):
            break
        time.sleep(0.05)
    assert not _alive(job), "the job outlived the shadow command"


@pytest.mark.usefixtures("shared")
def test_the_merged_config_is_the_paper_config_except_for_the_override_keys() -> None:
    paper, override, merged = read_yaml(REPO / PAPER), read_yaml(REPO / OVERRIDE), merged_config()
    assert set(override) <= set(Config.model_fields), "the override is a plain partial config"
    overridden = set(leaf_paths(override))

    def under_override(path: tuple[str, ...]) -> bool:
        return any(path[: len(o)] == o or o[: len(path)] == path for o in overridden)

    for path in set(leaf_paths(paper)) | set(leaf_paths(merged)):
        if not under_override(path):
            assert _get(merged, path) == _get(paper, path), ".".join(path)
    for path in overridden:  # every override key took effect (local paths made absolute)
        got, want = _get(merged, path), _get(override, path)
        assert got == want or (isinstance(want, str) and got == str((REPO / want).resolve())), ".".join(path)
    parse_config(merged)


@pytest.mark.usefixtures("shared")
def test_every_paper_model_entry_is_a_cpu_shadow_of_its_own_family() -> None:
    paper, merged = read_yaml(REPO / PAPER), merged_config()
    assert list(merged["models"]) == list(paper["models"])
    for name, entry in merged["models"].items():
        real = paper["models"][name]
        assert {k: entry[k] for k in real if k not in ("id", "gpus", "base_url")} == {
            k: v for k, v in real.items() if k not in ("id", "gpus", "base_url")
        }, name
        if entry.get("backend") == "openai":
            assert entry["id"] == real["id"], "the API model's name is what the requests carry"
            assert entry["base_url"].startswith("http://127.0.0.1:"), name
            assert entry["api_key_env"] != "OPENAI_API_KEY", "never the user's real key"
            continue
        assert entry["gpus"] == 0, name
        family = entry["id"].removeprefix("resources/models/shadow-")
        assert family in real["id"].lower(), f"{name} ({real['id']}) is shadowed by another family: {family}"
        spec = merged["zoo"]["models"][f"shadow-{family}"]
        if spec.get("tokenizer"):
            assert Path(spec["tokenizer"]).parent == (SHARED / "tokenizers").resolve(), name
    assert set(merged["zoo"]["models"]) == {
        *(Path(e["id"]).name for e in merged["models"].values() if e.get("backend") != "openai"),
        Path(merged["studies"]["decisionrisk"]["embedder"]).name,
        *(served_zoo(n) for n, e in merged["models"].items() if e.get("backend") == "openai"),
    }, "every zoo entry of the override is a family some entry uses"


@pytest.mark.usefixtures("shared")
def test_ci_folds_only_entries_of_one_combination_and_keeps_every_study_and_prompting_mode() -> None:
    paper, full = read_yaml(REPO / PAPER), merged_config()
    ci, folds = shadow_config(ci=True)
    assert folds == FOLDED
    assert set(ci["models"]) | set(FOLDED) == set(paper["models"]) and not set(ci["models"]) & set(FOLDED)
    for folded, kept in FOLDED.items():
        assert combination(folded, full) == combination(kept, full)
    assert {combination(n, full) for n in ci["models"]} == {combination(n, full) for n in full["models"]}
    for study in STUDIES:
        want = [FOLDED.get(m, m) for m in full["studies"][study].get("models", [])]
        assert ci["studies"][study].get("models", []) == list(dict.fromkeys(want)), study
    modes = {
        "riskscores": ("prompting", "tasks"),
        "nextword": ("temperatures", "chat_modes", "biased_models", "token_models", "finetune"),
        "labelbias": ("shots", "lora", "content_free_inputs", "chat_template"),
        "decisionrisk": ("encoder", "benchmarks", "injections"),
        "subgroups": ("inputs",),
    }
    for study, keys in modes.items():
        for key in keys:
            assert ci["studies"][study].get(key) == full["studies"][study].get(key), f"{study}.{key}"
    # importance and evidence: as the paper's, on one model per (backend, instruct), XGBoost always
    for analysis in ("importance", "evidence"):
        spec, full_spec = ci["studies"]["riskscores"][analysis], full["studies"]["riskscores"][analysis]
        assert {k: v for k, v in spec.items() if k != "models"} == {k: v for k, v in full_spec.items() if k != "models"}
        analysed = [FOLDED.get(m, m) for m in full_spec.get("models") or full["studies"]["riskscores"]["models"]]
        kinds = {(ci["models"][m].get("backend", "hf"), bool(ci["models"][m].get("instruct"))) for m in analysed}
        assert len(spec["models"]) == len(kinds) == 3 and set(spec["models"]) <= set(analysed), spec
        assert {
            (ci["models"][m].get("backend", "hf"), bool(ci["models"][m].get("instruct"))) for m in spec["models"]
        } == kinds
    # the ACS records: a few of the paper's states, generated, with at least as many rows in all
    acs, full_acs = ci["data"]["acs"], full["data"]["acs"]
    assert acs["source"] == full_acs["source"] == "generated"
    assert acs["states"] == [s for s in full_acs["states"] if s in CI_STATES] and len(acs["states"]) == len(CI_STATES)
    rows = acs["generated_rows_per_state"] * len(acs["states"])
    assert rows >= full_acs["generated_rows_per_state"] * len(full_acs["states"])
    assert {k: v for k, v in acs.items() if k not in ("states", "generated_rows_per_state")} == {
        k: v for k, v in full_acs.items() if k not in ("states", "generated_rows_per_state")
    }
    assert ci["data"]["acs"] is not full_acs and full_acs["states"] == paper["data"]["acs"]["states"]
    # the SNI tasks: those of CI_SNI_TASKS, all of them among the shadow's, the rest of data.sni unchanged
    sni, full_sni = ci["data"]["sni"], full["data"]["sni"]
    assert sni["tasks"] == [t for t in full_sni["tasks"] if t in CI_SNI_TASKS]
    assert len(sni["tasks"]) == len(CI_SNI_TASKS)
    assert {k: v for k, v in sni.items() if k != "tasks"} == {k: v for k, v in full_sni.items() if k != "tasks"}


def _summary(work: Path) -> list[dict[str, str]]:
    """``snakemake --summary``: every output file of ``rule all``'s DAG with its status."""
    result = subprocess.run(
        snakemake_command(REPO, work, "--summary", "all"), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line.split("\t") for line in result.stdout.splitlines() if "\t" in line]
    header = lines[0]
    return [dict(zip(header, row, strict=False)) for row in lines[1:]]


@pytest.mark.workflow
@pytest.mark.whole_machine
@pytest.mark.usefixtures("shared")
def test_the_ci_shadow_run_ends_with_every_table_and_figure_of_every_study(tmp_path: Path) -> None:
    before = time.time()
    work = tmp_path / "shadow"
    cmd = [sys.executable, str(REPO / "tools" / "shadow.py"), "--ci", "--cores", "2", "--port", "0"]
    cmd += ["--workdir", str(work)]
    with subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            stdout, _ = proc.communicate(timeout=1500)
        except subprocess.TimeoutExpired:
            # SIGTERM, not subprocess.run's SIGKILL: the shadow command then stops its snakemake
            # and every job, which would otherwise run on into the next tests
            proc.terminate()
            stdout, _ = proc.communicate(timeout=120)
            pytest.fail(f"the CI shadow run took over 1500 s:\n{stdout[-5000:]}")
    assert proc.returncode == 0, stdout[-5000:]
    assert "shadow run finished" in stdout.splitlines()[-1]

    # every table and figure of every study in the dry run's DAG of the same merged config exists
    summary = _summary(work)
    outputs = [row for row in summary if row["output_file"].split("/")[2:3] in (["tables"], ["figures"])]
    # and the per-model uncertainty profile, which reads every study's results
    assert {row["output_file"].split("/")[1] for row in outputs} == {*STUDIES, "profile"}
    for row in outputs:
        path = work / row["output_file"]
        assert path.is_file() and path.stat().st_size > 0, row["output_file"]
        assert row["status"] == "ok", row
    for study in STUDIES:
        for kind in ("tables", "figures"):
            assert any(r["output_file"].startswith(f"results/{study}/{kind}/") for r in outputs), (study, kind)
    again = subprocess.run(snakemake_command(REPO, work, "-n", "all"), capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in again.stdout + again.stderr

    # every prompting mode of the paper config ran, through every model that has it
    cfg = parse_config(read_yaml(work / "shadow-config.yaml"))
    results = work / "results"
    scores = pd.read_parquet(results / "riskscores" / "scores" / "scores.parquet")
    for model in cfg.studies.riskscores.models:
        assert set(scores.loc[scores["model"] == model, "prompting"]) == {"multiple_choice", "numeric"}, model
    for model, entry in cfg.study_models("nextword").items():
        nw = cfg.studies.nextword
        modes = nw.chat_modes if entry.instruct else [f"t{t:g}" for t in nw.temperatures]
        for mode in modes:
            stats = json.loads((results / "nextword" / "samples" / model / f"{mode}_stats.json").read_text())
            assert stats, (model, mode)
    for model in cfg.studies.labelbias.models:
        metrics = pd.read_parquet(results / "labelbias" / "scores" / f"{model}_metrics.parquet")
        want = {"none", "cc", "dc", "looc"} | ({"lora"} if model in cfg.studies.labelbias.lora.models else set())
        assert set(metrics["method"]) == want, model
        assert set(metrics["k"]) == set(cfg.studies.labelbias.shots), model
    confidences = pd.read_parquet(results / "decisionrisk" / "scores" / "confidences" / "anli.parquet")
    methods = confidences.groupby("model")["method"].agg(set)
    assert methods[cfg.studies.decisionrisk.encoder] == {"softmax"}
    for model, entry in cfg.study_models("decisionrisk").items():
        # log-likelihoods where the backend has them (a chat API has none), verbal confidences of chat models
        want = {"loglik"} if entry.backend == "hf" else set()
        assert methods[model] == want | ({"verbal"} if entry.instruct else set()), model

    # nothing was written into the repository's own results/ or resources/
    for top in ("results", "resources"):
        touched = [p for p in (REPO / top).rglob("*") if p.stat().st_mtime > before] if (REPO / top).is_dir() else []
        assert not touched, touched[:5]
