"""Robust EBCI critical values and moments: the ebci package's reference values, LP checks, edge cases."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linprog

from unsure.subgroups.ebci import EBProblem, cva, cvb, ebci_moments, r, rho, rho0, robust_ebci, robust_ebcis, t0


@pytest.mark.parametrize(
    ("m2", "kappa", "alpha", "expected"),
    [
        (0.0, 3.0, 0.05, 1.959964),  # the checks
        (25.0, 3.0, 0.05, 11.88358367),
        (1.0, 3.0, 0.2, 1.8494683),
        (100.0, 3.0, 0.05, 24.86172217),  # ebci's tests/testthat/test-cv.R
        (2.8**2, 8.0, 0.1, 7.0779747158),
        (0.0, np.inf, 0.2, stats.norm.ppf(0.9)),
    ],
)
def test_cva_matches_the_ebci_package(m2: float, kappa: float, alpha: float, expected: float) -> None:
    assert float(cva(m2, kappa, alpha)) == pytest.approx(expected, abs=5e-7)


R_GRID = Path(__file__).parent / "data" / "ebci_cva_grid.csv"
"""``ebci::cva(m2, kappa, alpha)$cv`` from R on 780 points, made by ``tests/data/ebci_cva_grid.R``."""


def test_cva_matches_r_on_the_reference_grid() -> None:
    """Issue 31: m2 from 1e-4 to 1e8, kappa 1, 3, 200, inf and alpha 0.01, 0.05, 0.1, all to 1e-6."""
    with R_GRID.open() as f:
        rows = np.array([[float(row[k]) for k in ("m2", "kappa", "alpha", "cv")] for row in csv.DictReader(f)])
    assert len(rows) == 780
    m2, kappa, alpha, expected = rows.T
    # the worst points must be on the grid
    assert np.any((m2 == 1e8) & (alpha == 0.01) & (kappa == 200))
    assert np.any((m2 == 1e-3) & (alpha == 0.05) & (kappa == 3))
    ours = np.empty_like(expected)
    for k in np.unique(kappa):
        for a in np.unique(alpha):
            sel = (kappa == k) & (alpha == a)
            ours[sel] = cva(m2[sel], float(k), float(a))
    rel = np.abs(ours / expected - 1)
    worst = [
        f"m2={m2[i]:.6g} kappa={kappa[i]} alpha={alpha[i]}: {ours[i]:.10g} vs R {expected[i]:.10g}"
        for i in np.argsort(-rel)[:5]
    ]
    assert rel.max() <= 1e-6, f"{(rel > 1e-6).sum()} points off by more than 1e-6, worst: {worst}"


def test_rho_matches_the_ebci_package() -> None:
    assert float(rho(1.0, 3.0, 11.9699639845401)[0]) == pytest.approx(6.0216e-05, rel=1e-4)
    assert float(rho(2.8**2, 8.0, 7.1324290147839279896)[0]) == pytest.approx(0.09805099, abs=1e-8)
    # large χ: E r is ≈ 0 except in a window of width ≈ 4e5 just below t₀ ≈ 1.5e9 (ebci's rho, from R)
    assert float(rho(1e8, 3.0, 38817.3663705)[0]) == pytest.approx(0.010000058529655818, abs=1e-10)


def test_kappa_one_is_the_known_bias_critical_value() -> None:
    m2 = np.array([0.0, 0.01, 1.0, 4.0, 99.0, 150.0])
    np.testing.assert_allclose(cva(m2, 1.0, 0.05), cvb(m2, 0.05), rtol=1e-12)
    # r(m2, cvb) = alpha: the point mass at m2 is exactly at the level
    np.testing.assert_allclose(r(m2[m2 < 100], cvb(m2[m2 < 100], 0.05)), 0.05, atol=1e-9)


def test_large_kappa_agrees_with_no_kurtosis_bound() -> None:
    m2 = np.array([0.25, 1.0, 4.0])
    np.testing.assert_allclose(cva(m2, 1e4, 0.2), cva(m2, np.inf, 0.2), rtol=1e-9)
    assert float(cva(4.0, 20.0, 0.05)) == pytest.approx(float(cva(4.0, np.inf, 0.05)), rel=1e-10)
    assert float(cva(0.25, 15.0, 0.05)) < float(cva(0.25, np.inf, 0.05))


def test_cva_is_ordered_in_kappa_and_m2() -> None:
    m2 = np.exp(np.linspace(np.log(1e-3), np.log(1e3), 40))
    by_kappa = np.array([cva(m2, k, 0.05) for k in (1.0, 1.5, 3.0, 10.0, np.inf)])
    assert np.all(np.diff(by_kappa, axis=0) >= -1e-9)
    assert np.all(np.diff(by_kappa, axis=1) > 0)


def test_noncoverage_at_the_critical_value_is_alpha() -> None:
    m2 = np.array([0.05, 0.5, 2.0, 10.0, 60.0])
    for kappa in (1.3, 3.0, 8.0, np.inf):
        chi = cva(m2, kappa, 0.05)
        np.testing.assert_allclose(rho(m2, kappa, chi), 0.05, atol=1e-10)


def test_two_point_solution_is_the_linear_programs_optimum() -> None:
    """The largest non-coverage equals the LP over a fine support grid (an inner approximation)."""
    rng = np.random.default_rng(3)
    for _ in range(25):
        m2 = float(np.exp(rng.uniform(np.log(0.02), np.log(40))))
        kappa = float(rng.uniform(1.1, 25))
        chi = float(rng.uniform(1.8, 2.5 * np.sqrt(1 + m2) + 2))
        top = max(4 * float(t0(chi)), 4 * kappa * m2, 10.0)
        xs = np.unique(np.concatenate([np.linspace(0, top, 4000), [m2]]))
        lp = linprog(
            -r(xs, chi),
            A_eq=np.vstack([np.ones_like(xs), xs]),
            b_eq=[1, m2],
            A_ub=xs[None, :] ** 2,
            b_ub=[kappa * m2 * m2],
            method="highs",
        )
        mine = float(rho(m2, kappa, chi)[0])
        assert -lp.fun <= mine + 1e-9, (m2, kappa, chi)
        assert -lp.fun >= mine - 2e-4, (m2, kappa, chi)


def test_rho0_is_the_concave_majorant() -> None:
    chi = 3.0
    tt = float(t0(chi))
    assert tt > chi**2 - 3
    ts = np.linspace(0, 3 * tt, 50)
    assert np.all(rho0(ts, chi) >= r(ts, chi) - 1e-15)
    np.testing.assert_allclose(rho0(tt, chi), r(tt, chi))


def test_vectorised_equals_one_at_a_time_and_keeps_shape() -> None:
    m2 = np.array([[0.1, 3.0], [0.1, 30.0]])
    out = cva(m2, 3.0, 0.05)
    assert out.shape == (2, 2)
    for idx in np.ndindex(m2.shape):
        assert out[idx] == pytest.approx(float(cva(m2[idx], 3.0, 0.05)), rel=1e-12)


def test_one_kurtosis_per_element_equals_one_call_per_kurtosis() -> None:
    m2 = np.array([0.0, 0.1, 3.0, 0.1, 30.0, 1e-3, 4.0, 0.25])
    kappa = np.array([3.0, 3.0, 3.0, 1.0, np.inf, 8.0, 20.0, 15.0])
    out = cva(m2, kappa, 0.05)
    for m, k, got in zip(m2, kappa, out, strict=True):
        assert got == pytest.approx(float(cva(m, k, 0.05)), rel=1e-12), (m, k)
    with pytest.raises(ValueError, match="kappa must be >= 1"):
        cva(m2, np.where(kappa == 1.0, 0.5, kappa), 0.05)
    with pytest.raises(ValueError, match=r"kappa of shape \(3,\) does not fit m2 of shape \(8,\)"):
        cva(m2, kappa[:3], 0.05)


def test_many_problems_at_once_equal_each_alone() -> None:
    """The subgroups evaluation finds a repetition's intervals in one root search."""
    rng = np.random.default_rng(7)
    problems = []
    for n, spread in ((40, 1.0), (12, 0.3), (25, 0.0), (60, 2.0)):
        se2 = rng.uniform(0.2, 1.0, n)
        if not spread:  # no spread and no noise
            se2 = np.zeros(n)
        z = rng.normal(0, spread, n) + rng.normal(0, np.sqrt(se2))
        problems.append(EBProblem(z, np.zeros(n), se2))
    problems.append(EBProblem(problems[0].z, problems[0].prior_mean, problems[0].se2, kappa=np.inf))
    together = robust_ebcis(problems, alpha=0.1)
    for p, ci in zip(problems, together, strict=True):
        alone = robust_ebci(p.z, p.prior_mean, p.se2, alpha=0.1, kappa=p.kappa)
        assert ci.moments == alone.moments
        np.testing.assert_allclose(ci.half_length, alone.half_length, rtol=1e-12)
        np.testing.assert_array_equal(ci.estimate, alone.estimate)
    assert np.isnan(together[2].half_length).all()  # no spread and no noise: nothing to say robustly


@pytest.mark.parametrize(
    ("m2", "kappa", "alpha", "message"),
    [(-1.0, 3.0, 0.05, "m2 must be"), (1.0, 0.5, 0.05, "kappa must be"), (1.0, 3.0, 1.5, "alpha must be")],
)
def test_bad_arguments_are_named(m2: float, kappa: float, alpha: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cva(m2, kappa, alpha)


def test_moments_follow_the_ebci_formulas() -> None:
    rng = np.random.default_rng(0)
    se2 = rng.uniform(0.5, 2.0, 300)
    eps = rng.normal(0, np.sqrt(1.0 + se2))
    w = rng.uniform(0.5, 1.5, 300)
    mom = ebci_moments(eps, se2, w)
    mu2 = np.sum(w * (eps**2 - se2)) / w.sum()
    mu4 = np.sum(w * (eps**4 - 6 * se2 * eps**2 + 3 * se2**2)) / w.sum()
    assert mom.mu2_raw == pytest.approx(mu2)
    assert mom.mu2 == pytest.approx(max(mu2, 2 * np.sum(w**2 * se2**2) / (w.sum() * np.sum(w * se2))))
    trim = 32 * np.sum(w**2 * se2**4) / (w.sum() * np.sum(w * se2**2))
    assert mom.kappa == pytest.approx(max(mu4 / mom.mu2**2, 1 + trim / mom.mu2**2))
    # no signal: PMT keeps mu2 at its positive floor, "none" truncates at zero
    flat = ebci_moments(np.zeros(50), np.ones(50))
    assert flat.mu2 == pytest.approx(2 / 50)
    assert ebci_moments(np.zeros(50), np.ones(50), fs_correction="none").mu2 == 0.0


def test_robust_ebci_uses_the_eb_weight_and_cva() -> None:
    rng = np.random.default_rng(1)
    se2 = rng.uniform(0.2, 1.0, 100)
    theta = rng.normal(0, 1, 100)
    z = theta + rng.normal(0, np.sqrt(se2))
    ci = robust_ebci(z, np.zeros(100), se2, alpha=0.1)
    w = ci.moments.mu2 / (ci.moments.mu2 + se2)
    np.testing.assert_allclose(ci.shrinkage, w)
    np.testing.assert_allclose(ci.estimate, w * z)
    half = cva(se2 / ci.moments.mu2, ci.moments.kappa, 0.1) * w * np.sqrt(se2)
    np.testing.assert_allclose(ci.half_length, half)
    np.testing.assert_allclose(ci.upper - ci.lower, 2 * half)
