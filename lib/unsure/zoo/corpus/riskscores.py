"""Training examples for the zoo: the study's prompts with answers drawn from the true P(Y | X).

Fresh person records come from the ACS generator (``unsure.generate.acs``) and go
through the study's real reading path (Census zip, data dictionary, folktables
task filters, feature text). Each example is one prompt of the ``corrected``
protocol (the demo's), zero-shot, in either prompting:

- multiple choice, in both option orders, answered by each letter weighted by
  the generator's exact probability of its label (the expectation of answers
  drawn from P(Y | X); the trainer reads both letters from one sequence);
- numeric, answered by the two digits after ``0.`` of that probability (of the
  label the question asks about), which the engine's numeric procedure reads.

An instruct model gets both through its chat template, as the study renders them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.generate.acs import TASKS, true_probabilities, write_data_dictionary, write_state_zip
from unsure.riskscores.dictionary import DataDictionary, read_dictionary
from unsure.riskscores.prompts import numeric_label, positive_letter, row_texts
from unsure.riskscores.requests import choice_requests, numeric_requests, option_orders
from unsure.riskscores.scoring import chat_wrapper
from unsure.riskscores.tasks import BASE_COLUMNS, FOLKTABLES, read_person_zip

STATES = ("CA", "TX", "NY", "FL")
"""States the records come from (the demo's two and two more)."""

YEAR = 2018
ROWS_PER_STATE = 1500

DEMO_PROTOCOL: Protocol = "corrected"
"""The protocol the examples are written in (the demo's)."""


def _persons(seed: int) -> tuple[pd.DataFrame, pd.DataFrame, DataDictionary]:
    """Generated records read back as the study reads them, and their true probabilities."""
    with tempfile.TemporaryDirectory() as tmp:
        dictionary_path = Path(tmp) / "dictionary.csv"
        write_data_dictionary(dictionary_path, year=YEAR)
        frames = []
        for state in STATES:
            path = Path(tmp) / f"csv_p{state.lower()}.zip"
            write_state_zip(path, state=state, year=YEAR, n_rows=ROWS_PER_STATE, seed=seed)
            frames.append(read_person_zip(path, BASE_COLUMNS))
        dictionary = read_dictionary(dictionary_path)
    persons = pd.concat(frames, ignore_index=True)
    return persons, true_probabilities(persons), dictionary


def draws(*, n: int, seed: int) -> pd.DataFrame:
    """The rows behind ``n`` prompts, spread over the five tasks: each with its feature text,
    true probability of label 1 and prompting. Two thirds of the prompts are multiple choice,
    each row asked in both option orders (their contrast is what teaches the letters' meaning),
    one third numeric."""
    rng = np.random.default_rng(seed)
    persons, truth, dictionary = _persons(seed)
    frames = []
    per_task = -(-2 * n // (3 * len(TASKS)))  # a multiple-choice row gives two prompts, a numeric one one
    for name in TASKS:
        population = persons[FOLKTABLES[name].population(persons)]
        picked = population.iloc[rng.choice(len(population), size=min(per_task, len(population)), replace=False)]
        frames.append(
            pd.DataFrame(
                {
                    "row_id": picked["row_id"].to_numpy(),
                    "task": name,
                    "text": row_texts(picked, FOLKTABLES[name].features, dictionary, protocol=DEMO_PROTOCOL).to_numpy(),
                    "p_true": truth.loc[picked.index, name].to_numpy(),
                    "prompting": np.where(rng.random(len(picked)) < 0.5, "multiple_choice", "numeric"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _examples(chat: Callable[[str, str], str] | None, *, n: int, seed: int) -> list[Example]:
    examples: list[Example] = []
    for row in draws(n=n, seed=seed).itertuples(index=False):
        task, p = FOLKTABLES[str(row.task)], float(row.p_true)
        if row.prompting == "multiple_choice":  # both orders: their contrast is the option reading to learn
            text = [str(row.text)]
            asked = choice_requests(text, task, year=YEAR, both_orders=True, chat=chat, protocol=DEMO_PROTOCOL)
            for order, request in zip(option_orders(True), asked, strict=True):
                positive = positive_letter(order, protocol=DEMO_PROTOCOL)
                for i, letter in enumerate(request.options):
                    weight = p if i == positive else 1 - p
                    examples.append(Example(request.prompt, f" {letter}", weight, after_prompt=True))
        else:
            (numeric,) = numeric_requests([str(row.text)], task, year=YEAR, chat=chat, protocol=DEMO_PROTOCOL)
            q = p if numeric_label(task, protocol=DEMO_PROTOCOL) == 1 else 1 - p
            examples.append(Example(numeric.prompt, f"{min(round(q * 100), 99):02d}", after_prompt=True))
    return examples


def zoo_examples(engine: HFEngine, *, instruct: bool, n: int, seed: int) -> list[Example]:
    """The training examples of one zoo model (through its chat template when ``instruct``)."""
    return _examples(chat_wrapper(engine, instruct, protocol=DEMO_PROTOCOL), n=n, seed=seed)


def tokenizer_texts(*, n: int, seed: int) -> list[str]:
    """Plain prompts for training a zoo tokenizer, so that it learns the Census words
    as a real tokenizer knows them (a prompt is ~120 tokens instead of ~550)."""
    return [ex.context for ex in _examples(None, n=n, seed=seed)]
