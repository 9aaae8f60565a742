"""Fig. 2: risk-coverage curves per benchmark (panels of chat models with unparseable replies say so)."""

from unsure.forkserver import hand_off

hand_off()

import pandas as pd

from unsure.decisionrisk.plots import risk_coverage_figure
from unsure.decisionrisk.tables import risk_coverage_curves, unparsed_notes
from unsure.logs import logged
from unsure.report import save_figure

with logged(snakemake.log[0]):
    decisions = pd.concat([pd.read_parquet(f) for f in snakemake.input.decisions], ignore_index=True)
    confidences = {
        b: pd.read_parquet(f) for b, f in zip(snakemake.params.benchmarks, snakemake.input.confidences, strict=True)
    }
    figure = risk_coverage_figure(risk_coverage_curves(decisions), unparsed_notes(confidences))
    save_figure(figure, snakemake.output[0])
