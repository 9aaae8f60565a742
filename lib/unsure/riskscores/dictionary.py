"""The official ACS PUMS data dictionary, parsed from the Census CSV layout.

The Census ships one CSV per survey year: a ``NAME,<var>,<C|N>,<length>,"label"``
row per variable followed by its ``VAL,<var>,<C|N>,<length>,"low","high","label"``
rows (numeric variables write the bounds unquoted; a blank value is written
``b`` repeated to the variable's length). Variables that appear in both the
housing and the person sections (``PUMA``, ``ST``) are read once.

Some years' CSVs glue a section header of the printed dictionary onto the
label before it: the 2018 1-year file has ESP code ``b`` as "N/A (...) Living
with two parents:", code 4 as "Neither parent in labor force living with one
parent: Living with father:" and code 6 as "Father not in labor force living
with mother:". The reader cuts such trailing headers (:data:`SECTION_HEADERS`)
off and puts the innermost one before the labels of its section ("Living with
father: Father not in labor force"), as the 5-year file writes them; a label
that still ends in a colon is an error naming file, variable and code.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ValueRange:
    """One ``VAL`` row: codes ``low``..``high`` (equal for a single code) and their meaning."""

    low: str
    high: str
    label: str

    @property
    def is_blank(self) -> bool:
        """The row describing a missing value (``b``, ``bb``, ...)."""
        return set(self.low) == {"b"}

    @property
    def is_single(self) -> bool:
        return self.low == self.high


@dataclass(frozen=True)
class Variable:
    """One variable of the dictionary: ``C`` (character code) or ``N`` (number)."""

    name: str
    kind: str
    length: int
    label: str
    values: tuple[ValueRange, ...] = field(default_factory=tuple)

    @property
    def blank(self) -> ValueRange | None:
        """The missing-value row, if the dictionary has one."""
        return next((v for v in self.values if v.is_blank), None)

    def lookup(self, value: float) -> ValueRange | None:
        """The row whose code range holds ``value`` (single codes win over ranges)."""
        best: ValueRange | None = None
        for row in self.values:
            if row.is_blank:
                continue
            try:
                low, high = float(row.low), float(row.high)
            except ValueError:
                continue
            if low <= value <= high and (best is None or (row.is_single and not best.is_single)):
                best = row
        return best


SECTION_HEADERS: tuple[str, ...] = (
    "Living with two parents",
    "Living with one parent",
    "Living with father",
    "Living with mother",
)
"""Section headers of the printed dictionary that the CSVs glue onto neighbouring labels."""

_HEADER = "|".join(re.escape(h) for h in SECTION_HEADERS)
_TRAILING_HEADERS = re.compile(rf"(?:\s*\b(?:{_HEADER}):)+\s*$", re.IGNORECASE)
_ONE_HEADER = re.compile(rf"({_HEADER}):", re.IGNORECASE)


def unglue(path: str, name: str, values: list[ValueRange]) -> list[ValueRange]:
    """Labels of one variable with glued section headers moved before the labels they head.

    A variable none of whose labels ends in a known header is returned as is.

    Raises:
        ValueError: a label ends in a colon that is not a known section header.
    """
    if not any(_TRAILING_HEADERS.search(v.label) for v in values):
        return _no_colon_ends(path, name, values)
    out, section = [], None
    for v in values:
        glued = _TRAILING_HEADERS.search(v.label)
        own = v.label[: glued.start()].strip() if glued else v.label
        label = own if v.is_blank or section is None else f"{section}: {own[:1].upper()}{own[1:]}"
        out.append(ValueRange(v.low, v.high, label))
        if glued:
            inner = _ONE_HEADER.findall(glued.group())[-1]
            section = inner[:1].upper() + inner[1:].lower()
    return _no_colon_ends(path, name, out)


def _no_colon_ends(path: str, name: str, values: list[ValueRange]) -> list[ValueRange]:
    for v in values:
        if v.label.rstrip().endswith(":"):
            raise ValueError(
                f"{path}: {name} code {v.low!r} has the label {v.label!r}, which ends in an unknown section header "
                "(glued onto the label by the Census CSV); add the header to SECTION_HEADERS"
            )
    return values


class DataDictionary(dict[str, Variable]):
    """Variables by name, as read from one year's dictionary file."""

    source: str = "<dictionary>"


def read_dictionary(path: str | os.PathLike[str]) -> DataDictionary:
    """Parse a PUMS data dictionary CSV.

    Raises:
        ValueError: naming the file and line of a malformed row.
    """
    out = DataDictionary()
    out.source = str(path)
    rows: dict[str, list[ValueRange]] = {}
    seen_twice: set[str] = set()
    with open(path, encoding="utf-8-sig", newline="") as f:
        for lineno, row in enumerate(csv.reader(f), start=1):
            if not row or not row[0].strip():
                continue
            kind = row[0].strip()
            try:
                if kind == "NAME":
                    name, ctype, length, label = row[1], row[2], int(row[3]), row[4]
                    if name in out:
                        seen_twice.add(name)
                        continue
                    out[name] = Variable(name, ctype, length, label.strip())
                    rows[name] = []
                elif kind == "VAL":
                    name, low, high, label = row[1], row[4].strip(), row[5].strip(), row[6].strip()
                    if name not in out:
                        raise ValueError(f"value row of {name!r} before its NAME row")
                    if name in seen_twice:
                        continue
                    rows[name].append(ValueRange(low, high, label))
                else:
                    raise ValueError(f"unknown row type {kind!r} (expected NAME or VAL)")
            except (IndexError, ValueError) as err:
                raise ValueError(f"{path}, line {lineno}: malformed data dictionary row ({err})") from None
    for name, values in rows.items():
        var = out[name]
        out[name] = Variable(var.name, var.kind, var.length, var.label, tuple(unglue(str(path), name, values)))
    if not out:
        raise ValueError(f"{path}: no NAME rows; is this a PUMS data dictionary CSV?")
    return out
