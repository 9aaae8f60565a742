"""Fine-tune the multiple-choice encoder on one benchmark's original training instances, then
score every instance (both splits, original and injected) with it."""

import pandas as pd

from unsure.engine.encoder import MultipleChoiceEncoder, finetune
from unsure.engine.shards import run_shard
from unsure.io import write_json
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    rows = pd.read_parquet(snakemake.input.instances)
    train = rows[(rows["split"] == "train") & rows["answerable"]]
    summary = finetune(
        p.model["id"],
        train["prompt"].tolist(),
        [list(c) for c in train["choices"]],
        train["label"].tolist(),
        out.model,
        revision=p.model["revision"],
        seed=p.seed,
        **p.settings,
    )
    write_json(out.summary, summary)
    log.info("fine-tuned %s on %d instances in %.1f s", p.model["id"], summary["instances"], summary["seconds"])
    encoder = MultipleChoiceEncoder(out.model, max_length=p.settings["max_length"])

    def score(chunk: pd.DataFrame) -> pd.DataFrame:
        probs = encoder.probs(chunk["prompt"].tolist(), [list(c) for c in chunk["choices"]])
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "confidences": list(probs)})

    fingerprint = {"model": p.model, "settings": p.settings, "seed": p.seed, "rows": len(rows)}
    run_shard(rows, score, out.scores, shard=0, n_shards=1, chunk_rows=p.chunk_rows, fingerprint=fingerprint)
