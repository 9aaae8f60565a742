"""Tables: the task selection, metrics per task, and metrics averaged over tasks and sets."""

from pathlib import Path

import pandas as pd

from unsure.labelbias.evaluate import summarize
from unsure.labelbias.tasks import label_list
from unsure.logs import logged
from unsure.report import write_table

with logged(snakemake.log[0]):
    out = Path(snakemake.output[0]).parent
    tasks = pd.read_parquet(snakemake.input.tasks)
    models = pd.DataFrame(snakemake.params.models)
    per_task = pd.concat([pd.read_parquet(f) for f in snakemake.input.metrics], ignore_index=True)
    shown = tasks.drop(columns=["definition"]).assign(labels=tasks["labels"].map(label_list))
    write_table(shown, out / "tasks", caption="SNI tasks: the label-bias task filter")
    cols = ["model", "task", "k", "set", "method", "n_eval", "n_heldout", "accuracy", "macro_f1", "rsd", "bias_score"]
    write_table(per_task[cols], out / "per_task", caption="Metrics per model, task, k, demonstration set and method")
    interchangeable = set(tasks.loc[tasks["selected"] & tasks["interchangeable"], "task"])
    write_table(
        summarize(per_task, models, interchangeable),
        out / "summary",
        caption="Metrics averaged over tasks and demonstration sets",
    )
