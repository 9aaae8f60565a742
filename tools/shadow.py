"""A shadow run of the paper config: try ``config/config.yaml`` before spending GPU hours.

The shadow config is ``config/config.yaml`` with ``config/shadow.yaml``, a plain partial
config, deep-merged over it (:func:`deep_merge`: mappings merge key by key, anything else
in the override replaces the paper's value). The override maps every model entry to a
tiny randomly initialised model of its family (declared once per family under
``zoo.models``: the family's real tokenizer files where ``../shared/data/tokenizers`` has
them, the zoo's trained tokenizer otherwise), points the API models at a loopback
OpenAI-compatible server (``tools/openai_server.py``, 127.0.0.1 only, its fake key
only in the run's environment), takes generated data (or the real local files the
pipeline can read) and shrinks sizes and shards. Every study, model entry, prompting mode
and table and figure of the paper config is kept.

Where those tokenizer folders are absent (a clone without ``../shared`` beside it),
:func:`provide_tokenizers` fetches each family's tokenizer files and ``config.json``, no
weights, from the Hugging Face hub (:func:`fetch_tokenizer`) into
``resources/tokenizers/<folder>`` (:data:`TOKENIZER_CACHE`; reused without network by
every later shadow run), or takes them from a folder the user names (``--tokenizers DIR``,
offline), and points the merged config at them.

:func:`run` writes the merged config into its own working directory (default
``.shadow/paper``), never into the repository's ``results/`` or ``resources/`` (but for
the tokenizer files it fetches), builds the served model, starts the server and runs
``snakemake all`` there with ``--directory``.

The CI variant (``--ci``) additionally folds together the model entries that differ only
in size (:func:`fold_models`): one entry per distinct (family, tokenizer, instruct,
backend, template) combination (:func:`combination`) is kept, and every study's reference
to a folded entry points at the one kept. It also generates the ACS records of a few
states (:data:`CI_STATES`) rather than all 51, each with as many rows as all of them had
together (:func:`fold_states`): one generator job per state is all a state changes. And it
scores four of the seven SNI tasks (:func:`fold_sni_tasks`), and runs riskscores' importance
and evidence analyses on one model per (backend, instruct) (:func:`fold_riskscores_analyses`).

    python tools/shadow.py [--ci] [--cores N] [--workdir DIR] [--port P] [--tokenizers DIR] [-n]
                            [snakemake options]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from huggingface_hub import snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from unsure.config import ZOO_DIR, ConfigError, deep_merge, parse_config
from unsure.engine.pretrained import TOKENIZER_FILES

REPO = Path(__file__).resolve().parents[1]
"""The repository: the Snakefile, ``config/config.yaml`` and ``config/shadow.yaml``."""

PAPER = "config/config.yaml"
OVERRIDE = "config/shadow.yaml"


def served_zoo(api_name: str) -> str:
    """The zoo entry (declared in the override) that the loopback server answers API model
    ``api_name``'s requests with: one per API model, trained on the prompts of the studies
    that run it (a tiny model taught several studies' formats answers none of them)."""
    return f"shadow-{api_name}"


SERVED_REPLY_TOKENS = 24
"""Replies of the loopback server end after this many tokens (``finish_reason: length``): its
random model never stops by itself, and a chat API's numeric answers ask for 128."""

Combination = tuple[str, str, bool, str, str | None]
"""(family, tokenizer, instruct, backend, template) of a model entry in the shadow."""


class ShadowError(RuntimeError):
    """The shadow run cannot start: the message names what is missing and where."""


# --------------------------------------------------------------------------- merging


def leaf_paths(tree: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Key paths of every non-mapping value in a nested mapping (an empty mapping is a leaf)."""
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            yield from leaf_paths(value, (*prefix, str(key)))
    else:
        yield prefix


def read_yaml(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        raw = yaml.safe_load(f) or {}
    if not isinstance(raw, dict):
        raise ShadowError(f"{path}: a config must be a mapping at the top level")
    return raw


def _local_paths(cfg: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """(mapping, key) of every config value naming a local input the user has (a folder or
    file outside the run's working directory): relative ones are relative to the repository."""
    for spec in (cfg.get("zoo") or {}).get("models", {}).values():
        if spec.get("tokenizer"):
            yield spec, "tokenizer"
    for source in (cfg.get("data") or {}).values():
        if isinstance(source, dict) and source.get("local_dir"):
            yield source, "local_dir"
    nextword = (cfg.get("studies") or {}).get("nextword") or {}
    for key in ("nltk_data", "word_vectors_path"):
        if nextword.get(key):
            yield nextword, key
    files = nextword.get("sample_files") or {}
    for name in files:
        yield files, name


def merged_config(
    repo: Path = REPO, *, override: str | Path | None = None, tokenizers: str | Path | None = None
) -> dict[str, Any]:
    """``config/config.yaml`` with the override merged over it, local input paths made absolute,
    and absent tokenizer folders provided (:func:`provide_tokenizers`; ``tokenizers``: the
    user's folder of them) before the other local inputs are checked, so that a clone without
    ``../shared`` gets its tokenizers whatever else it lacks.

    Raises:
        ShadowError: a local input the override names does not exist, or a tokenizer cannot be had.
    """
    paper = read_yaml(repo / PAPER)
    cfg = deep_merge(paper, read_yaml(override or repo / OVERRIDE))
    for mapping, key in _local_paths(cfg):
        path = Path(mapping[key])
        mapping[key] = str(path if path.is_absolute() else (repo / path).resolve())
    provide_tokenizers(cfg, paper, repo=repo, folder=tokenizers)
    missing = [mapping[key] for mapping, key in _local_paths(cfg) if not Path(mapping[key]).exists()]
    if missing:
        raise ShadowError(
            "the shadow config names local inputs that do not exist: "
            + ", ".join(missing)
            + " (the real tokenizers and data live in ../shared/data beside the repository; "
            "point the override's paths at your copies)"
        )
    return cfg


# --------------------------------------------------------------------------- tokenizers


TOKENIZER_CACHE = Path("resources/tokenizers")
"""Where the families' tokenizer files fetched from the hub go (relative to the repository):
one folder per tokenizer folder name of the override, shared by every shadow variant and
working directory, so that a later run, offline too, reuses them."""

HUB_TOKENIZERS: dict[str, str] = {
    # gemma-2b-it's own files (../shared pairs its config and template with Gemma-2's
    # tokenizer.json, the same 256k vocabulary, as gemma-2b-it's was not to be had there)
    "gemma-it-hybrid": "google/gemma-2b-it",
    # the paper's roberta-large has roberta-base's vocabulary
    "roberta-base": "FacebookAI/roberta-base",
}
"""The hub repo of each tokenizer folder of the override that is not named after a paper
``models:`` entry; one that is (``gpt2``, ``llama-2-7b``, ``mistral-7b-instruct``, ...) is that
entry's ``id`` at its ``revision`` (:func:`hub_source`), the model the paper run loads."""

HUB_FILES = ("config.json", *sorted(TOKENIZER_FILES), "chat_template.jinja", "chat_template.json")
"""The files fetched of a family's hub repo (those it has; top level only, never weights): what
the zoo builds a family's model from (``config.json``'s architecture, :data:`TOKENIZER_FILES`)
and the chat template files :func:`combination` reads."""

FETCHED = "fetched.json"
"""Written last into a fetched folder (repo id, revision, files): a folder that has it is
complete and is reused without the hub."""


@dataclass(frozen=True)
class HubSource:
    """Where a tokenizer folder's files come from on the hub."""

    repo_id: str
    revision: str | None = None


def hub_source(folder: str, paper: Mapping[str, Any]) -> HubSource | None:
    """The hub repo of tokenizer folder ``folder`` (its name in the override): the paper
    config's ``models:`` entry of that name, else :data:`HUB_TOKENIZERS`; ``None``: unknown."""
    entry = (paper.get("models") or {}).get(folder)
    if isinstance(entry, Mapping) and entry.get("id") and entry.get("backend", "hf") == "hf":
        revision = entry.get("revision")
        return HubSource(str(entry["id"]), str(revision) if revision is not None else None)
    if folder in HUB_TOKENIZERS:
        return HubSource(HUB_TOKENIZERS[folder])
    return None


def _shown(path: Path, repo: Path) -> str:
    return str(path.relative_to(repo)) if path.is_relative_to(repo) else str(path)


def provide_tokenizers(
    cfg: dict[str, Any], paper: Mapping[str, Any], *, repo: Path = REPO, folder: str | Path | None = None
) -> None:
    """Point every zoo entry of ``cfg`` (absolute paths) at its tokenizer files: with ``folder``
    (``--tokenizers``), that folder's subfolder of the same name, for every entry (offline);
    else the override's folder where it exists (``../shared``: CI), else the files fetched
    from the hub into :data:`TOKENIZER_CACHE` (:func:`fetch_tokenizer`).

    Raises:
        ShadowError: ``folder`` lacks one, no hub repo is known for one, or the hub fails.
    """
    specs = [s for s in ((cfg.get("zoo") or {}).get("models") or {}).values() if s.get("tokenizer")]
    names = sorted({Path(s["tokenizer"]).name for s in specs})
    if folder is not None:
        root = Path(folder).resolve()
        lacking = [n for n in names if not (root / n).is_dir()]
        if lacking:
            raise ShadowError(
                f"--tokenizers {root}: no folder {', '.join(lacking)} in it (it is laid out like "
                f"../shared/data/tokenizers: one folder per tokenizer, named as in {OVERRIDE}, holding "
                f"the files {', '.join(HUB_FILES)} that the model's hub repo has)"
            )
        for spec in specs:
            spec["tokenizer"] = str(root / Path(spec["tokenizer"]).name)
        return
    absent = sorted({Path(s["tokenizer"]).name for s in specs if not Path(s["tokenizer"]).exists()})
    if not absent:
        return
    sources = {name: hub_source(name, paper) for name in absent}
    unknown = [name for name, source in sources.items() if source is None]
    if unknown:
        raise ShadowError(
            f"no tokenizer folder {', '.join(unknown)} ({OVERRIDE}'s zoo: entries) and no hub repo known for "
            f"it (a paper models: entry of that name, or HUB_TOKENIZERS in tools/shadow.py): pass --tokenizers DIR"
        )
    cache = repo / TOKENIZER_CACHE
    wanted = sorted({str(Path(s["tokenizer"]).parent) for s in specs if Path(s["tokenizer"]).name in absent})
    print(
        f"shadow: no tokenizer folder {', '.join(absent)} in {', '.join(wanted)}: their tokenizer files and "
        f"config.json (no weights) from the Hugging Face hub, in {_shown(cache, repo)}/ "
        "(or pass --tokenizers DIR, a folder of your own)",
        flush=True,
    )
    fetched = {}
    for name, source in sources.items():
        assert source is not None
        dest = cache / name
        if is_fetched(dest, source):
            print(f"shadow:   {name}: {_shown(dest, repo)}, fetched before from {source.repo_id}", flush=True)
        else:
            print(f"shadow:   {name}: https://huggingface.co/{source.repo_id} -> {_shown(dest, repo)}", flush=True)
            fetch_tokenizer(name, source, cache)
            files = sorted(p.name for p in dest.iterdir() if p.is_file() and p.name != FETCHED)
            print(f"shadow:   {name}: {', '.join(files)}", flush=True)
        fetched[name] = dest
    for spec in specs:
        name = Path(spec["tokenizer"]).name
        if name in fetched:
            spec["tokenizer"] = str(fetched[name])


def is_fetched(folder: Path, source: HubSource) -> bool:
    """Whether ``folder`` holds a completed fetch of ``source`` (its :data:`FETCHED` record)."""
    try:
        recorded = json.loads((folder / FETCHED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(recorded, dict) and (recorded.get("repo_id"), recorded.get("revision")) == (
        source.repo_id,
        source.revision,
    )


def fetch_tokenizer(name: str, source: HubSource, cache: Path) -> Path:
    """``cache/name``: :data:`HUB_FILES` of ``source``'s hub repo, downloaded with the user's
    token (``HF_TOKEN`` or ``hf auth login``'s, which ``huggingface_hub`` reads), unless an
    earlier fetch of the same repo and revision completed there (then no network at all).

    The files are downloaded into ``cache/name.part`` (which a later fetch resumes) and
    moved into place once complete.

    Raises:
        ShadowError: the hub refuses or cannot be reached; the message names the repo and the fix.
    """
    dest = cache / name
    if is_fetched(dest, source):
        return dest
    if dest.exists() and not (dest / FETCHED).is_file():
        raise ShadowError(
            f"{dest} holds no {FETCHED}, so the shadow did not fetch it and will not replace it: move it away, "
            f"or pass --tokenizers {cache} to use it as it is"
        )
    part = cache / f"{name}.part"
    try:
        snapshot_download(source.repo_id, revision=source.revision, local_dir=part, allow_patterns=list(HUB_FILES))
    except Exception as err:  # the hub's errors, its HTTP client's (which differs by version), a malformed id
        raise ShadowError(hub_failure(name, source, err)) from None
    files = sorted(p.name for p in part.iterdir() if p.is_file()) if part.is_dir() else []
    if not {"tokenizer.json", "tokenizer.model", "vocab.json"} & set(files):
        raise ShadowError(
            f"https://huggingface.co/{source.repo_id} has no tokenizer files at its top level "
            f"({', '.join(files) or 'none of ' + ', '.join(HUB_FILES)}): name another repo for {name} "
            "in HUB_TOKENIZERS in tools/shadow.py, or pass --tokenizers DIR"
        )
    record = {"repo_id": source.repo_id, "revision": source.revision, "files": files}
    (part / FETCHED).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if dest.exists():  # an earlier fetch of another repo or revision (checked above)
        shutil.rmtree(dest)
    part.rename(dest)
    return dest


def hub_failure(name: str, source: HubSource, err: BaseException) -> str:
    """What a failed fetch of ``source`` (tokenizer folder ``name``) says: the repo, the reason
    and the fix, rather than ``huggingface_hub``'s traceback."""
    url = f"https://huggingface.co/{source.repo_id}"
    at = f" at revision {source.revision!r}" if source.revision else ""
    login = "log in here with that account (`hf auth login`, or set HF_TOKEN to one of its tokens)"
    status = err.response.status_code if isinstance(err, HfHubHTTPError) else None
    if isinstance(err, GatedRepoError):
        why = f"the model is gated: accept its licence at {url} while logged in there, then {login}"
    elif isinstance(err, RevisionNotFoundError):
        why = f"the repo has no revision {source.revision!r} (the paper config's models: entry names it)"
    elif isinstance(err, RepositoryNotFoundError):
        why = f"{url} does not exist or is private to another account; with access to it, {login}"
    elif status in (401, 403):
        why = f"the hub refused access ({status}): accept the model's licence at {url}, then {login}"
    elif isinstance(err, LocalEntryNotFoundError):
        why = "the hub cannot be reached (offline, or HF_HUB_OFFLINE is set): connect"
    else:
        why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}".rstrip(": ")
    return (
        f"cannot fetch the tokenizer files of {name} from the Hugging Face hub ({source.repo_id}{at}): {why}; "
        f"or pass --tokenizers DIR, a folder laid out like ../shared/data/tokenizers (one folder per tokenizer, "
        f"here {name}/, holding its model's tokenizer files and config.json)"
    )


# --------------------------------------------------------------------------- folding


def combination(name: str, cfg: Mapping[str, Any]) -> Combination:
    """What a model entry of the (merged) config exercises: its family (the zoo entry it is
    built from; an API model is its own family), tokenizer (the real folder's name, or the
    zoo's trained one), instruct, backend and chat template (``None`` where no template is
    used: base models and encoders)."""
    entry = cfg["models"][name]
    instruct = bool(entry.get("instruct", False))
    backend = entry.get("backend", "hf")
    if backend == "openai":
        return (f"api:{entry['id']}", f"served:{served_zoo(name)}", instruct, backend, "server" if instruct else None)
    parts = Path(entry["id"]).parts
    if len(parts) != 3 or "/".join(parts[:2]) != ZOO_DIR:
        raise ShadowError(f"models.{name}: {entry['id']!r} is not a shadow model (resources/models/<zoo entry>)")
    zoo_name = parts[2]
    spec = cfg["zoo"]["models"][zoo_name]
    tokenizer = Path(spec["tokenizer"]).name if spec.get("tokenizer") else f"zoo:{spec['architecture']}"
    template = None
    if instruct and entry.get("kind", "causal") == "causal":
        if entry.get("chat_template"):
            template = "config"
        elif spec.get("tokenizer"):
            template = "tokenizer" if _has_chat_template(Path(spec["tokenizer"])) else "engine default"
        else:
            template = "zoo ChatML" if spec.get("chat") else "engine default"
    return (zoo_name, tokenizer, instruct, backend, template)


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    path = folder / "tokenizer_config.json"
    return path.is_file() and bool(json.loads(path.read_text(encoding="utf-8")).get("chat_template"))


def fold_models(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The config with one model entry per :func:`combination` (the first in ``models:``
    order) and every reference to another entry of the same combination pointing at it.

    Returns the folded config and ``{folded entry: the entry kept}``.
    """
    kept: dict[Combination, str] = {}
    folds: dict[str, str] = {}
    for name in cfg["models"]:
        key = combination(name, cfg)
        if key in kept:
            folds[name] = kept[key]
        else:
            kept[key] = name
    out = copy.deepcopy(dict(cfg))
    out["models"] = {name: entry for name, entry in out["models"].items() if name not in folds}

    def names(values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        return list(dict.fromkeys(folds.get(v, v) for v in values))

    studies = out.get("studies", {})
    for study in studies.values():
        if "models" in study:
            study["models"] = names(study["models"])
    rs = studies.get("riskscores", {})
    for analysis in ("importance", "evidence"):
        if rs.get(analysis, {}).get("models") is not None:
            rs[analysis]["models"] = names(rs[analysis]["models"])
    nw = studies.get("nextword", {})
    for field in ("large_models", "biased_models", "token_models"):
        if field in nw:
            nw[field] = names(nw[field])
    if nw.get("finetune", {}).get("model") in folds:
        nw["finetune"]["model"] = folds[nw["finetune"]["model"]]
    lb = studies.get("labelbias", {})
    if lb.get("lora", {}).get("models"):
        lb["lora"]["models"] = names(lb["lora"]["models"])
    if "families" in lb:
        lb["families"] = {m: f for m, f in lb["families"].items() if m not in folds}
    dr = studies.get("decisionrisk", {})
    if dr.get("encoder") in folds:
        dr["encoder"] = folds[dr["encoder"]]
    return out, folds


CI_STATES = ("CA", "TX", "NY", "PR")
"""The states whose ACS records the CI variant generates (:func:`fold_states`): the largest
three and Puerto Rico, whose codes differ (birthplace, commute)."""


def fold_states(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config with generated ACS records of :data:`CI_STATES` only (those the config
    lists), as many rows in all as every state had: each state is one generator job, which
    costs a process start whatever its rows. Downloaded or local records are left alone."""
    out = copy.deepcopy(dict(cfg))
    acs = out.get("data", {}).get("acs", {})
    states = list(acs.get("states", []))
    kept = [s for s in states if s in CI_STATES]
    if acs.get("source") != "generated" or not kept or len(kept) == len(states):
        return out
    rows = acs.get("generated_rows_per_state")
    if rows is not None:
        acs["generated_rows_per_state"] = -(-rows * len(states) // len(kept))
    acs["states"] = kept
    return out


CI_SNI_TASKS = (
    "task1393_superglue_copa_text_completion",
    "task318_stereoset_classification_gender",
    "task1531_daily_dialog_type_classification",
    "task888_reviews_classification",
)
"""The SNI tasks the CI variant scores (:func:`fold_sni_tasks`): two, three and four labels,
letter labels (COPA's A/B) and words, and the shortest definition; left out are three tasks
that add only prompt length (task375's definition alone is 1,280 characters), which every
labelbias job (each k, each method, each LoRA adapter) pays again."""


def fold_sni_tasks(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config with the SNI tasks of :data:`CI_SNI_TASKS` only, among those it lists."""
    out = copy.deepcopy(dict(cfg))
    sni = out.get("data", {}).get("sni", {})
    tasks = list(sni.get("tasks") or [])
    kept = [t for t in tasks if t in CI_SNI_TASKS]
    if kept and len(kept) < len(tasks):
        sni["tasks"] = kept
    return out


def fold_riskscores_analyses(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config with riskscores' permutation importance and increasing evidence run on one
    model per (backend, instruct) of those they analyse (the first in order), and XGBoost.

    Each model of these analyses is two jobs that load it to score permuted and growing
    feature texts through the inference jobs' own prompts, which every model entry runs; in
    the CI variant those 24 jobs were nearly all process start and imports."""
    out = copy.deepcopy(dict(cfg))
    rs = out.get("studies", {}).get("riskscores", {})
    for analysis in ("importance", "evidence"):
        spec = rs.get(analysis)
        if spec is None:
            continue
        analysed = spec.get("models") or rs.get("models", [])
        kept: dict[tuple[str, bool], str] = {}
        for name in analysed:
            entry = out["models"][name]
            kept.setdefault((entry.get("backend", "hf"), bool(entry.get("instruct", False))), name)
        if len(kept) < len(analysed):
            spec["models"] = list(kept.values())
    return out


def shadow_config(
    repo: Path = REPO,
    *,
    ci: bool = False,
    override: str | Path | None = None,
    tokenizers: str | Path | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The shadow config (folded for CI when ``ci``), validated, and its folds."""
    cfg = merged_config(repo, override=override, tokenizers=tokenizers)
    folds: dict[str, str] = {}
    if ci:
        cfg, folds = fold_models(cfg)
        cfg = fold_riskscores_analyses(fold_sni_tasks(fold_states(cfg)))
    try:
        parse_config(cfg)
    except ConfigError as err:
        raise ShadowError(f"the shadow config is not a valid config:\n{err}") from None
    return cfg, folds


def api_models(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: e for n, e in cfg["models"].items() if e.get("backend", "hf") == "openai"}


def served_models(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The zoo entry that answers each API model id the requests name (:func:`served_zoo`)."""
    served: dict[str, str] = {}
    for name, entry in api_models(cfg).items():
        zoo_name = served_zoo(name)
        if zoo_name not in cfg.get("zoo", {}).get("models", {}):
            raise ShadowError(f"models.{name}: the shadow answers it with zoo.models.{zoo_name}, not in {OVERRIDE}")
        if served.setdefault(str(entry["id"]), zoo_name) != zoo_name:
            raise ShadowError(f"models.{name}: id {entry['id']!r} is another API model's; the server tells them by id")
    return served


def _loopback_port(cfg: Mapping[str, Any]) -> int | None:
    """The port every API model's ``base_url`` names on 127.0.0.1 (``None``: no API model)."""
    ports = set()
    for name, entry in api_models(cfg).items():
        url = urlsplit(entry.get("base_url") or "")
        if url.hostname != "127.0.0.1" or url.port is None:
            raise ShadowError(f"models.{name}.base_url: the shadow serves API models on http://127.0.0.1:<port>/v1")
        ports.add(url.port)
    if len(ports) > 1:
        raise ShadowError(f"the API models name different loopback ports {sorted(ports)}; the shadow serves one")
    return ports.pop() if ports else None


def _with_port(cfg: dict[str, Any], port: int) -> None:
    for entry in api_models(cfg).values():
        url = urlsplit(entry["base_url"])
        entry["base_url"] = urlunsplit(url._replace(netloc=f"127.0.0.1:{port}"))


# --------------------------------------------------------------------------- running


@dataclass
class Outcome:
    returncode: int
    seconds: float
    """Wall time of the whole command."""
    jobs: int | None
    """Jobs snakemake ran (the served model's build included)."""
    workdir: Path
    cpu_seconds: float = 0.0
    """CPU time of the command, its server and every job (user + system): what the run costs
    whatever else the machine is doing."""


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def snakemake_command(repo: Path, workdir: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(repo / "Snakefile"),
        "--workflow-profile",
        str(repo / "profiles" / "default"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "shadow-config.yaml"),
        *args,
    ]


_TOTAL = re.compile(r"^total\s+(\d+)$", re.MULTILINE)
"""The job count of snakemake's job stats table (printed before the first job)."""


def _stream(cmd: list[str], env: Mapping[str, str], log: Path) -> tuple[int, str]:
    """Run ``cmd``, echoing its output and appending it to ``log``; its code and output.

    Snakemake runs in a process group of its own: if this command is interrupted or
    terminated, the group (snakemake and every job it started) is stopped with it rather
    than left running against a server that is gone.
    """
    out: list[str] = []
    with (
        open(log, "a", encoding="utf-8") as f,
        subprocess.Popen(
            cmd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        ) as proc,
    ):
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                f.write(line)
                out.append(line)
            code = proc.wait()
        except BaseException:
            _stop_group(proc)
            raise
    return code, "".join(out)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to ``proc``'s process group (snakemake and its jobs), SIGKILL to what is left after 20 s."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # reap snakemake, so that only live processes keep the group
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def run(
    *,
    ci: bool = False,
    cores: int | None = None,
    workdir: str | Path | None = None,
    port: int | None = None,
    dry_run: bool = False,
    extra: list[str] | None = None,
    repo: Path = REPO,
    tokenizers: str | Path | None = None,
) -> Outcome:
    """Run the shadow of the paper config to its last table and figure (see the module);
    ``tokenizers``: the user's folder of the families' tokenizer folders (``--tokenizers``)."""
    import torch

    from openai_server import Server  # beside this file

    start, cpu_start = time.monotonic(), _cpu_seconds()
    cfg, folds = shadow_config(repo, ci=ci, tokenizers=tokenizers)
    work = Path(workdir or repo / ".shadow" / ("ci" if ci else "paper")).resolve()
    for forbidden in ("results", "resources"):
        if work == (repo / forbidden).resolve() or (repo / forbidden).resolve() in work.parents:
            raise ShadowError(f"--workdir {work}: the shadow never writes into the repository's {forbidden}/")
    work.mkdir(parents=True, exist_ok=True)
    log = work / "shadow.log"
    log.write_text("", encoding="utf-8")
    env = dict(os.environ)
    key_envs = {e.get("api_key_env", "OPENAI_API_KEY") for e in api_models(cfg).values()}
    key = secrets.token_urlsafe(24)
    for name in key_envs:
        env[name] = key  # the fake key exists only in the environment of this run
    cores_args = ["--cores", str(cores) if cores else "all"]
    server = None
    jobs_before = 0  # the served models' builds, when the API models need them
    try:
        wanted = _loopback_port(cfg)
        served = served_models(cfg)
        if wanted is not None and not dry_run:
            try:
                server = Server(
                    None,
                    key=key,
                    port=wanted if port is None else port,
                    log_requests=False,
                    max_reply_tokens=SERVED_REPLY_TOKENS,
                )
            except OSError as err:
                raise ShadowError(
                    f"cannot serve the API models on 127.0.0.1:{wanted if port is None else port} ({err}); "
                    "pass --port 0 for a free port"
                ) from None
            _with_port(cfg, server.port)
        header = "# The shadow of config/config.yaml (written by tools/shadow.py; do not edit)\n"
        if folds:
            header += "# CI: model entries folded into the one kept:\n" + "".join(
                f"#   {a} -> {b}\n" for a, b in folds.items()
            )
        if ci:
            header += f"# CI: generated ACS records of {', '.join(cfg['data']['acs']['states'])} only\n"
        (work / "shadow-config.yaml").write_text(header + yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        if server is not None:
            folders = {api_id: f"{ZOO_DIR}/{zoo_name}" for api_id, zoo_name in served.items()}
            code, output = _stream(snakemake_command(repo, work, *cores_args, *folders.values()), env, log)
            if code:
                return Outcome(code, time.monotonic() - start, None, work, _cpu_seconds() - cpu_start)
            built = _TOTAL.search(output)
            jobs_before = int(built.group(1)) if built else 0
            torch.set_num_threads(1)  # the server's tiny forwards; the jobs have the cores
            server.start({api_id: work / folder for api_id, folder in folders.items()})
        args = [*cores_args, *(["-n"] if dry_run else []), *(extra or []), "all"]
        code, output = _stream(snakemake_command(repo, work, *args), env, log)
        total = _TOTAL.search(output)
        jobs = jobs_before + int(total.group(1)) if total else None
        return Outcome(code, time.monotonic() - start, jobs, work, _cpu_seconds() - cpu_start)
    finally:
        if server is not None:
            server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/shadow.py",
        description="Run the paper config's shadow: every study, model entry and prompting mode of "
        "config/config.yaml on tiny models of the same families, on a CPU. Options it does not know "
        "go to snakemake.",
    )
    parser.add_argument("--ci", action="store_true", help="fold entries that differ only in size (the CI variant)")
    parser.add_argument("--cores", type=int, default=None, help="cores for snakemake (default: all)")
    parser.add_argument("--workdir", default=None, help="working directory (default .shadow/paper or .shadow/ci)")
    parser.add_argument("--port", type=int, default=None, help="loopback port of the API server (0: a free one)")
    parser.add_argument(
        "--tokenizers",
        metavar="DIR",
        default=None,
        help="the families' tokenizer files from DIR, offline (laid out like ../shared/data/tokenizers: "
        "one folder per tokenizer, named as in config/shadow.yaml); default: ../shared/data/tokenizers "
        "where it exists, else fetched from the Hugging Face hub into resources/tokenizers",
    )
    parser.add_argument("-n", "--dry-run", action="store_true", help="write the config and show the jobs only")
    args, extra = parser.parse_known_args(argv)
    # terminated (a CI timeout, scancel, kill): unwind, so that snakemake's group is stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        outcome = run(
            ci=args.ci,
            cores=args.cores,
            workdir=args.workdir,
            port=args.port,
            dry_run=args.dry_run,
            extra=extra,
            tokenizers=args.tokenizers,
        )
    except ShadowError as err:
        print(f"shadow: {err}", file=sys.stderr)
        return 2
    minutes, seconds = divmod(round(outcome.seconds), 60)
    status = "finished" if outcome.returncode == 0 else f"FAILED (snakemake exit code {outcome.returncode})"
    jobs = f"{outcome.jobs} jobs" if outcome.jobs is not None else "job count unknown"
    cpu = round(outcome.cpu_seconds / 60)
    print(
        f"shadow run {status} in {minutes} min {seconds:02d} s ({cpu} CPU-minutes), {jobs}; "
        f"outputs in {outcome.workdir}/results"
    )
    return outcome.returncode


if __name__ == "__main__":
    sys.exit(main())
