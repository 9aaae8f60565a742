"""Distances and calibration of next-word distributions: TVD, expected TVD, ECE with three targets.

* **TVD** at a position: ``½ Σ_w |p(w|c) − q(w|c)|`` over the union of the
  words of both distributions (a word one side never produced has probability
  0 there). It lies in [0, 1]: 0 for equal distributions, 1 for disjoint ones.
* **Expected TVD**: the mean of the per-position TVDs.
* **ECE** (Naeini et al. 2015; Guo et al. 2017) of a distribution's mode:
  confidence = probability of the mode, correct = the mode equals the target.
  Confidences fall into ``n_bins`` equal bins ``[0, .1), [.1, .2), …,
  [.9, 1.0]`` (1.0 belongs to the top bin), and ECE = Σ_b (n_b / N) ·
  |accuracy_b − confidence_b|. Three targets are used: the corpus word, the
  human majority (mode of all responses) and the majority of the target half
  of an oracle split.

Ties: when the distribution has several modes, or the target is a majority
with ties, "correct" is the probability that a uniformly random tie-break on
both sides picks the same word, ``|M ∩ T| / (|M| · |T|)``; this is the
expected 0/1 outcome, and it does not depend on alphabetical order or on
which tied word a sort happened to put first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from unsure.nextword.distributions import check_splits, frequencies, modes, restrict, to_probs, top_words
from unsure.nextword.frames import ROW_KEY, encode, positions_of, require, tvd_codes

ArrayLike = npt.ArrayLike


def _position_sets_differ(a: pd.MultiIndex, b: pd.MultiIndex, name_a: str, name_b: str) -> str | None:
    only_a = a.difference(b)
    only_b = b.difference(a)
    if len(only_a) == 0 and len(only_b) == 0:
        return None
    parts = []
    for only, name in ((only_a, name_a), (only_b, name_b)):
        if len(only):
            shown = ", ".join(f"({t}, {w})" for t, w in list(only)[:5])
            parts.append(f"{len(only)} position(s) only in {name}: {shown}{' ...' if len(only) > 5 else ''}")
    return "; ".join(parts)


def tvd(p: pd.DataFrame, q: pd.DataFrame, *, missing: str = "raise") -> pd.Series:
    """Total variation distance between two tables at every position, indexed by ``(text_id, word_num)``.

    ``p`` and ``q`` are counts or probability tables (counts are turned into
    relative frequencies). With ``missing="raise"`` both must cover the same
    positions; with ``missing="drop"`` only the positions they share are
    compared.

    Raises:
        ValueError: if the position sets differ (naming a few) and
            ``missing="raise"``, or ``missing`` is not one of the two options.
    """
    if missing not in ("raise", "drop"):
        raise ValueError(f"missing must be 'raise' or 'drop', got {missing!r}")
    pp, qq = to_probs(p), to_probs(q)
    pos_p, pos_q = positions_of(pp), positions_of(qq)
    if missing == "raise":
        problem = _position_sets_differ(pos_p, pos_q, "p", "q")
        if problem:
            raise ValueError(f"tvd: p and q cover different positions: {problem}")
        common = pos_p
    else:
        common = pos_p.intersection(pos_q).sort_values()
        if len(common) == 0:
            raise ValueError("tvd: p and q have no position in common")
    return pd.Series(_tvd(pp, qq, common), index=common, name="tvd")


def _tvd(pp: pd.DataFrame, qq: pd.DataFrame, positions: pd.MultiIndex) -> npt.NDArray[np.float64]:
    """Per-position TVD of two validated probability tables over ``positions`` (no checks)."""
    coded = encode([pp, qq], "prob", positions=positions)
    return tvd_codes(
        coded.pos[0], coded.word[0], coded.value[0], coded.pos[1], coded.word[1], coded.value[1], len(positions)
    )


def expected_tvd(p: pd.DataFrame, q: pd.DataFrame, *, missing: str = "raise") -> float:
    """Mean TVD over positions (see :func:`tvd`)."""
    return float(tvd(p, q, missing=missing).mean())


# ----------------------------------------------------------------------------- calibration


def _bin_index(confidence: npt.NDArray[np.float64], n_bins: int) -> npt.NDArray[np.int64]:
    # Round before flooring so that e.g. 0.7 (= 6.9999... * 0.1 in binary) lands in bin 7, not 6.
    return np.minimum(np.floor(np.round(confidence * n_bins, 9)), n_bins - 1).astype(np.int64)


def _check_ece_inputs(
    confidence: ArrayLike, correct: ArrayLike, n_bins: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    conf = np.asarray(confidence, dtype=np.float64).ravel()
    corr = np.asarray(correct, dtype=np.float64).ravel()
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    if conf.shape != corr.shape:
        raise ValueError(f"confidence and correct differ in length ({conf.size} vs {corr.size})")
    if conf.size == 0:
        raise ValueError("confidence is empty: nothing to calibrate")
    if not np.all(np.isfinite(conf)) or conf.min() < 0 or conf.max() > 1:
        raise ValueError("confidence values must lie in [0, 1]")
    if not np.all(np.isfinite(corr)) or corr.min() < 0 or corr.max() > 1:
        raise ValueError("correct values must lie in [0, 1] (1 right, 0 wrong, fractions for ties)")
    return conf, corr


def reliability_table(confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10) -> pd.DataFrame:
    """Per-bin count, mean confidence and accuracy behind the ECE (the data of a reliability diagram).

    One row per bin, empty bins included with NaN means; ``lower``/``upper``
    are the bin edges (the top bin includes 1.0).
    """
    conf, corr = _check_ece_inputs(confidence, correct, n_bins)
    idx = _bin_index(conf, n_bins)
    n = np.bincount(idx, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(idx, weights=conf, minlength=n_bins) / n
        accuracy = np.bincount(idx, weights=corr, minlength=n_bins) / n
    return pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lower": np.arange(n_bins) / n_bins,
            "upper": np.arange(1, n_bins + 1) / n_bins,
            "n": n,
            "confidence": mean_conf,
            "accuracy": accuracy,
        }
    )


def expected_calibration_error(confidence: ArrayLike, correct: ArrayLike, *, n_bins: int = 10) -> float:
    """ECE = Σ_b (n_b / N) · |accuracy_b − confidence_b| over ``n_bins`` equal-width confidence bins.

    ``correct`` may hold fractions (expected correctness under random
    tie-breaking). A confidence of exactly 1.0 belongs to the top bin; values
    within 1e-9 of a bin edge count as on it.
    """
    table = reliability_table(confidence, correct, n_bins=n_bins)
    used = table[table["n"] > 0]
    return float((used["n"] * (used["accuracy"] - used["confidence"]).abs()).sum() / used["n"].sum())


def _check_targets(targets: pd.DataFrame) -> pd.DataFrame:
    require(targets, ROW_KEY, "targets")
    out = targets[ROW_KEY].drop_duplicates().astype({"text_id": np.int64, "word_num": np.int64})
    if pd.api.types.infer_dtype(out["word"], skipna=False) not in ("string", "empty"):
        raise ValueError("targets: every target word must be a string")
    return out.sort_values(ROW_KEY, ignore_index=True)


def _position_codes(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
    """One int64 per position (text_id in the high 32 bits, word_num in the low)."""
    tid: npt.NDArray[np.int64] = frame["text_id"].to_numpy(dtype=np.int64)
    num: npt.NDArray[np.int64] = frame["word_num"].to_numpy(dtype=np.int64)
    return (tid << 32) | num


def _items(top: pd.DataFrame, targets: pd.DataFrame) -> pd.DataFrame:
    """Calibration items from the modes of a distribution and a clean target table (no checks)."""
    n_top = len(top)
    positions, inv = np.unique(np.concatenate([_position_codes(top), _position_codes(targets)]), return_inverse=True)
    pos_top, pos_tgt = inv[:n_top], inv[n_top:]
    word_codes, vocab = pd.factorize(np.concatenate([top["word"].to_numpy(object), targets["word"].to_numpy(object)]))
    width = max(len(vocab), 1)
    key_top = pos_top * width + word_codes[:n_top]
    key_tgt = pos_tgt * width + word_codes[n_top:]
    n = len(positions)
    n_modes = np.bincount(pos_top, minlength=n)
    n_targets = np.bincount(pos_tgt, minlength=n)
    hits = np.bincount(pos_top, weights=np.isin(key_top, key_tgt).astype(np.float64), minlength=n)
    confidence = np.zeros(n)
    confidence[pos_top] = top["prob"].to_numpy(dtype=np.float64)
    scored = (n_modes > 0) & (n_targets > 0)
    return pd.DataFrame(
        {
            "text_id": positions[scored] >> 32,
            "word_num": positions[scored] & 0xFFFFFFFF,
            "confidence": confidence[scored],
            "correct": hits[scored] / (n_modes[scored] * n_targets[scored]),
        }
    )


def _ece(top: pd.DataFrame, targets: pd.DataFrame, n_bins: int) -> float:
    items = _items(top, targets)
    return expected_calibration_error(items["confidence"], items["correct"], n_bins=n_bins)


def calibration_items(dist: pd.DataFrame, targets: pd.DataFrame) -> pd.DataFrame:
    """Confidence and correctness of the mode of ``dist`` against ``targets`` at every shared position.

    ``targets`` is a table ``text_id, word_num, word`` with one row per
    acceptable word (a majority with ties has several; see the module
    docstring for how ties score). Positions missing from either side are not
    scored. Returns ``text_id, word_num, confidence, correct``.
    """
    return _items(modes(dist), _check_targets(targets))


def ece(dist: pd.DataFrame, targets: pd.DataFrame, *, n_bins: int = 10) -> float:
    """ECE of the mode of ``dist`` against ``targets`` (see :func:`calibration_items`)."""
    return _ece(modes(dist), _check_targets(targets), n_bins)


# ----------------------------------------------------------------------------- evaluation

RESULT_COLUMNS: tuple[str, ...] = (
    "estimator",
    "seed",
    "n_positions",
    "expected_tvd_human",
    "expected_tvd_target",
    "ece_corpus_word",
    "ece_human_majority",
    "ece_oracle_majority",
)
"""Columns of :func:`evaluate` and :func:`evaluate_oracle`, so their rows stack into one table."""


def _half(splits: pd.DataFrame, seed: int, half: str) -> pd.DataFrame:
    """One group of validated splits as a clean counts table (no checks)."""
    rows = splits[(splits["seed"].to_numpy() == seed) & (splits[half].to_numpy() > 0)]
    return rows[ROW_KEY].assign(count=rows[half].to_numpy()).reset_index(drop=True)


def covered_positions(probs: pd.DataFrame, human: pd.DataFrame, name: str) -> pd.MultiIndex:
    """The positions a probability table covers; every one must have human responses."""
    covered = positions_of(probs)
    extra = covered.difference(positions_of(human))
    if len(extra):
        tid, num = extra[0]
        raise ValueError(f"{name}: {len(extra)} position(s) have no human responses, e.g. ({tid}, {num})")
    return covered


def evaluate(
    model: pd.DataFrame,
    human: pd.DataFrame,
    corpus: pd.DataFrame,
    splits: pd.DataFrame,
    *,
    name: str,
    n_bins: int = 10,
) -> pd.DataFrame:
    """Every headline metric of one model, one row per oracle split (columns :data:`RESULT_COLUMNS`).

    * ``expected_tvd_human``: model vs the human MLE of all responses (the
      paper's main number; the same on every row);
    * ``expected_tvd_target``: model vs the target half of the split, the
      quantity directly comparable with the oracle's ``expected_tvd_target``;
    * ``ece_corpus_word``, ``ece_human_majority`` (same on every row) and
      ``ece_oracle_majority`` (mode of the target half).

    ``model`` and ``human`` are counts or probability tables, ``corpus`` the
    corpus targets (:func:`unsure.nextword.data.corpus_targets`), ``splits``
    the output of :func:`unsure.nextword.distributions.oracle_splits`. The
    model is scored on the positions it covers (a model run on a subset of
    contexts); ``n_positions`` says how many.

    Raises:
        ValueError: if the model has a position the human table lacks, or an
            input is malformed.
    """
    probs = to_probs(model)
    human_p = to_probs(human)
    targets = _check_targets(corpus)
    splits = check_splits(splits)
    covered = covered_positions(probs, human_p, f"model {name!r}")
    human_here = restrict(human_p, covered)
    top = top_words(probs)
    tvd_human = float(_tvd(human_here, probs, covered).mean())
    ece_corpus = _ece(top, restrict(targets, covered), n_bins)
    ece_human = _ece(top, top_words(human_here)[ROW_KEY], n_bins)
    rows = []
    for seed in sorted(int(s) for s in splits["seed"].unique()):
        target = frequencies(restrict(_half(splits, seed, "target"), covered))
        rows.append(
            (
                name,
                seed,
                len(covered),
                tvd_human,
                float(_tvd(target, probs, covered).mean()),
                ece_corpus,
                ece_human,
                _ece(top, top_words(target)[ROW_KEY], n_bins),
            )
        )
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def evaluate_oracle(
    human: pd.DataFrame, corpus: pd.DataFrame, splits: pd.DataFrame, *, n_bins: int = 10, name: str = "oracle"
) -> pd.DataFrame:
    """The oracle's metrics, one row per split, in the same columns as :func:`evaluate`.

    The "model" is the oracle half of each split. ``expected_tvd_target`` is
    its distance to the disjoint target half (the reference level for
    models' ``expected_tvd_target``); ``expected_tvd_human`` is its distance
    to all responses, which include its own (the reference code's oracle).
    To compare with a model that covers only some positions, pass
    ``restrict(human, model)``, ``restrict(corpus, model)`` and
    ``restrict(splits, model)``.
    """
    human_p = to_probs(human)
    targets = _check_targets(corpus)
    splits = check_splits(splits)
    rows = []
    for seed in sorted(int(s) for s in splits["seed"].unique()):
        target = frequencies(_half(splits, seed, "target"))
        oracle = frequencies(_half(splits, seed, "oracle"))
        covered = covered_positions(oracle, human_p, "oracle splits")
        human_here = restrict(human_p, covered)
        top = top_words(oracle)
        rows.append(
            (
                name,
                seed,
                len(covered),
                float(_tvd(human_here, oracle, covered).mean()),
                float(_tvd(restrict(target, covered), oracle, covered).mean()),
                _ece(top, restrict(targets, covered), n_bins),
                _ece(top, top_words(human_here)[ROW_KEY], n_bins),
                _ece(top, top_words(target)[ROW_KEY], n_bins),
            )
        )
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def oracle_tvd(splits: pd.DataFrame, seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """Per-position TVD between the oracle and target halves: ``seed, text_id, word_num, tvd``."""
    splits = check_splits(splits)
    frames = []
    for seed in sorted(int(s) for s in splits["seed"].unique()) if seeds is None else list(seeds):
        t = tvd(_half(splits, seed, "target"), _half(splits, seed, "oracle"))
        frame = t.reset_index()
        frame.insert(0, "seed", np.int64(seed))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
