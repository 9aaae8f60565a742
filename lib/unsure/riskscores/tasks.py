"""Prediction tasks on ACS person records: the five folktables tasks and custom ones.

A :class:`Task` is a thresholded target, a feature list, population filters and
the question texts its prompts ask. The five folktables tasks are written out
here exactly as ``folktables`` defines them (features, target threshold,
population filter; a test checks them against the package). The positive class
of every task is the one its own question describes: for ``ACSMobility`` that
is ``MIG == 1``, "lived in the same house one year ago", as in folktables
(folktexts asks whether the person moved, which inverts the label; we do not).
"""

from __future__ import annotations

import hashlib
import operator
import os
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.config import RiskTask
from unsure.riskscores.dictionary import DataDictionary
from unsure.riskscores.text import clean_label

OPS: Mapping[str, Callable[[pd.Series, float], pd.Series]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Bound:
    """A population filter on one column: ``low <= x <= high`` (or strictly, per side)."""

    column: str
    low: float = -np.inf
    high: float = np.inf
    low_strict: bool = False
    high_strict: bool = False

    def mask(self, frame: pd.DataFrame) -> pd.Series:
        x = pd.to_numeric(frame[self.column], errors="coerce")
        above = x > self.low if self.low_strict else x >= self.low
        below = x < self.high if self.high_strict else x <= self.high
        return above & below  # NaN fails both

    @classmethod
    def parse(cls, text: str) -> Bound:
        """``COL=value`` or ``COL=low..high`` (inclusive; either side may be empty)."""
        column, _, spec = text.partition("=")
        if not column or not spec:
            raise ValueError(f"filter {text!r}: expected COLUMN=value or COLUMN=low..high")
        try:
            if ".." in spec:
                lo, _, hi = spec.partition("..")
                return cls(column, float(lo) if lo else -np.inf, float(hi) if hi else np.inf)
            return cls(column, float(spec), float(spec))
        except ValueError:
            raise ValueError(f"filter {text!r}: {spec!r} is not a number or a range low..high") from None


@dataclass(frozen=True)
class Task:
    """A binary prediction task on person records."""

    name: str
    target: str
    op: str
    threshold: float
    features: tuple[str, ...]
    filters: tuple[Bound, ...]
    question: str
    negative: str
    positive: str
    numeric_question: str

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the task reads: features, target and filter columns."""
        return tuple(dict.fromkeys([*self.features, self.target, *(b.column for b in self.filters)]))

    def population(self, frame: pd.DataFrame) -> pd.Series:
        """Rows in the task's population (all filters hold)."""
        mask = pd.Series(True, index=frame.index)
        for bound in self.filters:
            if bound.column not in frame.columns:
                raise KeyError(f"task {self.name}: filter column {bound.column!r} is not in the person records")
            mask &= bound.mask(frame)
        return mask

    def label(self, frame: pd.DataFrame) -> pd.Series:
        """The binary label (NaN targets compare false, as in folktables)."""
        x = pd.to_numeric(frame[self.target], errors="coerce")
        return OPS[self.op](x, self.threshold).astype(np.int8)


def _cols(names: str) -> tuple[str, ...]:
    return tuple(names.split())


def _gt(column: str, value: float) -> Bound:
    return Bound(column, low=value, low_strict=True)


def _lt(column: str, value: float) -> Bound:
    return Bound(column, high=value, high_strict=True)


FOLKTABLES: Mapping[str, Task] = {
    t.name: t
    for t in (
        Task(
            "ACSIncome",
            "PINCP",
            ">",
            50_000,
            _cols("AGEP COW SCHL MAR OCCP POBP RELP WKHP SEX RAC1P"),
            (_gt("AGEP", 16), _gt("PINCP", 100), _gt("WKHP", 0), Bound("PWGTP", low=1)),
            "What is this person's estimated yearly income?",
            "Below $50,000",
            "Above $50,000",
            "What is the probability that this person's estimated yearly income is above $50,000?",
        ),
        Task(
            "ACSPublicCoverage",
            "PUBCOV",
            "==",
            1,
            _cols("AGEP SCHL MAR SEX DIS ESP CIT MIG MIL ANC NATIVITY DEAR DEYE DREM PINCP ESR ST FER RAC1P"),
            (_lt("AGEP", 65), Bound("PINCP", high=30_000)),
            "Is this person currently covered by public health insurance (Medicare, Medicaid or other "
            "government assistance plans)?",
            "No, this person is not covered by public health insurance",
            "Yes, this person is covered by public health insurance",
            "What is the probability that this person is covered by public health insurance?",
        ),
        Task(
            "ACSMobility",
            "MIG",
            "==",
            1,
            _cols(
                "AGEP SCHL MAR SEX DIS ESP CIT MIL ANC NATIVITY RELP DEAR DEYE DREM RAC1P GCL COW ESR WKHP JWMNP PINCP"
            ),
            (_gt("AGEP", 18), _lt("AGEP", 35)),
            "Did this person live in this house or apartment 1 year ago?",
            "No, this person lived in a different house 1 year ago",
            "Yes, this person lived in the same house 1 year ago",
            "What is the probability that this person lived in the same house 1 year ago?",
        ),
        Task(
            "ACSEmployment",
            "ESR",
            "==",
            1,
            _cols("AGEP SCHL MAR RELP DIS ESP CIT MIG MIL ANC NATIVITY DEAR DEYE DREM SEX RAC1P"),
            (),
            "What is this person's employment status?",
            "Not a civilian at work (unemployed, absent from work, in the armed forces or not in the labor force)",
            "Civilian employed and at work",
            "What is the probability that this person is a civilian employed and at work?",
        ),
        Task(
            "ACSTravelTime",
            "JWMNP",
            ">",
            20,
            _cols("AGEP SCHL MAR SEX DIS ESP MIG RELP RAC1P PUMA ST CIT OCCP JWTR POWPUMA POVPIP"),
            (_gt("AGEP", 16), Bound("PWGTP", low=1), Bound("ESR", low=1, high=1)),
            "How many minutes did it usually take this person to get from home to work last week?",
            "20 minutes or less",
            "Longer than 20 minutes",
            "What is the probability that this person's usual travel time to work is longer than 20 minutes?",
        ),
    )
}
"""The five folktables tasks, with the questions of the Census questionnaire."""

FEATURE_COLUMNS: tuple[str, ...] = tuple(sorted({c for t in FOLKTABLES.values() for c in t.features}))
"""Every feature column of the five folktables tasks."""

_OP_WORDS = {">": "above", ">=": "at least", "<": "below", "<=": "at most", "==": "equal to", "!=": "not equal to"}


def custom_task(name: str, spec: RiskTask, dictionary: DataDictionary | None = None) -> Task:
    """A task from a ``custom_tasks`` config entry (on top of ``based_on`` if given).

    Question texts not given are the base task's when the target is unchanged,
    else built from the target's dictionary label ("Is this person's ... above 45?").
    """
    base = FOLKTABLES[spec.based_on] if spec.based_on is not None else None
    target = spec.target or (base.target if base else None)
    op = spec.op or (base.op if base else ">")
    threshold = spec.threshold if spec.threshold is not None else (base.threshold if base else None)
    features = spec.features or (base.features if base else None)
    if target is None or threshold is None or not features:
        raise ValueError(f"custom task {name!r} needs target, threshold and features (or based_on)")
    same_label = base is not None and (target, op, threshold) == (base.target, base.op, base.threshold)
    texts = _texts(base) if same_label and base else _default_texts(target, op, threshold, dictionary)
    texts |= {k: v for k in texts if (v := getattr(spec, k))}
    return Task(
        name=name,
        target=target,
        op=op,
        threshold=threshold,
        features=tuple(features),
        filters=(base.filters if base else ()) + tuple(Bound.parse(f) for f in spec.filters),
        **texts,
    )


def _texts(task: Task) -> dict[str, str]:
    return {"question": task.question, "negative": task.negative, "positive": task.positive,
            "numeric_question": task.numeric_question}  # fmt: skip


def _default_texts(target: str, op: str, threshold: float, dictionary: DataDictionary | None) -> dict[str, str]:
    label = target
    if dictionary is not None and target in dictionary:
        label = clean_label(dictionary[target].label).lower()
    words, value = _OP_WORDS[op], f"{threshold:g}"
    return {
        "question": f"Is this person's {label} {words} {value}?",
        "negative": f"No, this person's {label} is not {words} {value}",
        "positive": f"Yes, this person's {label} is {words} {value}",
        "numeric_question": f"What is the probability that this person's {label} is {words} {value}?",
    }


def resolve_tasks(
    names: Sequence[str], custom: Mapping[str, RiskTask], dictionary: DataDictionary | None = None
) -> dict[str, Task]:
    """The configured tasks by name: folktables ones and ``custom_tasks`` entries."""
    out = {}
    for name in names:
        out[name] = FOLKTABLES[name] if name in FOLKTABLES else custom_task(name, custom[name], dictionary)
    return out


# ----------------------------------------------------------------------------- data


def read_person_zip(path: str | os.PathLike[str], columns: Sequence[str]) -> pd.DataFrame:
    """The person records of one Census state zip (``csv_p{xx}.zip``), given columns only.

    A stable ``row_id`` (``ST-SERIALNO-SPORDER``) identifies each person across
    runs, shard counts and states.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.namelist() if m.lower().endswith(".csv")]
            if len(members) != 1:
                raise ValueError(f"{path}: expected one CSV member in the Census zip, found {members}")
            with archive.open(members[0]) as f:
                header = f.readline().decode("ascii").strip().split(",")
            wanted = list(dict.fromkeys(["SERIALNO", "SPORDER", "ST", *columns]))
            missing = [c for c in wanted if c not in header]
            if missing:
                raise ValueError(f"{path}: the person file lacks column(s) {', '.join(missing)}")
            with archive.open(members[0]) as f:
                frame = pd.read_csv(f, usecols=wanted, dtype={"SERIALNO": str}, low_memory=False)
    except (zipfile.BadZipFile, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: not a readable Census zip (truncated, or an HTML page?): {err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: the person file's header is not ASCII text ({err.reason})") from None
    if frame.empty:
        raise ValueError(f"{path}: the person file has a header but no records")
    numeric = [c for c in wanted if c != "SERIALNO"]
    coerced = frame[numeric].apply(pd.to_numeric, errors="coerce").astype(np.float64)
    for column in numeric:  # a blank cell is the Census' N/A; text where a code belongs is a damaged file
        bad = coerced[column].isna() & frame[column].notna()
        if bad.any():
            first = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{path}: column {column} holds {int(bad.sum())} non-numeric cell(s), the first "
                f"{frame[column].iloc[first]!r} on line {first + 2} (SERIALNO {frame['SERIALNO'].iloc[first]})"
            )
    frame[numeric] = coerced
    frame.insert(
        0,
        "row_id",
        frame["ST"].astype(int).astype(str).str.zfill(2)
        + "-"
        + frame["SERIALNO"]
        + "-"
        + frame["SPORDER"].astype(int).astype(str).str.zfill(2),
    )
    return frame.drop(columns=["SERIALNO"])


def split_key(row_ids: pd.Series, seed: int) -> np.ndarray:
    """A uniform pseudo-random number per row, a pure function of (seed, row id)."""
    digests = (hashlib.sha256(f"{seed}:{r}".encode()).digest()[:8] for r in row_ids)
    return np.fromiter((int.from_bytes(d, "little") for d in digests), dtype=np.uint64, count=len(row_ids))


def task_rows(persons: pd.DataFrame, task: Task, *, n_train: int, n_eval: int, seed: int) -> pd.DataFrame:
    """The task's population with its label and a fixed, seeded split.

    Rows are ordered by a hash of (seed, row id); the first ``n_eval`` form the
    evaluation split, the next ``n_train`` the training split, the rest are
    dropped. A row's split does not depend on which other rows exist.
    """
    missing = [c for c in task.columns if c not in persons.columns]
    if missing:
        raise KeyError(f"task {task.name}: the person records lack column(s) {', '.join(missing)}")
    rows = persons[task.population(persons)].copy()
    if rows.empty:
        raise ValueError(f"task {task.name}: no person record passes the population filters")
    if len(rows) <= n_eval:
        raise ValueError(
            f"task {task.name}: studies.riskscores.n_eval ({n_eval}) takes the whole population "
            f"({len(rows)} persons) and leaves no training rows for the threshold and the baselines; "
            "lower n_eval or add states (data.acs.states)"
        )
    rows["label"] = task.label(rows)
    rows = rows.iloc[np.argsort(split_key(rows["row_id"], seed), kind="stable")].reset_index(drop=True)
    rows["split"] = np.where(np.arange(len(rows)) < n_eval, "eval", "train")
    return rows.iloc[: n_eval + n_train].reset_index(drop=True)


BASE_COLUMNS: tuple[str, ...] = tuple(
    sorted({c for t in FOLKTABLES.values() for c in t.columns} | {"PWGTP", "ST", "SPORDER", "AGEP", "SEX", "RAC1P"})
)
"""The person-file columns every run keeps: all the folktables tasks read, plus weights and ids."""


def person_columns(custom: Iterable[RiskTask], extra: Iterable[str] = ()) -> list[str]:
    """Columns to keep from the person files: :data:`BASE_COLUMNS` and what custom tasks read."""
    cols = set(BASE_COLUMNS) | set(extra)
    for spec in custom:
        cols |= {c for c in (spec.target, *(spec.features or ())) if c}
        cols |= {Bound.parse(f).column for f in spec.filters}
    return sorted(cols)


def task_from_spec(name: str, spec: Mapping[str, object] | None, dictionary: DataDictionary | None = None) -> Task:
    """The task a rule works on: folktables' by name, or its ``custom_tasks`` entry (a dumped dict)."""
    if spec is None:
        if name not in FOLKTABLES:
            raise KeyError(f"task {name!r} is neither a folktables task nor given a custom_tasks entry")
        return FOLKTABLES[name]
    return custom_task(name, RiskTask.model_validate(spec), dictionary)


def scored_rows(rows: pd.DataFrame, threshold_rows: int) -> pd.DataFrame:
    """The rows a model scores: the evaluation split and the first ``threshold_rows``
    training rows (``split`` = ``threshold``), the labelled sample the threshold is fitted on."""
    train = rows[rows["split"] == "train"].head(threshold_rows).assign(split="threshold")
    return pd.concat([rows[rows["split"] == "eval"], train], ignore_index=True)
