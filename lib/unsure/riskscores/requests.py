"""What riskscores asks the engine, from its rows and settings: the one place that says it.

The scorer (:mod:`.scoring`), the zoo's training examples and the cost estimate read the
requests from here rather than build prompts themselves; the estimate's counts of them per rule
are here too (:func:`request_sets`, :func:`rule_work`; :mod:`unsure.workload`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

from unsure.config import Config, Protocol
from unsure.engine import ChoiceRequest, NumericRequest
from unsure.riskscores.analysis import evidence_steps
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.prompts import LETTERS, Shot, build_prompt
from unsure.riskscores.tasks import FOLKTABLES, Task, person_columns, read_person_zip, task_from_spec
from unsure.riskscores.text import frame_text
from unsure.workload import CHAT_TOKENS, EstimateError, RequestSet, Work, evenly, need, work

Chat = Callable[[str, str], str]
"""An instruct model's chat template: ``chat(user, prefill)`` (:func:`.scoring.chat_wrapper`)."""


def option_orders(both_orders: bool) -> tuple[int, ...]:
    """The option orders a multiple-choice row is asked in (both: folktexts' letter-bias cancelling)."""
    return (0, 1) if both_orders else (0,)


def choice_requests(
    texts: Sequence[str],
    task: Task,
    *,
    year: int,
    both_orders: bool,
    shots: Sequence[Shot] = (),
    chat: Chat | None = None,
    protocol: Protocol,
) -> list[ChoiceRequest]:
    """Multiple choice: one request per row and option order, every row's first order, then
    every row's second (one call: the engine encodes the features a row's orders share once)."""

    def prompt(text: str, order: int) -> str:
        return build_prompt(task, text, "multiple_choice", order, year=year, shots=shots, chat=chat, protocol=protocol)

    return [ChoiceRequest(prompt(t, o), LETTERS) for o in option_orders(both_orders) for t in texts]


def numeric_requests(
    texts: Sequence[str],
    task: Task,
    *,
    year: int,
    shots: Sequence[Shot] = (),
    chat: Chat | None = None,
    protocol: Protocol,
) -> list[NumericRequest]:
    """Numeric: one request per row, its prompt ending in ``0.`` (a chat API answers it in free form)."""
    return [
        NumericRequest(build_prompt(task, t, "numeric", 0, year=year, shots=shots, chat=chat, protocol=protocol))
        for t in texts
    ]


ACS_POPULATION = {
    # folktables (Ding et al., NeurIPS 2021): task populations, ACS PUMS 2018 1-Year, all states
    "ACSIncome": 1_664_500,
    "ACSEmployment": 3_236_107,
    "ACSMobility": 620_937,
    "ACSTravelTime": 1_466_648,
    "ACSPublicCoverage": 1_138_289,
}


def request_sets(cfg: Config, data: Path, *, sample: int, tokenizer: Any, encoder: Any = None) -> Iterator[RequestSet]:
    """Per task, the requests of each rule on sampled person records of the smallest state zip (the corrected
    words): ``risk/mc``, ``risk/numeric`` (with shots), ``risk/plain`` (importance) and ``risk/evidence``."""
    acs, study = cfg.data.acs, cfg.studies.riskscores
    if not study.models:
        return
    raw = data / "acs" / "raw" / str(acs.year) / acs.horizon
    year_part = str(acs.year) if acs.horizon == "1-Year" else f"{acs.year - 4}-{acs.year}"
    dictionary = read_dictionary(need(raw / f"PUMS_Data_Dictionary_{year_part}.csv", "ACS data dictionary"))
    zips = sorted(need(raw, "ACS person files").glob("csv_p*.zip"), key=lambda p: p.stat().st_size)
    if not zips:
        raise EstimateError(f"{raw}: no ACS person zip (csv_p<state>.zip)")
    persons = read_person_zip(zips[0], person_columns(study.custom_tasks.values(), [study.subgroup_column]))
    asked = partial(choice_requests, year=acs.year, protocol="corrected", both_orders=study.both_orders)
    for name in study.tasks:
        spec = study.custom_tasks.get(name)
        task = task_from_spec(name, spec.model_dump() if spec else None, dictionary)
        rows = persons[task.population(persons)]
        if len(rows) < 10 and spec is not None and spec.based_on:  # a filter this state zip does not meet
            rows = persons[FOLKTABLES[spec.based_on].population(persons)]
        rows = evenly(rows, sample)
        if rows.empty:
            raise EstimateError(f"{zips[0]}: no person record in task {name}'s population to build prompts from")
        texts = frame_text(rows, task.features, dictionary).tolist()
        shots = [Shot(texts[i % len(texts)], i % 2) for i in range(study.few_shot)]
        few = rows.head(max(1, len(rows) // 4))  # a prompt per step and row: a quarter of the rows is plenty
        steps = [frame_text(few, f, dictionary).tolist() for f in evidence_steps(task.features)]
        sets: dict[str, tuple[Sequence[ChoiceRequest | NumericRequest], int]] = {
            "mc": (asked(texts, task, shots=shots), len(texts)),
            "numeric": (numeric_requests(texts, task, year=acs.year, shots=shots, protocol="corrected"), len(texts)),
            "plain": (asked(texts, task), len(texts)),
            "evidence": ([r for s in steps for r in asked(s, task)], len(few) * len(steps)),
        }
        for key, (requests, units) in sets.items():
            yield RequestSet(f"risk/{key}/{name}", requests, units, [r.prompt for r in requests])


def task_features(cfg: Config, task: str) -> tuple[str, ...]:
    """A task's features, without reading the data dictionary."""
    spec = cfg.studies.riskscores.custom_tasks.get(task)
    if spec is None:
        return tuple(FOLKTABLES[task].features)
    return tuple(spec.features or FOLKTABLES[str(spec.based_on)].features)


def rule_work(cfg: Config, per_unit: Mapping[str, float]) -> list[Work]:
    """``riskscores_infer`` (a job scores every task and prompting of its model and shard: one load per job),
    ``riskscores_importance`` (each feature permuted) and ``riskscores_evidence`` (each step)."""
    study, out = cfg.studies.riskscores, []
    orders = len(option_orders(study.both_orders))
    for m in study.models:
        entry = cfg.models[m]
        api, chat = entry.backend == "openai", CHAT_TOKENS if entry.instruct else 0
        first = True
        for t in study.tasks:
            rows = min(study.n_eval, ACS_POPULATION.get(t, study.n_eval)) + study.threshold_rows
            for p in study.prompting:  # a chat API answers a numeric prompt in one free-form reply
                mc = p == "multiple_choice"
                tokens = rows * (per_unit[f"risk/{'mc' if mc else 'numeric'}/{t}"] + chat)
                requests = rows * (orders if mc else 1 if entry.instruct else 2)
                kind, loads, first = ("risk_scores" if mc else "numeric"), (study.shards if first else 0), False
                out.append(work("riskscores_infer", m, {"rs_model": m}, api=api, tokens=tokens, requests=requests,
                                loads=loads, kind=kind))  # fmt: skip
            features = task_features(cfg, t)
            steps: dict[Literal["importance", "evidence"], int] = {
                "importance": 1 + len(features),  # each feature permuted
                "evidence": len(evidence_steps(features)),
            }
            for rule, n in steps.items():
                if m in study.analysis_models(rule) and t in study.analysis_tasks(rule):
                    rows = min(getattr(study, rule).rows, study.n_eval) * n
                    tokens = rows * (per_unit[f"risk/{'plain' if rule == 'importance' else rule}/{t}"] + chat)
                    out.append(work(f"riskscores_{rule}", m, {"rs_model": m, "rs_task": t}, api=api, tokens=tokens,
                                    requests=rows * orders, loads=1, kind="risk_scores"))  # fmt: skip
    return out
