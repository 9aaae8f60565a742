"""Where every raw input lives, and what a valid copy of it looks like.

One function per source builds a :class:`Source`: its real public URL, the
file name it has there (and must have in a local copy), the config key that
points the workflow at a local copy instead, and a validator for the bytes.
Nothing here touches the network; :func:`obtain` does, through
:mod:`unsure.download`.

How each URL was checked is recorded next to it (``# verified:``): the URLs
could not be opened from the machine this was written on, so they were checked
against the code of projects that download them, and the file layouts against
real copies of the files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from unsure.download import (
    InvalidDownload,
    SourceError,
    Validator,
    all_of,
    copy_local,
    csv_with_columns,
    extract_zip,
    fetch,
    json_with_keys,
    jsonl_with_keys,
    lines_matching,
    nonempty,
    not_html,
    zip_with_members,
)
from unsure.states import STATE_FIPS

__all__ = [
    "ACS_KEY",
    "LABEL_BIAS_REF",
    "MCQA_KEY",
    "PROVO_KEY",
    "SNI_KEY",
    "STATE_FIPS",
    "Member",
    "Source",
    "acs_data_dictionary",
    "acs_pums_person",
    "anli",
    "catalogue",
    "extract",
    "hellaswag",
    "obtain",
    "piqa",
    "piqa_labels",
    "provo_norms",
    "sni_input_templates",
    "sni_split",
    "sni_task",
    "sni_task_info",
    "social_iqa",
]

ACS_KEY = "data.acs.local_dir"
PROVO_KEY = "data.provo.local_dir"
SNI_KEY = "data.sni.local_dir"
MCQA_KEY = "data.mcqa.local_dir"

Horizon = Literal["1-Year", "5-Year"]


@dataclass(frozen=True)
class Member:
    """One file inside an archive source: its name there, where it goes, how to check it."""

    name: str
    filename: str
    validate: Validator


@dataclass(frozen=True)
class Source:
    """One downloadable raw file.

    Attributes:
        key: stable identifier, e.g. ``mcqa/piqa/valid.jsonl``; for logs and tests.
        url: the real public URL.
        filename: the file's name (or path) at the source; a local copy must be
            at ``<local_dir>/<filename>``.
        config_key: the config key naming a directory with a local copy.
        validate: checks a downloaded or copied file.
        expect: what a valid file looks like, in words (for error messages and docs).
        members: for archives, the files to extract from it.
    """

    key: str
    url: str
    filename: str
    config_key: str
    validate: Validator = field(repr=False, compare=False)
    expect: str
    members: tuple[Member, ...] = ()


def _text_file(*checks: Validator) -> Validator:
    """A data file: not empty, not an HTML page, then the specific checks."""
    return all_of(nonempty, not_html, *checks)


# --------------------------------------------------------------------------- ACS PUMS


_ACS_BASE = "https://www2.census.gov/programs-surveys/acs"


def _check_acs(year: int, horizon: str) -> None:
    if horizon not in ("1-Year", "5-Year"):
        raise ValueError(f"ACS horizon must be '1-Year' or '5-Year', got {horizon!r}")
    if not 2014 <= year <= 2100:
        raise ValueError(f"ACS PUMS year must be 2014 or later (the layout read here), got {year}")


def acs_pums_person(year: int, state: str, horizon: Horizon = "1-Year") -> Source:
    """The ACS PUMS person file of one state (or ``US``) for one year, as the Census zips it.

    From 2017 the archive holds ``psam_p{FIPS}.csv``; up to 2016 it held
    ``ss{yy}p{state}.csv``. ``US`` is the whole-country archive, split into
    ``psam_pusa.csv``, ``psam_pusb.csv``, ...
    (The 2020 1-year release was published only as experimental estimates,
    elsewhere on the site; this URL does not exist for it.)
    """
    _check_acs(year, horizon)
    code = state.upper()
    if code != "US" and code not in STATE_FIPS:
        raise ValueError(f"unknown state {state!r}; use a two-letter code such as 'CA', or 'US'")
    if code == "US":
        pattern = "psam_pus?.csv" if year >= 2017 else f"ss{year % 100:02d}pus?.csv"
    elif year >= 2017:
        pattern = f"psam_p{STATE_FIPS[code]}.csv"
    else:
        pattern = f"ss{year % 100:02d}p{code.lower()}.csv"
    filename = f"csv_p{code.lower()}.zip"
    # verified: folktables 0.0.12 load_acs.py builds exactly
    # f"{_ACS_BASE}/data/pums/{year}/{horizon}/csv_{p|h}{state.lower()}.zip" and extracts
    # psam_p{FIPS}.csv (>= 2017) or ss{yy}p{state}.csv; csv_pus.zip seen in public scripts.
    url = f"{_ACS_BASE}/data/pums/{year}/{horizon}/{filename}"
    return Source(
        key=f"acs/{year}/{horizon}/{filename}",
        url=url,
        filename=filename,
        config_key=ACS_KEY,
        validate=all_of(nonempty, not_html, zip_with_members([pattern])),
        expect=f"an intact zip archive holding {pattern}",
        members=(),  # read straight from the zip by the ACS data module (files are large)
    )


def acs_data_dictionary(year: int, horizon: Horizon = "1-Year") -> Source:
    """The PUMS data dictionary (CSV layout, from 2017) that names every variable's codes.

    The 5-year dictionary is named by its span, e.g. ``2014-2018`` for 2018.
    Its rows start with ``NAME`` or ``VAL``; the file has no header.
    """
    _check_acs(year, horizon)
    if year < 2017:
        raise ValueError(f"the PUMS data dictionary is published as CSV from 2017 on, got {year}")
    span = str(year) if horizon == "1-Year" else f"{year - 4}-{year}"
    filename = f"PUMS_Data_Dictionary_{span}.csv"
    # verified: folktables 0.0.12 load_definitions() uses this URL with
    # year_string = year (1-Year) or f"{year - 4}-{year}" (5-Year); the layout was
    # checked against real 2018 and 2014-2018 dictionaries (tidycensus data-raw).
    return Source(
        key=f"acs/{year}/{horizon}/{filename}",
        url=f"{_ACS_BASE}/tech_docs/pums/data_dict/{filename}",
        filename=filename,
        config_key=ACS_KEY,
        validate=_text_file(lines_matching(r'"?(NAME|VAL)"?,.*', min_lines=100)),
        expect="a CSV with no header whose every line starts with NAME or VAL",
    )


# --------------------------------------------------------------------------- Provo

_PROVO_COLUMNS = ("Text_ID", "Text", "Word_Number", "Word", "Response", "Response_Proportion")


def provo_norms() -> Source:
    """Provo Corpus predictability norms (Luke & Christianson 2018), the file on OSF.

    One row per (text, word position, cloze response). The file is Latin-1.
    """
    filename = "Provo_Corpus-Predictability_Norms.csv"
    # verified: the OSF project https://osf.io/sjefs/ lists this file; its OSF file id
    # e4a2m is what public download scripts use for it (rycolab/revisiting-uid
    # src/pull_data.sh: `curl -L -o provo_norms.csv https://osf.io/e4a2m/download`;
    # bnicenboim/pangoling data-raw names https://osf.io/e4a2m "Provo_cloze"). The
    # column names are those read by published parsers of this file.
    return Source(
        key=f"provo/{filename}",
        url="https://osf.io/e4a2m/download",
        filename=filename,
        config_key=PROVO_KEY,
        validate=_text_file(csv_with_columns(_PROVO_COLUMNS, min_rows=1000)),
        expect=f"a CSV with columns {', '.join(_PROVO_COLUMNS)}",
    )


# --------------------------------------------------------------------------- SNI

_SNI_REPO = "https://raw.githubusercontent.com/allenai/natural-instructions"
_SNI_TASK = re.compile(r"task\d+_[A-Za-z0-9_.-]+")
_SNI_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def _check_ref(ref: str) -> None:
    if not _SNI_REF.fullmatch(ref) or ".." in ref:
        raise ValueError(f"not a git branch, tag or commit: {ref!r}")


def sni_task(task: str, ref: str = "master") -> Source:
    """One SUPER-NATURALINSTRUCTIONS task file, e.g. ``task1216_atomic_classification_causes``.

    Pin ``ref`` to a commit for reproducible runs. A local copy is a checkout of
    the repository: the file is ``<local_dir>/tasks/<task>.json``.
    """
    if not _SNI_TASK.fullmatch(task) or ".." in task:
        raise ValueError(f"not an SNI task name (like 'task039_qasc_find_overlapping_words'): {task!r}")
    _check_ref(ref)
    filename = f"tasks/{task}.json"
    # verified: tasks/<name>.json exists in allenai/natural-instructions (code index);
    # keys checked on seven real task files.
    return Source(
        key=f"sni/{ref}/{filename}",
        url=f"{_SNI_REPO}/{ref}/{filename}",
        filename=filename,
        config_key=SNI_KEY,
        validate=_text_file(json_with_keys(("Definition", "Positive Examples", "Instances"))),
        expect="a JSON object with Definition, Positive Examples and Instances",
    )


def sni_split(split: Literal["train", "test"], ref: str = "master", name: str = "default") -> Source:
    """The list of task names in one split (``splits/<name>/<split>_tasks.txt``)."""
    if split not in ("train", "test"):
        raise ValueError(f"SNI split must be 'train' or 'test', got {split!r}")
    if name not in ("default", "xlingual"):
        raise ValueError(f"SNI split set must be 'default' or 'xlingual', got {name!r}")
    _check_ref(ref)
    filename = f"splits/{name}/{split}_tasks.txt"
    # verified: splits/default/{train,test}_tasks.txt exist in allenai/natural-instructions
    # (code index); the line format was checked on the real files.
    return Source(
        key=f"sni/{ref}/{filename}",
        url=f"{_SNI_REPO}/{ref}/{filename}",
        filename=filename,
        config_key=SNI_KEY,
        validate=_text_file(lines_matching(_SNI_TASK.pattern, min_lines=10)),
        expect="one SNI task name per line",
    )


_LABEL_BIAS_REPO = "https://raw.githubusercontent.com/schwartz-lab-NLP/label-bias"
LABEL_BIAS_REF = "b72b504671c0d261ef5f4fe094b4ec92ed873d0a"
"""The label-bias study's repository at its last commit (May 2024), which the task metadata is read from."""
_TASK_INFO_COLUMNS = ("Name", "Summary", "Category", "Input Language", "Output Language")


def sni_task_info(ref: str = LABEL_BIAS_REF) -> Source:
    """Metadata of every SNI task (name, summary, category, languages), as the label-bias study ships it.

    The study's task filter reads the summaries; the SNI repository has no such
    table. A local copy is ``<local_dir>/task_info/full_task_info.csv``.
    """
    _check_ref(ref)
    filename = "task_info/full_task_info.csv"
    # verified: src/superni/task_info/full_task_info.csv of schwartz-lab-NLP/label-bias
    # (git mirror): unchanged since 86e81a4d, 1,613 rows, byte-identical to the copy
    # in ../shared/data/sni, whose columns the validator names.
    return Source(
        key=f"sni/label-bias/{ref}/{filename}",
        url=f"{_LABEL_BIAS_REPO}/{ref}/src/superni/{filename}",
        filename=filename,
        config_key=SNI_KEY,
        validate=_text_file(csv_with_columns(_TASK_INFO_COLUMNS, min_rows=1000)),
        expect=f"a CSV with columns {', '.join(_TASK_INFO_COLUMNS)} and a row per SNI task",
    )


def sni_input_templates(ref: str = LABEL_BIAS_REF) -> Source:
    """The label-bias study's input template of each of its 279 tasks (``task``, ``template``, an
    ``{INPUT}`` slot per input part), which its domain-context inputs follow.

    A local copy is ``<local_dir>/task_info/classification_task_input_templates.csv``.
    """
    _check_ref(ref)
    filename = "task_info/classification_task_input_templates.csv"
    # verified: src/superni/task_info/task_input_templates/classification_tasks.csv of
    # schwartz-lab-NLP/label-bias (git mirror) is byte-identical to the copy in ../shared/data/sni
    # under this file name: 279 rows, 174 templates with more than one slot.
    return Source(
        key=f"sni/label-bias/{ref}/{filename}",
        url=f"{_LABEL_BIAS_REPO}/{ref}/src/superni/task_info/task_input_templates/classification_tasks.csv",
        filename=filename,
        config_key=SNI_KEY,
        validate=_text_file(csv_with_columns(("task", "template"), min_rows=200)),
        expect="a CSV with columns task, template and a row per study task",
    )


# --------------------------------------------------------------------------- multiple choice

_HELLASWAG_KEYS = ("ind", "ctx", "endings", "activity_label")
_PIQA_KEYS = ("goal", "sol1", "sol2")
_SIQA_KEYS = ("context", "question", "answerA", "answerB", "answerC")
_ANLI_KEYS = ("story_id", "obs1", "obs2", "hyp1", "hyp2")


def hellaswag(split: Literal["train", "val", "test"]) -> Source:
    """HellaSwag as released by its authors (``label`` absent from the test split)."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"HellaSwag split must be 'train', 'val' or 'test', got {split!r}")
    filename = f"hellaswag_{split}.jsonl"
    keys = _HELLASWAG_KEYS if split == "test" else (*_HELLASWAG_KEYS, "label")
    # verified: rowanz/hellaswag data/README.md documents these files and fields; this
    # URL is used by many public loaders (code index); keys checked on real val items.
    return Source(
        key=f"mcqa/hellaswag/{filename}",
        url=f"https://raw.githubusercontent.com/rowanz/hellaswag/master/data/{filename}",
        filename=filename,
        config_key=MCQA_KEY,
        validate=_text_file(jsonl_with_keys(keys)),
        expect=f"JSON Lines with keys {', '.join(keys)}",
    )


def piqa(split: Literal["train", "valid"]) -> Source:
    """PIQA questions from the authors' site; labels are a separate file, :func:`piqa_labels`."""
    if split not in ("train", "valid"):
        raise ValueError(f"PIQA split must be 'train' or 'valid', got {split!r}")
    filename = f"{split}.jsonl"
    # verified: https://yonatanbisk.com/piqa/data/{train,valid}.jsonl is used by
    # lm-evaluation-harness (early), HELM and others (code index); keys checked on the
    # real valid.jsonl.
    return Source(
        key=f"mcqa/piqa/{filename}",
        url=f"https://yonatanbisk.com/piqa/data/{filename}",
        filename=filename,
        config_key=MCQA_KEY,
        validate=_text_file(jsonl_with_keys(_PIQA_KEYS)),
        expect=f"JSON Lines with keys {', '.join(_PIQA_KEYS)}",
    )


def piqa_labels(split: Literal["train", "valid"]) -> Source:
    """PIQA gold labels: one ``0`` or ``1`` per line, aligned with :func:`piqa`."""
    if split not in ("train", "valid"):
        raise ValueError(f"PIQA split must be 'train' or 'valid', got {split!r}")
    filename = f"{split}-labels.lst"
    # verified: as piqa(); format checked on the real valid-labels.lst.
    return Source(
        key=f"mcqa/piqa/{filename}",
        url=f"https://yonatanbisk.com/piqa/data/{filename}",
        filename=filename,
        config_key=MCQA_KEY,
        validate=_text_file(lines_matching(r"[01]")),
        expect="one label, 0 or 1, per line",
    )


def _train_dev_members(prefix: str, keys: tuple[str, ...], labels: str) -> tuple[Member, ...]:
    """The four files of an AI2 leaderboard train/dev archive, flattened to one directory."""
    out: list[Member] = []
    for split in ("train", "dev"):
        out.append(Member(f"{prefix}{split}.jsonl", f"{split}.jsonl", jsonl_with_keys(keys)))
        out.append(Member(f"{prefix}{split}-labels.lst", f"{split}-labels.lst", lines_matching(labels)))
    return tuple(out)


def social_iqa() -> Source:
    """Social IQa train and dev (AI2's archive); labels 1, 2, 3 name answerA, B, C."""
    filename = "socialiqa-train-dev.zip"
    members = _train_dev_members("socialiqa-train-dev/", _SIQA_KEYS, r"[123]")
    # verified: this URL is used by allenai/rainbow (with sha256 ee073914...ef5c3), the
    # HF social_i_qa script and others (code index); member paths from rainbow's
    # dataset table; keys and labels checked on the real dev files.
    return Source(
        key=f"mcqa/socialiqa/{filename}",
        url=f"https://storage.googleapis.com/ai2-mosaic/public/socialiqa/{filename}",
        filename=filename,
        config_key=MCQA_KEY,
        validate=all_of(nonempty, not_html, zip_with_members([m.name for m in members])),
        expect="an intact zip holding socialiqa-train-dev/{train,dev}.jsonl and -labels.lst",
        members=members,
    )


def anli() -> Source:
    """aNLI (ART) train and dev (AI2's archive); labels 1, 2 name hyp1, hyp2."""
    filename = "alphanli-train-dev.zip"
    members = _train_dev_members("", _ANLI_KEYS, r"[12]")
    # verified: this URL is used by allenai/rainbow (sha256 24840b27...1c8d), jiant and
    # the HF art script (code index); all of them read train.jsonl, train-labels.lst,
    # dev.jsonl, dev-labels.lst at the archive root.
    return Source(
        key=f"mcqa/anli/{filename}",
        url=f"https://storage.googleapis.com/ai2-mosaic/public/alphanli/{filename}",
        filename=filename,
        config_key=MCQA_KEY,
        validate=all_of(nonempty, not_html, zip_with_members([m.name for m in members])),
        expect="an intact zip holding {train,dev}.jsonl and {train,dev}-labels.lst at its root",
        members=members,
    )


# --------------------------------------------------------------------------- using a source


def obtain(
    source: Source,
    dest: str | os.PathLike[str],
    *,
    local_dir: str | os.PathLike[str] | None = None,
    mirror: str | None = None,
    timeout: float = 60,
    retries: int = 3,
) -> Path:
    """Put a valid copy of ``source`` at ``dest``: from ``local_dir`` when set, else download it
    (from ``<mirror>/<filename>`` when a mirror is set, the layout of a local copy).

    Raises:
        unsure.download.SourceError: with the URL or local path and the config key.
    """
    if local_dir:
        return copy_local(local_dir, source.filename, dest, validate=source.validate, config_key=source.config_key)
    return fetch(
        source.url if mirror is None else f"{mirror.rstrip('/')}/{source.filename}",
        dest,
        validate=source.validate,
        config_key=source.config_key,
        timeout=timeout,
        retries=retries,
    )


def extract(source: Source, zip_path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Extract an archive source's members into ``out_dir`` under their flat names.

    Raises:
        unsure.download.SourceError: a member is missing or invalid; it names
            the archive, the URL and the config key. Nothing is extracted then.
    """
    if not source.members:
        raise ValueError(f"{source.key} is not an archive with members to extract")
    try:
        return extract_zip(
            zip_path,
            out_dir,
            {m.name: m.filename for m in source.members},
            validate={m.name: m.validate for m in source.members},
        )
    except InvalidDownload as exc:
        raise SourceError(
            f"{source.key} (from {source.url} or a copy named by {source.config_key}) cannot be used: {exc}. "
            f"Set {source.config_key} to a directory holding a valid {source.filename} instead.",
            config_key=source.config_key,
        ) from exc


def catalogue() -> list[Source]:
    """One instance of every kind of source, for documentation and tests."""
    return [
        acs_pums_person(2018, "CA"),
        acs_pums_person(2018, "CA", "5-Year"),
        acs_pums_person(2016, "TX"),
        acs_pums_person(2018, "US"),
        acs_data_dictionary(2018),
        acs_data_dictionary(2018, "5-Year"),
        provo_norms(),
        sni_task("task1216_atomic_classification_causes"),
        sni_split("train"),
        sni_split("test"),
        sni_task_info(),
        hellaswag("train"),
        hellaswag("val"),
        piqa("train"),
        piqa("valid"),
        piqa_labels("train"),
        piqa_labels("valid"),
        social_iqa(),
        anli(),
    ]
