"""Estimators of per-subgroup performance from a few labelled rows per subgroup.

Plain functions over arrays, usable from a notebook. A *problem* is a set of
units (model × subgroup) with a few observed per-row values each (0/1
correctness, or a loss) and label-free unit features ``X``:

* **DT** (direct): the unit mean ``Z_g``; Wilson score intervals for 0/1
  values, Student-t intervals otherwise.
* **SR** (synthetic regression): an ``xgboost`` regressor of ``Z_g`` on ``X_g``,
  its number of trees and depth tuned by K-fold cross-validation, predicting
  out of fold (cross-fitting), so a unit's own noise never enters its
  prediction.
* **EB** (empirical Bayes): ``f̂ + Â/(σ̂² + Â)·(Z − f̂)`` with the cross-fitted
  SR prediction ``f̂``, ``Â = max(0, mean[(Z − f̂)² − σ̂²])`` over all units
  (each residual is out of fold), ``σ̂²_g = Z_g(1 − Z_g)/n_g`` for 0/1 values,
  the sample variance over ``n_g`` otherwise. Intervals: the robust EBCIs of
  :mod:`unsure.subgroups.ebci`, centred at the EBCI's own shrinkage
  ``μ̂₂/(μ̂₂ + σ̂²)`` (``μ̂₂`` = ``Â`` unless the finite-sample floor binds).
* **Lasso** (structured regression): weighted Lasso of ``Z_g`` on the
  standardised features plus one intercept per unit, weights ``1/σ̂²_g``, so a
  unit departs from the regression only as far as its data warrant; ``λ`` by
  cross-validation over the rows (fit on half of each unit's rows, score on
  the other half, swap). A zero ``σ̂²_g`` is smoothed for the weight only
  (see :func:`_weights`).

Protocols (config ``studies.subgroups.protocol``): under ``paper`` a 0/1 unit
whose sampled rows are all equal has the plug-in ``σ̂² = Z(1 − Z)/n = 0``; EB
then keeps ``Z_g`` unshrunk and its robust interval has zero width, so it
never covers a truth strictly between 0 and 1. ``corrected`` uses
``Z̃ = (nZ + 1)/(n + 2)`` (Laplace) in ``σ̂²`` instead, which cannot be zero;
in simulation this brings EB's coverage to the nominal level. Both EBs are
reported for 0/1 metrics: ``EB`` under the chosen protocol and ``EB-paper``
or ``EB-corrected`` under the other (:data:`EB_VARIANTS`).
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import xgboost as xgb
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import lasso_path
from sklearn.model_selection import KFold

from unsure.config import Subgroups
from unsure.subgroups.ebci import EBProblem, RobustEBCI, robust_ebcis

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
METHODS = ("DT", "SR", "EB", "Lasso")


# ----------------------------------------------------------------- direct


@dataclass(frozen=True)
class UnitStats:
    """Per-unit sample size, mean ``Z``, sample variance ``s²`` (ddof 1) and ``σ̂²`` of the mean."""

    n: Ints
    z: Floats
    s2: Floats
    se2: Floats


BinaryVariance = Literal["plugin", "laplace"]
PROTOCOL_VARIANCE: dict[str, BinaryVariance] = {"paper": "plugin", "corrected": "laplace"}
"""The σ̂² of a 0/1 mean under each protocol."""
EB_VARIANTS = {"plugin": "EB-paper", "laplace": "EB-corrected"}
"""Method name of the EB computed beside the chosen one with the other protocol's σ̂² (0/1 metrics)."""


def unit_stats(
    values: npt.ArrayLike, unit: npt.ArrayLike, n_units: int, *, binary: bool, variance: BinaryVariance = "plugin"
) -> UnitStats:
    """Aggregate per-row ``values`` by ``unit`` (ids ``0..n_units−1``, each observed at least once).

    ``σ̂²`` of a 0/1 mean is ``Z(1 − Z)/n`` (``plugin``, the paper's), or with
    ``laplace`` ``Z̃(1 − Z̃)/n`` with ``Z̃ = (nZ + 1)/(n + 2)``, which stays
    positive when every sampled row is right (or wrong).
    """
    v = np.asarray(values, dtype=np.float64)
    u = np.asarray(unit, dtype=np.int64)
    n = np.bincount(u, minlength=n_units)
    if np.any(n == 0):
        raise ValueError(f"unit_stats: unit {int(np.argmax(n == 0))} has no observations")
    z = np.bincount(u, weights=v, minlength=n_units) / n
    dev = np.bincount(u, weights=(v - z[u]) ** 2, minlength=n_units)
    s2 = np.where(n > 1, dev / np.maximum(n - 1, 1), 0.0)
    if binary:
        zt = (n * z + 1) / (n + 2) if variance == "laplace" else z
        se2 = zt * (1 - zt) / n
    else:
        se2 = s2 / n
    return UnitStats(n=n, z=z, s2=s2, se2=np.maximum(se2, 0.0))


def wilson_interval(z: npt.ArrayLike, n: npt.ArrayLike, alpha: float = 0.05) -> tuple[Floats, Floats]:
    """Wilson score interval for a proportion ``z`` out of ``n``."""
    zz, nn = np.asarray(z, dtype=np.float64), np.asarray(n, dtype=np.float64)
    q = stats.norm.ppf(1 - alpha / 2)
    denom = 1 + q**2 / nn
    centre = (zz + q**2 / (2 * nn)) / denom
    half = q * np.sqrt(zz * (1 - zz) / nn + q**2 / (4 * nn**2)) / denom
    return centre - half, centre + half


def t_interval(z: npt.ArrayLike, s2: npt.ArrayLike, n: npt.ArrayLike, alpha: float = 0.05) -> tuple[Floats, Floats]:
    """Student-t interval for a mean (NaN where ``n < 2``)."""
    zz, ss, nn = (np.asarray(a, dtype=np.float64) for a in (z, s2, n))
    df = np.where(nn > 1, nn - 1, np.nan)
    half = stats.t.ppf(1 - alpha / 2, df) * np.sqrt(ss / nn)
    return zz - half, zz + half


def direct(st: UnitStats, *, binary: bool, alpha: float = 0.05) -> tuple[Floats, Floats, Floats]:
    """DT estimates and intervals: ``(estimate, lower, upper)``."""
    lo, hi = wilson_interval(st.z, st.n, alpha) if binary else t_interval(st.z, st.s2, st.n, alpha)
    return st.z.copy(), lo, hi


# ------------------------------------------------------- synthetic regression


STUDY_DEFAULTS = Subgroups()
"""The study's settings when the config gives none: the one place their defaults are declared."""


@dataclass(frozen=True)
class SRSettings:
    """Tuning grid of the synthetic regression (xgboost, squared error)."""

    trees: tuple[int, ...] = STUDY_DEFAULTS.sr_trees
    depths: tuple[int, ...] = STUDY_DEFAULTS.sr_depths
    learning_rate: float = STUDY_DEFAULTS.sr_learning_rate
    cv_folds: int = STUDY_DEFAULTS.folds


@dataclass(frozen=True)
class SRFit:
    """A fitted synthetic regression, or a constant when there was too little to tune on."""

    booster: xgb.Booster | None
    constant: float
    depth: int = 0
    trees: int = 0

    def predict(self, X: Floats) -> Floats:
        """Predictions for unit features ``X``."""
        if self.booster is None:
            return np.full(len(X), self.constant)
        pred = self.booster.predict(xgb.DMatrix(X, nthread=1), iteration_range=(0, self.trees))
        return np.asarray(pred, dtype=np.float64)


def _train(X: Floats, y: Floats, depth: int, rounds: int, lr: float, seed: int) -> xgb.Booster:
    """``rounds`` boosting rounds, the first through the Booster's own ``update``: the model bytes
    of ``xgb.train``, without its callback container and closing ``reset``, which took a third
    of a 100-tree fit on a few dozen subgroups (11.5 ms against 7.7 ms), nor its per-round
    checks (:data:`_UPDATE_ONE_ITER`)."""
    params = {
        "objective": "reg:squarederror",
        "max_depth": depth,
        "eta": lr,
        "nthread": 1,
        "tree_method": "hist",
        "seed": seed,
        "verbosity": 0,
    }
    data = xgb.DMatrix(X, label=y, nthread=1)
    booster = xgb.Booster(params, [data])
    for round_ in range(rounds):
        if round_ == 0 or _UPDATE_ONE_ITER is None:
            booster.update(data, round_)  # checks the data's features against the booster's
        else:
            xgb.core._check_call(_UPDATE_ONE_ITER(booster.handle, ctypes.c_int(round_), data.handle))
    return booster


_UPDATE_ONE_ITER = getattr(getattr(xgb.core, "_LIB", None), "XGBoosterUpdateOneIter", None)
"""The C call ``Booster.update`` makes after reading and comparing the data's features again:
rounds after the first skip those checks (a fifth of a 100-tree fit on a few dozen subgroups:
7.8 ms against 6.3), the same model bytes. None where xgboost moves it: ``update`` throughout."""


def fit_sr(
    X: Floats, y: Floats, settings: SRSettings = SRSettings(), *, seed: int = 0, fixed: tuple[int, int] | None = None
) -> SRFit:
    """Fit SR, tuning (depth, trees) by ``settings.cv_folds``-fold CV unless ``fixed`` gives them.

    One booster per depth and fold is trained with the most trees; smaller
    tree counts are scored from its first iterations.
    """
    y = np.asarray(y, dtype=np.float64)
    mean = float(y.mean()) if len(y) else 0.0
    if X.shape[1] == 0 or len(y) < 2 * settings.cv_folds:
        return SRFit(booster=None, constant=mean)
    if fixed is None:
        trees = sorted(settings.trees)
        err = np.zeros((len(settings.depths), len(trees)))
        folds = KFold(settings.cv_folds, shuffle=True, random_state=seed).split(X)
        for train, valid in folds:
            dvalid = xgb.DMatrix(X[valid], nthread=1)
            for i, depth in enumerate(settings.depths):
                booster = _train(X[train], y[train], depth, trees[-1], settings.learning_rate, seed)
                for j, t in enumerate(trees):
                    pred = booster.predict(dvalid, iteration_range=(0, t))
                    err[i, j] += float(np.mean((pred - y[valid]) ** 2))
        best_depth, best_trees = np.unravel_index(int(np.argmin(err)), err.shape)
        fixed = (settings.depths[int(best_depth)], trees[int(best_trees)])
    depth, n_trees = fixed
    booster = _train(X, y, depth, n_trees, settings.learning_rate, seed)
    return SRFit(booster=booster, constant=mean, depth=depth, trees=n_trees)


def crossfit_sr(
    X: Floats,
    y: Floats,
    folds: Ints,
    settings: SRSettings = SRSettings(),
    *,
    seed: int = 0,
    fixed: dict[int, tuple[int, int]] | None = None,
) -> tuple[Floats, dict[int, SRFit]]:
    """Out-of-fold SR predictions: fit on the other folds, predict fold ``k``, for every ``k``."""
    pred = np.empty(len(y))
    fits: dict[int, SRFit] = {}
    for k in np.unique(folds):
        test = folds == k
        fit = fit_sr(X[~test], y[~test], settings, seed=seed + int(k), fixed=(fixed or {}).get(int(k)))
        fits[int(k)] = fit
        pred[test] = fit.predict(X[test])
    return pred, fits


# ------------------------------------------------------------- empirical Bayes


def eb_shrink(z: Floats, prior: Floats, se2: Floats) -> tuple[Floats, float, Floats]:
    """EB estimates ``prior + w·(z − prior)``, ``Â`` and the weights ``w = Â/(σ̂² + Â)``.

    A unit with ``σ̂² = 0`` (nothing to shrink away) keeps ``z`` (``w = 1``).
    """
    a_hat = max(0.0, float(np.mean((z - prior) ** 2 - se2)))
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(se2 > 0, a_hat / (se2 + a_hat), 1.0)
    return prior + w * (z - prior), a_hat, w


# -------------------------------------------------------- structured regression


def _standardise(X: Floats) -> Floats:
    sd = X.std(axis=0)
    return np.asarray((X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0), dtype=np.float64)


def _lasso_fits(D: Floats, y: Floats, w: Floats, alphas: Floats) -> tuple[Floats, Floats]:
    """Weighted Lasso path with an unpenalised intercept: coefficients (p × L) and intercepts (L)."""
    w = w / w.mean()
    xm = np.average(D, axis=0, weights=w)
    ym = float(np.average(y, weights=w))
    sw = np.sqrt(w)
    with warnings.catch_warnings():  # near-converged paths are fine for a λ search; the refit is single-λ
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, coefs, _ = lasso_path((D - xm) * sw[:, None], (y - ym) * sw, alphas=alphas, max_iter=10_000)
    return coefs, ym - xm @ coefs


def _weights(st: UnitStats, binary: bool) -> Floats:
    """Precision weights ``1/σ̂²``.

    A zero variance (a 0/1 unit whose rows all agree, a single row) would get
    an infinite weight and keep its raw mean; there ``σ̂²`` is replaced by its
    Laplace-smoothed value ``Z̃(1 − Z̃)/n`` (0/1), or by the pooled sample
    variance over ``n`` (other metrics).
    """
    if binary:
        zt = (st.n * st.z + 1) / (st.n + 2)
        fallback = zt * (1 - zt) / st.n
    else:
        pooled = st.s2[st.n > 1]
        fallback = np.full(len(st.n), float(pooled.mean()) if len(pooled) and pooled.mean() > 0 else 1.0) / st.n
    ok = np.isfinite(st.se2) & (st.se2 > 0)
    return np.asarray(1.0 / np.where(ok, st.se2, fallback), dtype=np.float64)


LASSO_FLOOR = 1e-4
"""The λ grid's smallest value, as a share of the largest λ (``λmax``, every unit coefficient zero).

At 1e-2 the grid stopped short: on subgroups with uninformative features and
tens of rows each, cross-validation picked its end and the fit had about 1.4×
DT's MSE; down to 1e-4 it is close to DT's.
"""


def lasso_grid(a_max: float, n_lambdas: int) -> Floats:
    """``n_lambdas`` log-spaced penalties from ``a_max`` down to ``LASSO_FLOOR · a_max``."""
    return np.asarray(a_max * np.logspace(0, np.log10(LASSO_FLOOR), n_lambdas), dtype=np.float64)


def structured_regression(
    X: Floats,
    values: Floats,
    unit: Ints,
    n_units: int,
    *,
    binary: bool,
    n_lambdas: int = 20,
    seed: int = 0,
    variance: BinaryVariance = "plugin",
) -> tuple[Floats, float]:
    """Lasso structured-regression estimates per unit and the chosen ``λ``."""
    rng = np.random.default_rng(seed)
    D = np.hstack([_standardise(X), np.eye(n_units)])
    full = unit_stats(values, unit, n_units, binary=binary, variance=variance)
    w = _weights(full, binary)
    wn = w / w.mean()
    yc = (full.z - np.average(full.z, weights=wn)) * np.sqrt(wn)
    Dc = (D - np.average(D, axis=0, weights=wn)) * np.sqrt(wn)[:, None]
    a_max = float(np.abs(Dc.T @ yc).max()) / n_units
    if not a_max > 0:
        return full.z.copy(), 0.0
    alphas = lasso_grid(a_max, n_lambdas)
    # split each unit's rows into two halves at random
    order = np.lexsort((rng.random(len(unit)), unit))
    start = np.concatenate([[0], np.cumsum(np.bincount(unit, minlength=n_units))[:-1]])
    half = np.empty(len(unit), dtype=np.int64)
    half[order] = (np.arange(len(unit)) - start[unit[order]]) % 2
    score = np.zeros(len(alphas))
    for k in (0, 1):
        train, test = half == k, half != k
        seen_train = np.bincount(unit[train], minlength=n_units) > 0
        seen_test = np.bincount(unit[test], minlength=n_units) > 0
        if not seen_train.any() or not seen_test.any():
            continue
        idx = np.flatnonzero(seen_train)
        remap = np.full(n_units, -1)
        remap[idx] = np.arange(len(idx))
        st = unit_stats(values[train], remap[unit[train]], len(idx), binary=binary, variance=variance)
        coefs, icpt = _lasso_fits(D[idx], st.z, _weights(st, binary), alphas)
        pred = D @ coefs + icpt
        sums = np.bincount(unit[test], weights=values[test], minlength=n_units)
        zt = sums[seen_test] / np.bincount(unit[test], minlength=n_units)[seen_test]
        score += ((pred[seen_test] - zt[:, None]) ** 2).mean(axis=0)
    best = int(np.argmin(score))
    coefs, icpt = _lasso_fits(D, full.z, w, alphas[best : best + 1])
    return D @ coefs[:, 0] + icpt[0], float(alphas[best])


# ------------------------------------------------------------------- problems


@dataclass(frozen=True)
class ProblemResult:
    """Every method's estimates (and intervals where it has them) for one problem."""

    stats: UnitStats
    estimates: dict[str, Floats]
    lower: dict[str, Floats]
    upper: dict[str, Floats]
    a_hat: float
    ebci: RobustEBCI
    sr_fits: dict[int, SRFit] = field(default_factory=dict)
    lasso_lambda: float = float("nan")


@dataclass(frozen=True)
class FittedProblem:
    """A problem's estimates before its EB intervals (:func:`fit_problem`); :func:`with_intervals`
    finds the intervals of many at once."""

    stats: UnitStats
    estimates: dict[str, Floats]
    lower: dict[str, Floats]
    upper: dict[str, Floats]
    a_hat: float
    eb: dict[str, EBProblem]
    """The EB problem behind each EB method's interval (``EB``, and the other protocol's for 0/1 values)."""
    sr_fits: dict[int, SRFit] = field(default_factory=dict)
    lasso_lambda: float = float("nan")


def fit_problem(
    X: Floats,
    values: Floats,
    unit: Ints,
    n_units: int,
    folds: Ints,
    *,
    binary: bool,
    alpha: float = 0.05,
    sr: SRSettings = SRSettings(),
    lasso_lambdas: int = 20,
    seed: int = 0,
    variance: BinaryVariance = "plugin",
) -> FittedProblem:
    """All four estimators on one problem (see :func:`estimate_problem`), the EB intervals left to
    :func:`with_intervals`."""
    st = unit_stats(values, unit, n_units, binary=binary, variance=variance)
    dt, dlo, dhi = direct(st, binary=binary, alpha=alpha)
    prior, fits = crossfit_sr(X, st.z, folds, sr, seed=seed)
    eb, a_hat, _ = eb_shrink(st.z, prior, st.se2)
    lasso, lam = structured_regression(
        X, values, unit, n_units, binary=binary, n_lambdas=lasso_lambdas, seed=seed, variance=variance
    )
    nan = np.full(n_units, np.nan)
    estimates = {"DT": dt, "SR": prior, "EB": eb, "Lasso": lasso}
    lower = {"DT": dlo, "SR": nan, "Lasso": nan}
    upper = {"DT": dhi, "SR": nan, "Lasso": nan}
    problems = {"EB": EBProblem(st.z, prior, st.se2)}
    if binary:  # the other protocol's EB, side by side (the SR prior is shared, so this is cheap)
        other: BinaryVariance = "plugin" if variance == "laplace" else "laplace"
        alt = unit_stats(values, unit, n_units, binary=True, variance=other)
        estimates[EB_VARIANTS[other]] = eb_shrink(alt.z, prior, alt.se2)[0]
        problems[EB_VARIANTS[other]] = EBProblem(alt.z, prior, alt.se2)
    return FittedProblem(st, estimates, lower, upper, a_hat, problems, fits, lam)


def with_intervals(fitted: Sequence[FittedProblem], *, alpha: float = 0.05) -> list[ProblemResult]:
    """The problems with their robust EB intervals, all found in one root search (:func:`robust_ebcis`)."""
    keys = [(i, method) for i, f in enumerate(fitted) for method in f.eb]
    cis = dict(zip(keys, robust_ebcis([fitted[i].eb[m] for i, m in keys], alpha=alpha), strict=True))
    return [
        ProblemResult(
            stats=f.stats,
            estimates=f.estimates,
            lower={**f.lower, **{m: cis[(i, m)].lower for m in f.eb}},
            upper={**f.upper, **{m: cis[(i, m)].upper for m in f.eb}},
            a_hat=f.a_hat,
            ebci=cis[(i, "EB")],
            sr_fits=f.sr_fits,
            lasso_lambda=f.lasso_lambda,
        )
        for i, f in enumerate(fitted)
    ]


def estimate_problem(
    X: Floats,
    values: Floats,
    unit: Ints,
    n_units: int,
    folds: Ints,
    *,
    binary: bool,
    alpha: float = 0.05,
    sr: SRSettings = SRSettings(),
    lasso_lambdas: int = 20,
    seed: int = 0,
    variance: BinaryVariance = "plugin",
) -> ProblemResult:
    """All four estimators on one problem: per-row ``values`` of ``unit``s, unit features ``X``, SR ``folds``.

    For 0/1 ``values`` the other protocol's EB comes too (method :data:`EB_VARIANTS` ``[other]``).
    """
    fitted = fit_problem(
        X,
        values,
        unit,
        n_units,
        folds,
        binary=binary,
        alpha=alpha,
        sr=sr,
        lasso_lambdas=lasso_lambdas,
        seed=seed,
        variance=variance,
    )
    return with_intervals([fitted], alpha=alpha)[0]
