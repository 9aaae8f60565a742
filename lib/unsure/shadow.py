"""A shadow run of the paper config: try ``config/config.yaml`` before spending GPU hours.

The shadow config is ``config/config.yaml`` with ``config/shadow.yaml``, a plain partial
config, deep-merged over it (:func:`deep_merge`: mappings merge key by key, anything else
in the override replaces the paper's value). The override maps every model entry to a
tiny randomly initialised model of its family (declared once per family under
``zoo.models``: the family's real tokenizer files where ``../shared/data/tokenizers`` has
them, the zoo's trained tokenizer otherwise), points the API models at a loopback
OpenAI-compatible server (:mod:`unsure.engine.openai_server`, 127.0.0.1 only, its fake key
only in the run's environment), takes generated data (or the real local files the
pipeline can read) and shrinks sizes and shards. Every study, model entry, prompting mode
and table and figure of the paper config is kept.

:func:`run` writes the merged config into its own working directory (default
``.shadow/paper``), never into the repository's ``results/`` or ``resources/``, builds the
served model, starts the server and runs ``snakemake all`` there with ``--directory``.

The CI variant (``--ci``) additionally folds together the model entries that differ only
in size (:func:`fold_models`): one entry per distinct (family, tokenizer, instruct,
backend, template) combination (:func:`combination`) is kept, and every study's reference
to a folded entry points at the one kept. It also generates the ACS records of a few
states (:data:`CI_STATES`) rather than all 51, each with as many rows as all of them had
together (:func:`fold_states`): one generator job per state is all a state changes.

    python -m unsure.shadow [--ci] [--cores N] [--workdir DIR] [--port P] [-n] [snakemake options]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import resource
import secrets
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

from unsure.config import ZOO_DIR, ConfigError, deep_merge, parse_config

REPO = Path(__file__).resolve().parents[2]
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


def merged_config(repo: Path = REPO, *, override: str | Path | None = None) -> dict[str, Any]:
    """``config/config.yaml`` with the override merged over it, local input paths made absolute.

    Raises:
        ShadowError: a local input the override names does not exist.
    """
    cfg = deep_merge(read_yaml(repo / PAPER), read_yaml(override or repo / OVERRIDE))
    missing = []
    for mapping, key in _local_paths(cfg):
        path = Path(mapping[key])
        path = path if path.is_absolute() else (repo / path).resolve()
        mapping[key] = str(path)
        if not path.exists():
            missing.append(str(path))
    if missing:
        raise ShadowError(
            "the shadow config names local inputs that do not exist: "
            + ", ".join(missing)
            + " (the real tokenizers and data live in ../shared/data beside the repository; "
            "point the override's paths at your copies)"
        )
    return cfg


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


def shadow_config(
    repo: Path = REPO, *, ci: bool = False, override: str | Path | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The shadow config (folded for CI when ``ci``), validated, and its folds."""
    cfg = merged_config(repo, override=override)
    folds: dict[str, str] = {}
    if ci:
        cfg, folds = fold_models(cfg)
        cfg = fold_states(cfg)
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
) -> Outcome:
    """Run the shadow of the paper config to its last table and figure (see the module)."""
    import torch

    from unsure.engine.openai_server import Server

    start, cpu_start = time.monotonic(), _cpu_seconds()
    cfg, folds = shadow_config(repo, ci=ci)
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
        header = "# The shadow of config/config.yaml (written by unsure.shadow; do not edit)\n"
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
        prog="python -m unsure.shadow",
        description="Run the paper config's shadow: every study, model entry and prompting mode of "
        "config/config.yaml on tiny models of the same families, on a CPU. Options it does not know "
        "go to snakemake.",
    )
    parser.add_argument("--ci", action="store_true", help="fold entries that differ only in size (the CI variant)")
    parser.add_argument("--cores", type=int, default=None, help="cores for snakemake (default: all)")
    parser.add_argument("--workdir", default=None, help="working directory (default .shadow/paper or .shadow/ci)")
    parser.add_argument("--port", type=int, default=None, help="loopback port of the API server (0: a free one)")
    parser.add_argument("-n", "--dry-run", action="store_true", help="write the config and show the jobs only")
    args, extra = parser.parse_known_args(argv)
    # terminated (a CI timeout, scancel, kill): unwind, so that snakemake's group is stopped too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        outcome = run(
            ci=args.ci, cores=args.cores, workdir=args.workdir, port=args.port, dry_run=args.dry_run, extra=extra
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
