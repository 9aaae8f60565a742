"""Training examples for the zoo's models in the decisionrisk room's own request formats (issue 19).

A randomly initialised zoo model gives every choice the same confidence and
never writes a reply :func:`~unsure.decisionrisk.confidences.parse_verbal`
accepts, so the demo's decision rules and its chat panel have nothing to work
on. The multiple-choice generator knows each item's truth
(:mod:`unsure.generate.mcqa`): a choice that shares a noun category with the
prompt (:func:`~unsure.generate.mcqa.linked_choice`) is always the gold one,
and where no choice is linked the gold is arbitrary. The examples teach exactly
what the room reads at inference (:func:`unsure.decisionrisk.infer.generative_scorer`):

* log-likelihood (base models): the prompt as context and the gold choice,
  after one space, as continuation
  (:func:`~unsure.decisionrisk.requests.continuation_request`), on items
  whose gold choice is the linked one (on the others it is arbitrary, and
  learning it would only teach noise);
* verbal confidences (instruct models): the chat-templated
  :func:`~unsure.decisionrisk.requests.verbal_prompt` as context and a reply
  stating the generator's probability that each option is right
  (:func:`known_confidences`), in percent and never below 1
  (:func:`verbal_reply`): ``A: 100 B: 1`` on a linked item, ``A: 50 B: 50``
  where nothing in the text points to an answer. Risk-injected copies
  (:func:`~unsure.decisionrisk.data.inject`) have no right choice, so their
  reply is uniform. NQ copies (an empty question, a prompt of their own) are
  always used; WQ and NRA copies only where no choice happens to be linked to
  the prompt they show, since only there do the text and the truth agree.

Replies separate the options by spaces, not commas, so that four options fit
in the demo's ``verbal_max_new_tokens`` (12 tokens), and they end the turn
(the tokenizer's end of text, where generation stops: the zoo's ChatML end of
turn), as a chat model's replies do. A reply that went on past its last option
was never trained on what follows it, so it went on by repeating a letter with
another number (``A: 50 B: 50 B: 100``), which does not parse: half or more of
the two-option replies of a chat model tuned from its base failed so, and how
many moved with the machine's float rounding.

Items are drawn fresh from the generator (the demo's benchmarks, all four),
through the room's own loader and risk injection, so prompts and choices are
the study's instances, never the demo's files.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

import numpy as np
import pandas as pd

from unsure.decisionrisk.confidences import LETTERS, uniform
from unsure.decisionrisk.data import INJECTIONS, ORIGINAL, load_benchmark, with_injections
from unsure.decisionrisk.requests import continuation_request, verbal_prompt
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.generate.mcqa import BENCHMARKS, Benchmark, linked_choice, write_benchmark

INJECTED_SHARE = 0.25
"""Share of the chat examples that are risk-injected copies (their reply is uniform)."""
CHAT_MIX: dict[str, float] = {"hellaswag": 0.3, "piqa": 0.2, "siqa": 0.25, "anli": 0.25}
"""Share of each benchmark in the chat examples. A reply that lists too few options does not
parse, so the four-option one weighs most (the letters C and D, which a brief training learns
last); nor does one that names an option twice with two numbers, which is how a briefly trained
model got the two-option replies wrong (``A: 100 B: 100 B: 1``), so those weigh almost half."""
REPLY_TOKENS = 12
"""The most tokens a reply may take: the demo's ``verbal_max_new_tokens`` (config/demo.yaml)."""
_SALT = 0x19D5
"""Mixed into the seed, so that the demo's data seed does not draw the demo's own benchmark files."""

ROW_COLUMNS = ["kind", "row_id", "benchmark", "prompt", "choices", "label", "injection", "answerable"]


def known_confidences(prompt: str, choices: Sequence[str], *, answerable: bool) -> list[float]:
    """The generator's probability that each choice is right, given the text a model sees.

    A linked choice is the gold one (probability 1); without one every choice
    is equally likely; on a risk-injected copy none is right, hence uniform.
    """
    k = len(choices)
    linked = linked_choice(prompt, choices) if answerable else None
    if linked is None:
        return [float(v) for v in uniform(k)]
    return [1.0 if i == linked else 0.0 for i in range(k)]


def verbal_reply(confidences: Sequence[float]) -> str:
    """The reply stating ``confidences`` in percent (at least 1), as the room's parser reads it
    (:func:`~unsure.decisionrisk.confidences.parse_verbal`).

    No option is ever given 0: a model that has not yet learnt which option
    to favour then writes the most frequent number everywhere, a uniform reply
    that parses, rather than all zeros, which does not.
    """
    if len(confidences) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} choices can be lettered, got {len(confidences)}")
    return " ".join(f"{LETTERS[i]}: {max(1, round(100 * c))}" for i, c in enumerate(confidences))


def generated_tokens(engine: HFEngine, pairs: Sequence[tuple[str, str]]) -> list[list[int] | None]:
    """Per (context, continuation) pair, the tokens the model must generate after the context
    when it is trained on the pair.

    The trainer encodes a pair as :meth:`~unsure.engine.tokens.Codec.split_pairs`
    does, which moves the chat prompt's trailing newline into the continuation;
    generation starts from the context encoded alone. ``None`` where the two
    disagree (the tokenizer merges the newline with the reply's first
    characters), so that training would teach tokens generation never reaches.
    """
    codec = engine.codec
    heads = codec.encode_many([context for context, _ in pairs])
    out: list[list[int] | None] = []
    for head, (ctx, cont) in zip(heads, codec.split_pairs(pairs), strict=True):
        whole = [*ctx, *cont]
        out.append(whole[len(head) :] if whole[: len(head)] == head else None)
    return out


def draw_items(benchmark: Benchmark, n: int, *, seed: int) -> pd.DataFrame:
    """``n`` fresh items of ``benchmark`` and their NQ, WQ and NRA copies, as the room's instance files hold them."""
    with tempfile.TemporaryDirectory(prefix="zoo-mcqa-") as folder:
        write_benchmark(folder, benchmark=benchmark, n_train=max(n, 2), n_val=1, seed=seed)
        frame = load_benchmark(folder, benchmark, "train")
    return with_injections(frame, INJECTIONS, seed=seed)


def shares(n: int, weights: Sequence[float]) -> list[int]:
    """``n`` split in proportion to ``weights`` (largest remainders; ties to the first)."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: counts[i] - exact[i])[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _interleave(groups: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row of each group in turn, so any prefix covers every group."""
    parts = [g.assign(_turn=np.arange(len(g)), _group=i) for i, g in enumerate(groups) if len(g)]
    if not parts:
        return pd.DataFrame(columns=ROW_COLUMNS)
    rows = pd.concat(parts, ignore_index=True).sort_values(["_turn", "_group"], kind="stable")
    return rows[ROW_COLUMNS].reset_index(drop=True)


def _injected(items: pd.DataFrame) -> pd.DataFrame:
    """The injected copies whose uniform reply the text supports, NQ, WQ and NRA taking turns."""
    injected = items[items["injection"] != ORIGINAL]
    unlinked = [
        name == "NQ" or linked_choice(p, list(c)) is None
        for name, p, c in zip(injected["injection"], injected["prompt"], injected["choices"], strict=True)
    ]
    kept = injected[unlinked]
    turns = kept.groupby("injection").cumcount() * len(INJECTIONS) + kept["injection"].map(INJECTIONS.index)
    return kept.iloc[np.argsort(turns.to_numpy(), kind="stable")]


def zoo_rows(*, instruct: bool, n: int, seed: int) -> pd.DataFrame:
    """The ``n`` instances behind :func:`zoo_examples`, one row each: its ``kind`` (``loglik`` for
    a base model, ``chat`` for an instruct one) and the instance's columns as in the room's
    instance files.

    Log-likelihood rows come from the four benchmarks equally, chat rows as :data:`CHAT_MIX`
    says; the same seed gives the same rows. An instruct model learns only the chat replies:
    they are what it is worst at, and the zoo's training is brief.
    """
    n = max(n, 0)
    n_injected = round(n * INJECTED_SHARE) if instruct else 0
    n_loglik, n_original = (0, n - n_injected) if instruct else (n, 0)
    draw = int(np.random.SeedSequence([seed, _SALT]).generate_state(1)[0])
    mix = [CHAT_MIX[b] for b in BENCHMARKS]
    groups = []
    for b, (benchmark, k_loglik, k_original, k_injected) in enumerate(
        zip(
            BENCHMARKS,
            shares(n_loglik, [1.0] * len(BENCHMARKS)),
            shares(n_original, mix),
            shares(n_injected, mix),
            strict=True,
        )
    ):
        # Linked originals for the log-likelihood rows (at least 80% are), any for the chat rows,
        # and three injected copies of each, to spare for the WQ and NRA ones dropped.
        items = draw_items(benchmark, 2 * k_loglik + k_original + k_injected, seed=draw + b)
        original = items[items["injection"] == ORIGINAL].assign(benchmark=benchmark)
        linked = [
            linked_choice(p, list(c)) == g
            for p, c, g in original[["prompt", "choices", "label"]].itertuples(index=False)
        ]
        loglik = original[linked].iloc[:k_loglik]
        chat = original.drop(index=loglik.index).iloc[:k_original].assign(kind="chat")
        loglik = loglik.assign(kind="loglik")
        injected = _injected(items).iloc[:k_injected].assign(kind="chat", benchmark=benchmark)
        groups.append(_interleave([loglik, chat, injected]))
    return _interleave(groups)


def zoo_examples(engine: HFEngine, *, instruct: bool, n: int, seed: int) -> list[Example]:
    """``n`` examples drawn with ``seed``: log-likelihood ones for a base model, chat replies for an
    instruct model (each as the room asks for it, with the answer it should get); the same seed
    gives the same list."""
    examples: list[Example | None] = []
    replies: dict[int, tuple[str, str]] = {}  # example index -> chat context, reply
    for _, row in zoo_rows(instruct=instruct, n=n, seed=seed).iterrows():
        prompt, choices = str(row["prompt"]), [str(c) for c in row["choices"]]
        if row["kind"] == "loglik":
            request = continuation_request(prompt, choices)
            examples.append(Example(request.context, request.continuations[int(row["label"])]))
            continue
        confidences = known_confidences(prompt, choices, answerable=bool(row["answerable"]))
        replies[len(examples)] = (engine.chat_prompt(verbal_prompt(prompt, choices)), verbal_reply(confidences))
        examples.append(None)
    end = engine.tokenizer.eos_token or ""  # the end of turn, past the tokens a reply may take
    for lead in ("", " "):  # a leading space keeps a newline from merging with the reply
        pending = [i for i in replies if examples[i] is None]
        pairs = [(replies[i][0], lead + replies[i][1]) for i in pending]
        for i, (context, reply), tokens in zip(pending, pairs, generated_tokens(engine, pairs), strict=True):
            if tokens is not None and len(tokens) <= REPLY_TOKENS:
                examples[i] = Example(context, reply + end)
    missing = [i for i in replies if examples[i] is None]
    if missing:
        raise ValueError(
            f"{engine.model_id}: the reply {replies[missing[0]][1]!r} does not fit in {REPLY_TOKENS} tokens "
            "after the chat prompt"
        )
    return [example for example in examples if example is not None]
