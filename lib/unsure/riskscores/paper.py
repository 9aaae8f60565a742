"""The ``paper`` protocol's prompt words: what folktexts (the authors' package) writes.

Under ``studies.riskscores.protocol: paper`` a prompt is built as folktexts
builds it, so that the models see the text the paper's models saw::

    The following data corresponds to a survey respondent. The survey was
    conducted among US residents in 2018. Please answer the question based on
    the information provided. The data provided is enough to reach an
    approximate answer.

    Information:
    - The age is: 50 years old.
    ...

    Question: What is this person's estimated yearly income?
    A. Below $50,000.
    B. Above $50,000.
    Answer:

Feature lines are ``- The <description> is: <words>.``, with the package's own
descriptions and value words (:data:`FEATURES`); occupation, place of birth
and state take the data dictionary's labels through the package's clean-ups
(its code lists equal the 2014-2018 5-year dictionary; the 2018 1-year one
words 14 places of birth differently). Questions and option orders are the
package's (:data:`QUESTIONS`). ``ACSMobility`` asks whether the person
*moved*; the study's label is "lived in the same house", so the options carry
the study's labels and a numeric answer is complemented (``numeric_label``).

The text is data here; :mod:`.prompts` assembles it (nothing imports folktexts,
a test compares the prompts with the package's byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from unsure.riskscores.dictionary import DataDictionary


@dataclass(frozen=True)
class Feature:
    """How the package describes one column: ``description``, value words, fill for a missing value."""

    description: str
    words: Mapping[int, str] | Callable[[float], str] | None = None
    """A code table, a function of the number, or ``None``: the data dictionary's label (cleaned)."""
    missing: str = "N/A"


def _numbered(fmt: str) -> Callable[[float], str]:
    return lambda v: fmt.format(int(v))


def _poverty(v: float) -> str:
    where = "below" if v < 90 else ("at or near" if v < 110 else "above")
    where = f"{where} the poverty line"
    return f"{int(v)}% of the poverty line income, which is {where}"


def _codes(*labels: str, start: int = 1) -> dict[int, str]:
    return dict(enumerate(labels, start=start))


FEATURES: Mapping[str, Feature] = {
    "AGEP": Feature("age", _numbered("{} years old")),
    "COW": Feature(
        "class of worker",
        _codes(
            "Working for a for-profit private company or organization",
            "Working for a non-profit organization",
            "Working for the local government",
            "Working for the state government",
            "Working for the federal government",
            "Owner of non-incorporated business, professional practice, or farm",
            "Owner of incorporated business, professional practice, or farm",
            "Working without pay in a for-profit family business or farm",
            "Unemployed and last worked 5 years ago or earlier or never worked",
        ),
    ),
    "SCHL": Feature(
        "highest educational attainment",
        _codes(
            "N/A - no schooling completed",
            "Nursery school / preschool",
            "Kindergarten",
            "1st grade only",
            *(f"{n} grade" for n in ("2nd", "3rd", *(f"{k}th" for k in range(4, 12)))),
            "12th grade, no diploma",
            "Regular high school diploma",
            "GED or alternative credential",
            "Some college, less than 1 year",
            "Some college, 1 or more years, no degree",
            "Associate's degree",
            "Bachelor's degree",
            "Master's degree",
            "Professional degree beyond a bachelor's degree",
            "Doctorate degree",
        ),
    ),
    "MAR": Feature("marital status", _codes("Married", "Widowed", "Divorced", "Separated", "Never married")),
    "OCCP": Feature("occupation"),
    "POBP": Feature("place of birth"),
    "RELP": Feature(
        "relationship to the reference person in the survey",
        _codes(
            "The reference person itself",
            "Husband/wife",
            "Biological son or daughter",
            "Adopted son or daughter",
            "Stepson or stepdaughter",
            "Brother or sister",
            "Father or mother",
            "Grandchild",
            "Parent-in-law",
            "Son-in-law or daughter-in-law",
            "Other relative",
            "Roomer or boarder",
            "Housemate or roommate",
            "Unmarried partner",
            "Foster child",
            "Other non-relative",
            "Institutionalized group quarters population",
            "Non-institutionalized group quarters population",
            start=0,
        ),
    ),
    "WKHP": Feature(
        "usual number of hours worked per week",
        _numbered("{} hours"),
        "N/A (less than 16 years old, or did not work during the past 12 months)",
    ),
    "SEX": Feature("sex", _codes("Male", "Female")),
    "RAC1P": Feature(
        "race",
        _codes(
            "White",
            "Black or African American",
            "American Indian",
            "Alaska Native",
            "American Indian and Alaska Native tribes specified; or American "
            "Indian or Alaska Native, not specified and no other races",
            "Asian",
            "Native Hawaiian and Other Pacific Islander",
            "Some other race alone (non-White)",
            "Two or more races",
        ),
    ),
    "PINCP": Feature("yearly income", lambda v: f"${int(v):,}", "N/A (less than 15 years old)"),
    "DIS": Feature("disability status", _codes("With a disability", "No disability")),
    "ESP": Feature(
        "employment status of parents",
        _codes(
            *(
                f"Living with two parents, {s}"
                for s in ("both employed", "only Father is employed", "only Mother is employed", "neither employed")
            ),
            *(f"Living with {p}, and {p} is {s}" for p in ("Father", "Mother") for s in ("employed", "not employed")),
        ),
        "N/A (not own child of householder, and not child in subfamily)",
    ),
    "CIT": Feature(
        "citizenship status",
        _codes(
            "Born in the United States",
            "Born in Puerto Rico, Guam, the U.S. Virgin Islands, or the Northern Marianas",
            "Born abroad of American parents",
            "Naturalized US citizen",
            "Not a US citizen",
        ),
    ),
    "MIG": Feature(
        "mobility status over the last year",
        _codes(
            "Lived in the same house one year ago",
            "Lived in a different house, outside the United States and Puerto Rico, one year ago",
            "Lived in a different house in the United States one year ago",
        ),
    ),
    "MIL": Feature(
        "military service status",
        _codes(
            "Now on active duty",
            "On active duty in the past, but not now",
            "Only on active duty for training in Reserved/National Guard",
            "Never served in the military",
        ),
        "N/A (less than 17 years old)",
    ),
    "ANC": Feature(
        "ancestry",
        _codes("Single ancestry", "Multiple ancestry", "Unclassified", "Not reported")
        | {8: "N/A (information suppressed for certain area codes)"},
    ),
    "NATIVITY": Feature("nativity", _codes("Native", "Foreign born")),
    "DEAR": Feature("hearing status", _codes("With hearing difficulty", "No hearing difficulty")),
    "DEYE": Feature("vision status", _codes("With vision difficulty", "No vision difficulty")),
    "DREM": Feature(
        "cognition status",
        _codes("With cognitive difficulty", "No cognitive difficulty"),
        "N/A (less than 5 years old)",
    ),
    "ESR": Feature(
        "employment status",
        _codes(
            "Civilian employed, at work",
            "Civilian employed, with a job but not at work",
            "Unemployed",
            "Armed forces, at work",
            "Armed forces, with a job but not at work",
            "Not in labor force",
        ),
        "N/A (less than 16 years old)",
    ),
    "ST": Feature("resident state"),
    "FER": Feature(
        "person has given birth within the last year",
        _codes(
            "Person has given birth within the last year.",
            "Person has not given birth within the last year.",
        ),
        "N/A (less than 15 years old, or greater than 50 years old, or male)",
    ),
    "JWMNP": Feature("commute time", _numbered("{} minutes"), "N/A (not a worker, or worker who worked at home)"),
    "JWTR": Feature(
        "means of transportation to work",
        _codes(
            "Car, truck, or van",
            "Bus or trolley bus",
            "Streetcar or trolley car",
            "Subway or elevated",
            "Railroad",
            "Ferryboat",
            "Taxicab",
            "Motorcycle",
            "Bicycle",
            "Walked",
            "Worked at home",
            "Other method",
        ),
    ),
    "POVPIP": Feature("income-to-poverty ratio", _poverty),
    "GCL": Feature(
        "grandparent living with grandchildren",
        _codes(
            "Household includes grandparent living with grandchildren",
            "Household does not include grandparents living with grandchildren",
        ),
        "N/A (less than 30 years old, or living in institutional group quarters)",
    ),
    "PUMA": Feature("Public Use Microdata Area (PUMA) code", _numbered("Public Use Microdata Area (PUMA) code: {}.")),
    "POWPUMA": Feature(
        "place of work PUMA", _numbered("Public Use Microdata Area (PUMA) code for the place of work: {}.")
    ),
}
"""The package's description and value words of every feature column of the five tasks."""


def _occupation(label: str) -> str:
    parts = label.split("-", 1)
    return (parts[1] if len(parts) == 2 else parts[0]).lower().capitalize().strip()


def _before_slash(label: str) -> str:
    return (label[: label.find("/")] if "/" in label else label).strip()


def _state(label: str) -> str:
    return label[: label.find("/")].strip()  # as the package: every state label has "/XX"


DICTIONARY_CLEANUP: Mapping[str, Callable[[str], str]] = {
    "OCCP": _occupation,
    "POBP": _before_slash,
    "ST": _state,
}
"""Columns worded by the data dictionary, and how the package cleans each label."""


@dataclass(frozen=True)
class Questions:
    """A task's questions: options in the package's order, each with the study's label."""

    question: str
    options: tuple[tuple[str, int], tuple[str, int]]
    numeric_question: str
    numeric_label: int = 1
    """The study's label whose probability the numeric question asks for (0: complement the answer)."""


QUESTIONS: Mapping[str, Questions] = {
    "ACSIncome": Questions(
        "What is this person's estimated yearly income?",
        (("Below $50,000", 0), ("Above $50,000", 1)),
        "What is the probability that this person's estimated yearly income is above $50,000 ?",
    ),
    "ACSPublicCoverage": Questions(
        "Does this person have public health insurance coverage?",
        (
            ("Yes, person is covered by public health insurance", 1),
            ("No, person is not covered by public health insurance", 0),
        ),
        "What is the probability that this person is covered by public health insurance?",
    ),
    "ACSMobility": Questions(
        "Has this person moved in the last year?",
        (
            ("No, person has lived in the same house for the last year", 1),
            ("Yes, person has moved in the last year", 0),
        ),
        "What is the probability that this person has moved in the last year?",
        numeric_label=0,
    ),
    "ACSEmployment": Questions(
        "What is this person's employment status?",
        (("Employed civilian", 1), ("Unemployed or in the military", 0)),
        "What is the probability that this person is an employed civilian?",
    ),
    "ACSTravelTime": Questions(
        "What is this person's commute time?",
        (("Longer than 20 minutes", 1), ("Less than 20 minutes", 0)),
        "What is the probability that this person's commute time is longer than 20 minutes?",
    ),
}
"""The package's questions per task (labels: the study's, so ``ACSMobility``'s are swapped)."""


def header(year: int, *, shots: bool = False) -> str:
    """The population paragraph (the few-shot variant speaks of several respondents)."""
    who, which, tail = (
        ("different survey respondents", "each question", " for each person")
        if shots
        else ("a survey respondent", "the question", "")
    )
    return (
        f"The following data corresponds to {who}. The survey was conducted among US residents in {year}. "
        f"Please answer {which} based on the information provided. "
        f"The data provided is enough to reach an approximate answer{tail}.\n"
    )


class MissingWords(KeyError):
    """A column the paper protocol has no words for; the message names it."""

    def __str__(self) -> str:
        return str(self.args[0])


def value_words(column: str, dictionary: DataDictionary) -> Callable[[Any], str]:
    """The package's words for values of ``column`` (a missing value: the column's fill;
    a code it does not list: ``N/A``, as the package writes it)."""
    if column not in FEATURES:
        raise MissingWords(
            f"column {column!r}: protocol paper has no folktexts words for it "
            f"(it words {', '.join(sorted(FEATURES))}); use protocol corrected"
        )
    feature = FEATURES[column]
    words = feature.words
    if words is None:
        if column not in dictionary:
            raise MissingWords(f"column {column!r} is not in the data dictionary {dictionary.source}")
        clean = DICTIONARY_CLEANUP[column]
        words = {int(float(v.low)): clean(v.label) for v in dictionary[column].values if v.is_single and not v.is_blank}

    def lookup(value: Any) -> str:
        if value is None or pd.isna(value):
            return feature.missing
        if callable(words):
            return words(float(value))
        x = float(value)
        return words.get(int(x), "N/A") if x.is_integer() else "N/A"

    return lookup


def feature_lines(frame: pd.DataFrame, features: tuple[str, ...], dictionary: DataDictionary) -> pd.Series:
    """Every row's ``- The <description> is: <words>.`` lines, joined by newlines."""
    parts = []
    for col in features:
        if col not in frame.columns:
            raise KeyError(f"column {col!r} is not in the prepared rows (columns: {', '.join(frame.columns)})")
        words, desc = value_words(col, dictionary), FEATURES[col].description
        column = frame[col]
        lines = {v: f"- The {desc} is: {words(v)}." for v in column.dropna().unique()}
        missing = f"- The {desc} is: {words(None)}."
        parts.append(column.map(lines).where(column.notna(), missing))
    if not parts:
        return pd.Series([""] * len(frame), index=frame.index)
    out = parts[0]
    for p in parts[1:]:
        out = out + "\n" + p
    return out.astype(str)
