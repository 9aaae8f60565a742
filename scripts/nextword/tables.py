"""Write tables 1-4 and the reproduction ledger (CSV, Markdown, LaTeX).

Table 1 shows the chosen protocol's values (``paper``: the authors' calculations
on the norms and each system's samples in their loop's order; ``corrected``: ours);
``reproduction`` shows both per cell, with the printed value and the named
difference. Then the biased estimator, ARD coefficients and the token level.
"""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.io import read_parquet, write_parquet
from unsure.logs import logged
from unsure.nextword.data import read_samples
from unsure.nextword.inference import biased_table
from unsure.nextword.tables import biased_tvds, protocol_tables, table2, table3, table4, token_level_tvds
from unsure.report import write_table

with logged(snakemake.log[0]) as log:
    i, p = snakemake.input, snakemake.params
    out = Path(snakemake.output[0]).parent
    human, corpus, splits = (pd.read_parquet(x) for x in (i.human, i.corpus, i.splits))
    t1, reproduction = protocol_tables(
        i.norms,
        dict(zip(p.systems, i.systems, strict=True)),
        pd.read_parquet(i.metrics),
        protocol=p.protocol,
        passages=p.passages,
        n_bins=p.n_bins,
        printed=p.printed,
    )
    write_table(
        reproduction,
        out / "reproduction",
        caption="Table 1 per cell: printed, ours under protocol paper (the authors' calculations), "
        "ours under corrected, and the named differences",
    )
    log.info("protocol %s; reproduction:\n%s", p.protocol, reproduction.drop(columns=["difference", "note"]))
    caption = "ECE against three targets and expected TVD, per system " + (
        "(the authors' calculations)" if p.protocol == "paper" else "(mean over oracle splits)"
    )
    write_table(t1, out / "table1", caption=caption)
    n_shards = len(i.biased) // max(1, len(p.biased_models))
    biased = {
        m: biased_table([read_parquet(x) for x in i.biased[k * n_shards : (k + 1) * n_shards]])
        for k, m in enumerate(p.biased_models)
    }
    write_parquet(snakemake.output.biased_tvd, biased_tvds(biased, human, splits))  # figure 5
    frames = [
        table2(read_samples(i.samples[k], known=human), biased[m], human, corpus, splits, model=m, n_bins=p.n_bins)
        for k, m in enumerate(p.biased_models)
    ]
    t2 = frames[0] if frames else pd.DataFrame({"metric": [], "note": []})
    for f in frames[1:]:
        t2 = t2.merge(f.drop(columns="oracle"), on="metric")
    if not frames:
        log.info("no biased_models configured: table2 is empty")
    write_table(t2, out / "table2", caption="Biased estimator (appendix A) vs unbiased sampling and the oracle")
    write_table(table3(pd.read_parquet(i.ard)), out / "table3", caption="ARD regression of model-vs-oracle TVD")
    tvds = [
        token_level_tvds(m, pd.read_parquet(path), human, splits)
        for m, path in zip(p.token_models, i.tokens, strict=True)
    ]
    tokens = (
        pd.concat(tvds, ignore_index=True)
        if tvds
        else pd.DataFrame(
            columns=[
                "text_id",
                "word_num",
                "tvd_model",
                "tvd_oracle",
                "mass",
                *(f"{c}_{n}" for n in ("model", "oracle1", "oracle2") for c in ("confidence", "correct")),
                "model",
            ]
        )
    )
    write_parquet(snakemake.output.tokens, tokens)
    write_table(
        table4(tokens, n_bins=p.n_bins),
        out / "table4",
        caption="Token level (appendix D): ECE against the humans' majority first token for the model's modal token "
        "and the two oracle halves, expected TVD and the model's mass on the human tokens",
    )
