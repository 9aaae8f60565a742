"""Training examples for the zoo: Provo-like passages whose next words follow the text model's exact distribution.

The study compares a model's next-word distribution with the human one at every
position of the Provo passages; the demo's norms are multinomial draws from the
text generator's exact next-word distribution (:mod:`unsure.generate.provo`). A
model approaches that distribution when its training targets are draws from it
(maximum likelihood on draws estimates the distribution itself, not its mode):

- a base model is trained on whole passages drawn from the generator as the
  Provo generator draws them (one topic, sentences until 40-60 words). A passage
  is an ancestral sample, so every word in it is a draw from the exact next-word
  distribution given the displayed words before it: one passage is a training
  target at every position the study samples at. The context is the first word
  (the norms have no position there, and a context is never empty at inference),
  the continuation the rest, as the study's contexts run on (words joined by
  single spaces, so the sampler's first word ends where the text's does).
- an instruct model is asked as the study asks it (:data:`~unsure.nextword.requests.CHAT_SINGLE`
  and :data:`~unsure.nextword.requests.CHAT_LIST` through ``engine.chat_prompt``) about a random
  prefix of such a passage. In ``single`` mode the study samples the reply, so the
  reply is one word drawn fresh from the exact distribution, ended by the EOS token
  (the sampler settles a word at EOS). In ``list`` mode the study decodes greedily,
  and a greedy decoder returns the most likely list, not a sample: the reply is the
  ``n``-word list closest in total variation to the exact distribution
  (:func:`quantized_list`, repeats as the prompt asks), so that the greedy reply's
  word frequencies estimate the distribution. A share of its examples are plain
  passages (:data:`INSTRUCT_PASSAGE_SHARE`), as an instruct model is a pretrained one.

Reply words are written as the text writes them mid-sentence (lower case; names and
``I`` capitalised) after one space: the tiny tokenizers spell such words with one
whole-word token (``▁door``, ``Ġdoor``) and a capitalised or space-less form with
pieces; the study's readers strip the space and normalise case before counting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.generate import text
from unsure.nextword.requests import CHAT_LIST, CHAT_SINGLE

LIST_SIZES: tuple[int, ...] = (5, 10)
"""Words asked for in ``list`` mode: the demo's ``n_samples_large`` and ``n_samples``."""

SINGLE_SHARE = 0.5
"""Share of an instruct model's examples in ``single`` mode (the rest: ``list`` mode)."""

INSTRUCT_PASSAGE_SHARE = 0.25
"""Share of an instruct model's examples that are plain passages, as a base model's: they teach the
language at every position (a chat example teaches one word), as pretraining does before chat tuning."""

PROMPTS_PER_PASSAGE = 4
"""Chat examples asked about one passage (at independent random prefixes): drawing a passage
that the generator writes is most of an example's cost."""


def sample_passage_words(rng: np.random.Generator) -> list[str]:
    """The display words of one passage, drawn as the Provo generator draws its passages.

    One topic from the prior, whole sentences until at least 40-60 words (the
    target drawn uniformly), as :func:`unsure.generate.provo.write_norms` does.
    """
    topic = text.sample_topic(rng)
    target = int(rng.integers(40, 61))
    words: list[str] = []
    while len(words) < target:
        words += text.display_words(text.sample_tokens(rng, topic))
    return words


def display_form(word: str, *, sentence_start: bool) -> str:
    """How the text would display the normalised ``word`` at this place (the generator's own rendering)."""
    return text.display_words([word])[0] if sentence_start else text.display_words(["the", word])[1]


def draw_word(dist: Mapping[str, float], rng: np.random.Generator) -> str:
    """One word drawn from ``dist`` (keys in their sorted order, so a seed gives one word)."""
    words = sorted(dist)
    p = np.array([dist[w] for w in words], dtype=np.float64)
    return words[int(rng.choice(len(words), p=p / p.sum()))]


def quantized_list(dist: Mapping[str, float], n: int) -> list[str]:
    """The ``n`` words whose frequencies are closest to ``dist`` in total variation, most likely first.

    Largest remainders: each word gets ``floor(n p)`` places and the places left
    go to the largest remainders (ties: the more probable word, then the
    alphabetically first), which minimises ``sum |c / n - p|``. Repeats are
    adjacent: ``["in", "in", "at", "with", "to"]``.
    """
    if n < 1:
        raise ValueError(f"a list needs at least one word, got n={n}")
    words = sorted(dist)
    p = np.array([dist[w] for w in words], dtype=np.float64)
    p = p / p.sum()
    counts = np.floor(n * p).astype(np.int64)
    rest = n - int(counts.sum())
    by_remainder = sorted(range(len(words)), key=lambda i: (-(n * p[i] - counts[i]), -p[i], words[i]))
    for i in by_remainder[:rest]:
        counts[i] += 1
    order = sorted((i for i in range(len(words)) if counts[i]), key=lambda i: (-counts[i], -p[i], words[i]))
    return [words[i] for i in order for _ in range(int(counts[i]))]


def _reply_end(engine: HFEngine) -> str:
    """The EOS token as text: a reply ends there, which settles its last word for the sampler."""
    eos = engine.tokenizer.eos_token
    return str(eos) if eos else "\n"


def _passage_example(words: Sequence[str]) -> Example:
    return Example(words[0], " " + " ".join(words[1:]))


def _chat_example(engine: HFEngine, words: Sequence[str], rng: np.random.Generator) -> Example:
    """A chat prompt about a random prefix of ``words`` and its reply, in a random mode."""
    i = int(rng.integers(1, len(words)))  # the next word's index: the context is never empty
    context = " ".join(words[:i])
    # the exact distribution at this one place (all of a passage's took most of the corpus's time)
    dist = text.next_word_distribution(words[:i])
    if rng.random() < SINGLE_SHARE:
        prompt = engine.chat_prompt(CHAT_SINGLE.format(context=context))
        reply = display_form(draw_word(dist, rng), sentence_start=False)
    else:
        n = int(rng.choice(LIST_SIZES))
        prompt = engine.chat_prompt(CHAT_LIST.format(context=context, n=n))
        reply = ", ".join(display_form(w, sentence_start=False) for w in quantized_list(dist, n))
    return Example(prompt, " " + reply + _reply_end(engine))


def zoo_examples(engine: HFEngine, *, instruct: bool, n: int, seed: int) -> list[Example]:
    """``n`` examples: whole passages for a base model, chat prompts and replies for an instruct one.

    Passages are drawn fresh with ``seed`` (the generator's grammar and lexicon
    are fixed; the seed only draws), never read from the demo's norms. The same
    seed gives the same list.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = np.random.default_rng(seed)
    n_plain = n if not instruct else round(INSTRUCT_PASSAGE_SHARE * n)
    examples = [_passage_example(sample_passage_words(rng)) for _ in range(n_plain)]
    while len(examples) < n:
        words = sample_passage_words(rng)
        k = min(PROMPTS_PER_PASSAGE, n - len(examples))
        examples += [_chat_example(engine, words, rng) for _ in range(k)]
    return [examples[i] for i in rng.permutation(len(examples))]
