"""What labelbias asks the engine: one place that says it.

Each (item, context) is one :class:`~unsure.engine.ContinuationRequest` whose
continuations are the task's labels as they follow ``Output:``, the EOS token scored
after each (the authors' scoring reads it). The scorer, the fine-tuning's evaluation,
the zoo's examples and the cost estimate take the requests and label texts from here; the
estimate's counts of them per rule are here too (:func:`request_sets`, :func:`rule_work`;
:mod:`unsure.workload`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unsure.config import Config
from unsure.engine import ContinuationRequest
from unsure.workload import CHAT_TOKENS, EstimateError, RequestSet, Work, need, work


def continuation(label: str) -> str:
    """How a label follows ``Output:``."""
    return " " + label.strip()


def label_requests(contexts: Sequence[str], labels: Sequence[Sequence[str]], *, eos: bool) -> list[ContinuationRequest]:
    """One request per context, its labels (``labels[i]`` for ``contexts[i]``) as continuations;
    ``eos``: the EOS token is scored after each label too (the ``paper`` scoring needs it)."""
    return [
        ContinuationRequest(ctx, tuple(continuation(lab) for lab in labs), eos=eos)
        for ctx, labs in zip(contexts, labels, strict=True)
    ]


SNI_TASK_INSTANCES = (
    # Instances of the study's 279 SUPER-NATURALINSTRUCTIONS classification tasks
    # (schwartz-lab-NLP/label-bias, splits/classification_tasks/test_tasks_info.csv), sorted.
    *(400, 400, 433, 478, 496, 497, 498, 500, 500, 504, 592, 597, 629, 661, 683, 699, 709, 723, 732, 750, 773),
    *(793, 797, 814, 826, 874, 898, 926, 951, 975, 992, 993, 993, 994, 995, 995, 996, 996, 998, 998, 999, 999),
    *(999, 1000, 1000, 1000, 1000, 1000, 1000, 1029, 1036, 1065, 1079, 1100, 1135, 1160, 1200, 1219, 1337, 1341),
    *(1450, 1458, 1480, 1481, 1500, 1500, 1526, 1576, 1576, 1577, 1590, 1590, 1731, 1777, 1795, 1797, 1800, 1805),
    *(1818, 1825, 1879, 1883, 1883, 1917, 1924, 1948, 1964, 1969, 1970, 1985, 1995, 1996, 1998, 2000, 2053, 2076),
    *(2283, 2305, 2345, 2395, 2476, 2480, 2528, 2529, 2530, 2589, 2602, 2603, 2635, 2648, 2656, 2771, 2855, 2899),
    *(2925, 2946, 2948, 2997, 2997, 3000, 3000, 3009, 3022, 3079, 3154, 3158, 3169, 3174, 3229, 3354, 3429, 3482),
    *(3644, 3708, 3716, 3769, 3810, 3837, 3954, 3975, 3983, 3996, 3999, 4000, 4209, 4449, 4464, 4499, 4550, 4580),
    *(4795, 4837, 4875, 4899, 5000, 5016, 5035, 5060, 5193, 5199, 5200, 5299, 5318, 5376, 5476, 5527, 5565, 5680),
    *(5745, 5840, 5903, 5912, 5985, 5994, 5994, 5995, 5995, 5997, 6000, 6000, 6011, 6077, 6161, 6162, 6162, 6213),
    *(6356, 6369, 6370, 6384, 6385, 6392, 6395, 6401, 6430, 6448, 6478, 6486, 6490, 6490, 6491, 6491, 6491, 6492),
    *(6492, 6493, 6493, 6493, 6493, 6493, 6493, 6493, 6493, 6494, 6494, 6494, 6494, 6494, 6494, 6494, 6495, 6495),
    *(6495, 6496, 6497, 6497, 6497, 6498, 6498, 6498, 6498, 6498, 6499, 6499, 6499, 6499, 6499, 6499, 6499, 6499),
    *(6499,),
    *(6500,) * 38,
)


def request_sets(cfg: Config, data: Path, *, sample: int, tokenizer: Any, encoder: Any = None) -> Iterator[RequestSet]:
    """Per k (the configured shots and LoRA's), contexts of eval instances of up to 40 tasks that pass the filter:
    ``sni/<k>`` (every label, the EOS after each: one pass scores both scorings) and ``sni/train/<k>`` (a
    fine-tuning example: the context and its gold label)."""
    from unsure.labelbias.prompts import item_context
    from unsure.labelbias.tasks import draw_instances, read_task, rejection, task_names

    lb = cfg.studies.labelbias
    if not lb.models:
        return
    root = need(data / "sni" / "raw", "SNI tasks")
    ks = sorted({*lb.shots, *(lb.lora.shots if lb.lora.enabled else ())})
    contexts: dict[int, list[str]] = {k: [] for k in ks}
    labels: list[tuple[str, ...]] = []
    names = task_names(root)
    for name in [names[i] for i in sorted(set(np.linspace(0, len(names) - 1, min(len(names), 40)).astype(int)))]:
        task = read_task(need(root / "tasks" / f"{name}.json", "an SNI task listed in tasks.txt"))
        needed = lb.min_eval_instances + lb.n_heldout + lb.n_pool
        if rejection(task, summary="", min_instances=needed, max_labels=lb.max_labels):
            continue
        drawn = draw_instances(task, n_eval=lb.n_eval, n_heldout=lb.n_heldout, n_pool=lb.n_pool, seed=lb.seed)
        pool = list(drawn.loc[drawn["split"] == "pool", ["input", "gold"]].itertuples(index=False, name=None))
        inputs = drawn.loc[drawn["split"] == "eval", "input"].head(max(1, sample // 10)).tolist()
        for k in ks:
            contexts[k] += [item_context(task.definition, pool, x, min(k, len(pool)), 0) for x in inputs]
        labels += [tuple(task.labels)] * len(inputs)
    if not labels:
        raise EstimateError(f"{root}: no task passes the label-bias filter with the config's sizes")
    for k, mine in contexts.items():
        yield RequestSet(f"sni/{k}", label_requests(mine, labels, eos=True), len(mine), mine)
        yield RequestSet(f"sni/train/{k}", label_requests(mine, [t[:1] for t in labels], eos=True), len(mine), mine)


def rule_work(cfg: Config, per_unit: Mapping[str, float]) -> list[Work]:
    """Over the published tasks the filter keeps: ``labelbias_infer`` (every (k, set) context of the eval, held-out,
    content-free and domain inputs, each demonstration left out once), ``labelbias_differences`` (the other
    protocol's calibration contexts rescored alone) and, per LoRA model, ``labelbias_lora`` (a job fine-tunes its
    tasks under every (k, set): one base load, then base + adapter per task and run) and
    ``labelbias_lora_differences`` (:func:`unsure.labelbias.finetune.lora_flip_plan`: every task fine-tuned again
    and scored, the targets at the first run, the example selection at the first run of a set >= 1)."""
    from unsure.labelbias.prompts import variants

    study, out = cfg.studies.labelbias, []
    held, pool, lora = study.n_heldout, study.n_pool, study.lora
    kept = [n for n in SNI_TASK_INSTANCES if n >= study.min_eval_instances + held + pool]
    evals = sum(min(study.n_eval, n - held - pool) for n in kept)
    chat = CHAT_TOKENS if study.chat_template else 0
    pairs = variants(study.shots, study.demonstration_sets)
    per_context = evals + len(kept) * (held + len(study.content_free_inputs) + study.domain_inputs)
    flipped = len(kept) * (study.domain_inputs + len(study.content_free_inputs))
    context = sum(per_unit[f"sni/{k}"] + chat for k, _ in pairs)  # one context of each (k, set), its labels
    looc = len(kept) * sum(k * (per_unit[f"sni/{k}"] + chat) for k, _ in pairs)

    def tuned(k: int) -> tuple[float, float]:  # scoring with the merged adapter; its training examples
        train = len(kept) * lora.epochs * lora.n_train * (per_unit[f"sni/train/{k}"] + chat)
        return (evals + len(kept) * held) * (per_unit[f"sni/{k}"] + chat), train

    for m in study.models:
        api, job = cfg.models[m].backend == "openai", {"lb_model": m}
        requests = per_context * len(pairs) + len(kept) * sum(k for k, _ in pairs)
        out.append(work("labelbias_infer", m, job, api=api, tokens=per_context * context + looc, requests=requests,
                        loads=study.shards, kind="label_scores"))  # fmt: skip
        out.append(work("labelbias_differences", m, job, api=api, tokens=flipped * context,
                        requests=flipped * len(pairs), loads=1, kind="label_scores"))  # fmt: skip
        if m not in study.lora_models():
            continue
        runs = study.lora_runs()
        for i, (k, _) in enumerate(runs):
            tokens, train = tuned(k)
            out.append(Work("labelbias", "labelbias_lora", m, job, tokens=tokens, train_tokens=train,
                            loads=(lora.shards if i == 0 else 0) + len(kept), kind="label_scores"))  # fmt: skip
        again = [k for k, _ in runs[:1]] + [k for k, s in runs if s >= 1][:1]
        if again:
            tokens, train = (sum(x) for x in zip(*(tuned(k) for k in again), strict=True))
            out.append(Work("labelbias", "labelbias_lora_differences", m, job, tokens=tokens, train_tokens=train,
                            loads=len(again) * (1 + len(kept)), kind="label_scores"))  # fmt: skip
    return out
