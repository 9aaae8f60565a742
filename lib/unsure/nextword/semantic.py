"""Beyond exact words: TVD over universal POS tags and over meaning clusters.

Two distributions can disagree on words yet agree on what kind of word comes
next. Both analyses map every word of a position to a group and compare the
distributions of groups with the same TVD as words
(:func:`group_distribution`, then :func:`unsure.nextword.metrics.tvd`).

* **POS level.** A word's group is its universal POS tag (NLTK's averaged
  perceptron tagger, ``tagset="universal"``) when tagged at the end of its
  context: the tag of ``w`` in ``tag(context + [w])``. The tagger's data comes
  from ``NLTK_DATA`` (``taggers/averaged_perceptron_tagger_eng`` and
  ``taggers/universal_tagset``; ``python -m nltk.downloader
  averaged_perceptron_tagger_eng universal_tagset`` fetches them). Tagging a
  whole context once per candidate word would cost minutes on the real corpus,
  so the context is tagged once and only the last three tokens are re-tagged
  per candidate: the perceptron looks two tokens back and two ahead, so the
  result is exactly that of tagging the full sequence (a test checks it).
* **Meaning level.** Per position, the words of the compared distributions
  that have a word2vec vector are standardised (with the mean and deviation
  over all words clustered) and grouped by k-means, with k chosen by the
  elbow of the within-cluster sum of squares over k = 1 … ``k_max``
  (:func:`choose_k`); words without a vector form one more group. Vectors come
  from a real word2vec model (:func:`load_word_vectors`) or, in the demo,
  from a small one trained on the generated corpus (:func:`train_word2vec`).
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from unsure.nextword.distributions import to_probs
from unsure.nextword.frames import KEY, ROW_KEY, fmt_position, require
from unsure.nextword.metrics import tvd
from unsure.nextword.words import normalize_words

TAGGER_HELP = (
    "NLTK tagger data not found: set NLTK_DATA to a folder holding taggers/averaged_perceptron_tagger_eng "
    "and taggers/universal_tagset (python -m nltk.downloader -d <folder> averaged_perceptron_tagger_eng "
    "universal_tagset)"
)
NO_VECTOR = "no-vector"
"""Group of the words that have no word2vec vector."""
CONTEXT_START = "START"
"""``last_pos`` of an empty context (a passage's first word)."""


class WordVectors(Protocol):
    """What the meaning analysis needs of word vectors: gensim ``KeyedVectors`` or a dict of arrays."""

    def __contains__(self, word: object) -> bool: ...

    def __getitem__(self, word: str) -> Any: ...


# ----------------------------------------------------------------------------- POS tags


def _sync_nltk_path() -> None:
    """Honour ``NLTK_DATA`` set after nltk was imported (nltk reads it only at import)."""
    import nltk

    for folder in reversed(os.environ.get("NLTK_DATA", "").split(os.pathsep)):
        if folder and folder not in nltk.data.path:
            nltk.data.path.insert(0, folder)


@functools.lru_cache(maxsize=1)
def _tagger() -> Any:
    from nltk.tag.mapping import map_tag
    from nltk.tag.perceptron import PerceptronTagger

    _sync_nltk_path()
    try:
        tagger = PerceptronTagger()
        map_tag("en-ptb", "universal", "NN")
    except LookupError as err:
        raise LookupError(TAGGER_HELP) from err
    return tagger


@functools.cache
def _universal(tag: str) -> str:
    from nltk.tag.mapping import map_tag

    return str(map_tag("en-ptb", "universal", tag))


def tokenize(text: str) -> list[str]:
    """Penn-Treebank-style tokens of a context (NLTK's word tokenizer, no sentence-splitter data needed).

    The tokenizer separates a period only at the very end of its input, so a
    period closing an inner sentence (``silence. The``) is split off here.
    """
    from nltk.tokenize import NLTKWordTokenizer

    out: list[str] = []
    for token in NLTKWordTokenizer().tokenize(text):
        if len(token) > 1 and token.endswith(".") and "." not in token[:-1]:
            out.extend((token[:-1], "."))
        else:
            out.append(token)
    return out


class _ContextTagger:
    """Tags of one context, reused for every candidate next word."""

    def __init__(self, tagger: Any, context: str) -> None:
        self.tagger = tagger
        self.tokens = tokenize(context)
        self.norm = [tagger.normalize(t) for t in self.tokens]
        self.tags = [tag for _, tag in tagger.tag(self.tokens)] if self.tokens else []

    def _tag_at(self, j: int) -> str:
        start: list[str] = self.tagger.START
        return self.tags[j] if j >= 0 else start[-1 - j]

    def tag_next(self, word: str) -> str:
        """The Penn tag of ``word`` in ``tag(context + [word])``, re-tagging only what the word can change."""
        tagger = self.tagger
        tokens = [*self.tokens, word]
        n = len(tokens)
        first = max(0, n - 3)
        context = [*tagger.START, *self.norm, tagger.normalize(word), *tagger.END]
        prev, prev2 = self._tag_at(first - 1), self._tag_at(first - 2)
        tag = ""
        for i in range(first, n):
            tag = tagger.tagdict.get(tokens[i])
            if not tag:
                tag, _ = tagger.model.predict(tagger._get_features(i, tokens[i], context, prev, prev2))
            prev2, prev = prev, tag
        return tag


@dataclass(frozen=True)
class Tagger:
    """A perceptron POS tagger and the map from its tags to the universal tagset."""

    perceptron: Any
    universal: Callable[[str], str]
    source: str


def nltk_tagger() -> Tagger:
    """NLTK's pretrained averaged perceptron (Penn tags, mapped with ``tagset="universal"``), from ``NLTK_DATA``."""
    return Tagger(_tagger(), _universal, "nltk averaged_perceptron_tagger_eng + universal_tagset")


def _lexicon_tag(tokens: list[str], i: int) -> str:
    """The generator's universal tag of ``tokens[i]``, its two ambiguous forms resolved by their neighbours."""
    from unsure.generate import text

    word = tokens[i].lower()
    tags = text.POS_TAGS.get(word)
    if tags is None:
        raise ValueError(f"generated corpus: {tokens[i]!r} is not in the generator's lexicon")
    if len(tags) == 1:
        return next(iter(tags))
    after = text.POS_TAGS.get(tokens[i + 1].lower(), frozenset()) if i + 1 < len(tokens) else frozenset()
    before = tokens[i - 1].lower() if i else ""
    if word == "to":
        return "PRT" if "VERB" in after and "NOUN" not in after else "ADP"
    return "VERB" if before in ("to", "not", "will") or "DET" in after or "PRON" in after else "ADJ"


def train_tagger(n_sentences: int, *, seed: int = 0, iterations: int = 5) -> Tagger:
    """A perceptron tagger trained on generated sentences tagged with the generator's known universal tags.

    For the demo, which may not download NLTK's pretrained tagger: its tags
    are universal already. Deterministic for a seed (NLTK shuffles with
    Python's ``random``, seeded here).
    """
    import random

    from nltk.tag.perceptron import PerceptronTagger

    from unsure.generate import text

    tagged = []
    for sentence in text.sentences(n_sentences, seed=seed):
        tokens = tokenize(sentence)
        tagged.append([(tok, _lexicon_tag(tokens, i)) for i, tok in enumerate(tokens)])
    random.seed(seed)
    perceptron = PerceptronTagger(load=False)
    perceptron.train(tagged, nr_iter=iterations)
    return Tagger(perceptron, str, f"perceptron trained on {n_sentences} generated sentences (generator's tags)")


def pos_tag_next(context: str, words: Iterable[str], tagger: Tagger | None = None) -> list[str]:
    """Universal POS tag of each word when it follows ``context`` (one tagging of the context for all)."""
    tagger = tagger or nltk_tagger()
    tagged = _ContextTagger(tagger.perceptron, context)
    return [tagger.universal(tagged.tag_next(w)) for w in words]


def last_word_pos(contexts: Iterable[str], tagger: Tagger | None = None) -> list[str]:
    """Universal POS tag of the last token of each context (``"."`` after a sentence end; START if empty)."""
    tagger = tagger or nltk_tagger()
    out = []
    for context in contexts:
        tokens = tokenize(context)
        out.append(tagger.universal(tagger.perceptron.tag(tokens)[-1][1]) if tokens else CONTEXT_START)
    return out


def _words_by_position(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    if not tables:
        raise ValueError("give at least one table")
    for i, t in enumerate(tables):
        require(t, ROW_KEY, f"table {i}")
    words = pd.concat([t[ROW_KEY] for t in tables], ignore_index=True).drop_duplicates()
    return words.astype({"text_id": np.int64, "word_num": np.int64}).sort_values(ROW_KEY, ignore_index=True)


def pos_groups(tables: Sequence[pd.DataFrame], positions: pd.DataFrame, tagger: Tagger | None = None) -> pd.DataFrame:
    """Universal POS tag of every word of ``tables`` in its context: ``text_id, word_num, word, group``.

    ``positions`` is the positions table (it supplies ``context``).

    Raises:
        ValueError: if a table has a position the positions table lacks.
        LookupError: if the NLTK tagger data cannot be found (see :data:`TAGGER_HELP`).
    """
    require(positions, [*KEY, "context"], "positions table")
    words = _words_by_position(tables)
    contexts = {(int(t), int(n)): str(c) for t, n, c in zip(*(positions[c] for c in (*KEY, "context")), strict=True)}
    groups: list[str] = []
    for (tid, num), g in words.groupby(KEY, sort=False):
        if (tid, num) not in contexts:
            raise ValueError(f"positions table: no context for position {fmt_position(tid, num)}")
        groups.extend(pos_tag_next(contexts[(tid, num)], g["word"], tagger))
    return words.assign(group=groups)


def group_distribution(table: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """The distribution of groups: probabilities of the words of a group added up.

    ``groups`` maps ``text_id, word_num, word`` to ``group`` (from
    :func:`pos_groups` or :func:`meaning_clusters`). The result is a
    probability table whose ``word`` column holds the group labels, so every
    metric applies unchanged.

    Raises:
        ValueError: naming the first word that ``groups`` does not map.
    """
    require(groups, [*ROW_KEY, "group"], "groups")
    probs = to_probs(table)
    merged = probs.merge(groups[[*ROW_KEY, "group"]], on=ROW_KEY, how="left")
    if merged["group"].isna().any():
        row = merged[merged["group"].isna()].iloc[0]
        where = fmt_position(row["text_id"], row["word_num"])
        raise ValueError(f"groups: no group for word {row['word']!r} at position {where}")
    out = merged.groupby([*KEY, "group"], sort=True, as_index=False)["prob"].sum()
    return out.rename(columns={"group": "word"})


def pos_tvd(
    p: pd.DataFrame, q: pd.DataFrame, positions: pd.DataFrame, *, missing: str = "raise", tagger: Tagger | None = None
) -> pd.Series:
    """TVD between the universal-POS distributions of ``p`` and ``q`` at every position."""
    groups = pos_groups([p, q], positions, tagger)
    return tvd(group_distribution(p, groups), group_distribution(q, groups), missing=missing).rename("pos_tvd")


# ----------------------------------------------------------------------------- meaning clusters


def _stable_hash(text: str) -> int:
    """Process-independent hash for gensim's per-word initial vectors (Python's ``hash`` is salted)."""
    return zlib.crc32(text.encode("utf-8"))


def corpus_sentences(text: str) -> list[list[str]]:
    """Training sentences for word2vec: one per non-empty line, its whitespace words normalised."""
    out = []
    for line in text.splitlines():
        words = [w for w in normalize_words(line.split()) if w]
        if words:
            out.append(words)
    return out


def train_word2vec(
    sentences: Iterable[Sequence[str]],
    *,
    vector_size: int = 50,
    window: int = 5,
    min_count: int = 1,
    epochs: int = 30,
    seed: int = 0,
) -> Any:
    """Train a small word2vec (CBOW) with gensim; the same inputs give the same vectors in any process.

    The defaults suit a corpus of a few thousand sentences (the demo's): more
    epochs than gensim's 5, or the vectors barely leave their random start.
    One worker thread and a process-independent word hash make it
    deterministic. Returns gensim ``KeyedVectors``.
    """
    from gensim.models import Word2Vec

    data = [list(s) for s in sentences]
    if not data:
        raise ValueError("train_word2vec: no sentences")
    model = Word2Vec(
        sentences=data,
        vector_size=vector_size,
        window=window,
        min_count=min_count,
        epochs=epochs,
        seed=seed,
        workers=1,
        hashfxn=_stable_hash,
    )
    return model.wv


def load_word_vectors(path: str | os.PathLike[str]) -> Any:
    """Load word vectors: gensim ``.kv`` files, or the word2vec format (``.bin``/``.bin.gz`` binary, else text)."""
    from gensim.models import KeyedVectors

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"word vectors not found: {path}")
    if path.suffix == ".kv":
        return KeyedVectors.load(str(path))
    binary = path.name.endswith((".bin", ".bin.gz"))
    return KeyedVectors.load_word2vec_format(str(path), binary=binary)


def choose_k(wcss: Sequence[float]) -> int:
    """The elbow of a within-cluster sum of squares curve ``wcss[k-1]`` for k = 1 … K.

    The chosen k is the point farthest below the straight line from the first
    to the last point (both axes scaled to [0, 1]). With no point below it
    (no bend: every added cluster explains as much as the last) every allowed
    cluster is kept, k = K; with one or two candidates, K; with no spread at
    all (``wcss[0] == 0``), 1.
    """
    w = np.asarray(wcss, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"wcss must be a non-empty sequence of finite numbers, got {wcss!r}")
    if w[0] <= 1e-12:
        return 1
    k_max = w.size
    if k_max <= 2 or w[0] - w[-1] <= 0:
        return k_max
    x = np.arange(k_max) / (k_max - 1)
    y = (w - w[-1]) / (w[0] - w[-1])
    below = (1.0 - x) - y
    i = int(np.argmax(below))
    return i + 1 if below[i] > 1e-12 else k_max


def _cluster(x: np.ndarray, k_max: int, seed: int) -> np.ndarray:
    """k-means labels of the rows of ``x`` with k from :func:`choose_k`."""
    from sklearn.cluster import KMeans

    n = len(x)
    if n <= 1:
        return np.zeros(n, dtype=np.int64)
    top = min(k_max, n)
    wcss = [float(((x - x.mean(axis=0)) ** 2).sum())]
    fits: dict[int, np.ndarray] = {1: np.zeros(n, dtype=np.int64), n: np.arange(n, dtype=np.int64)}
    for k in range(2, top + 1):
        if k == n:
            wcss.append(0.0)
            continue
        km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(x)
        wcss.append(float(km.inertia_))
        fits[k] = km.labels_.astype(np.int64)
    return fits[choose_k(wcss)]


def meaning_clusters(
    tables: Sequence[pd.DataFrame], vectors: WordVectors, *, k_max: int = 10, seed: int = 0
) -> pd.DataFrame:
    """Meaning cluster of every word of ``tables``, per position: ``text_id, word_num, word, group``.

    The words of all ``tables`` at a position are clustered together, so the
    distributions compared there share one grouping. Groups are labelled
    ``c0, c1, …`` within a position and :data:`NO_VECTOR` for words without
    a vector.
    """
    from threadpoolctl import threadpool_limits

    if isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
        raise ValueError(f"k_max must be a positive integer, got {k_max!r}")
    words = _words_by_position(tables)
    distinct = sorted({w for w in words["word"] if w in vectors})
    row_of: dict[str, int] = {}
    scaled = np.zeros((0, 0))
    if distinct:
        matrix = np.asarray([np.asarray(vectors[w], dtype=np.float64) for w in distinct])
        sd = matrix.std(axis=0)
        scaled = (matrix - matrix.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        row_of = {w: i for i, w in enumerate(distinct)}
    groups = np.empty(len(words), dtype=object)
    with threadpool_limits(1):
        for _, g in words.groupby(KEY, sort=False):
            idx = g.index.to_numpy()
            has = np.array([w in row_of for w in g["word"]], dtype=bool)
            groups[idx[~has]] = NO_VECTOR
            if has.any():
                x = scaled[[row_of[w] for w in g["word"][has]]]
                labels = _cluster(x, k_max, seed)
                groups[idx[has]] = [f"c{label}" for label in labels]
    return words.assign(group=groups)


def meaning_tvd(
    p: pd.DataFrame, q: pd.DataFrame, vectors: WordVectors, *, k_max: int = 10, seed: int = 0, missing: str = "raise"
) -> pd.Series:
    """TVD between the meaning-cluster distributions of ``p`` and ``q`` at every position."""
    groups = meaning_clusters([p, q], vectors, k_max=k_max, seed=seed)
    return tvd(group_distribution(p, groups), group_distribution(q, groups), missing=missing).rename("meaning_tvd")
