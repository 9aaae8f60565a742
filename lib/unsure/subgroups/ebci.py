"""Robust empirical Bayes confidence intervals (Armstrong, Kolesár & Plagborg-Møller, 2022).

An EB estimate shrinks an unbiased estimate ``Z_g`` (standard error ``σ_g``)
towards a prediction ``f(X_g)`` with weight ``w_g = μ₂ / (μ₂ + σ²_g)``, where
``μ₂`` is the second moment of ``θ_g − f(X_g)``. The parametric interval
``θ̂_g ± z·√w_g·σ_g`` covers on average only if the ``θ_g`` are normal; the
robust interval ``θ̂_g ± cva(σ²_g/μ₂, κ, α)·w_g·σ_g`` covers on average for any
distribution with second moment ``μ₂`` and kurtosis ``κ``.

``cva(m2, κ, α)`` is the ``χ`` solving ``ρ(m2, κ, χ) = α``, where ``ρ`` is the
largest average non-coverage ``E_F r(t, χ)`` over distributions ``F`` of the
squared normalized bias ``t = b²`` with ``E_F t = m2`` and ``E_F t² ≤ κ m2²``,
and ``r(t, χ) = P(|Z − √t| > χ)`` (``Z`` standard normal). ``r`` is convex and
then concave in ``t``, so (Appendix B of the paper):

* ``κ = 1``: ``F`` is the point mass at ``m2``; ``cva`` is the square root of a
  non-central χ² quantile (:func:`cvb`).
* ``κ = ∞`` or a non-binding kurtosis bound: ``F`` puts mass ``m2/t₀`` on
  ``t₀`` and the rest on 0, where the tangent to ``r`` at ``t₀`` passes through
  ``(0, r(0))`` (or ``F`` is the point mass at ``m2`` once ``m2 ≥ t₀``).
* binding bound: ``F`` is a two-point distribution with both moments equal to
  their bounds; we maximise ``E_F r`` over that one-parameter family directly
  (a grid on three scales, then golden-section refinement), which is the
  primal of the dual problem the ``ebci`` R package solves.

``cva`` reproduces ``ebci::cva`` including its two shortcuts, which move the
answer by far more than rounding: for ``κ = ∞`` it returns the Chebyshev bound
``√((1 + m2)/α)`` once ``ρ`` there is within ``9e-6`` of ``α`` (for large
``m2`` and small ``α``: 100,000.0005 rather than the exact root 99,995.34 at
``m2 = 1e8``, ``α = 0.01``), and for finite ``κ`` it keeps the ``κ = ∞`` value
unless the kurtosis bound lowers ``ρ`` there by more than ``1e-5``. So
``ρ(m2, κ, cva)`` lies in ``(α − 1e-5, α]`` rather than equalling ``α``.

Everything is vectorised over ``m2`` and ``κ`` (one ``α`` per call; one ``κ``
per EB problem, so the intervals of many problems come from one call): root
finding uses :func:`scipy.optimize.elementwise.find_root` (Chandrupatla's
method on all elements at once), so 500 distinct ``m2`` take a fraction of a
second instead of 1.5 to 2 s each.

The moment estimates :func:`ebci_moments` follow ``ebci::ebci`` including its
finite-sample corrections (``fs_correction = "PMT"``, posterior mean
truncation, the default, or ``"none"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats
from scipy.optimize import elementwise

Floats = npt.NDArray[np.float64]

GRID = 64
"""Grid points per scale (linear in ``t``, in ``log(t − m2)``, in ``√t`` near ``χ``) for the upper support point."""
EDGE = 8.0
"""Half-width, in ``√t``, of the window around ``χ`` where ``r(t, χ)`` rises from 0 to 1 (``Φ(−8) ≈ 6e-16``)."""
GOLDEN_STEPS = 48
"""Golden-section steps refining the best grid cell (shrinks it by 0.618**48 ≈ 1e-10)."""
LARGE_M2 = 1e12
"""Beyond this ``m2`` the kurtosis bound is treated as non-binding, as in ``ebci``."""
CHEBYSHEV_TOL = 9e-6
"""``ebci`` stops at the Chebyshev bound ``√((1 + m2)/α)`` for ``κ = ∞`` once ``ρ`` there is this close to ``α``."""
KAPPA_TOL = 1e-5
"""``ebci`` keeps the ``κ = ∞`` value unless the kurtosis bound lowers ``ρ`` there by more than this."""


def _arr(x: npt.ArrayLike) -> Floats:
    return np.asarray(x, dtype=np.float64)


def r(t: npt.ArrayLike, chi: npt.ArrayLike) -> Floats:
    """Non-coverage ``P(|Z − √t| > χ)`` of ``±χ`` around a normal with bias ``√t``."""
    s = np.sqrt(_arr(t))
    c = _arr(chi)
    return np.asarray(special.ndtr(-s - c) + special.ndtr(s - c), dtype=np.float64)


def _phi(x: Floats) -> Floats:
    return np.asarray(np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi), dtype=np.float64)


def r1(t: npt.ArrayLike, chi: npt.ArrayLike) -> Floats:
    """Derivative of :func:`r` in ``t`` (its limit ``χφ(χ)`` at ``t → 0``)."""
    t, c = np.broadcast_arrays(_arr(t), _arr(chi))
    s = np.sqrt(np.maximum(t, 1e-8))
    d = (_phi(s - c) - _phi(s + c)) / (2 * s)
    return _arr(np.where(t >= 1e-8, d, c * _phi(c)))


def r2(t: npt.ArrayLike, chi: npt.ArrayLike) -> Floats:
    """Second derivative of :func:`r` in ``t`` (its limit at ``t → 0`` below ``2e-6``)."""
    t, c = np.broadcast_arrays(_arr(t), _arr(chi))
    tt = np.maximum(t, 2e-6)
    s = np.sqrt(tt)
    d = (_phi(s + c) * (c * s + tt + 1) + _phi(s - c) * (c * s - tt - 1)) / (4 * tt**1.5)
    return _arr(np.where(t >= 2e-6, d, _phi(c) * c * (c * c - 3) / 6))


def t0(chi: npt.ArrayLike) -> Floats:
    """The ``t₀ > 0`` where the tangent to ``r(·, χ)`` passes through ``(0, r(0, χ))``; 0 if ``χ² < 3``.

    ``f(t) = r(t) − t·r'(t) − r(0)`` has ``f' = −t·r''``: it falls on the convex
    part of ``r`` (below the inflection point, which lies in ``[χ² − 3, χ²]``)
    and rises on the concave part, crossing zero once. Safeguarded Newton
    steps inside the bracket ``[χ² − 3, 2χ²]`` find it to machine precision.
    """
    c = np.atleast_1d(_arr(chi)).astype(np.float64)
    out = np.zeros_like(c)
    act = c * c > 3
    if not act.any():
        return out.reshape(np.shape(chi))
    ca = c[act]
    r0 = r(0.0, ca)

    def f(t: Floats) -> Floats:
        return r(t, ca) - t * r1(t, ca) - r0

    lo = ca * ca - 3
    hi = 2 * ca * ca
    while True:  # the bracket holds for any χ < 1e5; widen just in case
        bad = f(hi) < 0
        if not bad.any():
            break
        lo = np.where(bad, hi, lo)
        hi = np.where(bad, 2 * hi, hi)
    # start near the root: for large χ, φ(d) ≈ 2/(χ + d) with d = √t₀ − χ
    d = np.ones_like(ca)
    for _ in range(3):
        d = np.sqrt(2 * np.log(np.maximum((ca + d) / (2 * np.sqrt(2 * np.pi)), 1.0)) + 0.25)
    t = np.clip((ca + d) ** 2, lo, hi)
    for _ in range(200):
        ft = f(t)
        lo = np.where(ft < 0, t, lo)
        hi = np.where(ft < 0, hi, t)
        slope = -t * r2(t, ca)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            newton = t - ft / slope
        ok = (slope > 0) & (newton >= lo) & (newton <= hi)
        tol = 1e-13 * t + 1e-15
        done = (ok & (np.abs(newton - t) <= tol)) | (ft == 0) | (hi - lo <= tol)
        t = np.where(ft == 0, t, np.where(ok, newton, 0.5 * (lo + hi)))
        if done.all():
            break
    out[act] = t
    return out.reshape(np.shape(chi))


def rho0(m2: npt.ArrayLike, chi: npt.ArrayLike, tt: Floats | None = None) -> Floats:
    """Largest non-coverage under ``E t = m2`` alone (``κ = ∞``); ``tt``: :func:`t0` of ``chi``,
    where the caller has it already."""
    m, c = np.broadcast_arrays(_arr(m2), _arr(chi))
    tt = t0(c) if tt is None else tt
    tangent = r(tt, c) + (m - tt) * r1(tt, c)
    return _arr(np.where(m >= tt, r(m, c), tangent))


def _two_point(m2: Floats, m4: Floats, t: Floats, chi: Floats) -> Floats:
    """``E r`` under the distribution on ``{u, t}`` with ``E = m2`` and ``E t² = m4``."""
    u = np.maximum((t * m2 - m4) / (t - m2), 0.0)
    p = (m2 - u) / (t - u)
    ru = r(u, chi)
    return ru + p * (r(t, chi) - ru)


def _support_grid(m2: Floats, kappa: Floats, chi: Floats, a: Floats, b: Floats) -> Floats:
    """Candidate upper support points in ``[a, b]``, one row per ``m2``, sorted.

    ``E r`` over the two-point family varies on three scales: that of ``t``
    itself, that of ``t − m2`` (the lower point ``u`` moves fast near
    ``t = κ m2`` when ``κ`` is close to 1), and that of ``r(t, χ)``, which for
    large ``χ`` rises from 0 to 1 over a window of width ``≈ 4 EDGE χ`` around
    ``χ²``, far narrower than ``[a, b]``: a grid on one scale alone can miss the
    maximum entirely.
    """
    step = np.linspace(0.0, 1.0, GRID)[None, :]
    linear = a[:, None] + (b - a)[:, None] * step
    lo, hi = np.log((kappa - 1) * m2), np.log(b - m2)
    logs = m2[:, None] + np.exp(lo[:, None] + (hi - lo)[:, None] * step)
    s_lo = np.clip(chi - EDGE, np.sqrt(a), np.sqrt(b))
    s_hi = np.clip(chi + EDGE, np.sqrt(a), np.sqrt(b))
    roots = (s_lo[:, None] + (s_hi - s_lo)[:, None] * step) ** 2
    grid = np.clip(np.concatenate([linear, logs, roots], axis=1), a[:, None], b[:, None])
    return _arr(np.sort(grid, axis=1))


def _max_two_point(m2: Floats, kappa: Floats, chi: Floats, upper: Floats) -> Floats:
    """Maximise :func:`_two_point` over its upper support point in ``[κ m2, upper]`` (``κ`` per element)."""
    m4 = kappa * m2 * m2
    a = kappa * m2
    b = np.maximum(upper, a)
    grid = _support_grid(m2, kappa, chi, a, b)
    values = _two_point(m2[:, None], m4[:, None], grid, chi[:, None])
    k = np.argmax(values, axis=1)
    rows = np.arange(len(m2))
    best = values[rows, k]
    lo = grid[rows, np.maximum(k - 1, 0)]
    hi = grid[rows, np.minimum(k + 1, grid.shape[1] - 1)]
    g = (np.sqrt(5.0) - 1) / 2
    x1 = hi - g * (hi - lo)
    x2 = lo + g * (hi - lo)
    f1 = _two_point(m2, m4, x1, chi)
    f2 = _two_point(m2, m4, x2, chi)
    for _ in range(GOLDEN_STEPS):
        left = f1 >= f2  # the maximum lies in [lo, x2], else in [x1, hi]
        lo, hi = np.where(left, lo, x1), np.where(left, x2, hi)
        x1, x2 = np.where(left, hi - g * (hi - lo), x2), np.where(left, x1, lo + g * (hi - lo))
        fn = _two_point(m2, m4, np.where(left, x1, x2), chi)
        f1, f2 = np.where(left, fn, f2), np.where(left, f1, fn)
    return _arr(np.maximum(best, np.maximum(f1, f2)))


def rho(m2: npt.ArrayLike, kappa: npt.ArrayLike, chi: npt.ArrayLike) -> Floats:
    """Largest non-coverage ``sup E_F r(t, χ)`` over ``E_F t = m2``, ``E_F t² ≤ κ m2²``.

    ``kappa`` is one kurtosis or one per element."""
    m, k, c = np.broadcast_arrays(np.atleast_1d(_arr(m2)), np.atleast_1d(_arr(kappa)), np.atleast_1d(_arr(chi)))
    m, k, c = m.astype(np.float64).copy(), k.astype(np.float64).copy(), c.astype(np.float64).copy()
    point = k == 1
    out = np.empty_like(m)
    out[point] = r(m[point], c[point])
    rest = ~point
    if not rest.any():
        return out
    m, k, c = m[rest], k[rest], c[rest]
    tt = t0(c)
    tangent = rho0(m, c, tt)
    bind = np.isfinite(k) & (m < tt) & (k * m < tt) & (m > 0)
    if bind.any():
        tangent[bind] = _max_two_point(m[bind], k[bind], c[bind], tt[bind])
    out[rest] = tangent
    return out


def cvb(m2: npt.ArrayLike, alpha: float = 0.05) -> Floats:
    """Critical value for a known normalized bias ``√m2`` (``κ = 1``), as ``ebci``'s ``CVb``."""
    m = np.atleast_1d(_arr(m2))
    b = np.sqrt(m)
    small = b < 10
    out = b + stats.norm.ppf(1 - alpha)
    if small.any():
        q = np.where(m[small] > 0, stats.ncx2.ppf(1 - alpha, 1, np.maximum(m[small], 1e-300)), 0.0)
        q = np.where(m[small] > 0, q, stats.chi2.ppf(1 - alpha, 1))
        out[small] = np.sqrt(q)
    return _arr(out)


def _check(m2: Floats, kappa: Floats, alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"cva: alpha must be in (0, 1), got {alpha}")
    if not np.all(kappa >= 1):
        bad = kappa[~(kappa >= 1)][0]
        raise ValueError(f"cva: kappa must be >= 1 (a kurtosis), got {bad}")
    if not np.all(np.isfinite(m2)) or np.any(m2 < 0):
        raise ValueError("cva: m2 must be finite and non-negative")


def cva(m2: npt.ArrayLike, kappa: npt.ArrayLike = np.inf, alpha: float = 0.05) -> Floats:
    """Robust EBCI critical value ``cva_α(m2, κ)`` for every element of ``m2``.

    Equals ``ebci::cva(m2, kappa, alpha)$cv`` to about 1e-9 relative, shortcuts
    included (see the module docstring; ``tests/data/ebci_cva_grid.csv`` holds
    780 of R's values): e.g. ``cva(0, κ, 0.05) = 1.959964``,
    ``cva(25, 3, 0.05) = 11.88358``, ``cva(1, 3, 0.2) = 1.849468``. ``kappa``
    is one kurtosis or one per element of ``m2``, so that the intervals of many
    EB problems are found in one root search (its cost is mostly per call).
    Returns an array shaped like ``m2``.
    """
    shape = np.shape(m2)
    try:
        fits = np.broadcast_shapes(shape, np.shape(kappa)) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"cva: kappa of shape {np.shape(kappa)} does not fit m2 of shape {shape}")
    m_all, k_all = (np.atleast_1d(x).ravel() for x in np.broadcast_arrays(_arr(m2), _arr(kappa)))
    _check(m_all, k_all, alpha)
    pairs, inverse = np.unique(np.stack([m_all, k_all], axis=1), axis=0, return_inverse=True)
    m, k = pairs[:, 0].copy(), pairs[:, 1].copy()
    out = np.empty_like(m)
    zero = m == 0
    out[zero] = stats.norm.ppf(1 - alpha / 2)
    point = ~zero & (k == 1)
    out[point] = cvb(m[point], alpha)
    pos = ~zero & ~point
    if not pos.any():
        return out[inverse.ravel()].reshape(shape)
    mp, kp = m[pos], k[pos]
    lo = np.maximum(cvb(mp, alpha) - 0.01, 1e-8)
    cheb = np.sqrt((1 + mp) / alpha)  # Chebyshev: ρ ≤ (1 + m2)/χ²

    def f_inf(chi: Floats, mm: Floats) -> Floats:
        return rho0(mm, chi) - alpha

    # ρ(m2, ∞, cheb) ≤ α always; like ebci, stop at the bound once it is within CHEBYSHEV_TOL of α
    solve = ~(np.abs(f_inf(cheb, mp)) < CHEBYSHEV_TOL)
    hi = cheb.copy()
    if solve.any():
        hi[solve] = elementwise.find_root(f_inf, (lo[solve], cheb[solve]), args=(mp[solve],)).x
    cv = hi.copy()
    fin = np.isfinite(kp)
    bind = np.zeros_like(fin)
    if fin.any():
        tt = t0(hi[fin])
        bind[fin] = (mp[fin] < tt) & (kp[fin] * mp[fin] < tt) & (mp[fin] <= LARGE_M2)
    if bind.any():

        def f_k(chi: Floats, mm: Floats, kk: Floats) -> Floats:
            return rho(mm, kk, chi) - alpha

        mb, kb, lb, hb = mp[bind], kp[bind], lo[bind], hi[bind]
        # like ebci, keep the κ = ∞ value unless the bound lowers ρ there by more than KAPPA_TOL
        below = f_k(hb, mb, kb) < -KAPPA_TOL
        roots = hb.copy()
        if below.any():
            roots[below] = elementwise.find_root(f_k, (lb[below], hb[below]), args=(mb[below], kb[below])).x
        cv[bind] = roots
    out[pos] = cv
    return out[inverse.ravel()].reshape(shape)


# ------------------------------------------------------------------- moments


FsCorrection = Literal["PMT", "none"]


@dataclass(frozen=True)
class Moments:
    """Second moment and kurtosis of ``θ − f(X)``, corrected and raw."""

    mu2: float
    kappa: float
    mu2_raw: float
    kappa_raw: float


def ebci_moments(
    resid: npt.ArrayLike,
    se2: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    fs_correction: FsCorrection = "PMT",
) -> Moments:
    """Moment estimates of ``θ_g − f(X_g)`` from residuals ``Z_g − f(X_g)`` and variances ``σ²_g``.

    ``μ̃₂ = Σω(ε² − σ²)/Σω`` and ``μ̃₄ = Σω(ε⁴ − 6σ²ε² + 3σ⁴)/Σω`` are unbiased;
    PMT truncates them below at ``2Σω²σ⁴/(Σω·Σωσ²)`` and
    ``κ ≥ 1 + 32Σω²σ⁸/(Σω·Σωσ⁴·μ₂²)`` so that the data are never shrunk all the
    way to the regression, exactly as ``ebci::ebci`` does.
    """
    e = _arr(resid)
    s2 = _arr(se2)
    w = np.ones_like(e) if weights is None else _arr(weights)
    if not (e.shape == s2.shape == w.shape) or e.ndim != 1 or len(e) == 0:
        raise ValueError("ebci_moments: resid, se2 and weights must be equal-length non-empty vectors")
    sw = w.sum()
    w2 = e**2 - s2
    w4 = e**4 - 6 * s2 * e**2 + 3 * s2**2
    mu2_raw = float((w * w2).sum() / sw)
    mu4_raw = float((w * w4).sum() / sw)
    if fs_correction == "PMT":
        trim2 = 2 * np.mean(w**2 * s2**2) / (sw * np.mean(w * s2)) if np.any(s2 > 0) else 0.0
        trim4 = 32 * np.mean(w**2 * s2**4) / (sw * np.mean(w * s2**2)) if np.any(s2 > 0) else 0.0
        mu2 = max(mu2_raw, float(trim2))
        kappa = max(mu4_raw / mu2**2, 1 + float(trim4) / mu2**2) if mu2 > 0 else np.inf
    elif fs_correction == "none":
        mu2 = max(mu2_raw, 0.0)
        kappa = max(mu4_raw / mu2**2, 1.0) if mu2 > 0 else np.inf
    else:
        raise ValueError(f"ebci_moments: unknown fs_correction {fs_correction!r} (use 'PMT' or 'none')")
    kappa_raw = mu4_raw / mu2_raw**2 if mu2_raw != 0 else np.nan
    return Moments(mu2=mu2, kappa=float(kappa), mu2_raw=mu2_raw, kappa_raw=float(kappa_raw))


@dataclass(frozen=True)
class RobustEBCI:
    """Robust EBCIs for every unit: ``estimate ± half_length``."""

    estimate: Floats
    half_length: Floats
    shrinkage: Floats
    moments: Moments

    @property
    def lower(self) -> Floats:
        """Lower interval ends."""
        return self.estimate - self.half_length

    @property
    def upper(self) -> Floats:
        """Upper interval ends."""
        return self.estimate + self.half_length


def robust_ebci(
    z: npt.ArrayLike,
    prior_mean: npt.ArrayLike,
    se2: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    weights: npt.ArrayLike | None = None,
    kappa: float | None = None,
    fs_correction: FsCorrection = "PMT",
) -> RobustEBCI:
    """Robust EB confidence intervals shrinking ``z`` towards ``prior_mean`` (``ebci::ebci``'s ``th_eb ± len_eb``).

    ``kappa`` given fixes the kurtosis instead of estimating it (``np.inf``:
    second moment only). Where ``μ̂₂ = 0`` (every ``σ_g = 0`` and no spread),
    nothing can be said robustly and the half-lengths are NaN.
    """
    problem = EBProblem(z, prior_mean, se2, weights=weights, kappa=kappa)
    return robust_ebcis([problem], alpha=alpha, fs_correction=fs_correction)[0]


@dataclass(frozen=True)
class EBProblem:
    """One EB problem's inputs to :func:`robust_ebcis` (see :func:`robust_ebci` for each)."""

    z: npt.ArrayLike
    prior_mean: npt.ArrayLike
    se2: npt.ArrayLike
    weights: npt.ArrayLike | None = None
    kappa: float | None = None


def robust_ebcis(
    problems: Sequence[EBProblem], *, alpha: float = 0.05, fs_correction: FsCorrection = "PMT"
) -> list[RobustEBCI]:
    """:func:`robust_ebci` of each problem, their critical values found in one :func:`cva` call.

    Each problem keeps its own moments and kurtosis; only the root search is
    shared, whose cost is mostly per call (a repetition of the subgroups
    evaluation has dozens of small problems).
    """
    setups = []
    for p in problems:
        zz, f, s2 = _arr(p.z), _arr(p.prior_mean), _arr(p.se2)
        if not (zz.shape == f.shape == s2.shape):
            raise ValueError("robust_ebci: z, prior_mean and se2 must have the same shape")
        if np.any(s2 < 0) or not np.all(np.isfinite(s2)):
            raise ValueError("robust_ebci: se2 must be finite and non-negative")
        mom = ebci_moments(zz - f, s2, p.weights, fs_correction)
        if p.kappa is not None and mom.mu2 > 0:
            mom = Moments(mu2=mom.mu2, kappa=p.kappa, mu2_raw=mom.mu2_raw, kappa_raw=mom.kappa_raw)
        setups.append((zz, f, s2, mom))
    solved = [(s2 / mom.mu2, mom.kappa) for _, _, s2, mom in setups if mom.mu2 > 0]
    critical: Iterator[Floats] = iter([])
    if solved:
        m2 = np.concatenate([m.ravel() for m, _ in solved])
        kappa = np.concatenate([np.full(m.size, k) for m, k in solved])
        critical = iter(np.split(cva(m2, kappa, alpha), np.cumsum([m.size for m, _ in solved])[:-1]))
    out = []
    for zz, f, s2, mom in setups:
        if mom.mu2 <= 0:
            nan = np.full_like(zz, np.nan)
            out.append(RobustEBCI(estimate=f.copy(), half_length=nan, shrinkage=np.zeros_like(zz), moments=mom))
            continue
        w = mom.mu2 / (mom.mu2 + s2)
        half = next(critical).reshape(s2.shape) * w * np.sqrt(s2)
        out.append(RobustEBCI(estimate=f + w * (zz - f), half_length=half, shrinkage=w, moments=mom))
    return out
