"""Table 1 (decision risk), table 2 (composite risk), the unparseable chat replies and the reproduction ledger."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.decisionrisk.reproduction import DIFFERENCES, reproduction_table
from unsure.decisionrisk.tables import composite_risk_table, decision_risk_table, verbal_parse_table
from unsure.logs import logged
from unsure.report import write_table

with logged(snakemake.log[0]):
    p = snakemake.params
    decisions = pd.concat([pd.read_parquet(f) for f in snakemake.input.decisions], ignore_index=True)
    confidences = {b: pd.read_parquet(f) for b, f in zip(p.benchmarks, snakemake.input.confidences, strict=True)}
    out = Path(snakemake.output[0]).parent
    marks = ", ".join(f"{'*' * (i + 1)} p < {1 - level:.2g}" for i, level in enumerate(p.levels))
    table1 = decision_risk_table(decisions, p.injections, levels=p.levels)
    table2 = composite_risk_table(decisions, level=p.rrr_level)
    write_table(
        table1,
        out / "table1",
        caption=f"Decision-risk accuracy, in-domain and out-of-domain; one-sided binomial test against Random: {marks}",
    )
    write_table(
        table2,
        out / "table2",
        caption=f"Composite risk on the original instances; RRR with {p.rrr_level:.0%} log-scale (Katz) interval",
    )
    pairs = decisions.loc[decisions["model"] != p.encoder, ["model", "method"]].drop_duplicates()
    write_table(
        reproduction_table(
            table1, table2, encoder=p.encoder, generative=pairs.itertuples(index=False, name=None), protocol=p.protocol
        ),
        out / "reproduction",
        caption="Printed cells of Tables 1 and 2 beside ours under each protocol. Differences: "
        + " ".join(f"{k}: {v}" for k, v in DIFFERENCES.items()),
    )
    write_table(verbal_parse_table(confidences), out / "verbal_parse", caption="Chat replies that could not be parsed")
