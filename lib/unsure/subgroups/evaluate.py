"""The evaluation protocol: many small draws from a benchmark whose full results are the truth.

For a prepared source (:class:`unsure.subgroups.features.Prepared`) the truth
of a unit is its metric on all of the subgroup's rows. Each repetition draws
evaluation instances (the same instances for every model of a dataset) and
estimates every unit with every method:

* ``proportional``: rows drawn in proportion to subgroup size, the fraction
  set per dataset so that its smallest subgroup with at least
  ``floor_subgroup_rows`` rows gets ``min_eval_rows`` (each subgroup gets at
  least 2 and at most all of its rows); all metrics.
* ``equal-<n>``: ``n`` rows per subgroup, subgroups with fewer than ``4n``
  rows dropped; accuracy.

SR, EB and the Lasso are fitted per dataset (the paper analyses each dataset
separately, benchmarking all its models at once); under the proportional
design SR and EB are also fitted per dataset and model (``EB-separate``,
``SR-separate``: the paper's "LLMs benchmarked separately").

SR cross-fitting folds split the (dataset, subgroup) pairs, so that the same
subgroup under another model (whose rows are the same instances, hence whose
noise is correlated) never trains the prediction for it. Leave-one-covariate-
out importance refits SR without each covariate group (proportional design,
accuracy, the full fit's depth and trees).

Repetition ``r`` draws from ``numpy.random.default_rng([seed, r])`` and runs
its xgboost fits single-threaded, so results are identical for any number of
joblib workers.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from unsure.config import Protocol
from unsure.subgroups.estimators import (
    PROTOCOL_VARIANCE,
    STUDY_DEFAULTS,
    BinaryVariance,
    FittedProblem,
    ProblemResult,
    SRSettings,
    crossfit_sr,
    fit_problem,
    with_intervals,
)
from unsure.subgroups.features import COVARIATES, KEYS, Prepared, design_matrix
from unsure.subgroups.schema import is_binary

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
LOG = logging.getLogger("unsure.subgroups")


@dataclass(frozen=True)
class EvaluationSettings:
    """Everything the protocol draws and fits by; ``seed`` makes a run reproducible."""

    repetitions: int = STUDY_DEFAULTS.repetitions
    equal_sizes: tuple[int, ...] = STUDY_DEFAULTS.equal_sizes
    alpha: float = STUDY_DEFAULTS.alpha
    min_eval_rows: int = STUDY_DEFAULTS.min_eval_rows
    floor_subgroup_rows: int = STUDY_DEFAULTS.floor_subgroup_rows
    folds: int = STUDY_DEFAULTS.folds
    sr: SRSettings = field(default_factory=SRSettings)
    lasso_lambdas: int = STUDY_DEFAULTS.lasso_lambdas
    protocol: Protocol = STUDY_DEFAULTS.protocol
    """``paper``: plug-in σ̂² of a 0/1 mean, as the paper; ``corrected``: Laplace-smoothed (never zero)."""
    seed: int = STUDY_DEFAULTS.seed

    @property
    def binary_variance(self) -> BinaryVariance:
        return PROTOCOL_VARIANCE[self.protocol]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> EvaluationSettings:
        """Build from the config's ``studies.subgroups`` keys (``sr_*`` fill the SR settings)."""
        p = dict(params)
        sr = SRSettings(
            trees=tuple(p.pop("sr_trees", STUDY_DEFAULTS.sr_trees)),
            depths=tuple(p.pop("sr_depths", STUDY_DEFAULTS.sr_depths)),
            learning_rate=float(p.pop("sr_learning_rate", STUDY_DEFAULTS.sr_learning_rate)),
            cv_folds=int(p.get("folds", STUDY_DEFAULTS.folds)),
        )
        if "equal_sizes" in p:
            p["equal_sizes"] = tuple(p["equal_sizes"])
        known = {f.name for f in fields(cls)} - {"sr"}
        unknown = set(p) - known
        if unknown:
            raise ValueError(f"unknown protocol parameter(s): {', '.join(sorted(unknown))}")
        return cls(sr=sr, **p)

    @property
    def designs(self) -> list[str]:
        """Design names in the order they are drawn within a repetition."""
        return ["proportional", *(f"equal-{n}" for n in self.equal_sizes)]


@dataclass(frozen=True)
class _Dataset:
    name: str
    group: Ints  # subgroup code per instance
    group_rows: Ints  # instances per subgroup
    values: dict[str, Floats]  # metric -> (models, instances)
    unit: Ints  # (models, subgroups) -> unit id


class Pool:
    """A prepared source laid out for fast repeated sampling."""

    def __init__(self, prepared: Prepared) -> None:
        self.units = prepared.units.sort_values(KEYS).reset_index(drop=True)
        self.metrics = prepared.metrics
        uid = {k: i for i, k in enumerate(zip(*(self.units[c] for c in ("dataset", "model", "subgroup")), strict=True))}
        self.datasets: list[_Dataset] = []
        rows = prepared.rows.sort_values(["dataset", "subgroup", "row_id", "model"], kind="stable")
        for name, part in rows.groupby("dataset", sort=True):
            models = sorted(part["model"].unique())
            n_models = len(models)
            ids = part["row_id"].to_numpy()
            mods = part["model"].to_numpy()
            if len(part) % n_models or not (
                (ids.reshape(-1, n_models) == ids[::n_models, None]).all()
                and (mods.reshape(-1, n_models) == np.asarray(models)[None, :]).all()
            ):
                raise ValueError(f"dataset {name!r}: models do not share the same instances (prepare checks this)")
            inst = part.iloc[::n_models]
            groups = sorted(inst["subgroup"].unique())
            code = pd.Categorical(inst["subgroup"], categories=groups).codes.astype(np.int64)
            values = {m: part[m].to_numpy(np.float64).reshape(-1, n_models).T.copy() for m in self.metrics}
            unit = np.array([[uid[(name, mo, g)] for g in groups] for mo in models], dtype=np.int64)
            self.datasets.append(
                _Dataset(str(name), code, np.bincount(code, minlength=len(groups)).astype(np.int64), values, unit)
            )
        X, self.covariate_of = design_matrix(self.units)
        self.X = X
        pair = self.units["dataset"].astype(str) + "\x1f" + self.units["subgroup"].astype(str)
        self.pair: Ints = np.unique(pair.to_numpy(), return_inverse=True)[1].astype(np.int64)

    def sizes(self, design: str, settings: EvaluationSettings) -> list[Ints]:
        """Rows to draw per subgroup of each dataset (0: subgroup left out)."""
        out = []
        for ds in self.datasets:
            size = ds.group_rows
            if design == "proportional":
                eligible = size[size >= settings.floor_subgroup_rows]
                anchor = eligible.min() if len(eligible) else size.max()
                frac = settings.min_eval_rows / anchor
                n = np.minimum(size, np.maximum(2, np.ceil(frac * size - 1e-9).astype(np.int64)))
            else:
                k = int(design.removeprefix("equal-"))
                n = np.where(size >= 4 * k, k, 0)
            out.append(n.astype(np.int64))
        return out


@dataclass(frozen=True)
class _Draw:
    unit: Ints
    values: dict[str, Floats]


def _draw(pool: Pool, sizes: list[Ints], rng: np.random.Generator) -> _Draw:
    units: list[Ints] = []
    vals: dict[str, list[Floats]] = {m: [] for m in pool.metrics}
    for ds, n in zip(pool.datasets, sizes, strict=True):
        order = np.lexsort((rng.random(len(ds.group)), ds.group))
        start = np.concatenate([[0], np.cumsum(ds.group_rows)[:-1]])
        rank = np.arange(len(order)) - start[ds.group[order]]
        chosen = order[rank < n[ds.group[order]]]
        for mo in range(ds.unit.shape[0]):
            units.append(ds.unit[mo, ds.group[chosen]])
            for m in pool.metrics:
                vals[m].append(ds.values[m][mo, chosen])
    return _Draw(np.concatenate(units), {m: np.concatenate(v) for m, v in vals.items()})


def _folds(pool: Pool, units: Ints, k: int, rng: np.random.Generator) -> Ints:
    """Fold per unit: (dataset, subgroup) pairs assigned to ``k`` folds at random, balanced."""
    uniq, inv = np.unique(pool.pair[units], return_inverse=True)
    fold_of = rng.permutation(len(uniq)) % k
    return np.asarray(fold_of[inv], dtype=np.int64)


SEPARATE = {"EB": "EB-separate", "SR": "SR-separate"}
"""Methods of the "LLMs benchmarked separately" analysis: SR and EB fitted on one model's units of a dataset."""


def _fit(
    pool: Pool, draw: _Draw, present: Ints, folds: Ints, metric: str, settings: EvaluationSettings, seed: int
) -> FittedProblem:
    """Every estimator on the units ``present`` (their rows of ``draw``), cross-fitted over ``folds``
    (the EB intervals come later, those of a whole repetition at once: :func:`with_intervals`)."""
    remap = np.full(len(pool.units), -1, dtype=np.int64)
    remap[present] = np.arange(len(present))
    mask = remap[draw.unit] >= 0
    return fit_problem(
        pool.X[present],
        draw.values[metric][mask],
        remap[draw.unit[mask]],
        len(present),
        folds,
        binary=is_binary(metric),
        alpha=settings.alpha,
        sr=settings.sr,
        lasso_lambdas=settings.lasso_lambdas,
        seed=seed,
        variance=settings.binary_variance,
    )


def _frame(
    rep: int, design: str, metric: str, present: Ints, truth: Floats, res: ProblemResult, names: Mapping[str, str]
) -> list[pd.DataFrame]:
    """One estimates frame per method of ``res`` named in ``names`` (method -> name it is filed under)."""
    return [
        pd.DataFrame(
            {
                "rep": rep,
                "design": design,
                "metric": metric,
                "unit": present,
                "n": res.stats.n,
                "truth": truth,
                "method": name,
                "estimate": res.estimates[method],
                "lo": res.lower[method],
                "hi": res.upper[method],
            }
        )
        for method, name in names.items()
    ]


@dataclass(frozen=True)
class _Fitted:
    """A problem of a repetition, fitted, waiting for its intervals; ``names``: the methods filed
    (``None``: all under their own names, and the problem gets a diagnostics row)."""

    design: str
    metric: str
    dataset: str
    present: Ints
    truth: Floats
    fitted: FittedProblem
    names: Mapping[str, str] | None


def run_repetition(
    pool: Pool, settings: EvaluationSettings, rep: int, *, skipped: list[tuple[str, str]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One repetition: (estimates, problem diagnostics, LOCO importance) frames.

    SR, EB and the Lasso are fitted per dataset, as the paper analyses each
    dataset separately (all its models at once). Under the proportional
    design, accuracy is also estimated with SR and EB fitted per dataset and
    model (``EB-separate``, ``SR-separate``: the paper's "LLMs benchmarked
    separately").

    A dataset with fewer subgroups drawn than folds is skipped: logged, or, given
    ``skipped``, appended there as (design, dataset) for :func:`evaluate` to count
    over the repetitions (one line per job, not one per repetition).
    """
    rng = np.random.default_rng([settings.seed, rep])
    estimates: list[pd.DataFrame] = []
    problems: list[dict[str, object]] = []
    importance: list[pd.DataFrame] = []
    fits: list[_Fitted] = []
    dataset_of = pool.units["dataset"].astype(str).to_numpy()
    model_of = pool.units["model"].astype(str).to_numpy()
    for design in settings.designs:
        draw = _draw(pool, pool.sizes(design, settings), rng)
        drawn = np.unique(draw.unit)
        seed = int(rng.integers(2**31 - 1))
        metrics = pool.metrics if design == "proportional" else [m for m in pool.metrics if is_binary(m)]
        for dataset in sorted(set(dataset_of[drawn])):
            present = drawn[dataset_of[drawn] == dataset]
            folds = _folds(pool, present, settings.folds, rng)
            if len(np.unique(folds)) < settings.folds:
                if skipped is None:
                    LOG.warning("rep %d, %s, dataset %r: fewer subgroups than folds, skipped", rep, design, dataset)
                else:
                    skipped.append((design, dataset))
                continue
            for metric in metrics:
                fitted = _fit(pool, draw, present, folds, metric, settings, seed)
                truth = pool.units[f"truth_{metric}"].to_numpy()[present]
                fits.append(_Fitted(design, metric, dataset, present, truth, fitted, None))
                if design != "proportional" or not is_binary(metric):
                    continue
                fixed = {k: (f.depth, f.trees) for k, f in fitted.sr_fits.items() if f.booster is not None}
                importance.append(_loco(pool, present, fitted.stats.z, truth, folds, settings, seed, fixed, rep))
                for model in sorted(set(model_of[present])):
                    mine = model_of[present] == model
                    if len(np.unique(folds[mine])) < settings.folds:
                        continue
                    alone = _fit(pool, draw, present[mine], folds[mine], metric, settings, seed)
                    fits.append(_Fitted(design, metric, dataset, present[mine], truth[mine], alone, SEPARATE))
    for fit, res in zip(fits, with_intervals([f.fitted for f in fits], alpha=settings.alpha), strict=True):
        names = {m: m for m in res.estimates} if fit.names is None else fit.names
        estimates += _frame(rep, fit.design, fit.metric, fit.present, fit.truth, res, names)
        if fit.names is not None:
            continue
        mom = res.ebci.moments
        problems.append(
            {
                "rep": rep,
                "design": fit.design,
                "metric": fit.metric,
                "dataset": fit.dataset,
                "units": len(fit.present),
                "a_hat": res.a_hat,
                "mu2": mom.mu2,
                "kappa": mom.kappa,
                "mu2_raw": mom.mu2_raw,
                "lasso_lambda": res.lasso_lambda,
                "sr_depth": ",".join(str(f.depth) for f in res.sr_fits.values()),
                "sr_trees": ",".join(str(f.trees) for f in res.sr_fits.values()),
            }
        )
    return (
        pd.concat(estimates, ignore_index=True) if estimates else pd.DataFrame(),
        pd.DataFrame(problems),
        pd.concat(importance, ignore_index=True) if importance else pd.DataFrame(),
    )


def _loco(
    pool: Pool,
    present: Ints,
    z: Floats,
    truth: Floats,
    folds: Ints,
    settings: EvaluationSettings,
    seed: int,
    fixed: dict[int, tuple[int, int]],
    rep: int,
) -> pd.DataFrame:
    """SR squared error per unit with all covariates and with each group left out."""
    groups = np.asarray(pool.covariate_of)
    X = pool.X[present]
    out = []
    for left_out in ("none", *COVARIATES):
        keep = groups != left_out
        pred, _ = crossfit_sr(X[:, keep], z, folds, settings.sr, seed=seed, fixed=fixed)
        out.append(pd.DataFrame({"rep": rep, "unit": present, "left_out": left_out, "sq_error": (pred - truth) ** 2}))
    return pd.concat(out, ignore_index=True)


def _chunks(n: int, parts: int) -> Iterator[range]:
    size = math.ceil(n / parts)
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def _run_chunk(
    pool: Pool, settings: EvaluationSettings, reps: range
) -> tuple[list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]], list[tuple[str, str]]]:
    """The repetitions ``reps``, and the (design, dataset) each skipped (a worker's log is not the job's)."""
    skipped: list[tuple[str, str]] = []
    with threadpool_limits(limits=1):
        return [run_repetition(pool, settings, r, skipped=skipped) for r in reps], skipped


def _label(pool: Pool, frame: pd.DataFrame) -> pd.DataFrame:
    """Replace unit ids by their dataset, task, model, subgroup and size."""
    if frame.empty:
        return frame
    meta = pool.units[[*KEYS, "rows"]].iloc[frame["unit"].to_numpy()].reset_index(drop=True)
    for col in KEYS:
        meta[col] = meta[col].astype("category")
    return pd.concat([frame.drop(columns="unit").reset_index(drop=True), meta], axis=1)


def _warn_empty(pool: Pool, settings: EvaluationSettings) -> None:
    """Name, once per run, the subgroups a design draws no rows from: they get no estimate (NA in the tables)."""
    for design in settings.designs:
        need = "" if design == "proportional" else f" (fewer than {4 * int(design.removeprefix('equal-'))} rows)"
        for ds, n in zip(pool.datasets, pool.sizes(design, settings), strict=True):
            empty = np.flatnonzero(n == 0)
            if len(empty):
                names = pool.units["subgroup"].to_numpy()[ds.unit[0, empty]]
                shown = ", ".join(map(repr, names[:5])) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                LOG.warning(
                    "design %s, dataset %r: %d of %d subgroups are empty in every draw%s and get no estimate (NA): %s",
                    design,
                    ds.name,
                    len(empty),
                    len(n),
                    need,
                    shown,
                )


def evaluate(
    prepared: Prepared, settings: EvaluationSettings, *, n_jobs: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Run every repetition (in parallel over ``n_jobs`` workers): estimates, problems, importance."""
    pool = Pool(prepared)
    _warn_empty(pool, settings)
    chunks = list(_chunks(settings.repetitions, max(1, n_jobs) * 4))
    results: list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]] = []
    skipped: Counter[tuple[str, str]] = Counter()
    parallel = Parallel(n_jobs=n_jobs, return_as="generator")
    for i, (part, skips) in enumerate(parallel(delayed(_run_chunk)(pool, settings, c) for c in chunks)):
        results += part
        skipped.update(skips)
        LOG.info("repetitions: %d of %d chunks done", i + 1, len(chunks))
    for (design, dataset), n in skipped.items():
        LOG.warning(
            "design %s, dataset %r: fewer subgroups than folds (%d) in %d of %d repetitions, skipped there",
            design,
            dataset,
            settings.folds,
            n,
            settings.repetitions,
        )
    est, prob, imp = (pd.concat([r[i] for r in results], ignore_index=True) for i in range(3))
    for col in ("design", "metric", "method"):
        if col in est:
            est[col] = est[col].astype("category")
    return _label(pool, est), prob, _label(pool, imp)
