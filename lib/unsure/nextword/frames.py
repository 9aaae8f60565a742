"""Validation and integer encoding of the study's long tables (the frames every nextword module passes).

Every word distribution in the study is a long data frame keyed by
``(text_id, word_num, word)``: a **counts table** has a ``count`` column, a
**probability table** a ``prob`` column. The public functions take and return
such frames; internally they are turned into integer codes (position code,
word code, value) so that distances over thousands of positions are a few
``numpy`` calls instead of a Python loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

KEY = ["text_id", "word_num"]
ROW_KEY = ["text_id", "word_num", "word"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """Raise naming the missing columns of ``frame``."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what}: expected a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)} (has {', '.join(map(str, frame.columns))})")


def fmt_position(tid: Any, num: Any) -> str:
    return f"(text_id={int(tid)}, word_num={int(num)})"


def check_table(frame: pd.DataFrame, value: str, what: str) -> pd.DataFrame:
    """Validate a counts (``value="count"``) or probability table; return a clean sorted copy.

    Checks: the columns exist; values are finite and non-negative (counts
    whole); no (position, word) appears twice; words are strings.
    """
    require(frame, [*ROW_KEY, value], what)
    out = frame[[*ROW_KEY, value]].copy()
    vals = pd.to_numeric(out[value], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals) | (vals < 0)
    if value == "count":
        bad |= vals % 1 != 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = out.iloc[i]
        kind = "a whole number >= 0" if value == "count" else "a finite number >= 0"
        raise ValueError(
            f"{what}: {value} of {row['word']!r} at position {fmt_position(row['text_id'], row['word_num'])} "
            f"must be {kind}, got {row[value]!r}"
        )
    if pd.api.types.infer_dtype(out["word"], skipna=False) not in ("string", "empty"):
        i = next(i for i, w in enumerate(out["word"]) if not isinstance(w, str))
        row = out.iloc[i]
        raise ValueError(
            f"{what}: word at position {fmt_position(row['text_id'], row['word_num'])} must be a string, "
            f"got {row['word']!r}"
        )
    out["text_id"] = out["text_id"].astype(np.int64)
    out["word_num"] = out["word_num"].astype(np.int64)
    out[value] = vals.astype(np.int64) if value == "count" else vals
    dup = out.duplicated(ROW_KEY)
    if dup.any():
        row = out[dup].iloc[0]
        raise ValueError(
            f"{what}: word {row['word']!r} appears twice at position {fmt_position(row['text_id'], row['word_num'])}"
        )
    return out.sort_values(ROW_KEY, ignore_index=True)


def positions_of(frame: pd.DataFrame) -> pd.MultiIndex:
    """The sorted unique positions of a table."""
    return pd.MultiIndex.from_frame(frame[KEY].drop_duplicates().sort_values(KEY)).set_names(KEY)


@dataclass(frozen=True)
class Coded:
    """Rows of one or more tables as integer codes over shared positions and words."""

    positions: pd.MultiIndex
    vocab: npt.NDArray[np.object_]
    pos: list[IntArray]
    word: list[IntArray]
    value: list[FloatArray]


def encode(frames: Sequence[pd.DataFrame], value: str, positions: pd.MultiIndex | None = None) -> Coded:
    """Encode tables over one position index (their union unless given) and one vocabulary.

    Rows at positions outside ``positions`` are dropped.
    """
    if positions is None:
        positions = positions_of(pd.concat([f[KEY] for f in frames], ignore_index=True))
    pos_codes = []
    keep = []
    for f in frames:
        codes = positions.get_indexer(pd.MultiIndex.from_frame(f[KEY]))
        keep.append(codes >= 0)
        pos_codes.append(codes[codes >= 0].astype(np.int64))
    words = [f["word"].to_numpy(dtype=object)[k] for f, k in zip(frames, keep, strict=True)]
    all_codes, vocab = pd.factorize(np.concatenate(words) if words else np.array([], dtype=object))
    splits = np.cumsum([len(w) for w in words])[:-1]
    word_codes = [c.astype(np.int64) for c in np.split(all_codes, splits)]
    values = [f[value].to_numpy(dtype=np.float64)[k] for f, k in zip(frames, keep, strict=True)]
    return Coded(positions, np.asarray(vocab, dtype=object), pos_codes, word_codes, values)


def tvd_codes(
    pos_p: IntArray, word_p: IntArray, prob_p: FloatArray, pos_q: IntArray, word_q: IntArray, prob_q: FloatArray, n: int
) -> FloatArray:
    """½ Σ_w |p(w) − q(w)| per position from coded rows (words missing on one side count as 0)."""
    width = int(max(word_p.max(initial=-1), word_q.max(initial=-1))) + 1
    if width == 0:
        return np.zeros(n, dtype=np.float64)
    key = np.concatenate([pos_p * width + word_p, pos_q * width + word_q])
    val = np.concatenate([prob_p, -prob_q])
    uniq, inv = np.unique(key, return_inverse=True)
    diff = np.bincount(inv, weights=val, minlength=len(uniq))
    out = np.bincount(uniq // width, weights=np.abs(diff), minlength=n)[:n] / 2.0
    return np.clip(out, 0.0, 1.0)


def check_seeds(seeds: int | Iterable[int]) -> list[int]:
    """Seeds as a list of distinct non-negative ints (one int is one seed)."""
    out = [seeds] if isinstance(seeds, int | np.integer) else list(seeds)
    if not out:
        raise ValueError("seeds: give at least one seed")
    for s in out:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 0:
            raise ValueError(f"seeds: every seed must be a non-negative integer, got {s!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"seeds: repeated seed in {out}")
    return [int(s) for s in out]
