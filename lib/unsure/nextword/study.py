"""The study's tables, from distributions to the paper's numbered tables (plain data frames).

* :func:`prepare`: positions, human counts, corpus targets and oracle splits
  from the norms file.
* :func:`evaluate_systems`: every headline metric of every system (model
  samples, pre-collected files, the biased estimator), the human MLE and the
  oracle, plus per-position TVDs for the figures.
* :func:`table1` … :func:`table4`: the paper's tables; :func:`paper_table1`:
  Table 1 as the authors' code computes it (``protocol: paper``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from unsure.nextword import paper
from unsure.nextword._tables import KEY
from unsure.nextword.data import corpus_targets, read_norms
from unsure.nextword.distributions import human_counts, oracle_splits, restrict, split_half
from unsure.nextword.metrics import RESULT_COLUMNS, evaluate, evaluate_oracle, tvd
from unsure.nextword.paper import PaperColumn

HUMAN = "human"
ORACLE = "oracle"
METRIC_LABELS: dict[str, str] = {
    "ece_corpus_word": "ECE (corpus word)",
    "ece_human_majority": "ECE (human majority)",
    "ece_oracle_majority": "ECE (oracle majority)",
    "expected_tvd_human": "expected TVD (all responses)",
    "expected_tvd_target": "expected TVD (target half)",
    "n_positions": "positions",
}
"""Row labels of the paper-style tables, in order."""


def prepare(
    norms: str | os.PathLike[str], *, passages: Sequence[int] = (), splits: int = 20, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Positions (``text_id, word_num, context, corpus_word, n_responses``), human counts, corpus targets, splits.

    Only ``passages`` (all when empty); the oracle splits use seeds
    ``seed … seed + splits − 1``.
    """
    positions = read_norms(norms)
    if passages:
        missing = sorted(set(passages) - set(positions["text_id"]))
        if missing:
            raise ValueError(f"studies.nextword.passages: passage(s) {missing} are not in {norms}")
        positions = positions[positions["text_id"].isin(list(passages))].reset_index(drop=True)
    human = human_counts(positions)
    return {
        "positions": positions.drop(columns="responses"),
        "human": human,
        "corpus": corpus_targets(positions),
        "splits": oracle_splits(human, range(seed, seed + splits)),
    }


def evaluate_systems(
    systems: Mapping[str, pd.DataFrame],
    human: pd.DataFrame,
    corpus: pd.DataFrame,
    splits: pd.DataFrame,
    *,
    n_bins: int = 10,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metrics rows (one per system and split; :data:`RESULT_COLUMNS`) and per-position TVDs.

    Systems are counts or probability tables. The human MLE (``human``) and
    the oracle (``oracle``) get rows too. The per-position frame has
    ``system, text_id, word_num, tvd_human, tvd_target`` (target: the target
    half of the first split); the oracle's ``tvd_target`` is its distance to
    that same half.
    """
    seed = int(splits["seed"].min())
    target = split_half(splits, seed, "target")
    rows = [evaluate_oracle(human, corpus, splits, n_bins=n_bins, name=ORACLE)]
    rows.append(evaluate(human, human, corpus, splits, name=HUMAN, n_bins=n_bins))
    per_position = []
    oracle = split_half(splits, seed, "oracle")
    per_position.append(
        pd.DataFrame(
            {
                "tvd_human": tvd(human, oracle, missing="drop"),
                "tvd_target": tvd(target, oracle, missing="drop"),
            }
        )
        .reset_index()
        .assign(system=ORACLE)
    )
    for name, table in systems.items():
        rows.append(evaluate(table, human, corpus, splits, name=name, n_bins=n_bins))
        per_position.append(
            pd.DataFrame(
                {
                    "tvd_human": tvd(human, table, missing="drop"),
                    "tvd_target": tvd(target, table, missing="drop"),
                }
            )
            .reset_index()
            .assign(system=name)
        )
    tvds = pd.concat(per_position, ignore_index=True)[["system", *KEY, "tvd_human", "tvd_target"]]
    return pd.concat(rows, ignore_index=True)[list(RESULT_COLUMNS)], tvds


def _wide(metrics: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Metrics averaged over splits, one column per system, rows labelled by :data:`METRIC_LABELS`."""
    mean = metrics.groupby("estimator", sort=False)[list(METRIC_LABELS)].mean()
    wide = mean.reindex(list(order)).T
    wide.index = [METRIC_LABELS[m] for m in wide.index]
    wide.columns.name = None
    return wide.rename_axis("metric").reset_index()


def table1(metrics: pd.DataFrame, systems: Sequence[str]) -> pd.DataFrame:
    """Table 1: ECE against the three targets and expected TVD, one column per system, then human and oracle."""
    return _wide(metrics, [*systems, HUMAN, ORACLE])


def paper_table1(columns: Sequence[PaperColumn], systems: Sequence[str]) -> pd.DataFrame:
    """Table 1 under ``protocol: paper``: the authors' calculations (:mod:`unsure.nextword.paper`), same layout.

    Rows as :func:`table1`. The paper's expected-TVD row is the system against
    all responses, and for the oracle the oracle against its 20-response
    target: that value is in the target row, the oracle's all-responses cell
    and the human's cells are empty (the authors compute none), and so is
    each model's target cell.
    """
    by_name = {c.system: c for c in columns}
    order = [*systems, HUMAN, ORACLE]
    missing = [name for name in order if name not in by_name]
    if missing:
        raise ValueError(f"paper_table1: no paper column for system(s) {missing}")
    nan = float("nan")
    data = {}
    for name in order:
        c = by_name[name]
        data[name] = {
            "ece_corpus_word": c.ece_corpus_word,
            "ece_human_majority": c.ece_human_majority,
            "ece_oracle_majority": c.ece_oracle_majority,
            "expected_tvd_human": nan if name in (HUMAN, ORACLE) else c.expected_tvd_human,
            "expected_tvd_target": c.expected_tvd_human if name == ORACLE else nan,
            "n_positions": float(c.n_positions),
        }
    wide = pd.DataFrame(data).reindex(list(METRIC_LABELS))
    wide.index = [METRIC_LABELS[m] for m in wide.index]
    return wide.rename_axis("metric").reset_index()


def protocol_tables(
    norms: str | os.PathLike[str],
    sample_files: Mapping[str, str | os.PathLike[str]],
    metrics: pd.DataFrame,
    *,
    protocol: str,
    passages: Sequence[int] = (),
    n_bins: int = 10,
    printed: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 under ``protocol`` and the reproduction ledger (:func:`unsure.nextword.paper.reproduction_table`).

    ``sample_files`` maps each system (Table 1's order) to its samples file;
    ``metrics`` are :func:`evaluate_systems`' rows (the ``corrected`` values).
    The ``paper`` values are computed from the norms (cut to ``passages``) and
    each file's raw samples in file order. ``protocol`` picks which Table 1
    shows: ``paper`` (:func:`paper_table1`) or ``corrected`` (:func:`table1`).
    ``printed=False`` (generated norms) leaves the ledger's printed values empty.
    """
    if protocol not in ("paper", "corrected"):
        raise ValueError(f"studies.nextword.protocol: expected 'paper' or 'corrected', got {protocol!r}")
    positions = read_norms(norms)
    if passages:
        positions = positions[positions["text_id"].isin(list(passages))].reset_index(drop=True)
    raw = {name: paper.read_raw_samples(path) for name, path in sample_files.items()}
    columns = paper.paper_columns(positions, raw, n_bins=n_bins)
    ledger = paper.reproduction_table(columns, paper.corrected_values(metrics), paper.PAPER_NAMES, printed=printed)
    systems = list(sample_files)
    shown = paper_table1(columns, systems) if protocol == "paper" else table1(metrics, systems)
    return shown, ledger


def table2(
    unbiased: pd.DataFrame,
    biased: pd.DataFrame,
    human: pd.DataFrame,
    corpus: pd.DataFrame,
    splits: pd.DataFrame,
    *,
    model: str,
    n_bins: int = 10,
) -> pd.DataFrame:
    """Table 2: the biased estimator next to unbiased sampling and the oracle, on the positions both cover."""
    covered = pd.MultiIndex.from_frame(biased[KEY].drop_duplicates())
    unbiased_here = restrict(unbiased, covered)
    here = {"human": restrict(human, covered), "corpus": restrict(corpus, covered), "splits": restrict(splits, covered)}
    rows = pd.concat(
        [
            evaluate(
                unbiased_here, here["human"], here["corpus"], here["splits"], name=f"{model} (unbiased)", n_bins=n_bins
            ),
            evaluate(biased, here["human"], here["corpus"], here["splits"], name=f"{model} (biased)", n_bins=n_bins),
            evaluate_oracle(here["human"], here["corpus"], here["splits"], n_bins=n_bins, name=ORACLE),
        ],
        ignore_index=True,
    )
    return _wide(rows, [f"{model} (unbiased)", f"{model} (biased)", ORACLE])


def table3(coefficients: pd.DataFrame) -> pd.DataFrame:
    """Table 3: ARD coefficients with credible intervals (model-vs-oracle TVD on the predictors)."""
    return coefficients[["feature", "coef", "sd", "lower", "upper", "pruned"]].reset_index(drop=True)


def table4(token_tvds: pd.DataFrame) -> pd.DataFrame:
    """Table 4: expected token-level TVD of each model and of the oracle at its tokenisation."""
    out = token_tvds.groupby("model", sort=False).agg(
        positions=("tvd_model", "size"),
        expected_tvd_model=("tvd_model", "mean"),
        expected_tvd_oracle=("tvd_oracle", "mean"),
        mass_on_human_tokens=("mass", "mean"),
    )
    return out.reset_index()


def pick_example_positions(human: pd.DataFrame, n: int = 2) -> list[tuple[int, int]]:
    """Positions for figure 1: the one with the most concentrated human answers and the one with the most spread.

    Both are chosen among positions with at least 5 distinct responses, so
    there is something to show; ties go to the first position.
    """
    from unsure.nextword.distributions import entropy

    h = entropy(human)
    distinct = human.groupby(KEY).size()
    h = h[distinct.reindex(h.index) >= 5] if (distinct >= 5).any() else h
    picks = [h.idxmin(), h.idxmax()][:n]
    return [(int(t), int(w)) for t, w in picks]


def top_words_frame(tables: Mapping[str, pd.DataFrame], position: tuple[int, int], k: int = 15) -> pd.DataFrame:
    """The ``k`` most probable words at one position of each table: ``system, word, prob`` (for figure 1)."""
    from unsure.nextword.distributions import to_probs

    frames = []
    for name, table in tables.items():
        probs = to_probs(table)
        here = probs[(probs["text_id"] == position[0]) & (probs["word_num"] == position[1])]
        top = here.sort_values(["prob", "word"], ascending=[False, True]).head(k)
        frames.append(top[["word", "prob"]].assign(system=name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["word", "prob", "system"])


def fold_tvds(
    tables: Mapping[str, pd.DataFrame], human: pd.DataFrame, splits: pd.DataFrame, *, fold: int
) -> pd.DataFrame:
    """Per-position TVD to the target half (first split) of each table and of the oracle, on one fold's positions."""
    seed = int(splits["seed"].min())
    frames = []
    for name, table in tables.items():
        covered = pd.MultiIndex.from_frame(table[KEY].drop_duplicates())
        target = restrict(split_half(splits, seed, "target"), covered)
        oracle = restrict(split_half(splits, seed, "oracle"), covered)
        frames.append(tvd(target, table).rename("tvd").reset_index().assign(system=name, fold=fold))
        if name == next(iter(tables)):
            frames.append(tvd(target, oracle).rename("tvd").reset_index().assign(system=ORACLE, fold=fold))
    del human
    return pd.concat(frames, ignore_index=True)


def token_level_tvds(model: str, scored: pd.DataFrame, human: pd.DataFrame, splits: pd.DataFrame) -> pd.DataFrame:
    """Per position: token-level TVD of the model to the human first tokens, and of the oracle to the target half."""
    from unsure.nextword.inference import OTHER_TOKENS, token_distributions

    human_tokens, model_tokens = token_distributions(scored, human)
    seed = int(splits["seed"].min())
    target_tokens, _ = token_distributions(scored, split_half(splits, seed, "target"))
    oracle_tokens, _ = token_distributions(scored, split_half(splits, seed, "oracle"))
    covered = pd.MultiIndex.from_frame(scored[KEY])
    mass = 1.0 - model_tokens[model_tokens["word"] == OTHER_TOKENS].set_index(KEY)["prob"]
    out = pd.DataFrame(
        {
            "tvd_model": tvd(human_tokens, model_tokens),
            "tvd_oracle": tvd(restrict(target_tokens, covered), restrict(oracle_tokens, covered), missing="drop"),
        }
    )
    out["mass"] = mass.reindex(out.index).to_numpy(dtype=np.float64)
    return out.reset_index().assign(model=model)


def group_tvds(
    model: pd.DataFrame,
    splits: pd.DataFrame,
    positions: pd.DataFrame,
    *,
    tagger: object,
    vectors: object,
    k_max: int = 10,
    seed: int = 0,
) -> pd.DataFrame:
    """Figure 4's data: word-, POS- and meaning-level TVD of the model and of the oracle to the target half.

    Returns ``system, level, text_id, word_num, tvd`` (first split; the
    model on the positions it covers).
    """
    from unsure.nextword.semantic import meaning_tvd, pos_tvd

    first = int(splits["seed"].min())
    covered = pd.MultiIndex.from_frame(model[KEY].drop_duplicates())
    target = restrict(split_half(splits, first, "target"), covered)
    oracle = restrict(split_half(splits, first, "oracle"), covered)
    frames = []
    for name, table in (("model", model), (ORACLE, oracle)):
        levels = {
            "word": tvd(target, table),
            "POS": pos_tvd(target, table, positions, tagger=tagger),  # type: ignore[arg-type]
            "meaning": meaning_tvd(target, table, vectors, k_max=k_max, seed=seed),  # type: ignore[arg-type]
        }
        for level, values in levels.items():
            frames.append(values.rename("tvd").reset_index().assign(system=name, level=level))
    return pd.concat(frames, ignore_index=True)[["system", "level", *KEY, "tvd"]]
