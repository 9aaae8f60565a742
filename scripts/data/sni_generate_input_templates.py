"""Write the generated SNI tasks' input templates, as the label-bias study's CSV lays them out."""

from unsure.forkserver import hand_off

hand_off()

from unsure.generate import sni
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    names = sni.write_input_templates(snakemake.output[0], n_tasks=snakemake.params.tasks)
    log.info("wrote the input templates of %d generated classification tasks", len(names))
