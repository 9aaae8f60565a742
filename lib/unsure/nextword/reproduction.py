"""The reproduction ledger of Ilia & Aziz: every Table 1 cell as printed, as the authors' code
computes it (``protocol: paper``, :mod:`unsure.nextword.paper`) and as ours does (``corrected``),
with the named differences that keep them apart (``tables/reproduction``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from unsure.nextword.paper import PaperColumn


def corrected_values(metrics: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Our Table 1 cells per system, keyed as :data:`DIFFERENCES`, from the metrics rows (mean over splits).

    ``expected_tvd`` is the system's expected TVD to all responses, and for
    the oracle its expected TVD to the disjoint target half (the quantity the
    paper prints in the oracle column). ``n_positions``, where the rows have
    it, is the positions scored: each position once, none dropped.
    """
    mean = metrics.groupby("estimator", sort=False)[
        ["ece_corpus_word", "ece_human_majority", "ece_oracle_majority", "expected_tvd_human", "expected_tvd_target"]
    ].mean()
    positions = metrics.groupby("estimator", sort=False)["n_positions"].max() if "n_positions" in metrics else None
    out: dict[str, dict[str, float]] = {}
    for system, row in mean.iterrows():
        tvd_column = "expected_tvd_target" if system == "oracle" else "expected_tvd_human"
        out[str(system)] = {
            "ece_corpus_word": float(row["ece_corpus_word"]),
            "ece_human_majority": float(row["ece_human_majority"]),
            "ece_oracle_majority": float(row["ece_oracle_majority"]),
            "expected_tvd": float(row[tvd_column]),
        }
        if positions is not None:
            out[str(system)]["n_positions"] = float(positions[system])
    return out


PRINTED_TABLE1: dict[str, dict[str, float | None]] = {
    "human": {"ece_corpus_word": 0.14, "ece_human_majority": 0.60, "ece_oracle_majority": 0.19, "expected_tvd": None},
    "oracle": {"ece_corpus_word": 0.11, "ece_human_majority": 0.57, "ece_oracle_majority": 0.32, "expected_tvd": 0.42},
    "gpt2": {"ece_corpus_word": 0.02, "ece_human_majority": 0.20, "ece_oracle_majority": 0.19, "expected_tvd": 0.64},
    "gpt2-ft": {"ece_corpus_word": 0.03, "ece_human_majority": 0.22, "ece_oracle_majority": 0.19, "expected_tvd": 0.66},
    "gpt2-t0.5": {
        "ece_corpus_word": 0.35,
        "ece_human_majority": 0.13,
        "ece_oracle_majority": 0.15,
        "expected_tvd": 0.61,
    },
    "bloom": {"ece_corpus_word": 0.07, "ece_human_majority": 0.09, "ece_oracle_majority": 0.07, "expected_tvd": 0.61},
    "chatgpt": {"ece_corpus_word": 0.45, "ece_human_majority": 0.37, "ece_oracle_majority": 0.37, "expected_tvd": 0.76},
    "chatgpt-d": {
        "ece_corpus_word": 0.10,
        "ece_human_majority": 0.08,
        "ece_oracle_majority": 0.08,
        "expected_tvd": 0.82,
    },
}
"""Table 1 as printed (rows: column of the paper; keys: target row)."""

PRINTED_CONTEXTS: dict[str, int] = {"bloom": 669, "chatgpt": 500, "chatgpt-d": 500}
"""Contexts each column scores, as the paper's Section 4 states them ("a random subset of 669 Provo contexts")."""

COPY_PASTE_CELLS: dict[tuple[str, str], str] = {
    ("human", "ece_oracle_majority"): (
        "printed 0.19 is GPT-2's value left in the oracle notebook's kernel (ece_gpt2_oracle_maj); "
        "compare with the intended value (the human MLE against the oracle majority)"
    ),
}

UNMATCHED_CELLS: dict[tuple[str, str], str] = {
    ("chatgpt-d", "ece_human_majority"): (
        "0.0739 rounds to 0.07, printed 0.08: the notebook's stored outputs for this column, 0.0759 here and "
        "0.0968 for the corpus word (ours 0.0988), are both ours to every digit if the mode at position 33-36 is "
        "'when'; the released samples tie 'against' and 'when' (11 of 40 each) with 'against' first, and the "
        "authors' first-in-list ties pick 'against'. The notebook ran on inputs not all released: its ChatGPT "
        "expected TVD, which no tie touches, is 0.76164 against 0.76121 from the released files"
    ),
}
"""Printed cells the authors' code on the released inputs does not round to, and why (the ledger's note)."""

_POSITIONS = (
    "released_entries (paper: the released BLOOM/ChatGPT lists looped entry by entry in file order, a position "
    "given twice scored twice with each entry's own samples; corrected: each position once, its samples merged); "
    "last_position_dropped (paper: the loop's last visit, for the released lists the file's last entry, is not "
    "scored; corrected: every position)"
)

DIFFERENCES: dict[str, str] = {
    "ece_corpus_word": (
        "ece_one_in_no_bin (confidence 1.0 in no bin); raw_corpus_word (corpus word as displayed, "
        "'There', 'nationwide.'); first_in_list_ties; released_entries; last_position_dropped"
    ),
    "ece_human_majority": (
        "ece_one_in_no_bin; first_in_list_ties (mode and majority: first word in list order); released_entries; "
        "last_position_dropped"
    ),
    "ece_oracle_majority": (
        "ece_one_in_no_bin; first_in_list_ties; oracle_split (20 random responses vs the rest, random.seed(k) "
        "per position; ours: random halves over the configured seeds); released_entries; last_position_dropped"
    ),
    "expected_tvd": (
        "normalisation (lower-case only vs our normalize_word); released_entries; last_position_dropped; for the "
        "oracle: oracle_split (one seed, 20 vs the rest; ours: halves over seeds)"
    ),
    "n_positions": _POSITIONS,
}
"""The named differences behind each row's gap between the two protocols (``n_positions``: positions scored)."""

REPRODUCTION_COLUMNS = ("system", "paper_column", "metric", "printed", "paper", "corrected", "difference", "note")


def reproduction_table(
    paper_cols: Sequence[PaperColumn],
    corrected: Mapping[str, Mapping[str, float]],
    paper_names: Mapping[str, str] | None = None,
    *,
    printed: bool = True,
) -> pd.DataFrame:
    """One row per Table 1 cell a system can produce: printed, ours under ``paper``, under ``corrected``.

    Each system's last row, ``n_positions``, is the positions each protocol
    scores (printed: the paper's count of contexts, :data:`PRINTED_CONTEXTS`),
    so that the effect of their position rules is in the ledger.
    ``corrected`` maps a system to its corrected metrics (keys as in
    :data:`DIFFERENCES`); ``paper_names`` maps our system names to Table 1's
    column keys (:data:`PRINTED_TABLE1`), where they differ. ``printed=False``
    (inputs that are not the paper's, such as generated norms) leaves the
    printed values and their notes empty.
    """
    names = dict(paper_names or {})
    rows = []
    for col in paper_cols:
        key = names.get(col.system, col.system)
        cells = PRINTED_TABLE1.get(key, {})
        ours = corrected.get(col.system, {})
        for metric in DIFFERENCES:
            value = col.expected_tvd_human if metric == "expected_tvd" else getattr(col, metric)
            if metric == "expected_tvd" and col.system == "human":
                continue
            cell = PRINTED_CONTEXTS.get(key) if metric == "n_positions" else cells.get(metric)
            note = COPY_PASTE_CELLS.get((key, metric)) or UNMATCHED_CELLS.get((key, metric), "")
            rows.append(
                (
                    col.system,
                    key if key in PRINTED_TABLE1 else "",
                    metric,
                    cell if printed else None,
                    value,
                    ours.get(metric, float("nan")),
                    DIFFERENCES[metric],
                    note if printed else "",
                )
            )
    return pd.DataFrame(rows, columns=list(REPRODUCTION_COLUMNS))
