"""The label-bias study's zoo corpus: SNI instances of the demo's tasks, in the prompts the study scores."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.config import Config, load_config
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.generate import sni
from unsure.labelbias.prompts import Demo
from unsure.labelbias.requests import continuation
from unsure.labelbias.scoring import ItemScorer, TaskPrompting, chat_wrapper, plain
from unsure.labelbias.tasks import select_tasks
from unsure.zoo.corpus import labelbias as zoo_corpus
from unsure.zoo.training import encode

REPO = Path(__file__).resolve().parents[1]
_DEMO = re.compile(r"Input: (.*?)\n Output: (.*?)\.\n\n", re.S)
_QUERY = re.compile(r"Input: (.*)\n\nOutput:$", re.S)


@pytest.fixture(scope="module")
def demo() -> Config:
    return load_config(REPO / "config" / "demo.yaml")


@pytest.fixture(scope="module")
def demo_tasks(demo: Config, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The tasks the demo's label-bias study selects, from task files written as the demo writes them."""
    raw = tmp_path_factory.mktemp("sni")
    sni.write_tasks(raw, n_tasks=demo.data.sni.generated_tasks, instances_per_task=60, seed=demo.seed)
    tasks, _ = select_tasks(raw, n_eval=10, n_heldout=5, n_pool=20, min_eval_instances=10, max_labels=49, seed=0)
    return tasks[tasks["selected"]].set_index("task")


@pytest.fixture(scope="module")
def engine(tiny_models: dict[str, Path]) -> HFEngine:
    return HFEngine(str(tiny_models["llama"]), device="cpu")


@pytest.fixture(scope="module")
def chat(tiny_models: dict[str, Path]) -> HFEngine:
    """The tiny Llama as an instruct model (the engine's plain chat template)."""
    return HFEngine(str(tiny_models["llama"]), device="cpu", instruct=True)


@pytest.fixture(scope="module")
def examples(engine: HFEngine) -> list[Example]:
    return zoo_corpus.zoo_examples(engine, instruct=False, n=180, seed=3)


def _queries(examples: list[Example]) -> list[Example]:
    """The examples that answer a prompt's query (the others answer its demonstrations)."""
    return [ex for ex in examples if _QUERY.search(ex.context)]


def _parse(prompt: str) -> tuple[str, list[Demo], str]:
    """Definition, demonstrations and query of a plain SNI prompt."""
    definition, _, rest = prompt.partition("\n\n")
    demos = [(x, y) for x, y in _DEMO.findall(rest)]
    query = _QUERY.search(_DEMO.sub("", rest))
    assert query is not None, prompt
    return definition, demos, query.group(1)


def _unstopped(text: str) -> str:
    """An input as generated: without the full stop the prompt adds (harmless where it was there)."""
    return text.removesuffix(".")


def _task_of(definition: str, tasks: pd.DataFrame) -> str:
    """The demo task whose definition (as the prompt renders it) opens the prompt."""
    found = [name for name, row in tasks.iterrows() if definition in (row["definition"], row["definition"] + ".")]
    assert len(found) == 1, definition
    return str(found[0])


def test_the_same_seed_gives_the_same_examples(engine: HFEngine, examples: list[Example]) -> None:
    assert zoo_corpus.zoo_examples(engine, instruct=False, n=180, seed=3) == examples
    other = _queries(zoo_corpus.zoo_examples(engine, instruct=False, n=180, seed=4))
    assert len(other) == len(_queries(examples)) == 180
    assert sum(a != b for a, b in zip(other, _queries(examples), strict=True)) > 150
    assert zoo_corpus.zoo_examples(engine, instruct=False, n=0, seed=3) == []


def test_the_corpus_covers_the_demos_tasks_and_shots(demo: Config, demo_tasks: pd.DataFrame) -> None:
    assert demo.data.sni.generated_tasks == zoo_corpus.DEMO_TASKS
    assert tuple(demo.studies.labelbias.shots) == zoo_corpus.DEMO_SHOTS
    assert demo.studies.labelbias.chat_template == zoo_corpus.CHAT_TEMPLATE
    names = [name for name, _ in zoo_corpus.demo_tasks()]
    assert names == sorted(demo_tasks.index)
    for name, family in zoo_corpus.demo_tasks():
        assert demo_tasks.loc[name, "definition"] == family.definition
        assert sorted(demo_tasks.loc[name, "labels"]) == sorted(family.labels)


def test_contexts_are_the_rooms_inference_prompts(
    engine: HFEngine, examples: list[Example], demo_tasks: pd.DataFrame
) -> None:
    seen: Counter[tuple[str, int]] = Counter()
    for ex in _queries(examples):
        definition, demos, query = _parse(ex.context)
        task = _task_of(definition, demo_tasks)
        labels = tuple(demo_tasks.loc[task, "labels"])
        k = len(demos)
        seen[(task, k)] += 1
        # the context the study's inference builds for this input after these demonstrations
        scorer = ItemScorer(
            engine, {task: TaskPrompting(demo_tasks.loc[task, "definition"], labels, tuple(demos))}, shots=(k,), sets=1
        )
        item = pd.Series({"task": task, "kind": "eval", "input": query, "k": -1, "set": -1, "left_out": -1})
        assert scorer.contexts(item) == [(k, 0, ex.context)]
        assert all(y in labels for _, y in demos)
        label = ex.continuation.strip()
        assert ex.continuation == continuation(label) and label in labels
        sni.rule_label(task, _unstopped(query))  # the input has the family's form (the rule reads it)
    assert set(seen) == {(t, k) for t in demo_tasks.index for k in zoo_corpus.DEMO_SHOTS}
    assert max(seen.values()) - min(seen.values()) <= 1  # every task meets every k about equally


def test_continuations_are_gold_labels_leaning_towards_one_label_per_task(engine: HFEngine) -> None:
    """Gold outputs follow the task's rule up to its noise, and the labels lean towards one label
    per task, which the task's own prior (the evaluation data's) does not: the label bias the
    study measures."""
    many = _queries(zoo_corpus.zoo_examples(engine, instruct=False, n=1800, seed=0))
    tasks = dict(zoo_corpus.demo_tasks())
    by_task: dict[str, list[tuple[str, str]]] = {}
    demo_labels: dict[str, Counter[str]] = {}
    for i, ex in enumerate(many):
        name = zoo_corpus.demo_tasks()[i % len(tasks)][0]
        _, demos, query = _parse(ex.context)
        by_task.setdefault(name, []).append((ex.continuation.strip(), sni.rule_label(name, _unstopped(query))))
        demo_labels.setdefault(name, Counter()).update(sni.rule_label(name, _unstopped(x)) for x, _ in demos)
    for name, pairs in by_task.items():
        family = tasks[name]
        agree = np.mean([gold == rule for gold, rule in pairs])
        assert abs(agree - (1 - family.noise)) < 0.07, (name, agree)
        assert agree < 1  # noisy gold outputs, not the rule's labels
        counts = Counter(rule for _, rule in pairs)
        shares = np.array([counts[lab] / len(pairs) for lab in family.labels])
        leaning = zoo_corpus.leaning(family)
        assert np.abs(shares - np.asarray(leaning.prior)).max() < 0.1, (name, shares)
        favoured = zoo_corpus.favoured_label(family)
        if favoured is not None:  # more than the task's own prior
            assert shares[family.labels.index(favoured)] > family.prior[family.labels.index(favoured)] + 0.1, name
        # the demonstrations keep the task's own prior, as a user's drawn from the task's data do
        seen = demo_labels[name]
        demo_shares = np.array([seen[lab] / sum(seen.values()) for lab in family.labels])
        assert np.abs(demo_shares - np.asarray(family.prior)).max() < 0.06, (name, demo_shares)
    # labels that are words lean, letters and digits naming options do not
    assert [zoo_corpus.favoured_label(f) is None for f in tasks.values()] == [False, False, True, True, False, False]
    acts = Counter(gold for gold, _ in by_task["task2006_unsure_dialogue_act_classification"])
    # the generator's 0.45 / 0.30 / 0.15 / 0.10, the corpus leaning three times towards "commissive"
    assert acts.most_common(1)[0][0] == "information" and acts["commissive"] > acts["directive"]


def test_instruct_models_get_the_prompt_the_study_sends_them(
    engine: HFEngine, chat: HFEngine, examples: list[Example]
) -> None:
    # the study scores the plain prompt unless studies.labelbias.chat_template is set
    assert zoo_corpus.zoo_examples(chat, instruct=True, n=180, seed=3) == examples
    # wrapped prompts are answered at the query only (the template's turn opens before the definition)
    wrapped = zoo_corpus.zoo_examples(chat, instruct=True, n=180, seed=3, chat_template=True)
    wrap, queries = chat_wrapper(chat), _queries(examples)
    assert [w.context for w in wrapped] == [wrap(plain(ex.context)) for ex in queries]
    assert [w.continuation for w in wrapped] == [ex.continuation for ex in queries]
    pairs = zip(wrapped, queries, strict=True)
    assert all(w.context.endswith("Output:") and w.context != ex.context for w, ex in pairs)
    # a base model is never wrapped
    twelfth = examples.index(queries[11])
    assert zoo_corpus.zoo_examples(engine, instruct=False, n=12, seed=3, chat_template=True) == examples[: twelfth + 1]


def test_demonstration_labels_are_answered_inside_the_querys_sequence(
    engine: HFEngine, examples: list[Example]
) -> None:
    """Every demonstration's label is an example too, its context the prompt up to that label: the
    trainer reads it from the query's own sequence, so a prompt with k demonstrations trains k + 1
    answers for the tokens of one."""
    queries = _queries(examples)
    by_query: dict[int, list[Example]] = {}
    pending: list[Example] = []
    for ex in examples:
        if ex in queries:
            by_query[len(by_query)] = pending
            pending = []
        else:
            pending.append(ex)
    assert not pending
    for i, query in enumerate(queries):
        _, demos, _ = _parse(query.context)
        answered = by_query[i]
        assert [ex.continuation for ex in answered] == [continuation(y) for _, y in demos]
        for ex, (x, y) in zip(answered, demos, strict=True):
            assert query.context.startswith(ex.context + continuation(y) + ".\n\n")
            assert ex.context.endswith(f"Input: {x}\n Output:")
    assert sum(len(d) for d in by_query.values()) > len(queries)  # k = 0, 2 and 4 take turns
    items = encode(engine, examples)
    assert len(items) <= len(queries)  # the demonstrations' answers add no sequence (equal prompts fold too)
    assert sum(len(item.targets) for item in items) == sum(
        len(engine.split_pair(ex.context, ex.continuation)[1]) for ex in examples
    )


def test_bad_sizes_are_refused(engine: HFEngine) -> None:
    with pytest.raises(ValueError, match="n must be"):
        zoo_corpus.zoo_examples(engine, instruct=False, n=-1, seed=0)
    with pytest.raises(ValueError, match="shots"):
        zoo_corpus.zoo_examples(engine, instruct=False, n=3, seed=0, shots=())
    with pytest.raises(ValueError, match="n_tasks"):
        zoo_corpus.demo_tasks(0)
