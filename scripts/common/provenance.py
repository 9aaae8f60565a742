"""The provenance record of one study's results (weights, code, packages, config slice)."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

from unsure.config import parse_config
from unsure.engine.identity import model_identity
from unsure.io import write_json
from unsure.logs import logged
from unsure.provenance import provenance

with logged(snakemake.log[0]):
    # the project's commit is the workflow's checkout, not the run's --directory
    repo = Path(snakemake.scriptdir).parents[1]
    config, study = parse_config(snakemake.config), snakemake.params.study
    weights = {name: model_identity(entry) for name, entry in config.study_models(study).items()}
    write_json(snakemake.output[0], provenance(config, study, weights=weights, repo=repo))
