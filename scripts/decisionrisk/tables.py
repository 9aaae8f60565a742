"""Table 1 (decision risk), table 2 (composite risk) and the unparseable chat replies."""

from pathlib import Path

import pandas as pd

from unsure.decisionrisk.evaluate import composite_risk_table, decision_risk_table, verbal_parse_table
from unsure.logs import logged
from unsure.report import write_table

with logged(snakemake.log[0]):
    p = snakemake.params
    decisions = pd.concat([pd.read_parquet(f) for f in snakemake.input.decisions], ignore_index=True)
    confidences = {b: pd.read_parquet(f) for b, f in zip(p.benchmarks, snakemake.input.confidences, strict=True)}
    out = Path(snakemake.output[0]).parent
    marks = ", ".join(f"{'*' * (i + 1)} p < {1 - level:.2g}" for i, level in enumerate(p.levels))
    write_table(
        decision_risk_table(decisions, p.injections, levels=p.levels),
        out / "table1",
        caption=f"Decision-risk accuracy, in-domain and out-of-domain; one-sided binomial test against Random: {marks}",
    )
    write_table(
        composite_risk_table(decisions, level=p.rrr_level),
        out / "table2",
        caption=f"Composite risk on the original instances; RRR with {p.rrr_level:.0%} log-scale (Katz) interval",
    )
    write_table(verbal_parse_table(confidences), out / "verbal_parse", caption="Chat replies that could not be parsed")
