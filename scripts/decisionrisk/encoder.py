"""Fine-tune the multiple-choice encoder on one benchmark's original training instances and score
every instance (both splits, original and injected): training rows cross-fitted (each by an encoder
fine-tuned without its instance), validation rows by the encoder fine-tuned on all of them."""

from unsure.forkserver import hand_off

hand_off()

import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.config import Model
from unsure.decisionrisk.crossfit import FULL, Scorer, crossfit_folds, fit_fold_encoders, score_by_fold
from unsure.engine.encoder import MultipleChoiceEncoder, finetune
from unsure.engine.shards import run_shard
from unsure.io import write_json
from unsure.logs import logged

with logged(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    rows = pd.read_parquet(snakemake.input.instances)
    rows["fold"] = crossfit_folds(rows, p.folds, seed=p.seed)
    summaries = {}
    with tempfile.TemporaryDirectory(dir=Path(out.scores).parent, prefix=".folds-") as tmp:

        def fit(train: pd.DataFrame, fold: int) -> Scorer:
            """Fine-tune on ``train`` (the full encoder is the rule's output; fold encoders are temporary)."""
            where = out.model if fold == FULL else Path(tmp) / f"fold-{fold}"
            summary = finetune(
                p.model["id"],
                train["prompt"].tolist(),
                [list(c) for c in train["choices"]],
                train["label"].tolist(),
                where,
                revision=p.model["revision"],
                seed=p.seed,
                **p.settings,
            )
            name = "full" if fold == FULL else f"fold-{fold}"
            summaries[name] = summary
            log.info(
                "fine-tuned %s (%s) on %d instances in %.1f s", p.model["id"], name, len(train), summary["seconds"]
            )
            loaded: list[MultipleChoiceEncoder] = []  # loaded at first use: no scorer holds memory while others train

            def score(chunk: pd.DataFrame) -> npt.NDArray[np.float64]:
                if not loaded:
                    loaded.append(MultipleChoiceEncoder(where, max_length=p.settings["max_length"]))
                return loaded[0].probs(chunk["prompt"].tolist(), [list(c) for c in chunk["choices"]])

            return score

        scorers = fit_fold_encoders(rows, rows["fold"].to_numpy(), fit)
        fingerprint = {"settings": p.settings, "seed": p.seed, "rows": len(rows), "folds": p.folds}
        run_shard(
            rows,
            lambda chunk: score_by_fold(chunk, scorers),
            out.scores,
            shard=0,
            n_shards=1,
            chunk_rows=p.chunk_rows,
            fingerprint=fingerprint,
            model=Model.model_validate(p.model),
        )
    write_json(out.summary, summaries["full"] | {"folds": p.folds, "crossfit": summaries})
