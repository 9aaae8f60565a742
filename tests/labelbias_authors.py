"""A literal port of the label-bias authors' label scoring, for tests only (never imported by lib).

The authors' released code (schwartz-lab-NLP/label-bias, ``src/superni/utils/predict_utils.py``
and ``score_completions_for_task`` in ``src/superni/run_completions_eval.py``) scores one task's
prompts of one run (one shot count, one demonstration set, one kind of input) as a batch:

* the batch's shared prefix, ``os.path.commonprefix(prompts)`` less its last character, is
  encoded once (BOS added) and its key/value cache kept;
* each (prompt, label) is tokenised whole as ``prompt + ' ' + label + EOS``, the prompt's
  tokens (``len(tokenizer(prompt))``, BOS included) masked out of the labels; the first
  ``len(prefix tokens)`` tokens are cut off and the rest run after the prefix cache;
* a label's score is minus the model's mean loss over what is left (the label's tokens and
  EOS); probabilities are ``exp(score)`` normalised over the labels.

The cut assumes the prefix's tokens are the first tokens of every prompt. When the prefix ends
inside a token (a shared first character of differing inputs, a trailing space), the cached
tokens are not the prompt's and the scores move; :func:`prefix_aligned` tells such batches.

Written here from their code so a test can hold the project's ``paper`` scoring to it; their
code itself is not in this repository.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

IGNORE = -100
"""The loss's ignore index (their ``labels[:, :n_prompt] = -100``)."""


def get_shared_prompt_prefix(prompts: Sequence[str]) -> str:
    """The batch's common prefix less its last character (their ``get_shared_prompt_prefix``)."""
    return os.path.commonprefix(list(prompts))[:-1]  # noqa: RUF071 (character by character, as theirs)


def encode_with_prompt_completion_format(prompt: str, completion: str, tokenizer: Any) -> dict[str, torch.Tensor]:
    """``prompt + ' ' + completion + EOS`` tokenised whole, prompt tokens masked (their function of
    the same name, with ``max_seq_length=None`` as ``score_completions`` calls it)."""
    if not prompt.endswith((" ", "\n", "\t")) and not completion.startswith((" ", "\n", "\t")):
        text = prompt + " " + completion
    else:
        text = prompt + completion
    text = text + tokenizer.eos_token
    input_ids = tokenizer(text, return_tensors="pt", max_length=None, truncation=True).input_ids
    labels = input_ids.clone()
    n_prompt = tokenizer(prompt, return_tensors="pt", max_length=None, truncation=True).input_ids.shape[1]
    labels[:, :n_prompt] = IGNORE
    return {
        "input_ids": input_ids.flatten(),
        "labels": labels.flatten(),
        "attention_mask": torch.ones_like(input_ids).flatten(),
    }


def score_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    answer_choices: Sequence[Sequence[str]],
    prefix: str | None = None,
) -> list[dict[str, float]]:
    """Minus the mean loss over each completion's tokens and EOS, per prompt (their
    ``score_completions``, on the model's device instead of ``.cuda()``, no progress bar; their
    ``if isinstance(prompt, list): prompt = list[0]`` never fires on text prompts and is left out).

    Their transformers (4.40) rebuilt the cache from the returned tuple on every call, so every
    completion ran after the prefix alone; today's caches grow in place, so each call gets a copy.
    Today's transformers name their ``past_key_values`` ``cache``; the prefix pass keeps one
    logit row (the cache is the same, the rows went unused).
    """
    device = model.device
    results: list[dict[str, float]] = []
    with torch.no_grad():
        cache = None
        len_prefix = 0
        if prefix is not None:
            prefix_ids = tokenizer(prefix, return_tensors="pt").input_ids.to(device)
            cache = model(input_ids=prefix_ids, use_cache=True, logits_to_keep=1).cache
            len_prefix = cache.get_seq_length()
        for prompt, completions in zip(prompts, answer_choices, strict=True):
            result = {}
            for completion in completions:
                encoded = encode_with_prompt_completion_format(prompt, completion, tokenizer)
                if cache is not None:
                    # the attention mask keeps the prefix's positions; ids and labels lose them
                    batch = {
                        key: value.unsqueeze(0) if key == "attention_mask" else value.unsqueeze(0)[:, len_prefix:]
                        for key, value in encoded.items()
                    }
                    outputs = model(**{k: v.to(device) for k, v in batch.items()}, cache=copy.deepcopy(cache))
                else:
                    outputs = model(**{key: value.unsqueeze(0).to(device) for key, value in encoded.items()})
                result[completion] = -float(outputs.loss.item())
            results.append(result)
    return results


def task_probabilities(log_likelihoods: Sequence[dict[str, float]], labels: Sequence[str]) -> np.ndarray:
    """``exp(score)`` normalised over the labels, in ``labels``' order (their ``score_completions_for_task``)."""
    out = []
    for scores in log_likelihoods:
        exp = {label: np.exp(scores[label]) for label in scores}
        total = np.sum(list(exp.values()))
        out.append([exp[label] / total for label in labels])
    return np.array(out)


def score_batch(model: Any, tokenizer: Any, prompts: Sequence[str], labels: Sequence[str]) -> list[dict[str, float]]:
    """One batch as their ``score_completions_for_task`` runs it: the batch's shared prefix cached."""
    prefix = get_shared_prompt_prefix(prompts)
    return score_completions(model, tokenizer, prompts, [list(labels)] * len(prompts), prefix=prefix)


def prefix_aligned(tokenizer: Any, prompts: Sequence[str], labels: Sequence[str]) -> bool:
    """Whether the shared prefix's tokens are the first tokens of every (prompt, label) sequence
    (then the cache changes nothing: each label is scored as in one plain forward pass)."""
    prefix_ids = tokenizer(get_shared_prompt_prefix(prompts))["input_ids"]
    return all(
        encode_with_prompt_completion_format(p, label, tokenizer)["input_ids"][: len(prefix_ids)].tolist() == prefix_ids
        for p in prompts
        for label in labels
    )
