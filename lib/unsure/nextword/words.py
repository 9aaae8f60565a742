"""The one word normalisation used for everything the study compares.

Human cloze responses, the corpus word at a position and the words sampled
from a model all pass through :func:`normalize_word` before any count, mode or
distance is taken, so two spellings of one word can never count as different
outcomes on one side only. (The reference code compared the raw corpus word,
``it's`` or ``door.``, against cleaned responses, ``its`` and ``door``; that
bias towards "wrong" is what this module exists to prevent.)

Rules, in order:

1. Unicode NFKC (full-width letters, ligatures and the like become plain).
2. Case folding (``The`` and ``THE`` are ``the``).
3. Apostrophes of every kind (``' ’ ‘ ` ´ ʼ``) and hyphens/dashes of every
   kind (``- ‐ ‑ – — −``) are deleted, wherever they are: ``didn't`` is
   ``didnt`` and ``well-being`` is ``wellbeing``. The Provo responses were
   stored without apostrophes, so deleting them is the only choice under
   which ``it's`` in the text and ``its`` typed by a participant agree.
4. Thousands separators between digits are dropped (``10,000`` is ``10000``).
5. Whatever is not a letter or a digit is stripped from both ends
   (``"door."`` is ``door``, ``(U.S.)`` is ``u.s``); inner punctuation such as
   ``and/or`` or ``u.s`` stays.
6. Runs of white space inside are collapsed to one space.

A response made only of punctuation (``?``, ``----``) normalises to ``""``;
callers treat the empty string as "no word" and drop it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

_DELETE = dict.fromkeys(
    map(
        ord,
        "'\u2019\u2018\u201b`\u00b4\u02bc\u02b9\u2032\uff07"  # apostrophes and primes
        "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u00ad",  # hyphens, dashes, soft hyphen
    )
)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_SPACE = re.compile(r"\s+")


def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LN"


@functools.lru_cache(maxsize=1 << 18)
def normalize_word(word: str) -> str:
    """The comparison form of a word: see the module docstring for the rules.

    Idempotent (``normalize_word(normalize_word(w)) == normalize_word(w)``);
    returns ``""`` when nothing word-like is left.

    Raises:
        TypeError: if ``word`` is not a string (a missing CSV cell read as NaN).
    """
    if not isinstance(word, str):
        raise TypeError(f"a word must be a string, got {type(word).__name__} {word!r}")
    s = unicodedata.normalize("NFKC", word).casefold().translate(_DELETE)
    s = _THOUSANDS.sub("", s)
    start, end = 0, len(s)
    while start < end and not _is_word_char(s[start]):
        start += 1
    while end > start and not _is_word_char(s[end - 1]):
        end -= 1
    return _SPACE.sub(" ", s[start:end])


def normalize_words(words: Iterable[str]) -> list[str]:
    """:func:`normalize_word` over many words (cached, so repeated words cost nothing)."""
    return [normalize_word(w) for w in words]


def surface_form(text: str) -> str:
    """A word as a model would write it: surrounding white space and punctuation stripped, case and inside kept.

    ``"nationwide."`` is ``nationwide`` and ``" Parker"`` is ``Parker``: the
    first complete word a sampler extracts, whose log-probability after a
    space the biased estimator scores. ``normalize_word`` of it is that of
    ``text`` (both strip the same ends).
    """
    start, end = 0, len(text)
    while start < end and not _is_word_char(text[start]):
        start += 1
    while end > start and not _is_word_char(text[end - 1]):
        end -= 1
    return text[start:end]
