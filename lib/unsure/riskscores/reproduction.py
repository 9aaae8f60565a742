"""The reproduction ledger of Cruz et al.: which protocol made each number, the value the paper
prints beside ours, and both values of the metric-level choices.

The printed values are those of Table 1 (ACSIncome) and Tables A1-A4 (:data:`PRINTED`).
Each block is the table's rows as the paper prints them (model, then ECE, Brier score, AUC and
accuracy under multiple-choice prompting, then the same under numeric prompting; the baselines
repeat their one set of numbers in both halves). A test checks every row against the paper's
text. Paper names map to the model keys of ``config/config.yaml``; a run whose key is not among
them has no printed value. The printed accuracy is at threshold 0.5 (the paper: "If not
specified otherwise we use tau = 0.5").
"""

from __future__ import annotations

import pandas as pd

from unsure.config import Protocol
from unsure.riskscores.baselines import BASELINES
from unsure.riskscores.tables import BASELINE_NAMES, KEYS, PROMPTING_NAMES

PAPER_MODELS = {
    "GPT 4o mini (it)": "gpt-4o-mini",
    "Mixtral 8x22B (it)": "mixtral-8x22b-instruct",
    "Mixtral 8x22B": "mixtral-8x22b",
    "Llama 3 70B (it)": "llama-3-70b-instruct",
    "Llama 3 70B": "llama-3-70b",
    "Mixtral 8x7B (it)": "mixtral-8x7b-instruct",
    "Mixtral 8x7B": "mixtral-8x7b",
    "Yi 34B (it)": "yi-34b-chat",
    "Yi 34B": "yi-34b",
    "Llama 3 8B (it)": "llama-3-8b-instruct",
    "Llama 3 8B": "llama-3-8b",
    "Mistral 7B (it)": "mistral-7b-instruct",
    "Mistral 7B": "mistral-7b",
    "Gemma 7B (it)": "gemma-7b-it",
    "Gemma 7B": "gemma-7b",
    "Gemma 2B (it)": "gemma-2b-it",
    "Gemma 2B": "gemma-2b",
    "LR": "logistic_regression",
    "XGBoost": "xgboost",
}
"""Paper row name -> model key (``config/config.yaml``; the baselines' keys in the scores)."""
METRICS = ("ece", "brier", "auc", "accuracy")
TABLES = {"ACSIncome": "Table 1", "ACSEmployment": "Table A1", "ACSMobility": "Table A2",
          "ACSTravelTime": "Table A3", "ACSPublicCoverage": "Table A4"}  # fmt: skip

PRINTED = {
    "ACSIncome": """\
GPT 4o mini (it) 0.24 0.24 0.85 0.74 0.05 0.16 0.83 0.78
Mixtral 8x22B (it) 0.21 0.22 0.85 0.76 0.11 0.17 0.84 0.77
Mixtral 8x22B 0.17 0.19 0.85 0.68 0.13 0.18 0.82 0.74
Llama 3 70B (it) 0.27 0.27 0.86 0.69 0.25 0.23 0.84 0.67
Llama 3 70B 0.20 0.20 0.86 0.70 0.27 0.24 0.82 0.54
Mixtral 8x7B (it) 0.16 0.18 0.86 0.78 0.10 0.17 0.84 0.76
Mixtral 8x7B 0.17 0.21 0.83 0.65 0.07 0.17 0.81 0.78
Yi 34B (it) 0.19 0.19 0.86 0.72 0.22 0.21 0.80 0.48
Yi 34B 0.25 0.22 0.85 0.62 0.15 0.19 0.83 0.61
Llama 3 8B (it) 0.32 0.30 0.85 0.62 0.23 0.23 0.81 0.67
Llama 3 8B 0.25 0.26 0.81 0.38 0.14 0.24 0.63 0.40
Mistral 7B (it) 0.21 0.22 0.83 0.77 0.16 0.19 0.83 0.70
Mistral 7B 0.20 0.23 0.80 0.73 0.36 0.32 0.75 0.49
Gemma 7B (it) 0.61 0.59 0.84 0.37 0.33 0.30 0.78 0.42
Gemma 7B 0.24 0.27 0.76 0.37 0.15 0.20 0.80 0.73
Gemma 2B (it) 0.63 0.63 0.73 0.37 0.28 0.31 0.50 0.37
Gemma 2B 0.14 0.25 0.62 0.45 0.37 0.37 0.50 0.63
LR 0.03 0.18 0.79 0.74 0.03 0.18 0.79 0.74
XGBoost 0.00 0.13 0.90 0.82 0.00 0.13 0.90 0.82
""",
    "ACSEmployment": """\
GPT 4o mini (it) 0.28 0.29 0.79 0.65 0.23 0.23 0.80 0.73
Mixtral 8x22B (it) 0.38 0.39 0.60 0.51 0.06 0.14 0.87 0.79
Mixtral 8x22B 0.21 0.24 0.86 0.52 0.15 0.18 0.82 0.80
Llama 3 70B (it) 0.17 0.19 0.85 0.73 0.05 0.14 0.88 0.81
Llama 3 70B 0.25 0.26 0.82 0.52 0.05 0.15 0.86 0.78
Mixtral 8x7B (it) 0.22 0.24 0.82 0.73 0.07 0.15 0.87 0.78
Mixtral 8x7B 0.30 0.31 0.81 0.45 0.08 0.17 0.81 0.73
Yi 34B (it) 0.14 0.21 0.79 0.69 0.15 0.21 0.81 0.51
Yi 34B 0.08 0.23 0.70 0.62 0.13 0.23 0.66 0.50
Llama 3 8B (it) 0.07 0.19 0.79 0.74 0.08 0.17 0.82 0.77
Llama 3 8B 0.34 0.34 0.76 0.45 0.15 0.23 0.75 0.46
Mistral 7B (it) 0.35 0.36 0.72 0.63 0.04 0.19 0.79 0.69
Mistral 7B 0.26 0.30 0.76 0.45 0.14 0.19 0.80 0.79
Gemma 7B (it) 0.36 0.38 0.59 0.58 0.04 0.22 0.71 0.60
Gemma 7B 0.15 0.25 0.65 0.48 0.35 0.38 0.50 0.51
Gemma 2B (it) 0.38 0.41 0.42 0.46 0.12 0.27 0.46 0.46
Gemma 2B 0.01 0.24 0.63 0.54 0.01 0.23 0.57 0.53
LR 0.02 0.15 0.86 0.78 0.02 0.15 0.86 0.78
XGBoost 0.00 0.12 0.91 0.83 0.00 0.12 0.91 0.83
""",
    "ACSMobility": """\
GPT 4o mini (it) 0.26 0.26 0.57 0.73 0.22 0.25 0.49 0.73
Mixtral 8x22B (it) 0.40 0.40 0.51 0.39 0.05 0.20 0.54 0.73
Mixtral 8x22B 0.11 0.21 0.55 0.73 0.13 0.22 0.49 0.73
Llama 3 70B (it) 0.20 0.25 0.57 0.58 0.05 0.20 0.52 0.73
Llama 3 70B 0.22 0.24 0.55 0.53 0.06 0.20 0.53 0.73
Mixtral 8x7B (it) 0.26 0.26 0.58 0.73 0.11 0.21 0.51 0.73
Mixtral 8x7B 0.14 0.21 0.57 0.73 0.24 0.25 0.48 0.73
Yi 34B (it) 0.09 0.20 0.56 0.72 0.23 0.25 0.50 0.27
Yi 34B 0.07 0.20 0.57 0.73 0.15 0.23 0.52 0.44
Llama 3 8B (it) 0.15 0.22 0.56 0.70 0.11 0.21 0.49 0.73
Llama 3 8B 0.10 0.20 0.55 0.73 0.14 0.21 0.51 0.72
Mistral 7B (it) 0.26 0.26 0.57 0.73 0.17 0.23 0.49 0.73
Mistral 7B 0.20 0.23 0.53 0.73 0.27 0.27 0.50 0.73
Gemma 7B (it) 0.25 0.26 0.58 0.73 0.25 0.26 0.49 0.73
Gemma 7B 0.41 0.37 0.50 0.27 0.19 0.24 0.49 0.73
Gemma 2B (it) 0.73 0.73 0.52 0.27 0.02 0.20 0.50 0.73
Gemma 2B 0.25 0.26 0.51 0.34 0.27 0.27 0.50 0.73
LR 0.02 0.19 0.61 0.74 0.02 0.19 0.61 0.74
XGBoost 0.00 0.16 0.74 0.76 0.00 0.16 0.74 0.76
""",
    "ACSTravelTime": """\
GPT 4o mini (it) 0.39 0.40 0.65 0.55 0.15 0.27 0.58 0.57
Mixtral 8x22B (it) 0.31 0.33 0.66 0.59 0.12 0.24 0.64 0.59
Mixtral 8x22B 0.20 0.28 0.63 0.44 0.30 0.34 0.57 0.58
Llama 3 70B (it) 0.15 0.24 0.70 0.60 0.12 0.24 0.64 0.53
Llama 3 70B 0.09 0.24 0.67 0.55 0.08 0.25 0.52 0.46
Mixtral 8x7B (it) 0.45 0.45 0.66 0.52 0.09 0.24 0.61 0.57
Mixtral 8x7B 0.28 0.32 0.60 0.44 0.07 0.25 0.57 0.58
Yi 34B (it) 0.35 0.36 0.65 0.56 0.06 0.25 0.50 0.44
Yi 34B 0.08 0.24 0.62 0.56 0.14 0.27 0.53 0.44
Llama 3 8B (it) 0.19 0.28 0.60 0.57 0.11 0.25 0.56 0.56
Llama 3 8B 0.08 0.25 0.53 0.56 0.12 0.26 0.48 0.44
Mistral 7B (it) 0.41 0.42 0.59 0.57 0.11 0.25 0.55 0.56
Mistral 7B 0.05 0.25 0.57 0.56 0.44 0.44 0.50 0.56
Gemma 7B (it) 0.42 0.43 0.53 0.56 0.10 0.26 0.49 0.44
Gemma 7B 0.04 0.24 0.61 0.58 0.03 0.25 0.52 0.55
Gemma 2B (it) 0.34 0.36 0.49 0.56 0.19 0.28 0.50 0.56
Gemma 2B 0.09 0.26 0.48 0.44 0.44 0.44 0.50 0.56
LR 0.04 0.24 0.58 0.56 0.04 0.24 0.58 0.56
XGBoost 0.02 0.19 0.77 0.70 0.02 0.19 0.77 0.70
""",
    "ACSPublicCoverage": """\
GPT 4o mini (it) 0.33 0.34 0.71 0.60 0.10 0.20 0.68 0.73
Mixtral 8x22B (it) 0.24 0.25 0.70 0.72 0.04 0.18 0.71 0.75
Mixtral 8x22B 0.32 0.30 0.59 0.30 0.29 0.29 0.54 0.70
Llama 3 70B (it) 0.16 0.21 0.69 0.75 0.13 0.20 0.73 0.75
Llama 3 70B 0.18 0.22 0.67 0.63 0.12 0.21 0.64 0.53
Mixtral 8x7B (it) 0.20 0.23 0.70 0.74 0.06 0.19 0.69 0.74
Mixtral 8x7B 0.41 0.37 0.57 0.30 0.20 0.25 0.56 0.70
Yi 34B (it) 0.06 0.19 0.67 0.74 0.22 0.24 0.57 0.31
Yi 34B 0.04 0.21 0.59 0.70 0.09 0.20 0.67 0.64
Llama 3 8B (it) 0.11 0.21 0.59 0.71 0.17 0.22 0.64 0.68
Llama 3 8B 0.41 0.38 0.55 0.30 0.20 0.25 0.51 0.34
Mistral 7B (it) 0.30 0.30 0.61 0.70 0.07 0.20 0.67 0.65
Mistral 7B 0.29 0.30 0.45 0.30 0.30 0.30 0.50 0.70
Gemma 7B (it) 0.30 0.34 0.46 0.50 0.18 0.24 0.57 0.61
Gemma 7B 0.15 0.23 0.49 0.49 0.18 0.26 0.48 0.70
Gemma 2B (it) 0.70 0.70 0.54 0.30 0.24 0.29 0.42 0.42
Gemma 2B 0.26 0.28 0.54 0.30 0.30 0.30 0.50 0.70
LR 0.03 0.19 0.70 0.72 0.03 0.19 0.70 0.72
XGBoost 0.00 0.14 0.84 0.80 0.00 0.14 0.84 0.80
""",
}


def printed_values() -> pd.DataFrame:
    """One row per task, model key and prompting: the printed ECE, Brier, AUC and accuracy.
    The baselines (prompting ``supervised``) take their one printed set."""
    records = []
    for task, block in PRINTED.items():
        for line in block.splitlines():
            name, *numbers = line.rsplit(maxsplit=8)  # the name has spaces; the 8 numbers do not
            values = [float(v) for v in numbers]
            model = PAPER_MODELS[name]
            halves = {"multiple_choice": values[:4], "numeric": values[4:]}
            if model in ("logistic_regression", "xgboost"):
                halves = {"supervised": values[:4]}
            for prompting, four in halves.items():
                records.append(
                    {"task": task, "model": model, "prompting": prompting, "source": TABLES[task]}
                    | dict(zip(METRICS, four, strict=True))
                )
    return pd.DataFrame(records)


LEDGER_COLUMNS = {
    "task": "Task",
    "model": "Model",
    "prompting": "Prompting",
    "prompts": "Prompts (protocol)",
    "printed_in": "Printed in",
    "ece_printed": "ECE printed",
    "ece": "ECE (equal-width bins)",
    "ece_quantile": "ECE (quantile bins)",
    "brier_printed": "Brier printed",
    "brier": "Brier",
    "auc_printed": "AUC printed",
    "auc": "AUC",
    "accuracy_printed": "Accuracy printed",
    "accuracy": "Accuracy (0.5)",
    "sce": "SCE",
    "threshold_rule": "Threshold rule in tables",
    "accuracy_fitted": "Accuracy (accuracy-max threshold)",
    "accuracy_fitted_balanced": "Accuracy (balanced-accuracy-max threshold)",
    "threshold": "Threshold (accuracy)",
    "threshold_balanced": "Threshold (balanced accuracy)",
    "note": "Note",
}

_NOTES = {
    ("paper", "ACSMobility"): (
        "label 1 = same house as folktables (folktexts' question asks 'moved?': options carry our labels, "
        "numeric answers are complemented); AUC and Brier equal folktexts', ECE up to scores on bin edges"
    ),
    ("corrected", None): "our prompts (Census dictionary words, chat templates); the paper's need protocol: paper",
    ("paper", None): "folktexts' prompts, plain text for instruct models",
}


def reproduction_table(metrics: pd.DataFrame, protocol: Protocol) -> pd.DataFrame:
    """The ledger: per task, model and prompting, which protocol made the prompts, the value
    the paper prints beside ours (Table 1, A1-A4; :data:`PRINTED`; matched by
    the model keys of ``config/config.yaml``), and both values of the metric-level choices (ECE
    bins; the fitted threshold's rule), whichever the tables show. A prompt-level difference
    needs a run under the other protocol."""
    printed = printed_values().rename(columns={m: f"{m}_printed" for m in METRICS} | {"source": "printed_in"})
    rows = metrics.merge(printed, on=KEYS, how="left", validate="many_to_one")
    rows["printed_in"] = rows["printed_in"].fillna("—")
    baseline = rows["model"].isin(BASELINES)
    rows["prompts"] = [("—" if b else protocol) for b in baseline]
    rows["threshold_rule"] = "balanced accuracy" if protocol == "paper" else "accuracy"
    rows["note"] = [
        "trained baseline (no prompt)" if b else _NOTES.get((protocol, t), _NOTES[(protocol, None)])
        for b, t in zip(baseline, rows["task"], strict=True)
    ]
    rows["model"] = rows["model"].map(lambda m: BASELINE_NAMES.get(m, m))
    rows["prompting"] = rows["prompting"].map(lambda k: PROMPTING_NAMES.get(k, k))
    for col in LEDGER_COLUMNS:
        if col not in rows.columns:
            rows[col] = float("nan")
    return rows[list(LEDGER_COLUMNS)].rename(columns=LEDGER_COLUMNS).reset_index(drop=True)
