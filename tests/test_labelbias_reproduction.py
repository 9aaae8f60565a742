"""The reproduction ledger's prompt differences (DC inputs, the empty input, the prompt limit), each
flipped alone on a tiny model: the prompts each changes against independent renderings and token
counts, and a quantified ledger row per difference."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure.engine.hf import HFEngine
from unsure.labelbias import prompts
from unsure.labelbias.prompts import PromptFit
from unsure.labelbias.reproduction import (
    SHOWN,
    Flip,
    flip_evidence,
    flipped_metrics,
    prompt_flips,
    reproduction_table,
    substitute,
)
from unsure.labelbias.scoring import ItemScorer, TaskPrompting, prompt_fit, score_contexts_both
from unsure.labelbias.tables import explode_scores, method_probabilities, task_metrics, under_scoring

LABELS = ("Yes", "No")
DEFINITION = "Decide whether the sentence mentions an animal"
WORDS = ["cat", "cup", "dog", "pen", "owl", "box", "cow", "car", "bee", "hat", "fox", "mug"]
SHOTS, SETS = (0, 2), 2
CONTENT_FREE = ("N/A", "")


def _instances() -> pd.DataFrame:
    """One task: 4 pool items (two sets of k = 2), 6 evaluation and 2 held-out instances."""
    splits = ["pool"] * 4 + ["eval"] * 6 + ["heldout"] * 2
    return pd.DataFrame(
        {
            "task": "task9_animals",
            "row_id": [f"r{i}" for i in range(len(splits))],
            "order": range(len(splits)),
            "split": splits,
            "input": [f"the {w} was on the table by the old wooden door" for w in WORDS],
            "gold": ["Yes" if w in {"cat", "dog", "owl", "cow", "bee", "fox"} else "No" for w in WORDS],
        }
    )


def _items(protocol: str) -> pd.DataFrame:
    return prompts.build_items(
        _instances(),
        shots=SHOTS,
        sets=SETS,
        content_free=CONTENT_FREE,
        n_domain=3,
        seed=0,
        protocol=protocol,
    )


def _task() -> dict[str, TaskPrompting]:
    inst = _instances()
    return {"task9_animals": TaskPrompting(DEFINITION, LABELS, tuple(prompts.pools(inst)["task9_animals"]))}


def _contexts(items: pd.DataFrame) -> list[tuple[str, str, int, int, int]]:
    """(row_id, input, k, set, left_out) of every scored context, expanded independently of the module."""
    out = []
    for r in items.itertuples(index=False):
        pairs = [(r.k, r.set)] if r.kind == "looc" else prompts.variants(SHOTS, SETS)
        out += [(r.row_id, r.input, k, s, r.left_out) for k, s in pairs]
    return out


@pytest.fixture(scope="module")
def engine(tiny_models: dict[str, Path]) -> HFEngine:
    return HFEngine(str(tiny_models["llama"]))


def _limit(engine: HFEngine) -> int:
    """A token limit that cuts the longer k = 2 prompts and leaves k = 0 ones whole."""
    task = _task()["task9_animals"]
    texts = [
        prompts.item_context(DEFINITION, task.pool, x, k, s, lo) for _, x, k, s, lo in _contexts(_items("corrected"))
    ]
    counts = sorted(len(ids) for ids in engine.tokenizer(texts)["input_ids"])
    return counts[len(counts) * 3 // 4]


@pytest.mark.parametrize("protocol", ["corrected", "paper"])
def test_each_flip_holds_exactly_the_prompts_its_difference_changes(engine: HFEngine, protocol: str) -> None:
    paper = protocol == "paper"
    other = "corrected" if paper else "paper"
    items, other_items = _items(protocol), _items(other)
    limit = _limit(engine)
    fit = prompt_fit(engine, limit)
    flips = {
        f.difference: f
        for f in prompt_flips(items, other_items, _task(), shots=SHOTS, sets=SETS, protocol=protocol, fit=fit)
    }
    task = _task()["task9_animals"]
    run_fit = fit if paper else None

    def keyed(flip: Flip) -> dict[tuple[str, int, int], str]:
        return {(r.row_id, int(r.k), int(r.set)): r.prompt for r in flip.prompts.itertuples(index=False)}

    # the limit: every prompt rendered uncut and fitted, compared and counted independently
    uncut, fitted = {}, {}
    for row_id, x, k, s, lo in _contexts(items):
        uncut[(row_id, k, s)] = prompts.item_context(DEFINITION, task.pool, x, k, s, lo, paper=paper)
        fitted[(row_id, k, s)] = prompts.item_context(DEFINITION, task.pool, x, k, s, lo, paper=paper, fit=fit)
    cut = {key for key in uncut if uncut[key] != fitted[key]}
    assert 0 < len(cut) < len(uncut)
    assert keyed(flips["prompt_limit"]) == {key: (uncut if paper else fitted)[key] for key in cut}
    lengths = {key: len(engine.tokenizer(text)["input_ids"]) for key, text in uncut.items()}
    assert flips["prompt_limit"].longest == (
        max(len(engine.tokenizer(t)["input_ids"]) for t in fitted.values()),
        max(lengths.values()),
    )
    assert max(lengths.values()) > limit >= flips["prompt_limit"].longest[0]
    assert flips["prompt_limit"].compared == len(uncut)
    # the empty input: only the empty content-free input's contexts, in the other rendering
    empty = keyed(flips["empty_input"])
    assert {key[0] for key in empty} == {"task9_animals:cc:1"} and len(empty) == len(prompts.variants(SHOTS, SETS))
    for (_, k, s), text in empty.items():
        assert text == prompts.item_context(DEFINITION, task.pool, "", k, s, paper=not paper, fit=run_fit)
        assert ("Input: .\n\nOutput:" in text) is (not paper)
    assert flips["empty_input"].methods == ("cc",)
    # DC: the other protocol's inputs, rendered as this run renders prompts
    dc = other_items[other_items["kind"] == "dc"].set_index("row_id")["input"]
    expected = {
        (row_id, k, s): prompts.item_context(DEFINITION, task.pool, dc[row_id], k, s, paper=paper, fit=run_fit)
        for row_id in dc.index
        for k, s in prompts.variants(SHOTS, SETS)
    }
    assert keyed(flips["dc_inputs"]) == expected
    assert set(dc) != set(items.loc[items["kind"] == "dc", "input"])
    assert flips["dc_inputs"].methods == ("dc",)


def test_substitute_replaces_only_the_rescored_contexts() -> None:
    long = pd.DataFrame(
        {
            "row_id": ["a", "a", "b"],
            "k": [0, 2, 0],
            "set": [0, 0, 0],
            "probs": [[0.5, 0.5]] * 3,
            "probs_paper": [[0.5, 0.5]] * 3,
        }
    )
    new = pd.DataFrame({"row_id": ["a"], "k": [2], "set": [0], "probs": [[0.9, 0.1]], "probs_paper": [[0.2, 0.8]]})
    out = substitute(long, new)
    assert out["probs"].tolist() == [[0.5, 0.5], [0.9, 0.1], [0.5, 0.5]]
    assert out["probs_paper"].tolist() == [[0.5, 0.5], [0.2, 0.8], [0.5, 0.5]]
    with pytest.raises(ValueError, match="not one of the scored contexts"):
        substitute(long, new.assign(k=4))


def _run(engine: HFEngine, protocol: str, fit: PromptFit | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """This run's scores (long) and per-task metrics under both label scorings, as rule evaluate makes them."""
    items = _items(protocol)
    scorer = ItemScorer(
        engine,
        _task(),
        shots=SHOTS,
        sets=SETS,
        paper_prompt=protocol == "paper",
        fit=fit if protocol == "paper" else None,
    )
    long = explode_scores(scorer(items), items)
    labels: dict[str, Sequence[str]] = {"task9_animals": LABELS}
    per_task = [
        task_metrics(method_probabilities(under_scoring(long, s), labels), labels).assign(scoring=s, model="m")
        for s in ("corrected", "paper")
    ]
    return long, pd.concat(per_task, ignore_index=True)


@pytest.mark.parametrize("protocol", ["corrected", "paper"])
def test_the_ledger_quantifies_every_prompt_difference(engine: HFEngine, protocol: str) -> None:
    fit = prompt_fit(engine, _limit(engine))
    long, per_task = _run(engine, protocol, fit)
    other = "corrected" if protocol == "paper" else "paper"
    flips = prompt_flips(_items(protocol), _items(other), _task(), shots=SHOTS, sets=SETS, protocol=protocol, fit=fit)
    rescored = pd.concat([f.prompts.assign(difference=f.difference) for f in flips], ignore_index=True)
    probs, probs_paper = score_contexts_both(engine, rescored["prompt"].tolist(), [LABELS] * len(rescored))
    rescored["probs"] = [p.tolist() for p in probs]
    rescored["probs_paper"] = [p.tolist() for p in probs_paper]
    flipped = flipped_metrics(long, flips, rescored, {"task9_animals": LABELS}).assign(model="m")
    evidence = flip_evidence(flips).assign(model="m")
    models = pd.DataFrame({"model": ["m"], "family": ["f"], "size": ["1"], "variant": ["base"]})
    ledger = reproduction_table(
        per_task,
        models,
        protocol=protocol,
        interchangeable=set(),
        semantically_equivalent=set(),
        flipped=flipped,
        evidence=evidence,
    )
    run_col, other_col = ("paper", "corrected") if protocol == "paper" else ("corrected", "paper")
    headline = per_task[per_task["scoring"] == run_col]
    for name, method in (("dc_inputs", "dc"), ("empty_input", "cc"), ("prompt_limit", "none")):
        rows = ledger[(ledger["difference"] == name) & (ledger["method"] == method)]
        assert set(rows["metric"]) == set(SHOWN) and set(rows["k"]) == set(SHOTS), name
        assert np.isfinite(rows[["paper", "corrected", "gap"]].to_numpy(float)).all(), name
        # this run's column is this run's numbers, averaged over tasks and sets
        for r in rows.itertuples(index=False):
            mine = headline[(headline["method"] == method) & (headline["k"] == r.k)][r.metric].mean()
            assert getattr(r, run_col) == pytest.approx(mine), (name, r.k, r.metric)
        assert "Measured on m:" in rows["note"].iloc[0]
    # the limit cuts k = 2 prompts only; every in-context method moves, and the k = 2 numbers differ
    limit = ledger[ledger["difference"] == "prompt_limit"]
    assert set(limit["method"]) == {"", "none", "cc", "dc", "looc"}
    assert limit.loc[limit["k"] == 0, "gap"].abs().max() == 0
    assert limit.loc[limit["k"] == 2, "gap"].abs().max() > 0
    longest = limit[limit["metric"] == "longest_prompt_tokens"].iloc[0]
    assert longest["corrected"] > longest["paper"] and "tokens of m's tokenizer" in longest["note"]
    # the other protocol's DC inputs move the DC numbers
    assert ledger.loc[ledger["difference"] == "dc_inputs", "gap"].abs().max() > 0
    # only the fine-tuning differences are left unmeasured here (rule labelbias_lora_differences measures them)
    unmeasured = ledger.loc[ledger["note"].str.startswith("this run scored"), "difference"]
    assert set(unmeasured) == {"lora_targets", "lora_examples"}
    assert ledger.loc[ledger["difference"] == "dc_inputs", other_col].notna().all()


def test_rescoring_the_runs_own_prompts_gives_back_its_numbers(engine: HFEngine) -> None:
    """The flipped numbers come from a second engine call: fed this run's own prompts it must give
    this run's metrics (the substitution and the recomputation add nothing)."""
    long, per_task = _run(engine, "corrected", None)
    items = _items("corrected")
    same = prompt_flips(items, items, _task(), shots=SHOTS, sets=SETS, protocol="corrected", fit=None)
    dc = next(f for f in same if f.difference == "dc_inputs")
    probs, probs_paper = score_contexts_both(engine, dc.prompts["prompt"].tolist(), [LABELS] * len(dc.prompts))
    rescored = dc.prompts.assign(
        difference="dc_inputs", probs=[p.tolist() for p in probs], probs_paper=[p.tolist() for p in probs_paper]
    )
    flipped = flipped_metrics(long, [dc], rescored, {"task9_animals": LABELS})
    keys = ["scoring", "task", "k", "set", "method"]
    mine = per_task[per_task["method"] == "dc"].drop(columns="model").set_index(keys).sort_index()
    again = flipped.drop(columns="difference").set_index(keys).sort_index()[mine.columns]
    # to the engine's batch invariance (1e-6): the rescoring batches the prompts differently, and a
    # batch's shared opening, encoded once, moves numbers by float noise (measured 2e-8)
    pd.testing.assert_frame_equal(again, mine, check_dtype=False, atol=1e-6)
