"""Tables: the task selection, metrics per task, metrics averaged over tasks and sets (under the
protocol's label scoring), and the reproduction ledger (both scorings; the prompt differences
flipped one at a time by rule labelbias_differences, the LoRA ones by labelbias_lora_differences)."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.labelbias.reproduction import reproduction_table
from unsure.labelbias.tables import summarize
from unsure.labelbias.tasks import label_list
from unsure.logs import logged
from unsure.report import write_table

with logged(snakemake.log[0]):
    p = snakemake.params
    out = Path(snakemake.output[0]).parent
    tasks = pd.read_parquet(snakemake.input.tasks)
    models = pd.DataFrame(p.models)
    both = pd.concat([pd.read_parquet(f) for f in snakemake.input.metrics], ignore_index=True)
    per_task = both[both["scoring"] == p.scoring]
    shown = tasks.drop(columns=["definition"]).assign(labels=tasks["labels"].map(label_list))
    write_table(shown, out / "tasks", caption="SNI tasks: the label-bias task filter")
    cols = ["model", "task", "k", "set", "method", "n_eval", "n_heldout", "accuracy", "macro_f1", "macro_f1_paper"]
    cols += ["rsd", "bias_score"]
    write_table(per_task[cols], out / "per_task", caption=f"Metrics per model, task, k, set and method ({p.scoring})")
    selected = tasks[tasks["selected"]]
    interchangeable = set(selected.loc[selected["interchangeable"], "task"])
    sem_eq = set(selected.loc[selected["semantically_equivalent"], "task"])
    write_table(
        summarize(per_task, models, interchangeable, sem_eq),
        out / "summary",
        caption=f"Metrics averaged over tasks and demonstration sets ({p.scoring} label scoring)",
    )
    write_table(
        reproduction_table(
            both,
            models,
            protocol=p.protocol,
            interchangeable=interchangeable,
            semantically_equivalent=sem_eq,
            flipped=pd.concat(
                [pd.read_parquet(f) for f in [*snakemake.input.flipped, *snakemake.input.lora_flipped]],
                ignore_index=True,
            ),
            evidence=pd.concat(
                [pd.read_parquet(f) for f in [*snakemake.input.evidence, *snakemake.input.lora_evidence]],
                ignore_index=True,
            ),
        ),
        out / "reproduction",
        caption="Each difference between the authors' code (paper) and ours (corrected), with its effect",
    )
