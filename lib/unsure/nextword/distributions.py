"""Word distributions per cloze position: human MLE, oracle splits, model samples, entropy, modes.

A distribution is a long data frame keyed by ``(text_id, word_num, word)``
with normalised words (:func:`unsure.nextword.words.normalize_word`):

* a **counts table** has a whole-number ``count`` column (human responses,
  model samples, one half of an oracle split);
* a **probability table** has a ``prob`` column summing to one per position.

Every function that needs probabilities accepts either and turns counts into
relative frequencies (the maximum-likelihood estimate), so a model given as
samples and one given as probabilities go through the same code.

The oracle control (Ilia & Aziz 2024, §4) splits the ~40 responses at each
position at random into two disjoint groups: a *target* group that stands in
for the human distribution and an *oracle* group that plays a model which
knows the human distribution as well as a finite human sample can. Its
distance to the target is what "as good as humans" looks like under sampling
noise. :func:`oracle_splits` draws those splits for many seeds at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd

from unsure.nextword.frames import (
    KEY,
    ROW_KEY,
    IntArray,
    check_seeds,
    check_table,
    fmt_position,
    positions_of,
    require,
)
from unsure.nextword.words import normalize_word

Position = tuple[int, int]
Samples: TypeAlias = "pd.DataFrame | Mapping[Position, Sequence[str] | Mapping[str, int]]"


def _counts_frame(tids: list[int], nums: list[int], words: list[str], counts: list[int]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "text_id": np.asarray(tids, dtype=np.int64),
            "word_num": np.asarray(nums, dtype=np.int64),
            "word": pd.Series(words, dtype=object),
            "count": np.asarray(counts, dtype=np.int64),
        }
    )
    return frame.sort_values(ROW_KEY, ignore_index=True)


def human_counts(positions: pd.DataFrame) -> pd.DataFrame:
    """Normalised human response counts (a counts table) from the positions table of :func:`read_norms`.

    Raw responses that normalise to the same word are added up; responses
    that normalise to nothing (``?``, blank) are dropped.

    Raises:
        ValueError: if a position's ``responses`` is not a dict of counts, or
            no response of a position is left after normalisation.
    """
    require(positions, [*KEY, "responses"], "positions table")
    tids: list[int] = []
    nums: list[int] = []
    words: list[str] = []
    counts: list[int] = []
    for tid, num, responses in zip(positions["text_id"], positions["word_num"], positions["responses"], strict=True):
        where = f"positions table, position {fmt_position(tid, num)}"
        if not isinstance(responses, Mapping):
            raise ValueError(f"{where}: responses must be a dict of raw response -> count, got {responses!r}")
        acc: dict[str, int] = {}
        for raw, c in responses.items():
            if not isinstance(raw, str) or isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0:
                raise ValueError(f"{where}: response {raw!r} has count {c!r}; expected a string and a count >= 0")
            word = normalize_word(raw)
            if word and c:
                acc[word] = acc.get(word, 0) + int(c)
        if not acc:
            raise ValueError(f"{where}: no response is left after normalisation (all blank or punctuation)")
        for word, c in acc.items():
            tids.append(int(tid))
            nums.append(int(num))
            words.append(word)
            counts.append(c)
    return _counts_frame(tids, nums, words, counts)


def counts_from_samples(samples: Samples) -> pd.DataFrame:
    """A counts table from sampled words, normalised and added up per position.

    ``samples`` is either a long data frame with ``text_id, word_num, word``
    (one row per sample, or with a ``count`` column) or a mapping from
    ``(text_id, word_num)`` to a list of sampled words or to a word -> count
    mapping (the two forms of the pre-collected samples file). Samples that
    normalise to nothing are dropped; a position left with none has no row.
    """
    if isinstance(samples, pd.DataFrame):
        require(samples, [*KEY, "word"], "samples")
        frame = samples[[*KEY, "word"]].copy()
        frame["count"] = samples["count"] if "count" in samples.columns else 1
        bad = ~frame["word"].map(lambda w: isinstance(w, str))
        if bad.any():
            row = frame[bad].iloc[0]
            raise ValueError(
                f"samples: word at position {fmt_position(row['text_id'], row['word_num'])} must be a string, "
                f"got {row['word']!r}"
            )
        frame["word"] = frame["word"].map(normalize_word)
        frame = frame[frame["word"] != ""]
        grouped = frame.groupby(ROW_KEY, sort=True, as_index=False)["count"].sum()
        return check_table(grouped[grouped["count"] > 0], "count", "samples")
    tids: list[int] = []
    nums: list[int] = []
    words: list[str] = []
    counts: list[int] = []
    for key, value in samples.items():
        tid, num = key
        acc: dict[str, int] = {}
        items: Iterable[tuple[str, int]] = value.items() if isinstance(value, Mapping) else ((w, 1) for w in value)
        for w, c in items:
            if not isinstance(w, str) or isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0:
                raise ValueError(f"samples at position {fmt_position(tid, num)}: bad sample {w!r} with count {c!r}")
            norm = normalize_word(w)
            if norm and c:
                acc[norm] = acc.get(norm, 0) + int(c)
        for w, c in acc.items():
            tids.append(int(tid))
            nums.append(int(num))
            words.append(w)
            counts.append(c)
    return _counts_frame(tids, nums, words, counts)


def frequencies(counts: pd.DataFrame) -> pd.DataFrame:
    """Relative frequencies of an already validated, sorted counts table (internal fast path, no checks)."""
    c = counts["count"].to_numpy()
    totals = counts.groupby(KEY, sort=False)["count"].transform("sum").to_numpy()
    keep = c > 0
    out = counts.loc[keep, ROW_KEY].reset_index(drop=True)
    out["prob"] = c[keep] / totals[keep]
    return out


def to_probs(table: pd.DataFrame) -> pd.DataFrame:
    """A probability table (``text_id, word_num, word, prob``) from a counts or probability table.

    Counts become relative frequencies, the maximum-likelihood estimate of the
    distribution they were sampled from. A probability table is checked
    (sums within 1e-6 of one per position) and returned sorted. Zero rows are
    dropped.

    Raises:
        ValueError: naming the position whose counts are all zero or whose
            probabilities do not sum to one.
    """
    if "prob" in table.columns:
        probs = check_table(table, "prob", "probability table")
        sums = probs.groupby(KEY, sort=False)["prob"].sum()
        off = sums[(sums - 1.0).abs() > 1e-6]
        if not off.empty:
            (tid, num), total = next(iter(off.items()))
            raise ValueError(f"probability table: prob at position {fmt_position(tid, num)} sums to {total!r}, not 1")
        return probs[probs["prob"] > 0].reset_index(drop=True)
    counts = check_table(table, "count", "counts table")
    totals = counts.groupby(KEY, sort=False)["count"].sum()
    if (totals == 0).any():
        tid, num = totals.index[int(np.flatnonzero(totals.to_numpy() == 0)[0])]
        raise ValueError(f"counts table: all counts at position {fmt_position(tid, num)} are 0")
    return frequencies(counts)


def restrict(table: pd.DataFrame, like: pd.DataFrame | pd.MultiIndex) -> pd.DataFrame:
    """The rows of ``table`` at the positions of ``like`` (a table with ``text_id, word_num`` or an index)."""
    require(table, KEY, "table")
    positions = like if isinstance(like, pd.MultiIndex) else positions_of(like)
    codes = positions.get_indexer(pd.MultiIndex.from_frame(table[KEY]))
    return table[codes >= 0].reset_index(drop=True)


def entropy(table: pd.DataFrame) -> pd.Series:
    """Shannon entropy (nats) of the distribution at every position, indexed by ``(text_id, word_num)``."""
    probs = to_probs(table)
    p = probs["prob"].to_numpy()
    terms = pd.Series(-p * np.log(p), index=pd.MultiIndex.from_frame(probs[KEY]))
    return terms.groupby(level=KEY, sort=True).sum().rename("entropy")


def modes(table: pd.DataFrame) -> pd.DataFrame:
    """Every most probable word of each position (ties give several rows): ``text_id, word_num, word, prob``.

    Ties are exact for counts (equal counts give bit-identical frequencies);
    probabilities within a relative 1e-12 of the maximum count as tied.
    """
    return top_words(to_probs(table))


def top_words(probs: pd.DataFrame) -> pd.DataFrame:
    """:func:`modes` of an already validated probability table (internal fast path, no checks)."""
    top = probs.groupby(KEY, sort=False)["prob"].transform("max").to_numpy()
    is_mode = np.isclose(probs["prob"].to_numpy(), top, rtol=1e-12, atol=0.0)
    return probs[is_mode].reset_index(drop=True)


# ----------------------------------------------------------------------------- resampling


class _Responses:
    """A counts table expanded to one entry per response, for vectorised resampling."""

    def __init__(self, counts: pd.DataFrame, what: str) -> None:
        self.table = check_table(counts, "count", what)
        self.positions = positions_of(self.table)
        pos_of_row = self.positions.get_indexer(pd.MultiIndex.from_frame(self.table[KEY])).astype(np.int64)
        self.row: IntArray = np.repeat(np.arange(len(self.table), dtype=np.int64), self.table["count"].to_numpy())
        self.pos: IntArray = pos_of_row[self.row]
        self.size: IntArray = np.bincount(self.pos, minlength=len(self.positions)).astype(np.int64)
        self.start: IntArray = np.concatenate([[0], np.cumsum(self.size)[:-1]]).astype(np.int64)

    def shuffled(self, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
        """Responses in random order within each position: (table row of each, rank within its position)."""
        order = np.lexsort((rng.random(len(self.row)), self.pos))
        rank = np.arange(len(self.row), dtype=np.int64) - self.start[self.pos[order]]
        return self.row[order], rank

    def tally(self, rows: IntArray) -> IntArray:
        return np.bincount(rows, minlength=len(self.table)).astype(np.int64)


def oracle_splits(counts: pd.DataFrame, seeds: int | Iterable[int], *, size: int | None = None) -> pd.DataFrame:
    """Random disjoint target/oracle groups of the responses at every position, one split per seed.

    With ``size=None`` each group gets half of a position's responses
    (``n // 2`` each; with an odd ``n`` one response, chosen at random, is left
    out). With ``size=k`` each group gets ``min(k, n // 2)`` responses (the
    oracle-size study of appendix E uses 10 and 20). A response is in at most
    one group, so the groups are disjoint samples of the same population.

    Returns a long frame ``seed, text_id, word_num, word, target, oracle``
    (the two groups' counts of each word; rows with both zero are left out).
    Split ``s`` depends only on ``s`` and the table, not on the other seeds.

    Raises:
        ValueError: if a position has fewer than two responses, or a seed is
            negative or repeated.
    """
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"size must be a positive integer or None, got {size!r}")
    resp = _Responses(counts, "counts table")
    half = resp.size // 2 if size is None else np.minimum(size, resp.size // 2)
    if (half == 0).any():
        tid, num = resp.positions[int(np.flatnonzero(half == 0)[0])]
        raise ValueError(f"counts table: position {fmt_position(tid, num)} has fewer than 2 responses to split")
    pos_of_row = resp.positions.get_indexer(pd.MultiIndex.from_frame(resp.table[KEY]))
    frames = []
    for seed in check_seeds(seeds):
        rows, rank = resp.shuffled(np.random.default_rng(seed))
        h = half[pos_of_row[rows]]
        target = resp.tally(rows[rank < h])
        oracle = resp.tally(rows[(rank >= h) & (rank < 2 * h)])
        keep = (target + oracle) > 0
        frame = resp.table.loc[keep, ROW_KEY].reset_index(drop=True)
        frame.insert(0, "seed", np.int64(seed))
        frame["target"] = target[keep]
        frame["oracle"] = oracle[keep]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def check_splits(splits: pd.DataFrame) -> pd.DataFrame:
    """Validate the frame of :func:`oracle_splits`; return a clean copy sorted by seed and row key."""
    require(splits, ["seed", *ROW_KEY, "target", "oracle"], "oracle splits")
    if splits.empty:
        raise ValueError("oracle splits: empty")
    out = splits[["seed", *ROW_KEY, "target", "oracle"]].copy()
    for col in ("seed", "target", "oracle"):
        vals = pd.to_numeric(out[col], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(vals) | (vals < 0) | (vals % 1 != 0)
        if bad.any():
            row = out.iloc[int(np.flatnonzero(bad)[0])]
            raise ValueError(
                f"oracle splits: {col} at position {fmt_position(row['text_id'], row['word_num'])} must be a whole "
                f"number >= 0, got {row[col]!r}"
            )
        out[col] = vals.astype(np.int64)
    out = out.astype({"text_id": np.int64, "word_num": np.int64})
    if pd.api.types.infer_dtype(out["word"], skipna=False) != "string":
        raise ValueError("oracle splits: every word must be a string")
    dup = out.duplicated(["seed", *ROW_KEY])
    if dup.any():
        row = out[dup].iloc[0]
        raise ValueError(
            f"oracle splits: word {row['word']!r} appears twice at position "
            f"{fmt_position(row['text_id'], row['word_num'])} in split {row['seed']}"
        )
    return out.sort_values(["seed", *ROW_KEY], ignore_index=True)


def split_half(splits: pd.DataFrame, seed: int, half: Literal["target", "oracle"]) -> pd.DataFrame:
    """One group of one split of :func:`oracle_splits` as a counts table."""
    require(splits, ["seed", *ROW_KEY, "target", "oracle"], "oracle splits")
    if half not in ("target", "oracle"):
        raise ValueError(f"half must be 'target' or 'oracle', got {half!r}")
    rows = splits[(splits["seed"].to_numpy() == seed) & (splits[half].to_numpy() > 0)]
    if rows.empty:
        raise ValueError(f"oracle splits: no split with seed {seed} (seeds: {sorted(splits['seed'].unique())})")
    out = rows[ROW_KEY].reset_index(drop=True)
    out["count"] = rows[half].to_numpy(dtype=np.int64)
    return out


def subsample(counts: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` of the samples at every position, drawn without replacement (all of them where fewer exist)."""
    return subsamples(counts, [n], seed)[n]


def subsamples(counts: pd.DataFrame, sizes: Sequence[int], seed: int) -> dict[int, pd.DataFrame]:
    """Nested subsamples without replacement: the first ``n`` of one random order, for every ``n`` in ``sizes``.

    Nesting (the 10 samples are among the 20) makes the curves over ``n``
    differ only by the added samples, not by a fresh draw each time.
    """
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"subsample sizes must be positive integers, got {n!r}")
    resp = _Responses(counts, "counts table")
    rows, rank = resp.shuffled(np.random.default_rng(seed))
    out = {}
    for n in sizes:
        tally = resp.tally(rows[rank < n])
        frame = resp.table.loc[tally > 0, ROW_KEY].reset_index(drop=True)
        frame["count"] = tally[tally > 0]
        out[n] = frame
    return out


def sample_from(table: pd.DataFrame, n: int | pd.Series, seed: int) -> pd.DataFrame:
    """Draw ``n`` words with replacement from the distribution at every position (a counts table).

    For building constructed models: a model whose distribution is known
    exactly, observed through ``n`` samples as a real model would be. ``n`` is
    one number for all positions or a Series of positive integers indexed by
    ``(text_id, word_num)`` covering every position.
    """
    probs = to_probs(table)
    positions = positions_of(probs)
    if isinstance(n, pd.Series):
        sizes = n.reindex(positions)
        if sizes.isna().any():
            tid, num = positions[int(np.flatnonzero(sizes.isna().to_numpy())[0])]
            raise ValueError(f"n: no sample size for position {fmt_position(tid, num)}")
        per: IntArray = sizes.to_numpy(dtype=np.int64)
        if (per < 1).any():
            raise ValueError("n: every sample size must be a positive integer")
    elif isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be a positive integer or a Series of them, got {n!r}")
    else:
        per = np.full(len(positions), int(n), dtype=np.int64)
    pos = positions.get_indexer(pd.MultiIndex.from_frame(probs[KEY])).astype(np.int64)
    cdf = probs.groupby(KEY, sort=False)["prob"].cumsum().to_numpy(copy=True)
    last = np.r_[pos[1:] != pos[:-1], True]
    cdf[last] = 1.0
    edges = pos + cdf
    last_row = np.flatnonzero(last)
    rng = np.random.default_rng(seed)
    owner = np.repeat(np.arange(len(positions), dtype=np.int64), per)
    hit = np.minimum(np.searchsorted(edges, owner + rng.random(len(owner)), side="right"), last_row[owner])
    tally = np.bincount(hit, minlength=len(probs))
    out = probs.loc[tally > 0, ROW_KEY].reset_index(drop=True)
    out["count"] = tally[tally > 0].astype(np.int64)
    return out
