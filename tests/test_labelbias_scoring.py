"""Label probabilities against independent fresh forward passes, and LoRA fine-tuning round trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unsure.engine import ContinuationRequest
from unsure.engine.hf import HFEngine
from unsure.engine.lora import LoraSettings, train_adapter
from unsure.labelbias import prompts
from unsure.labelbias.requests import continuation
from unsure.labelbias.scoring import ItemScorer, TaskPrompting, score_contexts_both

LABELS = ("Yes", "No", "maybe so")  # label token lengths differ: scores are length-normalised
POOL = tuple(
    (f"the {w} was on the table", lab)
    for w, lab in zip(["cat", "cup", "dog", "pen"], ["Yes", "No", "Yes", "No"], strict=True)
)
TASK = TaskPrompting("Decide whether the sentence mentions an animal", LABELS, POOL)


def _items() -> pd.DataFrame:
    rows = [
        {
            "row_id": "e0",
            "task": "t",
            "kind": "eval",
            "input": "a bird sang",
            "gold": "Yes",
            "k": -1,
            "set": -1,
            "left_out": -1,
        },
        {
            "row_id": "e1",
            "task": "t",
            "kind": "eval",
            "input": "the car stopped",
            "gold": "No",
            "k": -1,
            "set": -1,
            "left_out": -1,
        },
        {"row_id": "c0", "task": "t", "kind": "cc", "input": "N/A", "gold": None, "k": -1, "set": -1, "left_out": -1},
        {
            "row_id": "l0",
            "task": "t",
            "kind": "looc",
            "input": POOL[1][0],
            "gold": "No",
            "k": 2,
            "set": 0,
            "left_out": 1,
        },
    ]
    return pd.DataFrame(rows)


def _fresh_distribution(model: AutoModelForCausalLM, tok: AutoTokenizer, context: str) -> np.ndarray:
    """Each label scored in its own forward pass from scratch, no cache, no packing."""
    logprobs, lengths = [], []
    ctx = tok(context)["input_ids"]
    for label in LABELS:
        full = tok(context + continuation(label))["input_ids"]
        assert full[: len(ctx)] == ctx
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0].double()
        lp = torch.log_softmax(logits, dim=-1)
        cont = full[len(ctx) :]
        logprobs.append(sum(float(lp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)))
        lengths.append(len(cont))
    scores = np.array(logprobs) / np.array(lengths) if len(set(lengths)) > 1 else np.array(logprobs)
    z = np.exp(scores - scores.max())
    return z / z.sum()


def test_label_probabilities_equal_fresh_forward_passes(tiny_models: dict[str, Path]) -> None:
    path = tiny_models["llama"]
    engine = HFEngine(str(path))
    scorer = ItemScorer(engine, {"t": TASK}, shots=[0, 2], sets=2)
    items = _items()
    out = scorer(items)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    n_checked = 0
    for (_, item), (_, result) in zip(items.iterrows(), out.iterrows(), strict=True):
        contexts = scorer.contexts(item)
        assert [(k, s) for k, s, _ in contexts] == list(zip(result["k"], result["set"], strict=True))
        for (_, _, context), probs in zip(contexts, result["probs"], strict=True):
            np.testing.assert_allclose(probs, _fresh_distribution(model, tok, context), atol=1e-5)
            n_checked += 1
    assert n_checked == 3 * 3 + 1
    # every row scored alone gives the same numbers as the chunk: nothing carries over between items
    for i in range(len(items)):
        alone = scorer(items.iloc[[i]])
        np.testing.assert_allclose(np.array(alone["probs"].iloc[0]), np.array(out["probs"].iloc[i]), atol=1e-6)


def test_lora_adapter_trains_on_the_label_saves_and_loads_back(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    path = str(tiny_models["llama"])
    engine = HFEngine(path)
    context = prompts.sni_prompt(TASK.definition, POOL[:2], "a bird sang")
    labels = (" Yes", " No")

    def probs(e: HFEngine) -> np.ndarray:
        return e.continuation_scores([ContinuationRequest(context, labels)])[0].softmax()

    before = probs(engine)
    target = int(np.argmin(before))  # train towards the label the random model finds unlikely
    examples = [(prompts.sni_prompt(TASK.definition, POOL[:2], f"item {i}"), labels[target]) for i in range(8)]
    settings = LoraSettings(rank=8, alpha=16, epochs=3, learning_rate=1e-2, gradient_accumulation=2)
    losses = train_adapter(engine, examples, tmp_path / "adapter", settings)
    assert len(losses) == 3 * 4 and losses[-1] < losses[0]
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    np.testing.assert_allclose(probs(engine), before, atol=1e-7)  # the engine's base model is untouched
    tuned = HFEngine(path, adapter=str(tmp_path / "adapter"))
    # the adapter is merged in and moves the label (8x on the zoo's tokenizer; the base is unchanged to 1e-7)
    assert probs(tuned)[target] > 5 * before[target]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_lora_loss_is_the_models_own_label_loss_with_the_output_layer_on_targets_only(
    arch: str, tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    from unsure.engine.lora import IGNORE, encode_examples

    engine = HFEngine(str(tiny_models[arch]))
    for module in engine.model.modules():  # GPT-2's dropout would draw differently in the two passes
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    examples = [
        (prompts.sni_prompt(TASK.definition, POOL[: i % 3], f"item {i}"), f" {LABELS[i % 3]}") for i in range(6)
    ]
    settings = LoraSettings(rank=4, alpha=8, epochs=1, batch_size=2, gradient_accumulation=2)
    encoded = encode_examples(engine, examples)
    # the first step's loss under the untrained adapter (LoRA's B starts at zero: the base model),
    # as the model's own labels= loss computes it over the same batches in the same order
    order = torch.randperm(len(encoded), generator=torch.Generator().manual_seed(settings.seed)).tolist()
    want = 0.0
    with torch.no_grad():
        for start in (0, 2):
            batch = [encoded[i] for i in order[start : start + 2]]
            width = max(len(ids) for ids, _ in batch)
            ids = torch.tensor([x + [0] * (width - len(x)) for x, _ in batch])
            labels = torch.tensor([y + [IGNORE] * (width - len(y)) for _, y in batch])
            mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in batch])
            want += float(engine.model(input_ids=ids, attention_mask=mask, labels=labels).loss) / 2
    rows_seen: list[int] = []
    hook = engine.model.get_output_embeddings().register_forward_hook(
        lambda _m, args, _o: rows_seen.append(args[0].shape[:-1].numel())
    )
    try:
        losses = train_adapter(engine, examples, tmp_path / "adapter", settings)
    finally:
        hook.remove()
    assert losses[0] == pytest.approx(want, rel=1e-5)
    # the output layer ran on the rows that predict a label token, not on every prompt position
    assert sum(rows_seen) == sum(sum(t != IGNORE for t in labels) for _, labels in encoded)


def test_lora_with_checkpointing_calls_no_deprecated_transformers_name(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    """transformers 5.24 renamed ``gradient_checkpointing_enable``/``_disable`` (the old names warned once per
    adapter in every LoRA job's log); training with checkpointing raises no FutureWarning."""
    import warnings

    engine = HFEngine(str(tiny_models["llama"]))
    examples = [(prompts.sni_prompt(TASK.definition, POOL[:2], f"item {i}"), " Yes") for i in range(2)]
    settings = LoraSettings(rank=4, alpha=8, epochs=1, gradient_checkpointing=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        losses = train_adapter(engine, examples, tmp_path / "adapter", settings)
    assert len(losses) == 1 and not engine.model.is_activation_checkpointing  # off again after training


# ---------------------------------------------------------------- the two label scorings on the real SNI tasks


def _authors_distribution(
    model: AutoModelForCausalLM, tok: AutoTokenizer, prompt: str, labels: tuple[str, ...]
) -> np.ndarray:
    """The authors' scoring, written from their description: ``prompt + ' ' + label + EOS`` tokenised
    whole, the prompt's tokens masked, the model's mean loss over what is left (label tokens and EOS),
    softmax of minus the loss over the labels. Plain full forward passes, no packing. (Their own code
    path, on Llama-2's real tokenizer, against their code's numbers: tests/test_labelbias_authors.py.)"""
    scores = []
    n_prompt = len(tok(prompt)["input_ids"])
    for label in labels:
        ids = torch.tensor([tok(prompt + " " + label.strip() + tok.eos_token)["input_ids"]])
        target = ids.clone()
        target[:, :n_prompt] = -100
        with torch.no_grad():
            loss = model(input_ids=ids, labels=target).loss
        scores.append(-float(loss))
    s = np.array(scores)
    z = np.exp(s - s.max())
    return z / z.sum()


def _ours_distribution(
    model: AutoModelForCausalLM, tok: AutoTokenizer, prompt: str, labels: tuple[str, ...]
) -> np.ndarray:
    """Today's scoring on fresh passes: summed log-probability of `` label`` (no EOS), per-token
    mean when the labels' token counts differ."""
    ctx = tok(prompt)["input_ids"]
    logprobs, lengths = [], []
    for label in labels:
        full = tok(prompt + continuation(label))["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([full])).logits[0].double(), dim=-1)
        cont = full[len(ctx) :]
        logprobs.append(sum(float(lp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont)))
        lengths.append(len(cont))
    s = np.array(logprobs) / np.array(lengths) if len(set(lengths)) > 1 else np.array(logprobs)
    z = np.exp(s - s.max())
    return z / z.sum()


def test_paper_and_corrected_label_scorings_on_the_real_sni_tasks(
    tiny_models: dict[str, Path], shared_data: Path
) -> None:
    """One packed pass gives both scorings; each equals an independent plain-forward implementation."""
    from unsure.labelbias.tasks import read_task

    files = sorted((shared_data / "sni" / "tasks").glob("*.json"))
    if len(files) < 7:
        pytest.skip("the seven real SNI task files are not in ../shared/data/sni/tasks")
    path = tiny_models["llama"]
    engine = HFEngine(str(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    n_checked = 0
    for file in files:
        task = read_task(file)
        rows = task.instances.head(5)
        pool = tuple(zip(rows["input"].head(2), rows["output"].head(2), strict=True))
        prompts_ = [prompts.sni_prompt(task.definition, pool, x) for x in rows["input"].iloc[2:5]]
        prompts_.append(prompts.sni_prompt(task.definition, pool, "", paper=True))  # the empty CC input
        prompts_.append(prompts.sni_prompt(task.definition, (), rows["input"].iloc[2]))  # k = 0
        corrected, paper = score_contexts_both(engine, prompts_, [task.labels] * len(prompts_))
        for prompt, ours, theirs in zip(prompts_, corrected, paper, strict=True):
            np.testing.assert_allclose(theirs, _authors_distribution(model, tok, prompt, task.labels), atol=1e-5)
            np.testing.assert_allclose(ours, _ours_distribution(model, tok, prompt, task.labels), atol=1e-5)
            n_checked += 1
        assert not np.allclose(np.stack(corrected), np.stack(paper))  # the scorings differ
    assert n_checked == 7 * 5


def test_item_scorer_carries_both_scorings_and_eos_leaves_the_label_scores_unchanged(
    tiny_models: dict[str, Path],
) -> None:
    engine = HFEngine(str(tiny_models["gpt2"]))
    out = ItemScorer(engine, {"t": TASK}, shots=[0, 2], sets=2)(_items())
    assert {"probs", "probs_paper"} <= set(out.columns)
    assert all(len(a) == len(b) for a, b in zip(out["probs"], out["probs_paper"], strict=True))
    req = [ContinuationRequest("Decide. Input: a cat.\n\nOutput:", tuple(continuation(lab) for lab in LABELS))]
    plain_scores = engine.continuation_scores(req)[0]
    with_eos = engine.continuation_scores([ContinuationRequest(req[0].context, req[0].continuations, eos=True)])[0]
    np.testing.assert_allclose(with_eos.logprob, plain_scores.logprob, atol=1e-6)
    assert (with_eos.n_tokens == plain_scores.n_tokens).all() and plain_scores.eos_logprob is None
    assert with_eos.eos_logprob is not None and (with_eos.eos_logprob < 0).all()


def test_paper_lora_targets_end_in_eos_under_the_fitted_evaluation_context(tiny_models: dict[str, Path]) -> None:
    """The authors train on ``prompt + ' ' + label + EOS`` with the loss on label and EOS; ours
    (corrected) on `` label`` alone. Both train under the context the items are scored in."""
    from unsure.engine.lora import IGNORE, encode_examples
    from unsure.labelbias.finetune import LoraProtocol, lora_examples
    from unsure.labelbias.scoring import prompt_fit

    engine = HFEngine(str(tiny_models["llama"]))
    eos_id = engine.tokenizer.eos_token_id
    pool = POOL * 3
    fit = prompt_fit(engine, 40)  # small enough to drop demonstrations
    task = TaskPrompting(TASK.definition, LABELS, pool)
    eos = engine.tokenizer.eos_token
    paper = lora_examples(task, k=2, s=0, n_train=4, choices=LoraProtocol.of("paper"), fit=fit, eos=eos)
    ours = lora_examples(task, k=2, s=0, n_train=4)
    train = prompts.training_examples(pool, 2, 0, 4)
    for (context, target), (x, y) in zip(paper, train, strict=True):
        assert context == prompts.item_context(TASK.definition, pool, x, 2, 0, paper=True, fit=fit)
        ids, labels = encode_examples(engine, [(context, target)])[0]
        assert ids[-1] == eos_id and labels[-1] == eos_id
        assert [t for t in labels if t != IGNORE] == engine.split_pair(context, " " + y)[1] + [eos_id]
    for context, target in ours:
        ids, labels = encode_examples(engine, [(context, target)])[0]
        assert eos_id not in labels and context.count("Output:") == 3
    assert any(context.count("Output:") < 3 for context, _ in paper)  # the limit dropped demonstrations


def test_an_items_cache_key_is_its_requests_a_changed_definition_or_demonstration_misses(tmp_path: Path) -> None:
    """The request cache keys an item on the requests it sends (its contexts: definition,
    demonstrations, template) rather than on the task files it reads."""
    from unsure.engine.shards import run_shard

    calls: list[int] = []

    def scored(chunk: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(chunk))
        return pd.DataFrame({"row_id": chunk["row_id"].to_numpy(), "p": [0.5] * len(chunk)})

    def run(name: str, task: TaskPrompting) -> None:
        scorer = ItemScorer(None, {"t": task}, shots=[0, 2], sets=2)  # type: ignore[arg-type]  # no engine asked
        shape = {"shots": [0, 2], "sets": 2}
        run_shard(_items(), scored, tmp_path / f"{name}.parquet", shard=0, n_shards=1, chunk_rows=8,
                  fingerprint=shape, cache=tmp_path / "cache", requests=scorer.requests)  # fmt: skip

    n = len(_items())
    run("a", TASK)
    run("b", TASK)
    assert sum(calls) == n
    run("c", TaskPrompting("Decide whether the sentence names an animal", LABELS, POOL))
    assert sum(calls) == 2 * n, "another definition was answered from the cache"
    run("d", TaskPrompting(TASK.definition, LABELS, (("the fox was on the table", "Yes"), *POOL[1:])))
    assert sum(calls) == 3 * n, "another demonstration was answered from the cache"
