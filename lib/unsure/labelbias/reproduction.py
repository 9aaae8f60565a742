"""The reproduction ledger: each difference between the authors' code (``paper``) and ours
(``corrected``), with its effect on this run's numbers where one run can show it."""

from __future__ import annotations

import pandas as pd

from unsure.labelbias.evaluate import summarize

SHOWN = ("accuracy", "macro_f1", "rsd", "bias_score")

DIFFERENCES = {
    "label_scoring": (
        "Label probabilities: the authors score ' label' + EOS and take the mean log-probability over the "
        "label tokens and EOS, always; ours sums the log-probability of ' label' (no EOS), averaging per "
        "token only when the labels' token counts differ. Both come from the same forward pass."
    ),
    "macro_f1": (
        "Macro-F1: the authors average over the gold labels only (macro_f1_paper); ours over every label "
        "that occurs as gold or prediction."
    ),
    "semantically_equivalent_subset": (
        "Fig. 4 subset: the paper's 18 sentence-completion and multiple-choice QA tasks (metadata category); "
        "ours: tasks whose labels are option names (A/B/C, 1/2/3) whatever their category."
    ),
    "dc_inputs": (
        "Domain-context inputs: the authors cut each input at its task template's markers and draw "
        "ceil(mean length) lower-cased words per part without replacement, keeping the markers; ours draws "
        "round(mean length) words of the whole input with replacement. Chosen by protocol (changes the prompts)."
    ),
    "empty_input": (
        "The empty content-free input renders 'Input: .' in the authors' prompt, 'Input:' in ours. "
        "Chosen by protocol (changes the prompt)."
    ),
    "prompt_limit": (
        "Prompt length: the authors fit every prompt to 2,000 tokens of the model's tokenizer "
        "(max_prompt_tokens; demonstrations dropped from the first that overflows, a prompt still too long "
        "cut at its end, 'Output:' included); ours never truncates. Chosen by protocol (changes the prompt)."
    ),
    "lora_targets": (
        "LoRA targets: the authors train on prompt + ' label' + EOS (loss on the label and EOS); ours on "
        "' label' alone. Chosen by protocol (changes the fine-tuned model)."
    ),
    "lora_examples": (
        "LoRA examples: the authors take n_train consecutive pool items from n_train*s (k = 0), k*(s+1) "
        "(k >= n_train) or k + n_train*s, wrapping round the pool; ours the first n_train pool items that are "
        "not the context's demonstrations. Chosen by protocol (changes the fine-tuned model)."
    ),
}
PROMPT_DIFFERENCES = {
    "dc_inputs": "dc",
    "empty_input": "cc",
    "prompt_limit": "",
    "lora_targets": "lora",
    "lora_examples": "lora",
}
"""Differences that change what the model is asked (or trained on), with the method they touch."""


def reproduction_table(
    per_task: pd.DataFrame,
    models: pd.DataFrame,
    *,
    protocol: str,
    interchangeable: set[str],
    semantically_equivalent: set[str],
) -> pd.DataFrame:
    """One row per (difference, model, k, method, metric): ours under ``paper`` and under
    ``corrected``, and the gap. ``per_task`` holds both label scorings (``scoring``).

    Differences that change the prompts or the fine-tuning (DC inputs, the empty
    input, the prompt limit, LoRA targets and examples) have one row saying which variant this
    run scored; their effect needs a run under the other protocol. The paper
    prints figures, not table cells, so there is no printed value to set beside ours.
    """
    keys = ["model", "k", "method"]
    summaries = {
        scoring: summarize(part, models, interchangeable, semantically_equivalent)
        for scoring, part in per_task.groupby("scoring", sort=True)
    }
    rows = []
    if {"paper", "corrected"} <= set(summaries):
        both = summaries["paper"].merge(
            summaries["corrected"], on=["subset", *keys], suffixes=("_paper", "_corrected"), validate="one_to_one"
        )
        for r in both[both["subset"] == "all"].itertuples(index=False):
            for metric in SHOWN:
                rows.append(
                    _row("label_scoring", r, metric, getattr(r, f"{metric}_paper"), getattr(r, f"{metric}_corrected"))
                )
    headline = summaries.get("paper" if protocol == "paper" else "corrected")
    if headline is not None:
        for r in headline[headline["subset"] == "all"].itertuples(index=False):
            rows.append(_row("macro_f1", r, "macro_f1", r.macro_f1_paper, r.macro_f1))
        subset = headline.set_index(["subset", *keys])
        for r in headline[headline["subset"] == "semantically_equivalent"].itertuples(index=False):
            other = ("interchangeable", r.model, r.k, r.method)
            for metric in ("rsd", "bias_score"):
                corrected = subset.at[other, metric] if other in subset.index else float("nan")
                rows.append(_row("semantically_equivalent_subset", r, metric, getattr(r, metric), corrected))
    for name, method in PROMPT_DIFFERENCES.items():
        rows.append(
            {
                "difference": name,
                "model": "",
                "k": -1,
                "method": method,
                "metric": "",
                "paper": float("nan"),
                "corrected": float("nan"),
                "gap": float("nan"),
                "note": f"this run scored the {protocol} variant; " + DIFFERENCES[name],
            }
        )
    return pd.DataFrame(rows, columns=["difference", *keys, "metric", "paper", "corrected", "gap", "note"])


def _row(name: str, r: object, metric: str, paper: float, corrected: float) -> dict[str, object]:
    return {
        "difference": name,
        "model": getattr(r, "model"),  # noqa: B009
        "k": int(getattr(r, "k")),  # noqa: B009
        "method": getattr(r, "method"),  # noqa: B009
        "metric": metric,
        "paper": float(paper),
        "corrected": float(corrected),
        "gap": float(paper) - float(corrected),
        "note": DIFFERENCES[name],
    }
