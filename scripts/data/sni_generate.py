"""Write generated SUPER-NATURALINSTRUCTIONS task files and splits in the official layout."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

from unsure.generate import sni
from unsure.io import atomic_dir, write_text
from unsure.logs import logged
from unsure.rawdata import TASK_LIST

with logged(snakemake.log[0]) as log, atomic_dir(snakemake.output[0]) as tmp:
    p = snakemake.params
    names = sni.write_tasks(tmp, n_tasks=p.tasks, instances_per_task=p.instances, seed=p.seed)
    write_text(Path(tmp, TASK_LIST), "".join(f"{name}\n" for name in names))
    log.info("wrote %d generated SNI tasks", len(names))
