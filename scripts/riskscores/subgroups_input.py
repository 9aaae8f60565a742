"""The per-instance file the subgroups study reads: multiple-choice scores of every model and XGBoost."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import row_texts
from unsure.riskscores.tables import subgroups_instances
from unsure.riskscores.tasks import task_from_spec
from unsure.subgroups.schema import validate_instances

with logged(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    dictionary = read_dictionary(inp.dictionary)
    tasks = []
    for path, name in zip(inp.rows, p.tasks, strict=True):
        task_rows = pd.read_parquet(path).query("split == 'eval'").assign(task=name)  # the rows scored for it
        features = task_from_spec(name, p.specs[name], dictionary).features
        tasks.append(task_rows.assign(text=row_texts(task_rows, features, dictionary, protocol=p.protocol)))
    rows = pd.concat(tasks)
    scores = pd.read_parquet(inp.scores)
    scores = scores[scores["prompting"].eq("multiple_choice") | scores["model"].eq("xgboost")]
    frame = subgroups_instances(rows, scores, dictionary)
    frame = validate_instances(frame, "riskscores", snakemake.output[0])
    log.info("%d instances of %d models", len(frame), frame["model"].nunique())
    write_parquet(snakemake.output[0], frame)
