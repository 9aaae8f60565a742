"""Confidence sets (a distribution over an instance's choices) from each kind of model.

* the encoder: softmax of its choice scores (:mod:`unsure.engine.encoder`);
* generative log-likelihoods: the prompt is the context and each choice,
  after a space, a continuation; the softmax of the per-token mean
  (``normalize=True``) or summed log-probabilities;
* chat models, asked for a confidence per choice (:func:`.requests.verbal_prompt`); the
  reply is parsed by :func:`parse_verbal`. A reply that cannot be parsed gets
  the uniform distribution (no preference between choices) and is flagged, so
  it is counted and reported rather than dropped.
"""

from __future__ import annotations

import re
import string

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

LETTERS = string.ascii_uppercase


_ENTRY = re.compile(r"(?<![A-Za-z])([A-Z])\s*[:=.)\-]\s*(\d+(?:\.\d+)?)\s*%?")


def parse_verbal(reply: str, n_choices: int) -> Floats | None:
    """The distribution a reply states: each lettered option's number, normalised to sum to one.

    ``None`` when some option has no number, one has two different numbers, or
    all numbers are zero.
    """
    found: dict[int, float] = {}
    for letter, value in _ENTRY.findall(reply):
        i = LETTERS.index(letter)
        if i >= n_choices:
            continue
        if i in found and found[i] != float(value):
            return None
        found[i] = float(value)
    if len(found) != n_choices:
        return None
    scores = np.array([found[i] for i in range(n_choices)])
    if scores.sum() <= 0:
        return None
    out: Floats = scores / scores.sum()
    return out


def uniform(n_choices: int) -> Floats:
    """The confidence set of an unparseable reply: no preference between the choices."""
    return np.full(n_choices, 1.0 / n_choices)
