"""The per-instance file the subgroups study reads: multiple-choice scores of every model and XGBoost."""

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.tables import subgroups_instances
from unsure.subgroups.schema import validate_instances

with logged(snakemake.log[0]) as log:
    inp = snakemake.input
    rows = pd.concat([pd.read_parquet(p).assign(task=t) for p, t in zip(inp.rows, snakemake.params.tasks, strict=True)])
    scores = pd.read_parquet(inp.scores)
    scores = scores[scores["prompting"].eq("multiple_choice") | scores["model"].eq("xgboost")]
    frame = subgroups_instances(rows, scores, read_dictionary(inp.dictionary))
    frame = validate_instances(frame, "riskscores", snakemake.output[0])
    log.info("%d instances of %d models", len(frame), frame["model"].nunique())
    write_parquet(snakemake.output[0], frame)
