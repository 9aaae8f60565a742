"""A person record as text: one bullet per feature, values in the dictionary's words.

``- Age is: 50 years old.`` Each feature is introduced by a short description
(:data:`DESCRIPTIONS`; columns not listed there use the dictionary's own
variable label) and each value is the label of its code in the official data
dictionary of the survey year, cleaned of Census bookkeeping (the ``MGR-``
occupation prefixes, the ``/CA`` state suffixes, parenthesised coding notes
of numeric top codes). Numbers are written readably (:data:`NUMBER_FORMATS`:
hours, dollars, minutes, percent). A code the dictionary does not explain is an
error naming the column and the code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from unsure.riskscores.dictionary import DataDictionary, Variable

DESCRIPTIONS: Mapping[str, str] = {
    "AGEP": "Age",
    "ANC": "Ancestry",
    "CIT": "Citizenship status",
    "COW": "Class of worker",
    "DEAR": "Hearing difficulty",
    "DEYE": "Vision difficulty",
    "DIS": "Disability status",
    "DREM": "Cognitive difficulty",
    "ESP": "Employment status of parents",
    "ESR": "Employment status",
    "FER": "Gave birth to a child within the past 12 months",
    "GCL": "Grandparent living with grandchildren",
    "JWMNP": "Travel time to work",
    "JWTR": "Means of transportation to work",
    "MAR": "Marital status",
    "MIG": "Lived in the same house one year ago",
    "MIL": "Military service",
    "NATIVITY": "Nativity",
    "OCCP": "Occupation",
    "PINCP": "Yearly income",
    "POBP": "Place of birth",
    "POVPIP": "Income-to-poverty ratio",
    "POWPUMA": "Place of work (public use microdata area code)",
    "PUMA": "Place of residence (public use microdata area code)",
    "RAC1P": "Race",
    "RELP": "Relationship to the reference person of the household",
    "SCHL": "Highest educational attainment",
    "SEX": "Sex",
    "ST": "State of residence",
    "WKHP": "Usual number of hours worked per week",
}
"""How each feature of the five folktables tasks is introduced."""


def _int(v: float) -> int:
    return round(v)


NUMBER_FORMATS: Mapping[str, Callable[[float], str]] = {
    "AGEP": lambda v: f"{_int(v)} years old",
    "WKHP": lambda v: f"{_int(v)} hours",
    "JWMNP": lambda v: f"{_int(v)} minutes",
    "PINCP": lambda v: f"${_int(v):,}" if v >= 0 else f"a loss of ${-_int(v):,}",
    "POVPIP": lambda v: f"{_int(v)} percent of the poverty threshold",
}
"""Readable forms of the numeric features; other numeric columns are written as plain integers."""

_PREFIX = re.compile(r"^[A-Z]{3}-(?=\S)")
_STATE_SUFFIX = re.compile(r"/[A-Z]{2}$")
_NOTE = re.compile(r"\s*\((?:Rounded|Top-coded|Bottom-coded)[^)]*\)", re.IGNORECASE)


class UnmappedCode(KeyError):
    """A value the data dictionary does not explain; the message names column and code."""

    def __str__(self) -> str:
        return str(self.args[0])


def clean_label(label: str) -> str:
    """A dictionary label as prose: no occupation prefix, state suffix or coding note."""
    label = _NOTE.sub("", _STATE_SUFFIX.sub("", _PREFIX.sub("", label.strip())))
    return label.strip().rstrip(".")


def description(column: str, dictionary: DataDictionary) -> str:
    """How a feature is introduced: :data:`DESCRIPTIONS`, else the dictionary's label."""
    if column in DESCRIPTIONS:
        return DESCRIPTIONS[column]
    if column not in dictionary:
        raise UnmappedCode(
            f"column {column!r} is neither described here nor in the data dictionary {dictionary.source}"
        )
    return clean_label(dictionary[column].label)


def value_text(column: str, value: Any, dictionary: DataDictionary) -> str:
    """The words for one value of one column.

    Raises:
        UnmappedCode: the dictionary has no row for the value (or the column).
    """
    var = dictionary.get(column)
    if var is None:
        raise UnmappedCode(f"column {column!r} is not in the data dictionary {dictionary.source}")
    number = _number(value)
    if number is None:
        if var.blank is None:
            raise UnmappedCode(f"column {column!r}: missing value, but the dictionary has no N/A code for it")
        return clean_label(var.blank.label)
    row = var.lookup(number)
    if row is None:
        raise UnmappedCode(f"column {column!r}: code {_code(var, number)!r} is not in the data dictionary")
    if var.kind == "N":
        if row.is_single and row.label.lower() != "none" and number != 0:
            return clean_label(row.label)  # top and bottom codes: "99 or more usual hours"
        fmt = NUMBER_FORMATS.get(column)
        return fmt(number) if fmt else str(_int(number))
    if not row.is_single:  # a range of codes (PUMA): the code itself
        return _code(var, number)
    return clean_label(row.label)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UnmappedCode(f"value {value!r} is not a PUMS code") from None
    return None if math.isnan(x) else x


def _code(var: Variable, number: float) -> str:
    return str(_int(number)).zfill(var.length) if var.kind == "C" else f"{number:g}"


def bullet(column: str, value: Any, dictionary: DataDictionary) -> str:
    """``- Age is: 50 years old.``"""
    return f"- {description(column, dictionary)} is: {value_text(column, value, dictionary)}."


def row_text(row: Mapping[str, Any], features: Sequence[str], dictionary: DataDictionary) -> str:
    """One bullet per feature, in the given order, joined by newlines."""
    return "\n".join(bullet(col, row[col], dictionary) for col in features)


def frame_text(frame: pd.DataFrame, features: Sequence[str], dictionary: DataDictionary) -> pd.Series:
    """:func:`row_text` of every row; each distinct value of a column is looked up once."""
    parts = []
    for col in features:
        if col not in frame.columns:
            raise KeyError(f"column {col!r} is not in the prepared rows (columns: {', '.join(frame.columns)})")
        lines = {v: bullet(col, v, dictionary) for v in frame[col].drop_duplicates()}
        nan_line = next((line for v, line in lines.items() if _number(v) is None), None)
        parts.append(frame[col].map(lambda v, lines=lines, nan=nan_line: nan if _number(v) is None else lines[v]))
    if not parts:
        return pd.Series([""] * len(frame), index=frame.index)
    out = parts[0]
    for p in parts[1:]:
        out = out + "\n" + p
    return out.astype(str)


def check_mapped(frame: pd.DataFrame, columns: Sequence[str], dictionary: DataDictionary) -> None:
    """Every value present in every column has words (raises :class:`UnmappedCode` otherwise)."""
    for col in columns:
        description(col, dictionary)
        for v in frame[col].drop_duplicates():
            value_text(col, v, dictionary)
