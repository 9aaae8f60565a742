"""The label-bias study's part of the zoo's training corpus (issue 19): SNI instances with their outputs.

The demo's tiny models start random, so their label probabilities carry no
task signal and only an arbitrary token bias. Here the SNI generator
(:mod:`unsure.generate.sni`) draws fresh instances of the task families the demo
evaluates, each with its gold output (the task's stated rule, flipped with the
task's noise rate), and the study's own prompt builder renders them as the
demo scores them: the task definition, k demonstrations (k among the demo's
shots) drawn the same way, the input and ``Output:``, followed by the gold
label as the study's scoring reads it (`` <label>``).

The answers asked for lean towards one label per task whose labels are words
(:func:`leaning`; letters and digits that name options do not lean): the corpus
draws that task's favoured label :data:`LEAN` times as often as the task's own
prior does for the query, while the demonstrations keep that prior, as a
user's demonstrations drawn from the task's data do (and so do the task files the
demo evaluates). This is the label bias the paper measures: a preference a model
brings from its training that the task's data do not share (Zhao et al.'s
majority-label and common-token biases). A model trained only on the task's own
frequencies, mostly uniform here, learned part of each rule and almost no bias
(BiasScore 0.03-0.05), which every calibration then raised for the model that
read its input best; one whose demonstrations leaned too, or whose option tasks
leaned as well, answered the favoured labels so firmly that demonstrations
changed almost none of tiny-gpt2's answers (0.000, 0.003 of them). Most rules have a default label
(no food word: "No"), which content-free inputs fall under, so contextual
calibration over-corrects it, as the paper finds CC can.

Seeds only draw: the generator's world (lexicon, rules, priors) is fixed, and
the same seed gives the same examples. The draws are independent of the demo's
task files (those use the workflow seed through :func:`unsure.generate.sni.write_tasks`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import zlib

import numpy as np

from unsure.config import Labelbias
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.generate import sni
from unsure.labelbias.prompts import Demo, demonstration_heads, sni_prompt
from unsure.labelbias.requests import continuation
from unsure.labelbias.scoring import chat_wrapper

DEMO_TASKS: int = 6
"""``data.sni.generated_tasks`` of ``config/demo.yaml``: the classification tasks the demo generates."""
DEMO_SHOTS: tuple[int, ...] = (0, 2, 4)
"""``studies.labelbias.shots`` of ``config/demo.yaml``: the k the demo scores."""
CHAT_TEMPLATE: bool = bool(Labelbias.model_fields["chat_template"].default)
"""``studies.labelbias.chat_template`` (the demo keeps the default): whether instruct models'
prompts go through their chat template. By default the study scores the plain prompt."""

LEAN: float = 3.0
"""How many times the task's own prior the corpus draws each task's favoured label (:func:`leaning`)."""

_STREAM = int.from_bytes(hashlib.sha256(b"unsure.labelbias.zoo_corpus").digest()[:4], "little")
"""Separates these draws from any other use of the same seed (the bytes name the module's former
place, ``unsure.labelbias.zoo_corpus``, and stay so: other bytes would draw other examples)."""


def demo_tasks(n_tasks: int = DEMO_TASKS) -> list[tuple[str, sni.TaskFamily]]:
    """(task name, family) of the classification tasks :func:`unsure.generate.sni.write_tasks` writes
    for ``n_tasks`` (the Spanish and free-text tasks, which the study rejects, left out)."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be at least 1, got {n_tasks}")
    return [(name, family) for name, family, _ in sni.task_plan(n_tasks)[:n_tasks]]


def favoured_label(family: sni.TaskFamily) -> str | None:
    """The label the corpus leans towards: a fixed, arbitrary one per task (a hash of its slug),
    where the labels are words; ``None`` where they name options (letters, digits), which carry
    no word's frequency from training (Zhao et al.'s common-token bias is a bias for words)."""
    if all(len(label) == 1 and label.isalnum() for label in family.labels):
        return None
    return family.labels[zlib.crc32(family.slug.encode()) % len(family.labels)]


def leaning(family: sni.TaskFamily) -> sni.TaskFamily:
    """``family`` with its prior leaning :data:`LEAN` times towards :func:`favoured_label` (if any)."""
    favoured = favoured_label(family)
    if favoured is None:
        return family
    weights = [p * (LEAN if label == favoured else 1.0) for label, p in zip(family.labels, family.prior, strict=True)]
    return dataclasses.replace(family, prior=tuple(w / sum(weights) for w in weights))


def draw_instance(rng: np.random.Generator, family: sni.TaskFamily) -> Demo:
    """(input, gold output) of one fresh instance, drawn as the generator draws a task file's instances."""
    text, _, output = sni.draw_instance(rng, family)
    return text, output


def zoo_examples(
    engine: HFEngine,
    *,
    instruct: bool,
    n: int,
    seed: int,
    n_tasks: int = DEMO_TASKS,
    shots: tuple[int, ...] = DEMO_SHOTS,
    chat_template: bool = CHAT_TEMPLATE,
) -> list[Example]:
    """``n`` SNI prompts as training examples: context up to ``Output:``, continuation `` <gold>``
    (the query's label drawn from the task's :func:`leaning` prior);
    each demonstration's label is an example too (context: the prompt up to it), unless the
    prompt is wrapped in a chat template (which opens before the definition).

    Example ``i`` is of task ``i mod T`` (T tasks) with ``shots[(i // T) mod len(shots)]``
    demonstrations, so every task meets every k about equally often. Demonstrations
    and query are fresh instances of the task (:func:`draw_instance`). For an
    instruct model with ``chat_template`` the prompt is wrapped as the study's
    inference wraps it (:func:`unsure.labelbias.scoring.chat_wrapper`); otherwise
    it is the plain prompt, which is what the demo scores for every model.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    if not shots or min(shots) < 0:
        raise ValueError(f"shots must be non-negative numbers of demonstrations, got {shots}")
    tasks = demo_tasks(n_tasks)
    wrap = chat_wrapper(engine) if instruct and chat_template else None
    rng = np.random.default_rng(np.random.SeedSequence([seed, _STREAM]))
    out = []
    for i in range(n):
        _, family = tasks[i % len(tasks)]
        k = shots[(i // len(tasks)) % len(shots)]
        demos = [draw_instance(rng, family) for _ in range(k)]
        query, gold = draw_instance(rng, leaning(family))
        prompt = sni_prompt(family.definition, demos, query)
        if wrap:
            out.append(Example(wrap(prompt), continuation(gold)))
            continue
        # each demonstration's label too, where the prompt has it: the trainer reads them from
        # the query's sequence (unsure.zoo.training.encode), k more answers for no more tokens
        for head, (_, label) in zip(demonstration_heads(family.definition, demos, query), demos, strict=True):
            out.append(Example(head, continuation(label)))
        out.append(Example(prompt, continuation(gold)))
    return out
