"""Run the evaluation protocol on one prepared source: every method on every repetition."""

from unsure.forkserver import hand_off

hand_off()

from unsure.io import write_parquet
from unsure.logs import logged
from unsure.subgroups.evaluate import EvaluationSettings, evaluate
from unsure.subgroups.features import read_prepared

with logged(snakemake.log[0]) as log:
    prepared = read_prepared(snakemake.input.rows, snakemake.input.units)
    settings = EvaluationSettings.from_params(snakemake.params.protocol)
    log.info("%s: %d repetitions on %d workers", snakemake.wildcards.source, settings.repetitions, snakemake.threads)
    estimates, problems, importance = evaluate(prepared, settings, n_jobs=snakemake.threads)
    write_parquet(snakemake.output.estimates, estimates)
    write_parquet(snakemake.output.problems, problems)
    write_parquet(snakemake.output.importance, importance)
