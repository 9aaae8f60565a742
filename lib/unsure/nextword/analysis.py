"""Follow-up analyses of the study: what TVD differences mean, which contexts are hard, how many samples.

* :func:`improvement_study` (appendix E): replace k % of a model's
  distributions by oracle estimates and watch its TVD distribution move onto
  the oracle's, for oracle sizes 10 and 20 and several seeds. This calibrates
  the reader's eye: "a TVD 0.1 lower" is worth so many percent of contexts
  predicted as well as a human sample would.
* :func:`hardness_features` + :func:`ard_regression` (appendix B): Bayesian
  ARD regression of the model-vs-oracle TVD on human entropy, model entropy,
  oracle-vs-oracle TVD, context length and the POS of the last context word,
  with credible intervals.
* :func:`sample_size_study` (appendix C.1): how far the TVD computed from 10,
  20, 40 or 100 samples is from the TVD of the full 1,000.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.linear_model import ARDRegression

from unsure.nextword.distributions import (
    entropy,
    oracle_splits,
    restrict,
    split_half,
    subsamples,
    to_probs,
)
from unsure.nextword.frames import KEY, check_seeds, check_table, require
from unsure.nextword.metrics import covered_positions, tvd


def improvement_study(
    model: pd.DataFrame,
    human: pd.DataFrame,
    *,
    ks: Sequence[int] = tuple(range(0, 101, 10)),
    sizes: Sequence[int] = (10, 20),
    seeds: int | Iterable[int] = range(10),
) -> pd.DataFrame:
    """TVD distributions of a model improved by replacing k % of its distributions with oracle estimates.

    For every seed and oracle size ``m``, the responses at each position are
    split into two disjoint groups of ``min(m, n // 2)`` (:func:`oracle_splits`):
    a target and an oracle. ``tvd_model`` is the model's TVD to the target,
    ``tvd_oracle`` the oracle's. For each ``k``, the model's distribution at
    ``round(k % of the positions)`` positions is replaced by the oracle's, so
    ``tvd_mixed`` is ``tvd_oracle`` there and ``tvd_model`` elsewhere. The
    replaced positions are the first ones of one random order per
    (seed, size), so the sets are nested as ``k`` grows: k = 0 is the model,
    k = 100 the oracle.

    Returns one row per (seed, oracle_size, k, position): ``seed, oracle_size,
    k, text_id, word_num, tvd_model, tvd_oracle, tvd_mixed, replaced``.
    Summarise with :func:`summarize_improvement`.
    """
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= 100:
            raise ValueError(f"ks must be integers in [0, 100], got {k!r}")
    covered = covered_positions(to_probs(model), human, "model")
    human_here = restrict(human, covered)
    probs = to_probs(model)
    n = len(covered)
    frames = []
    for seed in check_seeds(seeds):
        for size in sizes:
            splits = oracle_splits(human_here, [seed], size=size)
            target = split_half(splits, seed, "target")
            t_model = tvd(target, probs).to_numpy()
            t_oracle = tvd(target, split_half(splits, seed, "oracle")).to_numpy()
            order = np.random.default_rng([seed, size]).permutation(n)
            for k in ks:
                replaced = np.zeros(n, dtype=bool)
                replaced[order[: int(np.floor(k * n / 100 + 0.5))]] = True
                frames.append(
                    pd.DataFrame(
                        {
                            "seed": np.int64(seed),
                            "oracle_size": np.int64(size),
                            "k": np.int64(k),
                            "text_id": covered.get_level_values(0).to_numpy(dtype=np.int64),
                            "word_num": covered.get_level_values(1).to_numpy(dtype=np.int64),
                            "tvd_model": t_model,
                            "tvd_oracle": t_oracle,
                            "tvd_mixed": np.where(replaced, t_oracle, t_model),
                            "replaced": replaced,
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


def summarize_improvement(study: pd.DataFrame) -> pd.DataFrame:
    """Per (seed, oracle_size, k): expected TVD of the improved model and of the oracle, and how far apart.

    ``wasserstein`` is the 1-Wasserstein distance and ``ks_statistic`` the
    Kolmogorov-Smirnov statistic between the two per-position TVD
    distributions (both 0 at k = 100).
    """
    require(study, ["seed", "oracle_size", "k", "tvd_mixed", "tvd_oracle"], "improvement study")
    rows = []
    for (seed, size, k), g in study.groupby(["seed", "oracle_size", "k"], sort=True):
        mixed, oracle = g["tvd_mixed"].to_numpy(), g["tvd_oracle"].to_numpy()
        rows.append(
            {
                "seed": seed,
                "oracle_size": size,
                "k": k,
                "expected_tvd_mixed": float(mixed.mean()),
                "expected_tvd_oracle": float(oracle.mean()),
                "wasserstein": float(stats.wasserstein_distance(mixed, oracle)),
                "ks_statistic": float(stats.ks_2samp(mixed, oracle).statistic),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- hard contexts


HARDNESS_NUMERIC: tuple[str, ...] = ("human_entropy", "model_entropy", "tvd_oracle_oracle", "context_length")
"""The numeric predictors of :func:`hardness_features`, in the order of appendix B."""
HARDNESS_CATEGORICAL: tuple[str, ...] = ("last_pos",)
"""The categorical predictor of :func:`hardness_features` (present when the positions table has it)."""


def hardness_features(
    positions: pd.DataFrame,
    human: pd.DataFrame,
    model: pd.DataFrame,
    splits: pd.DataFrame,
    *,
    seed: int,
) -> pd.DataFrame:
    """Per-position predictors of how far a model is from humans, for :func:`ard_regression`.

    Columns: ``text_id, word_num``; the response ``tvd_model_oracle`` (model vs
    the target half of split ``seed``); ``human_entropy`` (all responses, nats),
    ``model_entropy``, ``tvd_oracle_oracle`` (oracle half vs target half),
    ``context_length`` (words before the position); and ``last_pos`` when the
    positions table has that column (see
    :func:`unsure.nextword.semantic.last_word_pos`). Then::

        ard_regression(frame, "tvd_model_oracle", HARDNESS_NUMERIC, HARDNESS_CATEGORICAL)
    """
    require(positions, [*KEY, "context"], "positions table")
    covered = covered_positions(to_probs(model), human, "model")
    target = restrict(split_half(splits, seed, "target"), covered)
    oracle = restrict(split_half(splits, seed, "oracle"), covered)
    frame = pd.DataFrame(index=covered)
    frame["tvd_model_oracle"] = tvd(target, model)
    frame["human_entropy"] = entropy(restrict(human, covered))
    frame["model_entropy"] = entropy(model)
    frame["tvd_oracle_oracle"] = tvd(target, oracle)
    pos = positions.set_index(KEY)
    missing = covered.difference(pos.index)
    if len(missing):
        tid, num = missing[0]
        raise ValueError(f"positions table: no context for position ({tid}, {num})")
    here = pos.loc[covered]
    frame["context_length"] = here["context"].map(lambda c: len(str(c).split())).to_numpy(dtype=np.int64)
    if "last_pos" in pos.columns:
        frame["last_pos"] = here["last_pos"].to_numpy()
    return frame.reset_index()


def ard_regression(
    frame: pd.DataFrame,
    target: str,
    numeric: Sequence[str],
    categorical: Sequence[str] = (),
    *,
    level: float = 0.95,
    standardize: bool = True,
    max_iter: int = 1000,
) -> pd.DataFrame:
    """Bayesian ARD linear regression of ``target`` with credible intervals for every coefficient.

    Numeric predictors are standardised (``standardize=True``) so that the
    coefficients say "TVD per standard deviation" and compare across
    predictors. A categorical predictor is one-hot encoded against its most
    frequent value as the reference (named in ``attrs["reference"]``), so a
    coefficient is the difference from that reference.

    ``sklearn.linear_model.ARDRegression`` gives the Gaussian posterior of the
    weights given its estimated precisions; the interval is
    ``coef ± z · sd`` with ``z`` the normal quantile for ``level``. A weight
    that ARD pruned (precision above ``threshold_lambda``) has coefficient 0
    and sd 0 and ``pruned=True``.

    Returns ``feature, coef, sd, lower, upper, pruned``; ``attrs`` holds
    ``intercept``, ``r2`` (in-sample), ``n`` and ``reference``.

    Raises:
        ValueError: on a missing column, a missing value (naming the column),
            a constant numeric predictor, fewer than 3 rows, or ``level``
            outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    require(frame, [target, *numeric, *categorical], "regression frame")
    if len(frame) < 3:
        raise ValueError(f"regression frame: need at least 3 rows, got {len(frame)}")
    for col in [target, *numeric, *categorical]:
        if frame[col].isna().any():
            raise ValueError(f"regression frame: column {col!r} has {int(frame[col].isna().sum())} missing value(s)")
    columns: dict[str, np.ndarray] = {}
    for col in numeric:
        x = frame[col].to_numpy(dtype=np.float64)
        if standardize:
            sd = x.std()
            if sd == 0:
                raise ValueError(f"regression frame: numeric predictor {col!r} is constant")
            x = (x - x.mean()) / sd
        columns[col] = x
    reference: dict[str, str] = {}
    for col in categorical:
        values = frame[col].astype(str)
        counts = values.value_counts()
        ref = sorted(counts[counts == counts.max()].index)[0]
        reference[col] = ref
        for value in sorted(set(values) - {ref}):
            columns[f"{col}={value}"] = (values == value).to_numpy(dtype=np.float64)
    if not columns:
        raise ValueError("ard_regression: no predictors")
    x_mat = np.column_stack(list(columns.values()))
    y = frame[target].to_numpy(dtype=np.float64)
    fitted = ARDRegression(max_iter=max_iter, fit_intercept=True).fit(x_mat, y)
    keep = fitted.lambda_ < fitted.threshold_lambda
    sd = np.zeros(x_mat.shape[1])
    if keep.any():
        sd[keep] = np.sqrt(np.clip(np.diag(fitted.sigma_), 0.0, None))
    z = float(stats.norm.ppf(0.5 + level / 2))
    coef = np.asarray(fitted.coef_, dtype=np.float64)
    out = pd.DataFrame(
        {
            "feature": list(columns),
            "coef": coef,
            "sd": sd,
            "lower": coef - z * sd,
            "upper": coef + z * sd,
            "pruned": ~keep,
        }
    )
    out.attrs.update(
        intercept=float(fitted.intercept_), r2=float(fitted.score(x_mat, y)), n=len(frame), reference=reference
    )
    return out


# ----------------------------------------------------------------------------- sample size


def sample_size_study(
    model: pd.DataFrame,
    human: pd.DataFrame,
    *,
    sizes: Sequence[int] = (10, 20, 40, 100),
    seeds: int | Iterable[int] = range(10),
) -> pd.DataFrame:
    """How much TVD moves when a model is seen through fewer samples (appendix C.1).

    ``model`` is a counts table of all samples (1,000 per position in the
    paper). For each seed, nested subsamples of ``n`` samples per position are
    drawn without replacement (:func:`subsamples`); the per-position TVD to the
    human MLE is compared with the TVD of the full set.

    Returns one row per (seed, n): ``seed, n, mse`` (mean squared difference of
    per-position TVDs), ``bias`` (mean difference), ``expected_tvd``,
    ``expected_tvd_full``, ``n_positions`` and ``n_short`` (positions with fewer
    than ``n`` samples, where the subsample is all of them).
    """
    samples = check_table(model, "count", "model samples")
    covered = covered_positions(to_probs(samples), human, "model")
    human_here = restrict(human, covered)
    full = tvd(human_here, samples).to_numpy()
    totals = samples.groupby(KEY, sort=True)["count"].sum().reindex(covered).to_numpy()
    rows = []
    for seed in check_seeds(seeds):
        subs = subsamples(samples, list(sizes), seed)
        for n in sizes:
            t = tvd(human_here, subs[n]).to_numpy()
            rows.append(
                {
                    "seed": seed,
                    "n": n,
                    "mse": float(np.mean((t - full) ** 2)),
                    "bias": float(np.mean(t - full)),
                    "expected_tvd": float(t.mean()),
                    "expected_tvd_full": float(full.mean()),
                    "n_positions": len(covered),
                    "n_short": int((totals < n).sum()),
                }
            )
    return pd.DataFrame(rows)
