"""Brief training of the zoo's causal LMs on examples whose truth is known.

A randomly initialised model answers every prompt alike, so the demo's figures
would be flat and no end-to-end check could tell a working pipeline from a broken
one. The zoo writes training examples in each study's own request formats
(:data:`unsure.zoo.corpus.ZOO_EXAMPLES`), drawn fresh from the generators,
whose answers follow the generators' true distributions (ACS answers from the
exact P(Y|X), next words from the text model's exact next-word distribution, SNI
gold labels, MCQA gold choices). The model is trained on all of them, one pass in the demo
(all parameters, AdamW, linear warm-up and decay, no dropout), with the loss on
the answer tokens only, encoded exactly as the engine encodes a (context,
continuation) pair. Same seed, same threads: the same bytes.

Encoders (the decisionrisk study's multiple-choice BERT) are not trained here:
the study fine-tunes them itself.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel, get_linear_schedule_with_warmup

from unsure.config import CorpusStudy, ZooTraining
from unsure.engine.finetune import Example
from unsure.engine.forward import packed_mask, shared_prefix_groups
from unsure.engine.hf import HFEngine
from unsure.zoo.corpus import ZOO_EXAMPLES
from unsure.zoo.seeds import corpus_seed

log = logging.getLogger(__name__)


def corpus(
    engine: HFEngine, examples: Mapping[CorpusStudy, int], studies: Sequence[CorpusStudy], *, instruct: bool, seed: int
) -> list[Example]:
    """The named studies' examples for this model, in the studies' formats (chat formats when ``instruct``)."""
    out: list[Example] = []
    for study in studies:
        part = ZOO_EXAMPLES[study](engine, instruct=instruct, n=examples[study], seed=corpus_seed(seed, study))
        log.info("%s: %d training examples", study, len(part))
        out.extend(part)
    if not out:
        raise ValueError(f"zoo training: the studies {list(studies)} wrote no examples")
    return out


@dataclass
class Item:
    """One training sequence: token ids and the (position, token, weight, example) targets read
    from it; the targets of one example are its answer's tokens (or an answer's soft letters)."""

    ids: list[int]
    targets: list[tuple[int, int, float, int]] = field(default_factory=list)


def _pair_ids(engine: HFEngine, examples: Sequence[Example]) -> list[tuple[list[int], list[int]]]:
    """Each example's context and answer ids as the engine encodes the request, the
    tokenizer called on whole lists (one call per example took most of a build's minute)."""
    codec = engine.codec
    out: list[tuple[list[int], list[int]]] = [([], [])] * len(examples)
    split = [n for n, ex in enumerate(examples) if not ex.after_prompt]
    pairs = codec.split_pairs([(examples[n].context, examples[n].continuation) for n in split])
    for n, pair in zip(split, pairs, strict=True):
        out[n] = pair
    # choice, numeric and sampling requests read after the prompt encoded alone: the running
    # text's tokens when they extend the prompt's, else the answer's own
    after = [n for n, ex in enumerate(examples) if ex.after_prompt]
    contexts = [examples[n].context for n in after]
    context_ids = dict(zip(contexts, codec.encode_many(contexts), strict=True))
    wholes = codec.tokens_extended([(examples[n].context, examples[n].continuation) for n in after], context_ids)
    misaligned: list[tuple[int, list[int]]] = []
    for n, ctx, whole in zip(after, (context_ids[c] for c in contexts), wholes, strict=True):
        if len(whole) > len(ctx) and whole[: len(ctx)] == ctx:
            out[n] = (ctx, whole[len(ctx) :])
        else:
            misaligned.append((n, ctx))
    answers = codec.tokens_many([examples[n].continuation for n, _ in misaligned], special=False)
    for (n, ctx), ids in zip(misaligned, answers, strict=True):
        out[n] = (ctx, ids or codec.encode(examples[n].continuation, special=False))
    return out


def encode(engine: HFEngine, examples: Sequence[Example], *, most: int = 2) -> list[Row]:
    """The training sequences, as the engine encodes each request.

    Examples of the same context whose answers are one token each (an option
    letter weighted by its true probability, say) share one sequence: a soft
    target at the answer position, the exact expectation of drawn answers, for
    the cost of one. An example whose tokens begin another's (a demonstration's
    label, read where the prompt that goes on to the query has it) is read from
    that longer sequence: its targets for no forward pass of its own. Sequences with a long
    common opening (a census row in both option orders, a task's demonstrations before
    different queries) are packed into one row as the engine packs a context and its
    continuations: the opening once (a quarter fewer tokens in the demo's corpus).
    """
    items: list[Item] = []
    soft: dict[tuple[int, ...], tuple[Item, int]] = {}  # the shared sequence and its first example
    for n, (ex, (ctx, cont)) in enumerate(zip(examples, _pair_ids(engine, examples), strict=True)):
        if len(cont) == 1 and ex.after_prompt:
            key = tuple(ctx)
            if key not in soft:
                soft[key] = (Item([*ctx, cont[0]]), n)
                items.append(soft[key][0])
            item, first = soft[key]
            item.targets.append((len(ctx) - 1, cont[0], ex.weight, first))
        else:
            targets = [(len(ctx) - 1 + i, t, ex.weight, n) for i, t in enumerate(cont)]
            items.append(Item([*ctx, *cont], targets))
    return pack(_fold_prefixes(items), most)


def _fold_prefixes(items: list[Item]) -> list[Item]:
    """Items whose ids begin another item's moved into it (their targets read the same tokens).

    In lexicographic order an item that begins others comes right before one of them, so each
    item is compared with the next only; the items keep their first-seen order otherwise.
    """
    order = sorted(range(len(items)), key=lambda i: items[i].ids)
    folded: set[int] = set()
    for a, b in pairwise(order):
        short, long = items[a], items[b]
        if long.ids[: len(short.ids)] == short.ids:
            long.targets.extend(short.targets)
            folded.add(a)
    return [item for i, item in enumerate(items) if i not in folded]


@dataclass
class Row:
    """Sequences packed into one row of a batch: an opening they share, then each one's rest.
    Positions restart after the opening for every rest; ``segments`` (0 the opening, ``s`` the
    ``s``-th rest) give the engine's attention layout (:func:`unsure.engine.forward.packed_mask`)."""

    ids: list[int]
    positions: list[int]
    segments: list[int]
    targets: list[tuple[int, int, float, int]]
    sequences: int


def pack(items: Sequence[Item], most: int) -> list[Row]:
    """Items grouped by the engine's rule for shared prompt openings
    (:func:`unsure.engine.forward.shared_prefix_groups`), at most ``most`` to a row.

    A target read at a position inside the opening reads the same hidden state in the row
    (it depends on the opening's tokens only), so every target keeps its exact prediction.
    """
    rows: list[Row] = []
    for members, cut in shared_prefix_groups({i: ((), item.ids) for i, item in enumerate(items)}):
        for start in range(0, len(members), most):
            chunk = [items[i] for i in members[start : start + most]]
            if len(chunk) == 1:
                (item,) = chunk
                n = len(item.ids)
                rows.append(Row(item.ids, list(range(n)), [0] * n, item.targets, 1))
                continue
            ids, positions, segments = chunk[0].ids[:cut], list(range(cut)), [0] * cut
            targets: list[tuple[int, int, float, int]] = []
            for s, item in enumerate(chunk, start=1):
                offset = len(ids) - cut  # where this rest's position ``cut`` lands in the row
                rest = item.ids[cut:]
                ids += rest
                positions += range(cut, cut + len(rest))
                segments += [s] * len(rest)
                targets += [(pos if pos < cut else pos + offset, tok, w, ex) for pos, tok, w, ex in item.targets]
            rows.append(Row(ids, positions, segments, targets, len(chunk)))
    return rows


def row_loss(model: PreTrainedModel, batch: Sequence[Row], pad: int) -> torch.Tensor:
    """Each example's weighted mean negative log-likelihood of its targets, summed over the
    rows' examples, over the number of sequences packed in them; the output layer runs only
    where a target is read (it dominates a small model's cost). An example counts the same
    whether it has a sequence of its own, is read from another's or shares a row."""
    width = max(len(row.ids) for row in batch)
    device = model.get_input_embeddings().weight.device
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    positions = torch.zeros((len(batch), width), dtype=torch.long)
    segments = torch.full((len(batch), width), -1, dtype=torch.long)
    for b, row in enumerate(batch):
        ids[b, : len(row.ids)] = torch.tensor(row.ids)
        positions[b, : len(row.ids)] = torch.tensor(row.positions)
        segments[b, : len(row.ids)] = torch.tensor(row.segments)
    dtype = model.get_input_embeddings().weight.dtype
    hidden = model.base_model(
        input_ids=ids.to(device),
        attention_mask=packed_mask(segments.to(device), dtype),
        position_ids=positions.to(device),
    ).last_hidden_state
    rows, cols, tokens, weights, examples = zip(
        *((b, pos, tok, w, ex) for b, row in enumerate(batch) for pos, tok, w, ex in row.targets), strict=True
    )
    logits = model.get_output_embeddings()(hidden[torch.tensor(rows), torch.tensor(cols)]).float()
    picked = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(tokens, device=device)[:, None])[:, 0]
    # each example's weighted mean over its targets: a 60-token passage counts as much as one answer
    totals: dict[tuple[int, int], float] = {}
    for b, ex, w in zip(rows, examples, weights, strict=True):
        totals[b, ex] = totals.get((b, ex), 0.0) + w
    share = torch.tensor([w / totals[b, ex] for b, ex, w in zip(rows, examples, weights, strict=True)], device=device)
    return -(share * picked).sum() / sum(row.sequences for row in batch)


def batches(data: Sequence[Row], batch_size: int, rng: np.random.Generator) -> list[list[int]]:
    """Shuffled batches of ``batch_size`` sequences (a packed row counts its sequences) and
    similar lengths (little padding): a random order, sorted by length within windows of 16
    batches' rows, and the batches shuffled again."""
    order = rng.permutation(len(data))
    window = 16 * batch_size
    out: list[list[int]] = []
    for start in range(0, len(order), window):
        batch: list[int] = []
        held = 0  # sequences in ``batch``
        for i in sorted(order[start : start + window].tolist(), key=lambda i: len(data[i].ids)):
            batch.append(i)
            held += data[i].sequences
            if held >= batch_size:
                out.append(batch)
                batch, held = [], 0
        if batch:
            out.append(batch)
    return [out[i] for i in rng.permutation(len(out))]


def train(engine: HFEngine, examples: Sequence[Example], settings: ZooTraining, *, seed: int) -> pd.DataFrame:
    """Train every parameter of ``engine.model`` on ``examples``; the loss per step."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = engine.model
    data = encode(engine, examples)
    log.info(
        "%d examples in %d sequences, packed in %d rows of %d tokens",
        len(examples),
        sum(row.sequences for row in data),
        len(data),
        sum(len(row.ids) for row in data),
    )
    pad = engine.tokenizer.pad_token_id
    if pad is None:
        pad = engine.tokenizer.eos_token_id or 0
    plan = [b for _ in range(settings.epochs) for b in batches(data, settings.batch_size, rng)]
    for p in model.parameters():
        p.requires_grad_(True)
    # fused: one kernel for every parameter (the unfused step took a tenth of a zoo step on a CPU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0, fused=True)
    schedule = get_linear_schedule_with_warmup(optimizer, min(settings.warmup_steps, len(plan) // 2), len(plan))
    # no dropout (the model stays in eval mode): each example is a fresh draw, seen once or twice, so there is
    # nothing to overfit; GPT-2's attention dropout would also keep attention off its fused kernel
    # (a GPT-2 step took 90 ms instead of 55). Llama has no dropout: its steps are unchanged.
    model.eval()
    losses = []
    for step, batch in enumerate(plan):
        loss = row_loss(model, [data[i] for i in batch], pad)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if step % 50 == 0 or step == len(plan) - 1:
            log.info("step %d/%d: loss %.4f", step + 1, len(plan), np.mean(losses[-50:]))
    return pd.DataFrame({"step": np.arange(1, len(losses) + 1), "loss": losses})


def train_folder(
    folder: str | Path,
    settings: ZooTraining,
    studies: Sequence[CorpusStudy],
    *,
    seed: int,
    out_dir: str | Path | None = None,
    instruct: bool | None = None,
) -> None:
    """Train the causal LM saved in ``folder`` on ``studies``' examples and save the
    weights to ``out_dir`` (default: in place).

    A model whose tokenizer has a chat template is an instruct variant (unless
    ``instruct`` says otherwise): it learns the studies' chat formats.
    """
    started = time.perf_counter()
    engine = HFEngine(str(folder), dtype="float32", device="cpu")
    if instruct is None:
        instruct = engine.tokenizer.chat_template is not None
    examples = corpus(engine, settings.examples, studies, instruct=instruct, seed=seed)
    curve = train(engine, examples, settings, seed=seed)
    target = Path(out_dir or folder)
    target.mkdir(parents=True, exist_ok=True)
    engine.model.save_pretrained(target)
    if out_dir is not None:
        engine.tokenizer.save_pretrained(target)
    first, last = curve["loss"].head(50).mean(), curve["loss"].tail(50).mean()
    log.info(
        "trained %s on %s (%d examples, %s) in %.1f s: %d steps, loss %.3f -> %.3f",
        folder,
        ", ".join(studies),
        len(examples),
        "chat formats" if instruct else "plain formats",
        time.perf_counter() - started,
        len(curve),
        first,
        last,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Train a copy of a built zoo model on some studies' examples (for trying a corpus out)."""
    defaults = ZooTraining()
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", help="a built zoo model folder")
    parser.add_argument("out", help="where the trained copy goes")
    parser.add_argument("--studies", nargs="+", default=list(defaults.examples), choices=list(defaults.examples))
    parser.add_argument("--examples", type=int, help="examples per study (default: the config's)")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--instruct", action="store_true", help="chat formats (default: when it has a chat template)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    examples = dict(defaults.examples) if args.examples is None else dict.fromkeys(args.studies, args.examples)
    settings = ZooTraining(
        examples=examples, epochs=args.epochs, learning_rate=args.learning_rate, batch_size=args.batch_size
    )
    train_folder(args.model, settings, args.studies, seed=args.seed, out_dir=args.out, instruct=args.instruct or None)


if __name__ == "__main__":
    main()
