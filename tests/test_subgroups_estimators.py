"""Estimators over arrays: unit statistics, direct intervals, SR tuning and cross-fitting, EB, Lasso."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb
from scipy import stats

from unsure.subgroups.estimators import (
    Floats,
    Ints,
    SRSettings,
    _train,
    crossfit_sr,
    direct,
    eb_shrink,
    estimate_problem,
    fit_sr,
    structured_regression,
    t_interval,
    unit_stats,
    wilson_interval,
)

SR = SRSettings(trees=(10, 30), depths=(1, 2), cv_folds=2)


def test_unit_stats_by_unit() -> None:
    values = np.array([1, 0, 1, 1, 0.0])
    unit = np.array([0, 0, 1, 1, 2])
    st = unit_stats(values, unit, 3, binary=True)
    np.testing.assert_array_equal(st.n, [2, 2, 1])
    np.testing.assert_allclose(st.z, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(st.se2, [0.125, 0.0, 0.0])
    lap = unit_stats(values, unit, 3, binary=True, variance="laplace")
    np.testing.assert_allclose(lap.se2, [0.125, 0.75 * 0.25 / 2, (2 / 3) * (1 / 3)])
    cont = unit_stats(np.array([1.0, 3.0, 2.0, 2.0, 5.0]), unit, 3, binary=False)
    np.testing.assert_allclose(cont.s2, [2.0, 0.0, 0.0])
    np.testing.assert_allclose(cont.se2, [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="unit 3 has no observations"):
        unit_stats(values, unit, 4, binary=True)


def test_wilson_and_t_intervals_match_scipy() -> None:
    for k, n in [(0, 10), (3, 10), (10, 10), (17, 40)]:
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
        lo, hi = wilson_interval(k / n, n, 0.05)
        assert (float(lo), float(hi)) == pytest.approx((ci.low, ci.high), abs=1e-12)
    x = np.array([0.2, 0.5, 0.9, 0.4])
    lo, hi = t_interval(x.mean(), x.var(ddof=1), 4, 0.05)
    ref = stats.t.interval(0.95, 3, loc=x.mean(), scale=stats.sem(x))
    assert (float(lo), float(hi)) == pytest.approx(ref)


def test_direct_uses_wilson_for_binary_and_t_otherwise() -> None:
    unit = np.repeat([0, 1], 5)
    binary = unit_stats(np.array([1, 1, 0, 1, 0, 0, 0, 0, 1, 0.0]), unit, 2, binary=True)
    est, lo, _ = direct(binary, binary=True)
    np.testing.assert_allclose(est, [0.6, 0.2])
    np.testing.assert_allclose(lo, wilson_interval(est, 5)[0])
    cont = unit_stats(np.linspace(0, 1, 10), unit, 2, binary=False)
    _, lo, _ = direct(cont, binary=False)
    np.testing.assert_allclose(lo, t_interval(cont.z, cont.s2, 5)[0])


def test_sr_tunes_depth_and_trees_and_is_seeded() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = 0.5 + 0.3 * np.sign(X[:, 0]) * np.sign(X[:, 1]) + rng.normal(0, 0.02, 200)  # XOR: stumps see nothing
    fit = fit_sr(X, y, SRSettings(trees=(5, 60), depths=(1, 3)), seed=1)
    again = fit_sr(X, y, SRSettings(trees=(5, 60), depths=(1, 3)), seed=1)
    assert (fit.depth, fit.trees) == (3, 60)  # an interaction needs depth, lr 0.1 needs trees
    np.testing.assert_array_equal(fit.predict(X), again.predict(X))
    assert fit_sr(X[:3], y[:3], SR).booster is None  # too few units to tune: the mean
    assert fit_sr(X[:3], y[:3], SR).predict(X[:2]) == pytest.approx([y[:3].mean()] * 2)


def test_crossfitting_never_sees_the_unit_it_predicts() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    y = X[:, 0] * 0.1
    folds = np.arange(60) % 2
    base, _ = crossfit_sr(X, y, folds, SR, seed=0)
    y2 = y.copy()
    y2[0] = 50.0  # a wild unit in fold 0 moves only fold 1's predictions
    moved, _ = crossfit_sr(X, y2, folds, SR, seed=0)
    np.testing.assert_array_equal(moved[folds == 0], base[folds == 0])
    assert not np.allclose(moved[folds == 1], base[folds == 1])


def test_eb_shrinkage_formula() -> None:
    z = np.array([0.2, 0.8, 0.5, 0.9])
    prior = np.array([0.4, 0.6, 0.5, 0.5])
    se2 = np.array([0.01, 0.04, 0.02, 0.0])
    est, a_hat, w = eb_shrink(z, prior, se2)
    assert a_hat == pytest.approx(max(0.0, float(np.mean((z - prior) ** 2 - se2))))
    np.testing.assert_allclose(w[:3], a_hat / (se2[:3] + a_hat))
    assert w[3] == 1.0 and est[3] == 0.9  # no noise: keep the data
    flat, a0, _ = eb_shrink(prior + 0.001, prior, np.full(4, 0.5))
    assert a0 == 0.0 and np.allclose(flat, prior)


def test_structured_regression_shrinks_between_regression_and_direct() -> None:
    rng = np.random.default_rng(2)
    units = 40
    X = rng.normal(size=(units, 2))
    mu = np.clip(0.6 + 0.15 * X[:, 0] + rng.normal(0, 0.05, units), 0.05, 0.95)
    n = rng.integers(5, 60, units)
    unit = np.repeat(np.arange(units), n)
    values = (rng.random(len(unit)) < mu[unit]).astype(float)
    est, lam = structured_regression(X, values, unit, units, binary=True, seed=0)
    z = unit_stats(values, unit, units, binary=True).z
    assert lam > 0 and np.all(np.isfinite(est))
    assert np.mean((est - mu) ** 2) < np.mean((z - mu) ** 2)
    again, _ = structured_regression(X, values, unit, units, binary=True, seed=0)
    np.testing.assert_array_equal(est, again)


def test_estimate_problem_returns_every_method() -> None:
    rng = np.random.default_rng(3)
    units = 30
    X = rng.normal(size=(units, 3))
    unit = np.repeat(np.arange(units), 12)
    values = (rng.random(len(unit)) < 0.7).astype(float)
    res = estimate_problem(X, values, unit, units, np.arange(units) % 2, binary=True, sr=SR)
    assert set(res.estimates) == {"DT", "SR", "EB", "Lasso", "EB-corrected"}  # the paper protocol by default
    for method in ("DT", "EB", "EB-corrected"):
        assert np.all(res.lower[method] <= res.upper[method])
    assert np.isnan(res.lower["SR"]).all()
    np.testing.assert_allclose(res.estimates["DT"], res.stats.z)


def test_each_protocol_reports_the_other_eb_beside_it() -> None:
    """0/1 values: EB under the chosen protocol, the other protocol's EB beside it; none for losses."""
    rng = np.random.default_rng(4)
    units = 30
    X = rng.normal(size=(units, 3))
    unit = np.repeat(np.arange(units), 5)
    values = (rng.random(len(unit)) < 0.9).astype(float)
    folds = np.arange(units) % 2
    paper = estimate_problem(X, values, unit, units, folds, binary=True, sr=SR, variance="plugin")
    corrected = estimate_problem(X, values, unit, units, folds, binary=True, sr=SR, variance="laplace")
    np.testing.assert_allclose(paper.lower["EB-corrected"], corrected.lower["EB"])
    np.testing.assert_allclose(corrected.upper["EB-paper"], paper.upper["EB"])
    agree = (paper.stats.z == 0) | (paper.stats.z == 1)
    assert agree.any()
    assert np.all(paper.upper["EB"][agree] == paper.lower["EB"][agree])  # the paper's zero width
    assert np.all(corrected.upper["EB"] - corrected.lower["EB"] > 0)
    loss = estimate_problem(X, rng.random(len(unit)), unit, units, folds, binary=False, sr=SR)
    assert set(loss.estimates) == {"DT", "SR", "EB", "Lasso"}


def test_protocol_sets_the_binary_variance() -> None:
    from unsure.config import Subgroups
    from unsure.subgroups.estimators import SRSettings
    from unsure.subgroups.evaluate import EvaluationSettings

    assert EvaluationSettings.from_params({"protocol": "corrected"}).binary_variance == "laplace"
    assert EvaluationSettings.from_params({"protocol": "paper"}).binary_variance == "plugin"
    # what the config leaves out is the config's default, not another one of the library's
    study, settings = Subgroups(), EvaluationSettings.from_params({})
    assert settings.protocol == study.protocol and settings.repetitions == study.repetitions
    assert (SRSettings().trees, settings.sr.trees, settings.sr.depths) == (study.sr_trees,) * 2 + (study.sr_depths,)


def _uninformative_case(seed: int, units: int = 60, n: int = 40) -> tuple[Floats, Floats, Floats, Ints]:
    """Subgroup accuracies mostly off the features' regression, 40 rows each: DT is hard to beat."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(units, 3))
    theta = np.clip(0.6 + 0.05 * X[:, 0] + rng.normal(0, 0.15, units), 0.02, 0.98)
    unit = np.repeat(np.arange(units), n)
    values = (rng.random(units * n) < theta[unit]).astype(np.float64)
    return X, theta, values, unit


def test_lasso_cv_does_not_stop_at_the_grid_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the grid ending at 1e-2·λmax, CV picked its end in 8 of 8 draws here and the Lasso had
    1.38× DT's MSE; the grid now goes to 1e-4·λmax, where CV stops inside it and the Lasso is near DT."""
    import unsure.subgroups.estimators as est_mod

    ends: list[float] = []
    grid = est_mod.lasso_grid

    def recording(a_max: float, n_lambdas: int) -> Floats:
        out = grid(a_max, n_lambdas)
        ends.append(float(out[-1]))
        return out

    monkeypatch.setattr(est_mod, "lasso_grid", recording)
    at_end, ratios = 0, []
    for seed in range(8):
        X, theta, values, unit = _uninformative_case(seed)
        fit, lam = structured_regression(X, values, unit, 60, binary=True, seed=seed)
        at_end += int(np.isclose(lam, ends[-1]))
        z = np.bincount(unit, weights=values) / np.bincount(unit)
        ratios.append(np.mean((fit - theta) ** 2) / np.mean((z - theta) ** 2))
    assert est_mod.LASSO_FLOOR <= 1e-4
    assert at_end <= 2, f"CV chose the grid's end in {at_end} of 8 draws"
    assert np.mean(ratios) < 1.15


@pytest.mark.parametrize("depth", [1, 2])
def test_sr_boosting_loop_gives_xgboost_trains_model_bytes(depth: int) -> None:
    """SR boosts through the Booster's own update (no callbacks, no closing reset): the same model as xgb.train."""
    rng = np.random.default_rng(depth)
    X, y = rng.normal(size=(24, 5)), rng.normal(size=24)
    ours = _train(X, y, depth, 50, 0.1, seed=3)
    params = {"objective": "reg:squarederror", "max_depth": depth, "eta": 0.1, "nthread": 1}
    params |= {"tree_method": "hist", "seed": 3, "verbosity": 0}
    theirs = xgb.train(params, xgb.DMatrix(X, label=y, nthread=1), num_boost_round=50)
    assert bytes(ours.save_raw()) == bytes(theirs.save_raw())
