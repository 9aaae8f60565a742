"""Select the classification tasks, draw their instances and list every item to score."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import write_parquet
from unsure.labelbias.prompts import build_items, read_templates
from unsure.labelbias.tasks import select_tasks
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    task_info = snakemake.input.task_info[0] if snakemake.input.task_info else None
    tasks, instances = select_tasks(snakemake.input.raw, **p.sizes, seed=p.seed, task_info=task_info)
    items = build_items(
        instances,
        shots=p.shots,
        sets=p.sets,
        content_free=p.content_free,
        n_domain=p.domain_inputs,
        seed=p.seed,
        protocol=p.protocol,
        templates=read_templates(snakemake.input.templates[0] if snakemake.input.templates else None),
    )
    write_parquet(snakemake.output.tasks, tasks)
    write_parquet(snakemake.output.instances, instances)
    write_parquet(snakemake.output.score_items, items)
    log.info("%d of %d tasks selected; %d items to score", tasks["selected"].sum(), len(tasks), len(items))
    for row in tasks[~tasks["selected"]].itertuples():
        log.info("rejected %s: %s", row.task, row.reason)
