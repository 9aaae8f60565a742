"""Appendix F's data side: passage folds and the weighted (context, response) training pairs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from unsure.engine.finetune import Example
from unsure.nextword._tables import KEY, require


def passage_folds(first: int, last: int, folds: int) -> list[list[int]]:
    """Passages ``first..last`` in ``folds`` contiguous, near-equal folds (1-10, 11-20, ... for 1-40 and 4)."""
    if folds < 2 or last - first + 1 < folds:
        raise ValueError(f"cannot make {folds} folds of passages {first}..{last}")
    return [[int(p) for p in part] for part in np.array_split(np.arange(first, last + 1), folds)]


def response_examples(positions: pd.DataFrame, human: pd.DataFrame, passages: list[int]) -> list[Example]:
    """One example per (position, distinct human word) of ``passages``, weighted by the word's share of responses.

    The weighted loss is then the cross-entropy between the human next-word
    distribution and the model's, position by position.
    """
    require(positions, [*KEY, "context"], "positions table")
    require(human, [*KEY, "word", "count"], "human counts")
    here = human[human["text_id"].isin(passages)]
    totals = here.groupby(KEY)["count"].transform("sum")
    contexts = {
        (int(t), int(n)): str(c)
        for t, n, c in zip(positions["text_id"], positions["word_num"], positions["context"], strict=True)
    }
    return [
        Example(contexts[(int(t), int(n))], " " + str(w), float(c / s))
        for t, n, w, c, s in zip(here["text_id"], here["word_num"], here["word"], here["count"], totals, strict=True)
    ]
