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

from unsure.config import Protocol
from unsure.nextword import paper, reproduction
from unsure.nextword.data import corpus_targets, read_norms, typed_responses
from unsure.nextword.distributions import human_counts, modes, oracle_splits, restrict, split_half
from unsure.nextword.frames import KEY, require
from unsure.nextword.metrics import RESULT_COLUMNS, evaluate, evaluate_oracle, expected_calibration_error, tvd
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

    Also ``typed``: the responses as typed (the biased estimator scores their surface forms).

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
        "typed": typed_responses(positions),
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
    """Table 1 under ``protocol`` and the reproduction ledger (:func:`unsure.nextword.reproduction.reproduction_table`).

    ``sample_files`` maps each system (Table 1's order) to its samples file;
    ``metrics`` are :func:`evaluate_systems`' rows (the ``corrected`` values).
    The ``paper`` values are computed from the norms (cut to ``passages``) and
    each file's raw samples in the authors' loop order
    (:func:`unsure.nextword.paper.read_raw_samples`: a released list entry by
    entry, as released, otherwise by position). ``protocol`` picks which Table 1
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
    ledger = reproduction.reproduction_table(
        columns, reproduction.corrected_values(metrics), paper.PAPER_NAMES, printed=printed
    )
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


def table4(token_tvds: pd.DataFrame, n_bins: int = 10) -> pd.DataFrame:
    """Table 4 (appendix D): token-level ECE against the humans' majority first token, and expected TVDs.

    Per model: ECE of its modal token (``ece_human_majority_model``) and of
    the modes of the two oracle halves (``..._oracle1``, ``..._oracle2``), the
    paper's three columns; then expected token-level TVD of the model (to all
    responses' first tokens) and of the oracle (half vs half), and the
    model's mean mass on the human tokens.
    """
    rows = []
    for model, g in token_tvds.groupby("model", sort=False):
        row: dict[str, object] = {"model": model, "positions": len(g)}
        for name in ("model", "oracle1", "oracle2"):
            ok = g[f"confidence_{name}"].notna() & g[f"correct_{name}"].notna()
            row[f"ece_human_majority_{name}"] = expected_calibration_error(
                g.loc[ok, f"confidence_{name}"], g.loc[ok, f"correct_{name}"], n_bins=n_bins
            )
        row.update(
            expected_tvd_model=g["tvd_model"].mean(),
            expected_tvd_oracle=g["tvd_oracle"].mean(),
            mass_on_human_tokens=g["mass"].mean(),
        )
        rows.append(row)
    columns = ["model", "positions"] + [f"ece_human_majority_{n}" for n in ("model", "oracle1", "oracle2")]
    columns += ["expected_tvd_model", "expected_tvd_oracle", "mass_on_human_tokens"]
    return pd.DataFrame(rows, columns=columns)


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


def _modal_items(scored: pd.DataFrame, majority: pd.DataFrame) -> pd.DataFrame:
    """Calibration items of the model's modal token against the majority first tokens (ties: expected correctness)."""
    n_majority = majority.groupby(KEY).size()
    majority_set = set(zip(majority["text_id"], majority["word_num"], majority["word"], strict=True))
    key = pd.MultiIndex.from_frame(scored[KEY])
    hit = [
        (int(t), int(n), str(m)) in majority_set
        for t, n, m in zip(scored["text_id"], scored["word_num"], scored["modal_token"], strict=True)
    ]
    out = pd.DataFrame(
        {
            "confidence": np.exp(scored["modal_logprob"].to_numpy(dtype=np.float64)),
            "correct": np.asarray(hit, dtype=np.float64) / n_majority.reindex(key).to_numpy(dtype=np.float64),
        },
        index=key,
    )
    return out


def token_level_tvds(model: str, scored: pd.DataFrame, human: pd.DataFrame, splits: pd.DataFrame) -> pd.DataFrame:
    """Per position, the token level (appendix D): TVDs and the calibration items of Table 4.

    ``tvd_model``: the model's next-token distribution vs the human first
    tokens; ``tvd_oracle``: oracle half vs target half of the first split;
    ``mass``: the model's mass on the human tokens. Table 4's items, against
    the majority first token of all responses (ties: expected correctness):
    ``confidence_*`` / ``correct_*`` of the model's modal token over the whole
    vocabulary (``model``) and of the modes of the two disjoint halves of the
    first split (``oracle1``: the oracle half, ``oracle2``: the target half).
    """
    from unsure.nextword.inference import OTHER_TOKENS, token_distributions
    from unsure.nextword.metrics import calibration_items

    require(scored, [*KEY, "tokens", "logprobs", "modal_token", "modal_logprob"], "token-level scores")
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
    majority = modes(human_tokens)[["text_id", "word_num", "word"]]
    model_items = _modal_items(scored, majority).reindex(out.index)
    out["confidence_model"], out["correct_model"] = model_items["confidence"], model_items["correct"]
    for name, table in (("oracle1", oracle_tokens), ("oracle2", target_tokens)):
        items = calibration_items(restrict(table, covered), majority).set_index(KEY).reindex(out.index)
        out[f"confidence_{name}"], out[f"correct_{name}"] = items["confidence"], items["correct"]
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
    human: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Figure 4's data: word-, POS- and meaning-level TVD of the model and of the oracle.

    The oracle half is measured against the target half of the first split;
    the model against that same half, or with ``human`` (all responses,
    ``protocol: paper``, as the authors' figure) against all responses.
    Returns ``system, level, text_id, word_num, tvd`` (the model on the
    positions it covers).
    """
    from unsure.nextword.semantic import meaning_tvd, pos_tvd

    first = int(splits["seed"].min())
    covered = pd.MultiIndex.from_frame(model[KEY].drop_duplicates())
    target = restrict(split_half(splits, first, "target"), covered)
    oracle = restrict(split_half(splits, first, "oracle"), covered)
    frames = []
    model_reference = target if human is None else restrict(human, covered)
    for name, table, reference in (("model", model, model_reference), (ORACLE, oracle, target)):
        levels = {
            "word": tvd(reference, table),
            "POS": pos_tvd(reference, table, positions, tagger=tagger),  # type: ignore[arg-type]
            "meaning": meaning_tvd(reference, table, vectors, k_max=k_max, seed=seed),  # type: ignore[arg-type]
        }
        for level, values in levels.items():
            frames.append(values.rename("tvd").reset_index().assign(system=name, level=level))
    return pd.concat(frames, ignore_index=True)[["system", "level", *KEY, "tvd"]]


def tvd_differences(tvds: pd.DataFrame, systems: Sequence[str]) -> pd.DataFrame:
    """Per position and system: TVD(system, all responses) minus TVD(oracle, all responses) (figure 12).

    ``tvds`` is :func:`evaluate_systems`' per-position frame. Positive values
    are positions where the system is farther from the humans than another
    group of humans is; only positions both cover count.
    """
    require(tvds, ["system", *KEY, "tvd_human"], "per-position TVD table")
    oracle = tvds[tvds["system"] == ORACLE].set_index(KEY)["tvd_human"]
    frames = []
    for name in systems:
        mine = tvds[tvds["system"] == name].set_index(KEY)["tvd_human"]
        both = mine.index.intersection(oracle.index)
        diff = (mine.loc[both] - oracle.loc[both]).rename("difference").reset_index()
        frames.append(diff.assign(system=name))
    if not frames:
        return pd.DataFrame(columns=["system", *KEY, "difference"])
    return pd.concat(frames, ignore_index=True)[["system", *KEY, "difference"]]


def biased_tvds(biased: Mapping[str, pd.DataFrame], human: pd.DataFrame, splits: pd.DataFrame) -> pd.DataFrame:
    """Per position: TVD to all responses of each biased estimator and of the oracle half, where both exist (fig. 5).

    ``biased`` maps a model to its :func:`unsure.nextword.inference.biased_table`;
    the oracle is the oracle half of the first split, as in figure 2. Columns
    ``system, text_id, word_num, tvd_human``; systems are ``<model> (biased)``
    and ``oracle`` (on the positions of the first biased model).
    """
    seed = int(splits["seed"].min())
    frames = []
    for k, (model, table) in enumerate(biased.items()):
        probs = table[[*KEY, "word", "prob"]]
        covered = pd.MultiIndex.from_frame(probs[KEY].drop_duplicates())
        human_here = restrict(human, covered)
        frames.append(tvd(human_here, probs).rename("tvd_human").reset_index().assign(system=f"{model} (biased)"))
        if k == 0:
            oracle = restrict(split_half(splits, seed, "oracle"), covered)
            frames.append(
                tvd(human_here, oracle, missing="drop").rename("tvd_human").reset_index().assign(system=ORACLE)
            )
    if not frames:
        return pd.DataFrame({"system": [], "text_id": [], "word_num": [], "tvd_human": []})
    return pd.concat(frames, ignore_index=True)[["system", *KEY, "tvd_human"]]


def _system_of(system: str, models: Sequence[str]) -> tuple[str, str] | None:
    """(model, how it was sampled) of a Table 1 system named as the workflow names them: the model
    (unbiased sampling at T = 1), ``<model>-t<T>``, ``<model>-<chat mode>`` or ``<model>-ft``; the
    longest model name wins (``gpt2-large`` is not ``gpt2`` in mode ``large``). None: no model's."""
    for model in sorted(models, key=len, reverse=True):
        if system == model:
            return model, "sampling, T=1"
        if system.startswith(f"{model}-"):
            mode = system.removeprefix(f"{model}-")
            if mode == "ft":
                return model, "fine-tuned"
            if mode.startswith("t") and mode[1:].replace(".", "", 1).isdigit():
                return model, f"sampling, T={mode[1:]}"
            return model, f"chat, {mode}"
    return None


def headline(table1_path: str | os.PathLike[str], models: Sequence[str], *, protocol: Protocol) -> pd.DataFrame:
    """Expected TVD to all human responses of each of ``models``' systems, read from ``tables/table1.csv``
    (the values of ``protocol``, ``studies.nextword.protocol``): the study's number in the cross-study
    profile (:mod:`unsure.profile`). It is the study's calibration measure: how far the model's
    next-word distribution is from the humans'.

    One row per (model, system): ``model, study, measure, setting, value, protocol, better,
    calibration``; the setting says how the system sampled (temperature, chat mode, fine-tuned).
    Pre-collected sample files, the human MLE and the oracle are no model's and are left out.
    """
    table = pd.read_csv(table1_path).set_index("metric")
    label = METRIC_LABELS["expected_tvd_human"]
    if label not in table.index:
        raise ValueError(f"{table1_path}: no row {label!r} (rows: {', '.join(map(str, table.index))})")
    rows = []
    for system, value in table.loc[label].items():
        found = _system_of(str(system), models) if system not in (HUMAN, ORACLE) else None
        if found is None or pd.isna(value):
            continue
        model, setting = found
        rows.append(
            {
                "model": model,
                "study": "nextword",
                "measure": "expected TVD to humans",
                "setting": setting,
                "value": float(value),
                "protocol": protocol,
                "better": "lower",
                "calibration": True,
            }
        )
    columns = ["model", "study", "measure", "setting", "value", "protocol", "better", "calibration"]
    return pd.DataFrame(rows, columns=columns)
