"""Simulations under the normal–normal model: EB beats DT and SR, robust EBCIs cover, EB's limits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from unsure.subgroups.ebci import robust_ebci
from unsure.subgroups.estimators import SRSettings, crossfit_sr, eb_shrink

Floats = npt.NDArray[np.float64]
SR = SRSettings(trees=(25, 50, 100), depths=(1, 2), learning_rate=0.1, cv_folds=2)
UNITS = 200
PRIOR_VAR = 0.01


@dataclass
class Run:
    theta: Floats
    z: Floats
    sr: Floats
    eb: Floats
    weight: Floats
    lower: Floats
    upper: Floats


def simulate(seed: int, se2_scale: float = 1.0, units: int = UNITS) -> Run:
    """θ_g = f(X_g) + N(0, A), Z_g = θ_g + N(0, σ²_g); SR cross-fitted on X, EB and robust EBCI on top."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(units, 3))
    f = 0.6 + 0.08 * X[:, 0] + 0.05 * np.tanh(2 * X[:, 1])
    theta = f + rng.normal(0, np.sqrt(PRIOR_VAR), units)
    se2 = se2_scale * PRIOR_VAR * rng.uniform(0.3, 3.0, units)
    z = theta + rng.normal(0, np.sqrt(se2))
    folds = rng.permutation(units) % 2
    sr, _ = crossfit_sr(X, z, folds, SR, seed=seed)
    eb, _, w = eb_shrink(z, sr, se2)
    ci = robust_ebci(z, sr, se2, alpha=0.05)
    return Run(theta, z, sr, eb, w, ci.lower, ci.upper)


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    return [simulate(seed) for seed in range(10)]  # 10 × 200 = 2,000 draws


def mse(est: Floats, truth: Floats) -> float:
    return float(np.mean((est - truth) ** 2))


def test_eb_has_lower_mse_than_direct_and_synthetic_regression(runs: list[Run]) -> None:
    dt = np.mean([mse(r.z, r.theta) for r in runs])
    sr = np.mean([mse(r.sr, r.theta) for r in runs])
    eb = np.mean([mse(r.eb, r.theta) for r in runs])
    assert eb < dt
    assert eb < sr
    assert eb < 0.8 * min(dt, sr)


def test_robust_intervals_cover_at_least_93_percent(runs: list[Run]) -> None:
    covered = np.concatenate([(r.lower <= r.theta) & (r.theta <= r.upper) for r in runs])
    assert covered.size == 2000
    assert covered.mean() >= 0.93


def test_eb_tends_to_direct_as_samples_grow() -> None:
    """σ²_g = s²/n_g: as n_g grows the shrinkage weight goes to 1 and EB's error to DT's."""
    gaps, ratios = [], []
    for scale in (1.0, 1e-2, 1e-4):
        run = simulate(11, se2_scale=scale)
        gaps.append(float(np.mean(np.abs(run.eb - run.z))))
        ratios.append(mse(run.eb, run.theta) / mse(run.z, run.theta))
        if scale == 1e-4:
            assert run.weight.min() > 0.99
    assert gaps[0] > gaps[1] > gaps[2]
    assert ratios[-1] == pytest.approx(1.0, abs=0.01)


def test_eb_tends_to_synthetic_regression_as_noise_grows() -> None:
    gaps = []
    for scale in (1.0, 1e2, 1e4):
        run = simulate(12, se2_scale=scale)
        gaps.append(float(np.mean(np.abs(run.eb - run.sr)) / np.mean(np.abs(run.z - run.sr))))
        if scale == 1e4:
            assert run.weight.max() < 0.01
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[-1] < 0.01


def test_corrected_protocol_covers_binary_subgroups_without_zero_width_intervals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Accuracy of subgroups with 10 rows each: θ_g = logistic(1 + f(X_g) + N(0, 0.8²)).

    About one unit in nine draws 10 right (or 10 wrong) rows. Under ``paper``
    (plug-in σ̂² = 0 there) those units keep Z_g with a zero-width interval that
    cannot cover θ_g; ``corrected`` (Laplace σ̂²) covers at the nominal 95%.
    """
    from unsure.subgroups.estimators import PROTOCOL_VARIANCE, estimate_problem

    units, n = 150, 10
    sr = SRSettings(trees=(25, 50), depths=(1, 2), learning_rate=0.1, cv_folds=2)
    covered: dict[str, list[npt.NDArray[np.bool_]]] = {"EB": [], "EB-paper": []}
    zero: dict[str, list[npt.NDArray[np.bool_]]] = {"EB": [], "EB-paper": []}
    for seed in range(8):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(units, 3))
        theta = 1 / (1 + np.exp(-(1.0 + 0.6 * X[:, 0] + 0.4 * np.tanh(X[:, 1]) + rng.normal(0, 0.8, units))))
        unit = np.repeat(np.arange(units), n)
        values = (rng.random(units * n) < theta[unit]).astype(np.float64)
        folds = rng.permutation(units) % 2
        res = estimate_problem(
            X,
            values,
            unit,
            units,
            folds,
            binary=True,
            sr=sr,
            lasso_lambdas=3,
            seed=seed,
            variance=PROTOCOL_VARIANCE["corrected"],
        )
        for method in covered:
            covered[method].append((res.lower[method] <= theta) & (theta <= res.upper[method]))
            zero[method].append(res.upper[method] - res.lower[method] <= 1e-12)
    coverage = {m: float(np.concatenate(c).mean()) for m, c in covered.items()}
    zero_width = {m: float(np.concatenate(z).mean()) for m, z in zero.items()}
    with capsys.disabled():
        print(
            f"\nEB coverage: corrected {coverage['EB']:.3f}, paper {coverage['EB-paper']:.3f}; "
            f"zero-width share: corrected {zero_width['EB']:.3f}, paper {zero_width['EB-paper']:.3f}"
        )
    assert coverage["EB"] >= 0.94
    assert zero_width["EB"] == 0.0
    assert zero_width["EB-paper"] > 0.05  # the paper's plug-in variance: all-agreeing units
    assert coverage["EB-paper"] < coverage["EB"] - 0.05
