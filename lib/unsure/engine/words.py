"""Reading generated text: where its first word ends, and what probability it states.

Boundaries are found on decoded text, not on token pieces, so byte-level BPE
(``Ġ``), SentencePiece (``▁``) and WordPiece (``##``) tokenizers all give the
same answer for the same text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from unsure.logs import COUNT, Tally

_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_JOINERS = "'’-"


def first_word(text: str, *, finished: bool) -> tuple[str | None, bool]:
    """The first word of ``text`` and whether the text settles it.

    Returns ``(word, True)`` once the word is complete (followed by a
    character that cannot continue it, or ``finished`` is set because
    generation stopped), ``(None, True)`` when the text can never start with a
    word (it starts with punctuation), and ``(None, False)`` while undecided.
    """
    stripped = text.lstrip()
    if not stripped:
        return None, finished
    match = _WORD.match(stripped)
    if match is None:
        return None, True
    rest = stripped[match.end() :]
    if not rest:
        return (match.group(), True) if finished else (None, False)
    if rest[0] in _JOINERS and len(rest) == 1 and not finished:
        return None, False  # "don'" may still become "don't"
    return match.group(), True


_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?|\.\d+)\s*(%|percent\b)?", re.IGNORECASE)


def parse_probability(reply: str, *, lead: str = "") -> float | None:
    """The first probability stated in a free-form reply, or ``None``.

    ``0.73``, ``.73`` and ``73%`` (or ``73 percent``) all read as 0.73; a bare
    number above 1 is not a probability and is skipped, as are numbers inside
    words (``A1``). ``lead`` is the number the prompt ended in (``0.``): a reply
    that opens with bare digits continues it (``73`` reads as 0.73), as the
    completions procedure reads the digits after ``0.``.
    """
    for match in _NUMBER.finditer(reply):
        number, percent = match.group(1), match.group(2)
        if lead and not percent and number.isdecimal() and not reply[: match.start()].strip():
            number = lead + number
        value = float(number)
        if percent:
            value /= 100
        if 0.0 <= value <= 1.0:
            return value
    return None


def probabilities_from_replies(
    replies: Sequence[str], model_id: str, tally: Tally, *, leads: Sequence[str] | None = None
) -> list[float]:
    """:func:`parse_probability` per reply (``leads``: each prompt's trailing ``0.``, if any);
    NaN where none is stated, counted in the engine's ``tally`` (one warning per engine, not per call)."""
    values = [parse_probability(r, lead=lead) for r, lead in zip(replies, leads or [""] * len(replies), strict=True)]
    tally.add(
        f"{model_id}: NaN for {COUNT}: no probability stated", sum(v is None for v in values), len(values), "replies"
    )
    return [math.nan if v is None else v for v in values]
