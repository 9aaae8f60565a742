"""One task's rows: population filter, label and seeded train/eval split. The rows' text is
written by the jobs that prompt with it, in the words of the study's protocol
(:func:`unsure.riskscores.prompts.row_texts`), so that a change of protocol leaves this file
and the baselines trained on it alone."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.tasks import task_from_spec, task_rows

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    dictionary = read_dictionary(snakemake.input.dictionary)
    task = task_from_spec(snakemake.wildcards.rs_task, p.spec, dictionary)
    rows = task_rows(pd.read_parquet(snakemake.input.persons), task, n_train=p.n_train, n_eval=p.n_eval, seed=p.seed)
    n_eval = int((rows["split"] == "eval").sum())
    log.info(
        "%s: %d evaluation and %d training rows, positive rate %.3f",
        task.name,
        n_eval,
        len(rows) - n_eval,
        rows["label"].mean(),
    )
    if n_eval < p.n_eval:
        log.warning("%s: only %d evaluation rows (n_eval is %d)", task.name, n_eval, p.n_eval)
    write_parquet(snakemake.output[0], rows)
