"""Config validation and helpers shared by every module.

The config is checked twice before any job runs: by the typed model in
``unsure.config`` (errors name the key path; cross references such as a study
naming an undefined model) and by the JSON schema generated from it.
"""

import atexit
import json
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from unsure.config import ConfigError, Studies, parse_config, read_config_file
from unsure import forkserver
from unsure.controller import (
    clear_stale_locks,
    forget_controller,
    own_lock_files,
    record_controller,
)
from unsure.model_sizes import local_memory_warnings
from unsure.paths import slug
from unsure.provenance import study_settings

try:
    for (
        path
    ) in workflow.configfiles:  # Snakemake's loader keeps the last of two equal keys
        read_config_file(path)
    CFG = parse_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None

validate(config, "../schemas/config.schema.json")

LOGS = "results/logs"

# A controller killed with SIGKILL leaves its locks behind; a later run on this
# host removes them once that controller is provably gone. Each controller
# records its own lock files (unsure.controller), so the locks of a live one,
# or of one that has not recorded them yet, are never touched.
if workflow.is_main_process:
    for stale in clear_stale_locks(".snakemake"):
        logger.warning(
            f"removed {stale.lock}: the controller that held it is no longer running"
            f" (process {stale.pid})"
        )
    # a hub model this machine cannot hold warns before anything is downloaded, in a
    # local run (the executor is chosen after this file is read: a profile or an
    # --executor on the command line means the jobs run elsewhere)
    cluster = "SNAKEMAKE_PROFILE" in os.environ or any(
        a.split("=")[0] in ("--profile", "--executor", "-e") for a in sys.argv
    )
    _planned = {
        n: m for s in CFG.active_studies() for n, m in CFG.study_models(s).items()
    }
    for line in (
        [] if cluster else local_memory_warnings(_planned, CFG.zoo.models, most=2)
    ):
        logger.warning(line)


onstart:
    # the record goes when the process ends, after Snakemake has removed its locks
    atexit.register(
        forget_controller,
        record_controller(".snakemake", own_lock_files(workflow.persistence)),
    )
    # a local run's jobs start from a process that has already imported their libraries
    if workflow.local_exec and not workflow.touch:
        forkserver.start()


def zoo_models_in_use():
    """Zoo entries that some configured model is built from."""
    return sorted({m.zoo_name for m in CFG.models.values() if m.zoo_name is not None})


def zoo_base(wildcards):
    """The built folder of the zoo model that zoo model ``name`` is instruction-tuned from, if any."""
    base = CFG.zoo.models[wildcards.name].base
    return [f"resources/models/{base}"] if base else []


def model_files(name):
    """What a job that loads model ``name`` must wait for: its zoo build, if any."""
    zoo = CFG.models[name].zoo_name
    return [f"resources/models/{zoo}"] if zoo else []


def model_gpus(name):
    """GPUs one inference job of model ``name`` asks the scheduler for."""
    return CFG.models[name].gpus


def report_outputs(study, kind, names, labels=None, captions=None):
    """Every file of ``study``'s tables or figures ``names``, in expand's order,
    with the CSV (tables) or PNG (figures) flagged for ``snakemake --report``.

    One place, so that every study files its results the same way: category
    the study, subcategory ``kind``, caption ``workflow/report/<study>/<name>.rst``
    (``captions[name]`` names another caption), labels the name and then
    ``labels[name]`` (model, task: what the result is about).
    """
    exts = {"tables": ["csv", "md", "tex"], "figures": ["png", "pdf"]}[kind]
    files = []
    for name in names:
        for ext in exts:
            path = f"results/{study}/{kind}/{name}.{ext}"
            if ext == exts[0]:
                path = report(
                    path,
                    caption=f"../report/{study}/{(captions or {}).get(name, name)}.rst",
                    category=study,
                    subcategory=kind,
                    labels={kind[:-1]: name, **(labels or {}).get(name, {})},
                )
            files.append(path)
    return files


STUDIES = list(Studies.model_fields)
