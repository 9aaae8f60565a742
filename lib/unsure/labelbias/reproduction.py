"""The reproduction ledger: each difference between the authors' code (``paper``) and ours
(``corrected``), with its effect on this run's numbers where one run can show it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.labelbias.prompts import PromptFit, item_context, variants
from unsure.labelbias.scoring import SCORINGS, TaskPrompting
from unsure.labelbias.tables import (
    METRICS,
    lora_probabilities,
    method_probabilities,
    summarize,
    task_metrics,
    under_scoring,
)

SHOWN = ("accuracy", "macro_f1", "rsd", "bias_score")

DIFFERENCES = {
    "label_scoring": (
        "Label probabilities: the authors score ' label' + EOS and take the mean log-probability over the "
        "label tokens and EOS, always; ours sums the log-probability of ' label' (no EOS), averaging per "
        "token only when the labels' token counts differ. Both come from the same forward pass. Not "
        "reproduced: the authors' prefix cache. Their code encodes a batch's (one task's run's) common prefix "
        "less its last character alone, caches it and drops that many tokens from each prompt; where the "
        "prefix ends inside one of a prompt's tokens (inputs that start alike, a trailing space) the cached "
        "tokens are not the prompt's and their scores move (a probability by 0.16 on task318 with shot "
        "counts mixed in one batch). Run as they run it, one shot count per batch, it still happens in "
        "leave-one-out batches whose first two demonstrations' inputs start alike, and in small batches: 5 "
        "of the 42 real-task batches of tests/test_labelbias_authors.py, by up to 2.6e-4 on its tiny random "
        "model. Ours scores every prompt whole: their numbers (to 1e-5) wherever the prefix aligns."
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
        "' label' alone. Chosen by protocol (changes the fine-tuned model); measured by fine-tuning again "
        "with it flipped at one (k, set), the first the run fine-tunes."
    ),
    "lora_examples": (
        "LoRA examples: the authors take n_train consecutive pool items from n_train*s (k = 0), k*(s+1) "
        "(k >= n_train) or k + n_train*s, wrapping round the pool; ours the first n_train pool items that are "
        "not the context's demonstrations (the two coincide for demonstration set 0 of every k). Chosen by "
        "protocol (changes the fine-tuned model); measured by fine-tuning again with it flipped at one "
        "(k, set), the first the run fine-tunes where the two differ."
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
    flipped: pd.DataFrame | None = None,
    evidence: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (difference, model, k, method, metric): ours under ``paper`` and under
    ``corrected``, and the gap. ``per_task`` holds both label scorings (``scoring``).

    Differences that change the prompts (DC inputs, the empty input, the prompt limit) are
    measured where ``flipped`` (per-task metrics with one difference flipped, see
    :func:`flipped_metrics`, with ``model``) and ``evidence`` (:func:`flip_evidence` per
    ``model``) are given: one row per model, k, method they move and metric, under the run's
    headline label scoring, with the prompts changed (and for the limit, the longest prompt in
    tokens) in the note. The LoRA differences come the same way (:func:`lora_flip_metrics`,
    :func:`lora_flip_evidence`) from a second fine-tuning run at one (k, set) (the evidence's
    ``k`` and ``set``): their rows compare the ``lora`` numbers of that (k, set) alone. A
    difference no flip measured has one row saying which variant this run scored. The paper
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
    measured: set[str] = set()
    if flipped is not None and evidence is not None and headline is not None:
        scoring = "paper" if protocol == "paper" else "corrected"
        base = per_task[per_task["scoring"] == scoring]
        for ev in evidence.itertuples(index=False):
            measured.add(str(ev.difference))
            rows.extend(_flip_rows(ev, base, flipped, models, protocol=protocol, scoring=scoring))
    for name, method in PROMPT_DIFFERENCES.items():
        if name in measured:
            continue
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


def _flip_rows(
    ev: object,
    base: pd.DataFrame,
    flipped: pd.DataFrame,
    models: pd.DataFrame,
    *,
    protocol: str,
    scoring: str,
) -> list[dict[str, object]]:
    """The ledger rows of one measured prompt difference on one model (``ev``: a row of the evidence)."""
    name, model = str(getattr(ev, "difference")), str(getattr(ev, "model"))  # noqa: B009
    changed, compared = int(getattr(ev, "changed")), int(getattr(ev, "compared"))  # noqa: B009
    kinds = str(getattr(ev, "changed_kinds"))  # noqa: B009
    at_k, at_set = int(getattr(ev, "k", -1)), int(getattr(ev, "set", -1))
    if name in LORA_DIFFERENCES:
        where = f" at k = {at_k}, demonstration set {at_set} only" if at_k >= 0 else ""
        note = f"{DIFFERENCES[name]} Measured on {model}{where}: {changed} of {compared} training examples differ"
    else:
        note = f"{DIFFERENCES[name]} Measured on {model}: {changed} of {compared} scored prompts differ"
        note += f" ({kinds})" if kinds else ""
    unmeasured = str(getattr(ev, "unmeasured"))  # noqa: B009
    if unmeasured:
        return [_note_row(name, model, f"{DIFFERENCES[name]} Not measured on {model}: {unmeasured}.")]
    out = []
    if name == "prompt_limit":
        paper_n, corrected_n = int(getattr(ev, "longest_paper")), int(getattr(ev, "longest_corrected"))  # noqa: B009
        note += f"; the longest prompt has {corrected_n} tokens of {model}'s tokenizer uncut, {paper_n} fitted"
        if changed == 0:
            note += ", so the limit changes no prompt and no number"
        out.append(
            {
                "difference": name,
                "model": model,
                "k": -1,
                "method": "",
                "metric": "longest_prompt_tokens",
                "paper": float(paper_n),
                "corrected": float(corrected_n),
                "gap": float(paper_n - corrected_n),
                "note": note + ".",
            }
        )
    if kinds and set(kinds.split(",")) & {"eval", "heldout"}:
        note += "; LoRA is trained and scored on prompts rendered the same way and is not re-measured"
    methods = [m for m in str(getattr(ev, "methods")).split(",") if m]  # noqa: B009
    if not methods:
        return out
    keys = ["task", "k", "set", "method"]
    mine = base[(base["model"] == model) & base["method"].isin(methods)]
    if at_k >= 0:  # measured at one (k, set): the other contexts' numbers are not compared
        mine = mine[(mine["k"] == at_k) & (mine["set"] == at_set)]
    other = flipped[(flipped["model"] == model) & (flipped["difference"] == name) & (flipped["scoring"] == scoring)]
    swapped = mine.set_index(keys)
    swapped.update(other.set_index(keys)[list(METRICS)])
    run = summarize(mine, models, set())
    alt = summarize(swapped.reset_index(), models, set())
    both = run[run["subset"] == "all"].merge(
        alt[alt["subset"] == "all"], on=["model", "k", "method"], suffixes=("_run", "_other"), validate="one_to_one"
    )
    first, second = ("run", "other") if protocol == "paper" else ("other", "run")
    for r in both.itertuples(index=False):
        for metric in SHOWN:
            row = _row(name, r, metric, getattr(r, f"{metric}_{first}"), getattr(r, f"{metric}_{second}"))
            row["note"] = note + "."
            out.append(row)
    return out


def _note_row(name: str, model: str, note: str) -> dict[str, object]:
    return {
        "difference": name,
        "model": model,
        "k": -1,
        "method": PROMPT_DIFFERENCES[name],
        "metric": "",
        "paper": float("nan"),
        "corrected": float("nan"),
        "gap": float("nan"),
        "note": note,
    }


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


# --- Prompt-changing differences, measured on this run's items -------------------------------

HOME_METHODS = {"dc_inputs": ("dc",), "empty_input": ("cc",), "prompt_limit": ()}
"""The method each prompt difference is about: its rows are in the ledger even when nothing changed."""
KIND_METHODS = {"eval": None, "heldout": None, "cc": ("cc",), "dc": ("dc",), "looc": ("looc",)}
"""Methods a changed prompt of each item kind moves (``None``: every in-context method)."""
IN_CONTEXT_METHODS = ("none", "cc", "dc", "looc")
NEAR_LIMIT = 64
"""Prompts within this many tokens of the limit get the exact fitting (the limit's checks join the
demonstrations with up to k - 1 extra spaces, so a prompt just under it may still lose one)."""


@dataclass(frozen=True)
class Flip:
    """One prompt difference on one model's items: the prompts it changes, rendered as the variant
    this run did not score (``prompt``, keyed by ``row_id``, ``k``, ``set``), and what was measured."""

    difference: str
    prompts: pd.DataFrame
    compared: int
    longest: tuple[int, int] | None = None
    """prompt_limit: the longest prompt in tokens of the model's tokenizer, (paper, corrected)."""
    unmeasured: str = ""
    """Why the difference could not be measured (empty when it was)."""

    @property
    def methods(self) -> tuple[str, ...]:
        """The in-context methods whose numbers the changed prompts can move, and the home method."""
        out = set(HOME_METHODS[self.difference])
        for kind in set(self.prompts["kind"]):
            out |= set(KIND_METHODS[kind] or IN_CONTEXT_METHODS)
        return tuple(m for m in IN_CONTEXT_METHODS if m in out)


def scored_contexts(items: pd.DataFrame, shots: Sequence[int], sets: int) -> pd.DataFrame:
    """One row per (item, context) the inference scores (``k``, ``set`` of each context), as
    :class:`unsure.labelbias.scoring.ItemScorer` expands them."""
    grid = pd.DataFrame(variants(shots, sets), columns=["k", "set"])
    plain = items[items["kind"] != "looc"].drop(columns=["k", "set"]).merge(grid, how="cross")
    out = pd.concat([plain, items[items["kind"] == "looc"]], ignore_index=True)
    return out[["row_id", "task", "kind", "input", "k", "set", "left_out"]]


def render(
    task: TaskPrompting, contexts: pd.DataFrame, *, paper_prompt: bool, fit: PromptFit | None = None
) -> list[str]:
    """The SNI prompt of each (item, context) row of one task (before any chat template)."""
    return [
        item_context(task.definition, task.pool, str(x), int(k), int(s), int(lo), paper=paper_prompt, fit=fit)
        for x, k, s, lo in zip(contexts["input"], contexts["k"], contexts["set"], contexts["left_out"], strict=True)
    ]


def prompt_flips(
    items: pd.DataFrame,
    other_items: pd.DataFrame,
    tasks: Mapping[str, TaskPrompting],
    *,
    shots: Sequence[int],
    sets: int,
    protocol: str,
    fit: PromptFit | None,
) -> list[Flip]:
    """Each prompt difference of the ledger flipped alone, the rest as this run scored:

    * ``dc_inputs``: the other protocol's domain-context inputs (``other_items``), rendered as this
      run renders prompts;
    * ``empty_input``: the other rendering of empty inputs (``Input: .`` vs ``Input:``), found by
      rendering every scored prompt both ways;
    * ``prompt_limit``: the authors' token limit (``fit``, the model's tokenizer) on or off; every
      prompt is counted, and those within :data:`NEAR_LIMIT` tokens of the limit are fitted exactly.

    ``fit`` is None when the model has no tokenizer: the limit is then not measured.
    """
    paper = protocol == "paper"
    run_fit = fit if paper else None
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in HOME_METHODS}
    compared = dict.fromkeys(HOME_METHODS, 0)
    longest = [0, 0]  # paper, corrected
    keys = ["row_id", "task", "kind", "k", "set"]
    for name, contexts in scored_contexts(items, shots, sets).groupby("task", sort=True):
        task = tasks[str(name)]
        # dc_inputs: the other protocol's inputs under this run's rendering
        dc = scored_contexts(other_items[(other_items["task"] == name) & (other_items["kind"] == "dc")], shots, sets)
        parts["dc_inputs"].append(dc[keys].assign(prompt=render(task, dc, paper_prompt=paper, fit=run_fit)))
        compared["dc_inputs"] += int((contexts["kind"] == "dc").sum())
        # empty_input: the other rendering wherever it differs
        mine = render(task, contexts, paper_prompt=paper)
        other = render(task, contexts, paper_prompt=not paper)
        differ = np.array([a != b for a, b in zip(mine, other, strict=True)], dtype=bool)
        flipped = contexts[differ]
        parts["empty_input"].append(
            flipped[keys].assign(prompt=render(task, flipped, paper_prompt=not paper, fit=run_fit))
        )
        compared["empty_input"] += len(contexts)
        # prompt_limit: every prompt counted, those near the limit fitted exactly
        if fit is None:
            continue
        counts = np.asarray(fit.tokens.counts(mine), dtype=np.int64)
        near = np.flatnonzero(counts > fit.max_tokens - NEAR_LIMIT)
        fitted = dict(zip(near, render(task, contexts.iloc[near], paper_prompt=paper, fit=fit), strict=True))
        cut = [i for i, text in fitted.items() if text != mine[i]]
        fitted_counts = counts.copy()
        if cut:
            fitted_counts[cut] = fit.tokens.counts([fitted[i] for i in cut])
        longest = [max(longest[0], int(fitted_counts.max())), max(longest[1], int(counts.max()))]
        other_text = [mine[i] if paper else fitted[i] for i in cut]
        parts["prompt_limit"].append(contexts.iloc[cut][keys].assign(prompt=other_text))
        compared["prompt_limit"] += len(contexts)
    empty = pd.DataFrame(columns=[*keys, "prompt"])
    out = []
    for name, frames in parts.items():
        prompts = pd.concat(frames, ignore_index=True) if frames else empty
        if name == "prompt_limit" and fit is None:
            out.append(Flip(name, empty, 0, unmeasured="the model has no tokenizer to count its prompts"))
        else:
            out.append(
                Flip(name, prompts, compared[name], (longest[0], longest[1]) if name == "prompt_limit" else None)
            )
    return out


def substitute(long: pd.DataFrame, rescored: pd.DataFrame) -> pd.DataFrame:
    """``long`` (one row per scored item and context) with the ``probs`` and ``probs_paper`` of the
    rows in ``rescored`` (keyed by ``row_id``, ``k``, ``set``) replaced."""
    keys = ["row_id", "k", "set"]
    index = pd.MultiIndex.from_frame(long[keys])
    new = rescored.set_index(keys)
    missing = new.index.difference(index)
    if len(missing):
        raise ValueError(f"rescored context {missing[0]} is not one of the scored contexts")
    out = long.copy()
    at = index.get_indexer(new.index)
    for col in ("probs", "probs_paper"):
        values = out[col].tolist()
        for i, v in zip(at, new[col], strict=True):
            values[i] = list(v)
        out[col] = values
    return out


def flipped_metrics(
    long: pd.DataFrame,
    flips: Sequence[Flip],
    rescored: pd.DataFrame,
    labels: Mapping[str, Sequence[str]],
    scorings: Sequence[str] = SCORINGS,
) -> pd.DataFrame:
    """Per-task metrics with each difference flipped (under each label scoring of ``scorings``):
    ``long`` (this run's scores) with the flip's prompts' rows replaced by their ``rescored``
    probabilities (keyed by ``difference``, ``row_id``, ``k``, ``set``). Only the tasks and methods
    a flip changes are recomputed (from the instances and the calibration inputs of those methods);
    the rest equal this run's."""
    parts = []
    for flip in flips:
        mine = rescored[rescored["difference"] == flip.difference]
        if mine.empty:
            continue
        kinds = {"eval", "heldout"} | {
            kind for kind, methods in KIND_METHODS.items() if set(methods or ()) & set(flip.methods)
        }
        changed = substitute(long[long["task"].isin(set(mine["task"])) & long["kind"].isin(kinds)], mine)
        for scoring in scorings:
            probs = method_probabilities(under_scoring(changed, scoring), dict(labels))
            per_task = task_metrics(probs, dict(labels))
            parts.append(
                per_task[per_task["method"].isin(flip.methods)].assign(difference=flip.difference, scoring=scoring)
            )
    columns = ["difference", "scoring", "task", "k", "set", "method", "n_eval", "n_heldout", *METRICS]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def flip_evidence(flips: Sequence[Flip]) -> pd.DataFrame:
    """What each flip measured: prompts compared and changed, the methods they move, the longest prompt."""
    return pd.DataFrame(
        {
            "difference": [f.difference for f in flips],
            "compared": [f.compared for f in flips],
            "changed": [len(f.prompts) for f in flips],
            "changed_kinds": [",".join(sorted(set(f.prompts["kind"]))) for f in flips],
            "methods": [",".join(f.methods) for f in flips],
            "longest_paper": [f.longest[0] if f.longest else -1 for f in flips],
            "longest_corrected": [f.longest[1] if f.longest else -1 for f in flips],
            "unmeasured": [f.unmeasured for f in flips],
            "k": pd.Series([-1] * len(flips), dtype=np.int64),  # every context
            "set": pd.Series([-1] * len(flips), dtype=np.int64),
        }
    )


# --- LoRA differences, measured by fine-tuning again with one flipped --------------------------

LORA_DIFFERENCES = ("lora_targets", "lora_examples")
"""The ledger's differences that change only the fine-tuned model (method ``lora``)."""


@dataclass(frozen=True)
class LoraFlip:
    """One LoRA difference flipped alone on one model: the (k, set) it is fine-tuned again at and
    how many of that run's training examples (over every task) it changes
    (:func:`unsure.labelbias.finetune.lora_flip_plan`)."""

    difference: str
    k: int
    set: int
    compared: int
    changed: int
    unmeasured: str = ""
    """Why no second fine-tuning run was made (empty when one was)."""


def lora_flip_metrics(
    scores: pd.DataFrame,
    items: pd.DataFrame,
    labels: Mapping[str, Sequence[str]],
    scorings: Sequence[str] = SCORINGS,
) -> pd.DataFrame:
    """Per-task ``lora`` metrics of each flipped fine-tuning run (``scores``: ``difference, task,
    row_id, k, set, probs, probs_paper``), in :func:`flipped_metrics`' columns, under each label
    scoring of ``scorings``."""
    columns = ["difference", "scoring", "task", "k", "set", "method", "n_eval", "n_heldout", *METRICS]
    parts = []
    for difference, part in scores.groupby("difference", sort=False):
        for scoring in scorings:
            probs = lora_probabilities(under_scoring(part.drop(columns="difference"), scoring), items, dict(labels))
            per_task = task_metrics(probs, dict(labels))
            parts.append(per_task.assign(difference=difference, scoring=scoring))
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def lora_flip_evidence(flips: Sequence[LoraFlip]) -> pd.DataFrame:
    """:func:`flip_evidence`'s columns for the LoRA flips: training examples compared and changed
    (kind ``train``), method ``lora``, and the (k, set) each was measured at."""
    return pd.DataFrame(
        {
            "difference": [f.difference for f in flips],
            "compared": [f.compared for f in flips],
            "changed": [f.changed for f in flips],
            "changed_kinds": ["train" if f.changed else "" for f in flips],
            "methods": ["lora" for _ in flips],
            "longest_paper": [-1 for _ in flips],
            "longest_corrected": [-1 for _ in flips],
            "unmeasured": [f.unmeasured for f in flips],
            "k": pd.Series([f.k for f in flips], dtype=np.int64),
            "set": pd.Series([f.set for f in flips], dtype=np.int64),
        }
    )
