"""The SNI prompt, demonstration sets, and every item a model scores.

The prompt is the study's: the task definition, then k demonstrations
(``Input: x.`` / `` Output: y.``), then the test input and ``Output:``; a label
is scored as the continuation `` <label>``. Demonstration set ``s`` of ``k``
shots is slice ``[s·k, (s+1)·k)`` of the task's pool, so the sets of one k are
disjoint. Items are the rows an inference job scores: evaluation and held-out
instances and the calibration inputs (content-free, domain-context) under every
(k, set) context, and each leave-one-out item under its own context.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
import pandas as pd

from unsure.labelbias.tasks import task_seed

Demo = tuple[str, str]
"""A demonstration: (input, output)."""

ITEM_COLUMNS = ("row_id", "task", "kind", "input", "gold", "k", "set", "left_out")
KINDS = ("eval", "heldout", "cc", "dc", "looc")
"""Item kinds: evaluation and held-out instances, content-free, domain-context and leave-one-out inputs."""


def _end(text: str) -> str:
    """The text with a full stop added unless it ends in punctuation (as the study's template does)."""
    text = text.rstrip()
    return text if text and text[-1] in string.punctuation else text + "."


def sni_prompt(definition: str, demos: Sequence[Demo], query: str) -> str:
    """The study's SNI prompt, ending in ``Output:`` (the label follows after a space)."""
    parts = [_end(definition) + "\n\n"] if definition.strip() else []
    for x, y in demos:
        parts.append(f"{_end('Input: ' + x.strip())}\n{_end(' Output: ' + y.strip())}\n\n")
    parts.append(f"{_end('Input: ' + query.strip())}\n\nOutput:")
    return "".join(parts)


def variants(shots: Sequence[int], sets: int) -> list[tuple[int, int]]:
    """Every (k, demonstration set) scored; k = 0 has one set."""
    return [(k, s) for k in shots for s in range(1 if k == 0 else sets)]


def demonstrations(pool: Sequence[Demo], k: int, s: int) -> list[Demo]:
    """Demonstration set ``s`` of ``k`` shots: a slice of the pool, disjoint from the other sets of ``k``."""
    if (s + 1) * k > len(pool):
        raise ValueError(f"a pool of {len(pool)} cannot give demonstration set {s} of {k} shots")
    return list(pool[s * k : (s + 1) * k])


def leave_one_out(demos: Sequence[Demo], j: int) -> list[Demo]:
    """The demonstrations without the ``j``-th: the context LOOC scores demonstration ``j`` in."""
    return [d for i, d in enumerate(demos) if i != j]


def training_examples(pool: Sequence[Demo], k: int, s: int, n: int) -> list[Demo]:
    """Fine-tuning examples for the (k, s) context: the first ``n`` pool items not among its demonstrations."""
    shown = set(range(s * k, (s + 1) * k))
    rest = [d for i, d in enumerate(pool) if i not in shown]
    if len(rest) < n:
        raise ValueError(f"a pool of {len(pool)} leaves {len(rest)} examples besides set {s} of {k}, not {n}")
    return rest[:n]


def domain_inputs(texts: Sequence[str], n: int, seed: np.random.SeedSequence) -> list[str]:
    """Domain-context calibration inputs: ``n`` strings of L random words from ``texts``.

    L is the mean number of words per text; words are drawn with replacement
    from all the texts' words, so the inputs carry the task's vocabulary but no
    instance's meaning.
    """
    words = [w for t in texts for w in t.split()]
    if not words:
        raise ValueError("domain-context calibration needs evaluation inputs with words")
    length = max(1, round(len(words) / len(texts)))
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=length, replace=True)) for _ in range(n)]


def build_items(
    instances: pd.DataFrame,
    *,
    shots: Sequence[int],
    sets: int,
    content_free: Sequence[str],
    n_domain: int,
    seed: int,
) -> pd.DataFrame:
    """Every row the inference jobs score, with a stable ``row_id``.

    ``eval``/``heldout``/``cc``/``dc`` rows are scored under every (k, set)
    context (``k``, ``set``, ``left_out`` are -1); ``looc`` rows score
    demonstration ``left_out`` of set (``k``, ``set``) with the others as context.
    """
    rows: list[pd.DataFrame] = []
    for task, part in instances.groupby("task", sort=True):
        part = part.sort_values("order", kind="stable")
        scored = part[part["split"].isin(["eval", "heldout"])]
        rows.append(
            pd.DataFrame(
                {
                    "row_id": scored["row_id"],
                    "task": task,
                    "kind": scored["split"],
                    "input": scored["input"],
                    "gold": scored["gold"],
                }
            )
        )
        cf = [(f"{task}:cc:{i}", x) for i, x in enumerate(content_free)]
        dc_seed = task_seed(seed, f"{task}:dc")
        evals = part.loc[part["split"] == "eval", "input"].tolist()
        dc = [(f"{task}:dc:{i}", x) for i, x in enumerate(domain_inputs(evals, n_domain, dc_seed))]
        for kind, pairs in (("cc", cf), ("dc", dc)):
            rows.append(
                pd.DataFrame(
                    {
                        "row_id": [r for r, _ in pairs],
                        "task": task,
                        "kind": kind,
                        "input": [x for _, x in pairs],
                        "gold": None,
                    }
                )
            )
        pool = list(part.loc[part["split"] == "pool", ["input", "gold"]].itertuples(index=False, name=None))
        looc = []
        for k, s in variants(shots, sets):
            for j, (x, y) in enumerate(demonstrations(pool, k, s)):
                looc.append(
                    {"row_id": f"{task}:looc:{k}:{s}:{j}", "input": x, "gold": y, "k": k, "set": s, "left_out": j}
                )
        if looc:
            rows.append(pd.DataFrame(looc).assign(task=task, kind="looc"))
    items = pd.concat(rows, ignore_index=True).reindex(columns=list(ITEM_COLUMNS))
    for col in ("k", "set", "left_out"):
        items[col] = items[col].fillna(-1).astype(np.int64)
    return items


def pools(instances: pd.DataFrame) -> dict[str, list[Demo]]:
    """Each task's pool of (input, gold) in draw order."""
    pool = instances[instances["split"] == "pool"].sort_values(["task", "order"], kind="stable")
    return {
        str(task): list(part[["input", "gold"]].itertuples(index=False, name=None))
        for task, part in pool.groupby("task", sort=True)
    }


def item_context(definition: str, pool: Sequence[Demo], query: str, k: int, s: int, left_out: int = -1) -> str:
    """The prompt of one item under (k, s); a LOOC item leaves its own demonstration out."""
    demos = demonstrations(pool, k, s)
    if left_out >= 0:
        demos = leave_one_out(demos, left_out)
    return sni_prompt(definition, demos, query)
