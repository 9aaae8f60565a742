"""Read the norms: positions, normalised human counts, corpus targets and the oracle splits."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.nextword.tables import prepare

with logged(snakemake.log[0]) as log:
    p = snakemake.params
    data = prepare(snakemake.input[0], passages=p.passages, splits=p.splits, seed=p.seed)
    for name, frame in data.items():
        write_parquet(snakemake.output[name], frame)
    log.info(
        "%d positions in %d passages, %d oracle splits",
        len(data["positions"]),
        data["positions"]["text_id"].nunique(),
        p.splits,
    )
