"""Table 1 as the authors' released code computes it (``protocol: paper``).

Ilia & Aziz's notebooks (evgeniael/predict_next_word, ``TVD/*/*_processing.ipynb``)
differ from our corrected metrics (:mod:`unsure.nextword.metrics`) in these
ways, each reproduced here and each named in ``tables/reproduction``:

* ``ece_one_in_no_bin``: the ECE loop's bins are ``[i, i + 0.1)`` for ``i`` in
  ``np.arange(0, 1, 0.1)``, so a confidence of exactly 1.0 falls in no bin but
  still counts in the denominator (it contributes 0 instead of ``1 - acc``).
  Confidences are float32 (torch tensors) and compared with the float64 edges.
* ``raw_corpus_word``: the corpus word is compared as displayed in the text
  (``There``, ``nationwide.``) with lower-cased model words, so those never
  match; responses and model words are only lower-cased, never stripped.
* ``first_in_list_ties``: the mode of a distribution and the majority word are
  the first of the tied words in order of first appearance (``Counter`` order,
  ``torch.argmax``), scored 0/1, not expected correctness.
* ``oracle_split``: the oracle target is 20 responses drawn with Python's
  ``random`` (``random.seed(k)`` re-set at every position, k = 0..19), after
  dropping one random response from an odd list *in place*; the other group
  is the rest in the human list's own order, which puts the most frequent
  response first, so its argmax ties go to the majority word.
* ``last_position_dropped``: the loops run over ``range(len(samples) - 1)``,
  so the last position is never scored.
* ``human_oracle_copy``: the printed Human × Oracle-majority cell (0.19) is
  the value of GPT-2's column left in the notebook's kernel
  (``ece_gpt2_oracle_maj``); :func:`paper_columns` computes the intended value.

All inputs are plain ordered lists: a position's human responses expanded in
the norms' order, its raw corpus word, and its raw model samples in order.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

FAILURE = "Failed to generate word"
"""The marker the authors' sampling code stored for a sample without a complete word."""

ORACLE_SIZE = 20
N_SPLITS = 20

Position = tuple[int, int]


def estimator(words: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The authors' ``get_estimator_unbiased``: drop the marker and NaN (``""`` here), lower-case, count in order.

    Returns the support (first-appearance order) and float32 probabilities.
    """
    kept = [w.lower() for w in words if isinstance(w, str) and w not in (FAILURE, "nan", "")]
    counts = Counter(kept)
    total = sum(counts.values())
    return list(counts), np.asarray([c / total for c in counts.values()], dtype=np.float32)


def mode_hit(words: list[str], probs: np.ndarray, gold_words: list[str], gold_probs: np.ndarray) -> tuple[float, int]:
    """The authors' ``get_ece_data``: (max probability, 1 if the first mode equals the first gold majority)."""
    gold = gold_words[int(np.argmax(gold_probs))]
    return float(probs.max()), int(words[int(np.argmax(probs))] == gold)


def tvd(words: list[str], probs: np.ndarray, other_words: list[str], other_probs: np.ndarray) -> float:
    """TVD over the union of supports (float32 sums, as the authors' torch code)."""
    p = dict(zip(words, probs.tolist(), strict=True))
    q = dict(zip(other_words, other_probs.tolist(), strict=True))
    diff = np.asarray([p.get(w, 0.0) - q.get(w, 0.0) for w in {**p, **q}], dtype=np.float32)
    return float(np.abs(diff).sum(dtype=np.float32) / 2)


def ece(items: Sequence[tuple[float, int]], n_bins: int = 10) -> float:
    """The authors' ``calculate_ECE``: bins ``[i, i + 1/n)`` for ``i`` in ``np.arange(0, 1, 1/n)``.

    A confidence of exactly 1.0 is in no bin but counts in N.
    """
    arr = np.asarray(items, dtype=np.float64).reshape(-1, 2)
    n = arr.shape[0]
    total = 0.0
    for lo in np.arange(0, 1, 1 / n_bins):
        inside = arr[(arr[:, 0] >= lo) & (arr[:, 0] < lo + 1 / n_bins)]
        if inside.shape[0]:
            total += abs(inside[:, 0].mean() - inside[:, 1].mean()) * inside.shape[0] / n
    return float(total)


def oracle_split(words: list[str], seed: int, size: int = ORACLE_SIZE) -> tuple[list[str], list[str]]:
    """The authors' disjoint oracle groups; **mutates** ``words`` (drops one response if odd), as theirs does."""
    random.seed(seed)
    if len(words) % 2 == 1:
        words.remove(random.sample(words, 1)[0])
    first = random.sample(words, size)
    rest = words.copy()
    for w in first:
        rest.remove(w)
    return first, rest


@dataclass(frozen=True)
class PaperColumn:
    """One column of Table 1 under the authors' code."""

    system: str
    n_positions: int
    ece_corpus_word: float
    ece_human_majority: float
    ece_oracle_majority: float
    expected_tvd_human: float
    """System vs all responses; for the oracle column: oracle vs the seed-1 oracle target (Table 1's 0.42)."""


def _scored(order: Sequence[Position]) -> list[Position]:
    return list(order)[:-1]  # range(len(samples) - 1)


def model_column(
    system: str,
    samples: Mapping[Position, Sequence[str]],
    human: Mapping[Position, Sequence[str]],
    corpus: Mapping[Position, str],
    *,
    trimmed_human: bool = False,
    n_bins: int = 10,
) -> PaperColumn:
    """A model column as the authors' model notebooks compute it, over the positions ``samples`` covers (sorted).

    A scored position whose samples hold no word (only the failure marker or
    empty strings) is skipped; ``n_positions`` counts the positions scored.

    ``trimmed_human``: the human lists were already cut to even length by an
    earlier loop in the same kernel (ChatGPT's second and third loops).
    """
    order = _scored(sorted(samples))
    corpus_items, human_items, tvds = [], [], []
    oracle_items: list[list[tuple[float, int]]] = [[] for _ in range(N_SPLITS)]
    n_scored = 0
    for pos in order:
        mw, mp = estimator(samples[pos])
        if not mw:  # no complete word at this position: the authors' code has nothing to score (it would fail)
            continue
        n_scored += 1
        h = list(human[pos])
        if trimmed_human:
            oracle_split(h, 1)
        hw, hp = estimator(h)
        oracle_split(h, 1)
        tvds.append(tvd(mw, mp, hw, hp))
        human_items.append(mode_hit(mw, mp, hw, hp))
        corpus_items.append(mode_hit(mw, mp, [corpus[pos]], np.ones(1, dtype=np.float32)))
        for k in range(N_SPLITS):
            first, _ = oracle_split(h, k)
            ow, op = estimator(first)
            oracle_items[k].append(mode_hit(mw, mp, ow, op))
    return PaperColumn(
        system,
        n_scored,
        ece(corpus_items, n_bins),
        ece(human_items, n_bins),
        float(np.mean([ece(items, n_bins) for items in oracle_items])),
        float(np.mean(tvds)) if tvds else float("nan"),
    )


def human_and_oracle_columns(
    human: Mapping[Position, Sequence[str]], corpus: Mapping[Position, str], *, n_bins: int = 10
) -> tuple[PaperColumn, PaperColumn]:
    """The Human and Oracle columns of the authors' oracle notebook (its cells run in order, one kernel)."""
    order = _scored(sorted(human))
    lists = {pos: list(human[pos]) for pos in order}
    one = np.ones(1, dtype=np.float32)
    h_corpus, h_human = [], []
    h_oracle: list[list[tuple[float, int]]] = [[] for _ in range(N_SPLITS)]
    for pos in order:
        h = lists[pos]
        hw, hp = estimator(h)
        h_human.append(mode_hit(hw, hp, hw, hp))
        h_corpus.append(mode_hit(hw, hp, [corpus[pos]], one))
        for k in range(N_SPLITS):
            first, _ = oracle_split(h, k)  # k = 0 trims an odd list in place
            ow, op = estimator(first)
            h_oracle[k].append(mode_hit(hw, hp, ow, op))
    o_corpus, o_human, o_tvd = [], [], []
    o_oracle: list[list[tuple[float, int]]] = [[] for _ in range(N_SPLITS)]
    for pos in order:
        h = lists[pos]  # already even: the human loop above trimmed it
        hw, hp = estimator(h)
        first, rest = oracle_split(h, 1)
        tw, tp = estimator(first)
        rw, rp = estimator(rest)
        o_tvd.append(tvd(rw, rp, tw, tp))
        o_human.append(mode_hit(rw, rp, hw, hp))
        o_corpus.append(mode_hit(rw, rp, [corpus[pos]], one))
        for k in range(N_SPLITS):
            first, rest = oracle_split(h, k)
            tw, tp = estimator(first)
            rw, rp = estimator(rest)
            o_oracle[k].append(mode_hit(rw, rp, tw, tp))
    human_col = PaperColumn(
        "human",
        len(order),
        ece(h_corpus, n_bins),
        ece(h_human, n_bins),
        float(np.mean([ece(items, n_bins) for items in h_oracle])),
        float("nan"),
    )
    oracle_col = PaperColumn(
        "oracle",
        len(order),
        ece(o_corpus, n_bins),
        ece(o_human, n_bins),
        float(np.mean([ece(items, n_bins) for items in o_oracle])),
        float(np.mean(o_tvd)),
    )
    return human_col, oracle_col


def human_lists(positions: pd.DataFrame) -> tuple[dict[Position, list[str]], dict[Position, str]]:
    """Expanded human response lists and raw corpus words from a positions table (:func:`read_norms`).

    The authors' lists are in descending frequency, ties alphabetical; that
    order decides their argmax ties and the oracle's remaining group.
    """
    frame = positions
    lists: dict[Position, list[str]] = {}
    corpus: dict[Position, str] = {}
    for tid, num, word, responses in zip(
        frame["text_id"], frame["word_num"], frame["corpus_word"], frame["responses"], strict=True
    ):
        pos = (int(tid), int(num))
        ranked = sorted(responses.items(), key=lambda wc: (-int(wc[1]), wc[0]))  # the authors' list order
        lists[pos] = [w for w, c in ranked for _ in range(int(c))]
        corpus[pos] = str(word)
    return lists, corpus


def read_raw_samples(path: str | os.PathLike[str]) -> dict[Position, list[str]]:
    """A pre-collected samples file's raw words per position, in file order (``counts`` expanded in key order).

    The file is first validated by :func:`unsure.nextword.data.read_samples`
    (so a malformed line or a repeated position is an error naming file and line).
    """
    from unsure.nextword.data import read_samples

    read_samples(path)
    out: dict[Position, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            pos = (int(record["text_id"]), int(record["word_num"]))
            if "samples" in record:
                out[pos] = list(record["samples"])
            else:
                out[pos] = [w for w, c in record["counts"].items() for _ in range(int(c))]
    return out


def paper_columns(
    positions: pd.DataFrame,
    samples: Mapping[str, Mapping[Position, Sequence[str]]],
    *,
    paper_names: Mapping[str, str] | None = None,
    n_bins: int = 10,
) -> list[PaperColumn]:
    """Every Table 1 column under ``protocol: paper``: each system's, then Human and Oracle.

    ``positions`` is a positions table with ``responses`` (:func:`read_norms`,
    already cut to the studied passages); ``samples`` maps a system to its raw
    samples (:func:`read_raw_samples`), of which positions of other passages
    are left out. ``paper_names`` (default :data:`PAPER_NAMES`) maps a system
    to its Table 1 column: the ChatGPT-D column is computed on human lists
    already trimmed to even length, as in the authors' kernel. The Human
    column's oracle-majority cell is the intended value (the human MLE against
    the oracle majority), not the printed copy of GPT-2's (``human_oracle_copy``).

    Raises:
        ValueError: naming the position, if a position has fewer than
            ``ORACLE_SIZE + 2`` human responses (the authors' 20-vs-rest
            oracle, after trimming to even length, needs one left over), or a system has
            samples at a position of a studied passage that the norms lack.
    """
    names = PAPER_NAMES if paper_names is None else paper_names
    human, corpus = human_lists(positions)
    short = [(pos, len(words)) for pos, words in human.items() if len(words) < ORACLE_SIZE + 2]
    if short:
        (tid, num), n = short[0]
        raise ValueError(
            f"protocol paper: position (text_id={tid}, word_num={num}) has {n} human responses; the authors' "
            f"oracle needs at least {ORACLE_SIZE + 2} ({len(short)} position(s) have fewer)"
        )
    passages = {tid for tid, _ in human}
    cols = []
    for name, raw in samples.items():
        here = {pos: words for pos, words in raw.items() if pos[0] in passages}
        unknown = sorted(set(here) - set(human))
        if unknown:
            tid, num = unknown[0]
            raise ValueError(f"{name}: samples at position (text_id={tid}, word_num={num}), which the norms lack")
        cols.append(
            model_column(name, here, human, corpus, trimmed_human=names.get(name, name) == "chatgpt-d", n_bins=n_bins)
        )
    return [*cols, *human_and_oracle_columns(human, corpus, n_bins=n_bins)]


def corrected_values(metrics: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Our Table 1 cells per system, keyed as :data:`DIFFERENCES`, from the metrics rows (mean over splits).

    ``expected_tvd`` is the system's expected TVD to all responses, and for
    the oracle its expected TVD to the disjoint target half (the quantity the
    paper prints in the oracle column).
    """
    mean = metrics.groupby("estimator", sort=False)[
        ["ece_corpus_word", "ece_human_majority", "ece_oracle_majority", "expected_tvd_human", "expected_tvd_target"]
    ].mean()
    out: dict[str, dict[str, float]] = {}
    for system, row in mean.iterrows():
        tvd_column = "expected_tvd_target" if system == "oracle" else "expected_tvd_human"
        out[str(system)] = {
            "ece_corpus_word": float(row["ece_corpus_word"]),
            "ece_human_majority": float(row["ece_human_majority"]),
            "ece_oracle_majority": float(row["ece_oracle_majority"]),
            "expected_tvd": float(row[tvd_column]),
        }
    return out


PAPER_NAMES: dict[str, str] = {
    "human": "human",
    "oracle": "oracle",
    "gpt2": "gpt2",
    "gpt2-ft": "gpt2-ft",
    "gpt2-t0.5": "gpt2-t0.5",
    "bloom": "bloom",
    "bloom-7b1": "bloom",
    "chatgpt": "chatgpt",
    "chatgpt-d": "chatgpt-d",
}
"""Our system names whose Table 1 column is one of the paper's (:data:`PRINTED_TABLE1` keys).

A system of another name (zoo models, GPT-2 large, the chat modes of
gpt-3.5-turbo, whose prompts are not the authors') gets no printed value;
name a pre-collected file after the paper's column (``chatgpt``, ...) to
compare it with the printed cell."""


PRINTED_TABLE1: dict[str, dict[str, float | None]] = {
    "human": {"ece_corpus_word": 0.14, "ece_human_majority": 0.60, "ece_oracle_majority": 0.19, "expected_tvd": None},
    "oracle": {"ece_corpus_word": 0.11, "ece_human_majority": 0.57, "ece_oracle_majority": 0.32, "expected_tvd": 0.42},
    "gpt2": {"ece_corpus_word": 0.02, "ece_human_majority": 0.20, "ece_oracle_majority": 0.19, "expected_tvd": 0.64},
    "gpt2-ft": {"ece_corpus_word": 0.03, "ece_human_majority": 0.22, "ece_oracle_majority": 0.19, "expected_tvd": 0.66},
    "gpt2-t0.5": {
        "ece_corpus_word": 0.35,
        "ece_human_majority": 0.13,
        "ece_oracle_majority": 0.15,
        "expected_tvd": 0.61,
    },
    "bloom": {"ece_corpus_word": 0.07, "ece_human_majority": 0.09, "ece_oracle_majority": 0.07, "expected_tvd": 0.61},
    "chatgpt": {"ece_corpus_word": 0.45, "ece_human_majority": 0.37, "ece_oracle_majority": 0.37, "expected_tvd": 0.76},
    "chatgpt-d": {
        "ece_corpus_word": 0.10,
        "ece_human_majority": 0.08,
        "ece_oracle_majority": 0.08,
        "expected_tvd": 0.82,
    },
}
"""Table 1 as printed (rows: column of the paper; keys: target row)."""

COPY_PASTE_CELLS: dict[tuple[str, str], str] = {
    ("human", "ece_oracle_majority"): (
        "printed 0.19 is GPT-2's value left in the oracle notebook's kernel (ece_gpt2_oracle_maj); "
        "compare with the intended value (the human MLE against the oracle majority)"
    ),
}

DIFFERENCES: dict[str, str] = {
    "ece_corpus_word": (
        "ece_one_in_no_bin (confidence 1.0 in no bin); raw_corpus_word (corpus word as displayed, "
        "'There', 'nationwide.'); first_in_list_ties"
    ),
    "ece_human_majority": "ece_one_in_no_bin; first_in_list_ties (mode and majority: first word in list order)",
    "ece_oracle_majority": (
        "ece_one_in_no_bin; first_in_list_ties; oracle_split (20 random responses vs the rest, random.seed(k) "
        "per position; ours: random halves over the configured seeds)"
    ),
    "expected_tvd": (
        "normalisation (lower-case only vs our normalize_word); last_position_dropped; for the oracle: "
        "oracle_split (one seed, 20 vs the rest; ours: halves over seeds)"
    ),
}
"""The named differences behind each row's gap between the two protocols."""

REPRODUCTION_COLUMNS = ("system", "paper_column", "metric", "printed", "paper", "corrected", "difference", "note")


def reproduction_table(
    paper_cols: Sequence[PaperColumn],
    corrected: Mapping[str, Mapping[str, float]],
    paper_names: Mapping[str, str] | None = None,
    *,
    printed: bool = True,
) -> pd.DataFrame:
    """One row per Table 1 cell a system can produce: printed, ours under ``paper``, under ``corrected``.

    ``corrected`` maps a system to its corrected metrics (keys as in
    :data:`DIFFERENCES`); ``paper_names`` maps our system names to Table 1's
    column keys (:data:`PRINTED_TABLE1`), where they differ. ``printed=False``
    (inputs that are not the paper's, such as generated norms) leaves the
    printed values and their notes empty.
    """
    names = dict(paper_names or {})
    rows = []
    for col in paper_cols:
        key = names.get(col.system, col.system)
        cells = PRINTED_TABLE1.get(key, {})
        ours = corrected.get(col.system, {})
        for metric in DIFFERENCES:
            value = col.expected_tvd_human if metric == "expected_tvd" else getattr(col, metric)
            if metric == "expected_tvd" and col.system == "human":
                continue
            rows.append(
                (
                    col.system,
                    key if key in PRINTED_TABLE1 else "",
                    metric,
                    cells.get(metric) if printed else None,
                    value,
                    ours.get(metric, float("nan")),
                    DIFFERENCES[metric],
                    COPY_PASTE_CELLS.get((key, metric), "") if printed else "",
                )
            )
    return pd.DataFrame(rows, columns=list(REPRODUCTION_COLUMNS))
