"""Read every state's person zip once into one parquet file (kept columns only, stable row ids)."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.tasks import read_person_zip

with logged(snakemake.log[0]) as log:
    columns = list(snakemake.params.columns)
    dictionary = read_dictionary(snakemake.input.dictionary)
    unknown = [c for c in columns if c not in dictionary]
    if unknown:
        raise ValueError(f"{snakemake.input.dictionary}: no entry for column(s) {', '.join(unknown)}")
    frames = []
    for path in snakemake.input.zips:
        frames.append(read_person_zip(path, columns))
        log.info("%s: %d person records", path, len(frames[-1]))
    persons = pd.concat(frames, ignore_index=True)
    if persons["row_id"].duplicated().any():
        raise ValueError(f"duplicate person ids, e.g. {persons.loc[persons['row_id'].duplicated(), 'row_id'].iloc[0]}")
    write_parquet(snakemake.output[0], persons)
