"""One uncertainty profile per model: the studies' headline numbers, their table and figure."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

from unsure.logs import logged
from unsure.profile import read_headlines, write_profile

with logged(snakemake.log[0]):
    p = snakemake.params
    named = {study: getattr(snakemake.input, study) for study in p.studies}
    files = {study: [f] if isinstance(f, str) else list(f) for study, f in named.items()}
    frames = read_headlines(files, p.protocols, nextword_models=p.nextword_models, stand_ins=p.stand_ins)
    write_profile(
        frames,
        p.models,
        tables=Path(snakemake.output[0]).parent,
        figures=Path(snakemake.output[-1]).parent,
    )
