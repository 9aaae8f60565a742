"""Fig. 2: risk-coverage curves per benchmark."""

import pandas as pd

from unsure.decisionrisk.evaluate import risk_coverage_curves
from unsure.decisionrisk.plots import risk_coverage_figure
from unsure.logs import logged
from unsure.report import save_figure

with logged(snakemake.log[0]):
    decisions = pd.concat([pd.read_parquet(f) for f in snakemake.input], ignore_index=True)
    save_figure(risk_coverage_figure(risk_coverage_curves(decisions)), snakemake.output[0])
