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
  is the rest in the human list's own order (the norms file's order of
  responses, not frequency order), so its argmax ties go to the list's first.
* ``last_position_dropped``: the loops run over ``range(len(samples) - 1)``,
  so the last position they visit is never scored.
* ``released_entries``: the BLOOM and ChatGPT notebooks visit the released
  ``processed_*.json`` entry by entry, in the file's (random) order: a
  position the file gives twice is scored twice, each time with that entry's
  own samples, and the entry dropped is the file's last (BLOOM 14-23, ChatGPT
  50-23), so 669 and 500 positions are scored, the counts the paper states.
  ``corrected`` scores each position once with all its samples merged and
  drops none (657 and 487 positions). The GPT-2 notebooks visit positions in
  passage order, so there the last position of the last passage is dropped.
* ``human_oracle_copy``: the printed Human × Oracle-majority cell (0.19) is
  the value of GPT-2's column left in the notebook's kernel
  (``ece_gpt2_oracle_maj``); :func:`paper_columns` computes the intended value.

All inputs are plain ordered lists: a position's human responses expanded in
the norms' order, its raw corpus word, and a system's visits (position, raw
samples in order) in the order the authors' loop makes them.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

FAILURE = "Failed to generate word"
"""The marker the authors' sampling code stored for a sample without a complete word."""

ORACLE_SIZE = 20
N_SPLITS = 20

Position = tuple[int, int]
Visit = tuple[Position, list[str]]
_T = TypeVar("_T")
"""One step of the authors' loop over a system's samples: a position and the raw words scored there."""


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


def _scored(order: Sequence[_T]) -> list[_T]:
    """The authors' loops run over ``range(len(samples) - 1)``: the last visit is never scored."""
    return list(order)[:-1]


def model_column(
    system: str,
    visits: Sequence[tuple[Position, Sequence[str]]],
    human: Mapping[Position, Sequence[str]],
    corpus: Mapping[Position, str],
    *,
    trimmed_human: bool = False,
    n_bins: int = 10,
) -> PaperColumn:
    """A model column as the authors' model notebooks compute it, over ``visits`` in their loop's order.

    ``visits`` (:func:`read_raw_samples`) may hold a position twice, as the
    released lists do; each visit is scored on its own samples and, as in
    the authors' ``range(len(samples) - 1)``, the last visit is not scored
    (``last_position_dropped``). A scored visit whose samples hold no word
    (only the failure marker or empty strings) is skipped; ``n_positions``
    counts the visits scored.

    ``trimmed_human``: the human lists were already cut to even length by an
    earlier loop in the same kernel (ChatGPT's second and third loops).
    """
    order = _scored(visits)
    corpus_items, human_items, tvds = [], [], []
    oracle_items: list[list[tuple[float, int]]] = [[] for _ in range(N_SPLITS)]
    n_scored = 0
    for pos, words in order:
        mw, mp = estimator(words)
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

    Each list keeps the norms file's order of responses (first appearance,
    repeats added up), as the authors' ``Response.unique()`` builds it; that
    order decides their argmax ties and the oracle's random groups.
    """
    frame = positions
    lists: dict[Position, list[str]] = {}
    corpus: dict[Position, str] = {}
    for tid, num, word, responses in zip(
        frame["text_id"], frame["word_num"], frame["corpus_word"], frame["responses"], strict=True
    ):
        pos = (int(tid), int(num))
        lists[pos] = [w for w, c in responses.items() for _ in range(int(c))]
        corpus[pos] = str(word)
    return lists, corpus


def _released_words(item: object, where: str) -> tuple[int, list[str]]:
    """One ``released`` item of a converted file: (its entry index in the release, its words as released)."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: each 'released' item must be an object {{entry, words}}")
    entry, words = item.get("entry"), item.get("words")
    if isinstance(entry, bool) or not isinstance(entry, int) or entry < 0:
        raise ValueError(f"{where}: 'released' entry must be a non-negative integer, got {entry!r}")
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError(f"{where}: 'released' words must be a list of strings")
    return entry, list(words)


def read_raw_samples(path: str | os.PathLike[str]) -> list[Visit]:
    """A samples file as the authors' loop visits it: (position, raw words in order), in their loop's order.

    A file converted from the released BLOOM / ChatGPT lists
    (:func:`unsure.nextword.data.convert_released_lists`: every record has
    ``released``) gives one visit per released entry, in the release's order,
    with the words as released (``released_entries``): a position given twice
    is visited twice. Any other file gives one visit per position, sorted by
    position (the authors' GPT-2 notebooks read the passages in order), with
    its ``samples`` or its ``counts`` expanded in key order.

    The file is first validated by :func:`unsure.nextword.data.read_samples`
    (so a malformed line or a repeated position is an error naming file and
    line); so is ``released``, which every record has or none, and whose
    entry indices are distinct.
    """
    from unsure.nextword.data import read_samples

    read_samples(path)
    merged: dict[Position, list[str]] = {}
    released: dict[int, Visit] = {}
    with_released: list[bool] = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {line_no}"
            record = json.loads(line)
            pos = (int(record["text_id"]), int(record["word_num"]))
            if "samples" in record:
                merged[pos] = list(record["samples"])
            else:
                merged[pos] = [w for w, c in record["counts"].items() for _ in range(int(c))]
            with_released.append("released" in record)
            if with_released[-1] != with_released[0]:
                raise ValueError(f"{where}: 'released' is on some records only; convert the release again")
            if not with_released[-1]:
                continue
            items = record["released"]
            if not isinstance(items, list) or not items:
                raise ValueError(f"{where}: 'released' must be a non-empty list of {{entry, words}}")
            for item in items:
                entry, words = _released_words(item, where)
                if entry in released:
                    raise ValueError(f"{where}: released entry {entry} is also given at position {released[entry][0]}")
                released[entry] = (pos, words)
    if with_released and with_released[0]:
        return [released[entry] for entry in sorted(released)]
    return sorted(merged.items())


def paper_columns(
    positions: pd.DataFrame,
    samples: Mapping[str, Sequence[tuple[Position, Sequence[str]]]],
    *,
    paper_names: Mapping[str, str] | None = None,
    n_bins: int = 10,
) -> list[PaperColumn]:
    """Every Table 1 column under ``protocol: paper``: each system's, then Human and Oracle.

    ``positions`` is a positions table with ``responses`` (:func:`read_norms`,
    already cut to the studied passages); ``samples`` maps a system to its
    visits (:func:`read_raw_samples`), of which those at positions of other
    passages are left out before the last is dropped. ``paper_names``
    (default :data:`PAPER_NAMES`) maps a system to its Table 1 column: the
    ChatGPT-D column is computed on human lists already trimmed to even
    length, as in the authors' kernel. The Human
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
        here = [(pos, words) for pos, words in raw if pos[0] in passages]
        unknown = sorted({pos for pos, _ in here} - set(human))
        if unknown:
            tid, num = unknown[0]
            raise ValueError(f"{name}: samples at position (text_id={tid}, word_num={num}), which the norms lack")
        cols.append(
            model_column(name, here, human, corpus, trimmed_human=names.get(name, name) == "chatgpt-d", n_bins=n_bins)
        )
    return [*cols, *human_and_oracle_columns(human, corpus, n_bins=n_bins)]


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
"""Our system names whose Table 1 column is one of the paper's
(:data:`unsure.nextword.reproduction.PRINTED_TABLE1` keys).

A system of another name (zoo models, GPT-2 large, the chat modes of
gpt-3.5-turbo, whose prompts are not the authors') gets no printed value;
name a pre-collected file after the paper's column (``chatgpt``, ...) to
compare it with the printed cell."""
