"""SNI task files: reading, the study's classification-task filter, and the per-task instance draws.

The filter follows the study: a task is a candidate when its name, category or
(given the metadata file) summary speaks of classification or detection; it
must be English in and out, not one of the tasks the study excluded by hand,
have fewer than 50 distinct outputs (the first output of each instance), mostly
one output per instance, and enough instances to leave ``min_eval_instances``
for evaluation after the held-out and pool draws. On the full collection with
``task_info`` this yields the study's 279 tasks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from unsure.paths import slug
from unsure.rawdata import TASK_LIST

NAME_WORDS = ("classification", "detection", "answer_generation")
CATEGORY_WORDS = ("classification", "detection")
SUMMARY_WORDS = ("classification", "classify", "detect")
EXCLUDED_TASKS = frozenset(
    {
        "task007_mctaco_answer_generation_transient_stationary",
        "task089_swap_words_verification",
        "task563_discofuse_answer_generation",
        "task646_answer_generation",
        "task342_winomt_classification_profession_pro",
        "task343_winomt_classification_profession_anti",
        "task218_rocstories_swap_order_answer_generation",
        "task1359_numer_sense_answer_generation",
        "task302_record_classification",
    }
)
"""Tasks the study removed by hand: they pass the filter but are not classification tasks."""

SPLITS = ("heldout", "pool", "eval")


@dataclass(frozen=True)
class TaskFacts:
    """What the filter looks at, apart from the summary.

    Counted from a task file (:attr:`SniTask.facts`) or taken from the study's
    metadata, so the selection can be checked where the task files are absent.
    """

    name: str
    categories: tuple[str, ...]
    input_language: tuple[str, ...]
    output_language: tuple[str, ...]
    n_instances: int
    n_labels: int
    """Distinct first outputs."""
    mean_outputs: float
    """Mean number of outputs per instance."""


@dataclass(frozen=True)
class SniTask:
    """One task file: what the filter and the prompts need."""

    name: str
    definition: str
    categories: tuple[str, ...]
    input_language: tuple[str, ...]
    output_language: tuple[str, ...]
    instances: pd.DataFrame
    """``id``, ``input``, ``output`` (the first output) and ``n_outputs``, in file order."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The label set: every distinct (first) output, sorted."""
        return tuple(sorted(self.instances["output"].unique()))

    @property
    def facts(self) -> TaskFacts:
        """What the filter decides on, counted from the file."""
        n = len(self.instances)
        return TaskFacts(
            name=self.name,
            categories=self.categories,
            input_language=self.input_language,
            output_language=self.output_language,
            n_instances=n,
            n_labels=int(self.instances["output"].nunique()),
            mean_outputs=float(self.instances["n_outputs"].mean()) if n else 0.0,
        )


def read_task(path: str | os.PathLike[str]) -> SniTask:
    """Read ``tasks/<name>.json`` of the official layout.

    Raises:
        ValueError: naming the file and the key when the file is not a task file.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        rows = [
            {"id": str(i["id"]), "input": str(i["input"]), "output": str(i["output"][0]), "n_outputs": len(i["output"])}
            for i in raw["Instances"]
            if i["output"]
        ]
        return SniTask(
            name=path.stem,
            definition=str(raw["Definition"][0]),
            categories=tuple(raw.get("Categories", ())),
            input_language=tuple(raw["Input_language"]),
            output_language=tuple(raw["Output_language"]),
            instances=pd.DataFrame(rows, columns=["id", "input", "output", "n_outputs"]),
        )
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not an SNI task file (not UTF-8 text: {err.reason} at byte {err.start})") from None
    except (KeyError, IndexError, TypeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not an SNI task file ({type(err).__name__}: {err})") from None


def task_names(raw_dir: str | os.PathLike[str]) -> list[str]:
    """Tasks present in an SNI raw directory: its ``tasks.txt`` if written, else every task file."""
    root = Path(raw_dir)
    listing = root / TASK_LIST
    if not listing.is_file():
        return sorted(p.stem for p in (root / "tasks").glob("*.json"))
    names = []
    for lineno, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), start=1):
        name = line.strip()
        if name and name != slug(name):  # names become file names (tasks/<name>.json, adapters/<name>)
            raise ValueError(f"{listing}, line {lineno}: {name!r} is not a task name (one file-safe path component)")
        if name:
            names.append(name)
    return names


def read_summaries(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """Task summaries from the study's metadata CSV (``Name``, ``Summary``); empty without one."""
    if path is None:
        return {}
    info = pd.read_csv(path)
    missing = {"Name", "Summary"} - set(info.columns)
    if missing:
        raise ValueError(f"{path} (studies.labelbias.task_info): missing column(s) {', '.join(sorted(missing))}")
    return dict(zip(info["Name"].astype(str), info["Summary"].fillna("").astype(str), strict=True))


def is_candidate(name: str, categories: tuple[str, ...] | list[str], summary: str = "") -> bool:
    """Whether name, category or summary says the task classifies or detects (the study's first filter)."""
    cats = " ".join(categories).lower()
    return (
        any(w in name for w in NAME_WORDS)
        or any(w in cats for w in CATEGORY_WORDS)
        or any(w in summary.lower() for w in SUMMARY_WORDS)
    )


def rejection(task: SniTask | TaskFacts, *, summary: str, min_instances: int, max_labels: int) -> str:
    """Why the study would not use ``task`` (empty when it would)."""
    facts = task.facts if isinstance(task, SniTask) else task
    if facts.name in EXCLUDED_TASKS or "incorrect_answer" in facts.name:
        return "excluded by hand (not a classification task)"
    if not is_candidate(facts.name, facts.categories, summary):
        return "not a classification or detection task"
    if set(facts.input_language) != {"English"} or set(facts.output_language) != {"English"}:
        return "not English input and output"
    if facts.n_labels > max_labels:
        return f"{facts.n_labels} distinct outputs (more than {max_labels})"
    if facts.n_instances == 0 or facts.mean_outputs >= 2:
        return "most instances have more than one output"
    if facts.n_instances < min_instances:
        return f"{facts.n_instances} instances (fewer than {min_instances})"
    return ""


def label_list(labels: list[str] | tuple[str, ...], shown: int = 8) -> str:
    """Labels for one table cell: the first ``shown`` and how many more, separated by `` / ``.

    A ``|`` inside a label is escaped and line breaks become spaces, so the
    cell stays one cell of a Markdown table.
    """
    cells = [" ".join(lab.split()).replace("|", "\\|") for lab in labels]
    more = f" / … ({len(cells) - shown} more)" if len(cells) > shown else ""
    return " / ".join(cells[:shown]) + more


def _common_prefix(texts: list[str]) -> str:
    """The longest string every text starts with (the lexicographic extremes share it)."""
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


_LETTER = re.compile(r"^[A-Za-z]$")


def interchangeable_labels(labels: tuple[str, ...] | list[str]) -> bool:
    """Whether the labels carry no meaning of their own (A/B/C, 1/2/3, "Option 1"/"Option 2").

    A common prefix and suffix are stripped; what is left must be single letters
    or the integers 1, 2, ... (so 0/1, which means no/yes, does not count).
    """
    if len(labels) < 2:
        return False
    prefix = _common_prefix(list(labels))
    suffix = _common_prefix([lab[::-1] for lab in labels])[::-1]
    cores = [lab[len(prefix) : len(lab) - len(suffix)].strip() for lab in labels]
    if all(_LETTER.match(c) for c in cores):
        return True
    if all(c.isdigit() for c in cores):
        return sorted(int(c) for c in cores) == list(range(1, len(cores) + 1))
    return False


SENTENCE_COMPLETION = "Text Completion"
QUESTION_ANSWERING = "Question Answering"


def semantically_equivalent(
    name: str, categories: tuple[str, ...] | list[str], labels: tuple[str, ...] | list[str]
) -> bool:
    """Whether a task is in the paper's subset with semantically equivalent labels (§6, Fig. 4).

    The paper takes every sentence-completion task (pick the more logical
    continuation among options, usually A/B: SNI category ``Text Completion``,
    or a task named ``..._text_completion`` such as SuperGLUE COPA, filed under
    Cause Effect Classification) and every multiple-choice question-answering
    task (category ``Question Answering`` whose labels name options, A/B/C/D or
    1/2/3; not yes/no, 0/1 or answer words); on its 279 tasks that is 18. The
    paper prints no list: this rule is ours, and gives its count.
    """
    if SENTENCE_COMPLETION in categories or "text_completion" in name:
        return True
    return QUESTION_ANSWERING in categories and interchangeable_labels(labels)


def read_categories(path: str | os.PathLike[str] | None) -> dict[str, tuple[str, ...]]:
    """Task categories from the study's metadata CSV (``Name``, ``Category``); empty without one."""
    if path is None:
        return {}
    info = pd.read_csv(path)
    if "Category" not in info or "Name" not in info:
        return {}
    return {
        str(name): tuple(c.strip() for c in str(cat).split(",") if c.strip())
        for name, cat in zip(info["Name"], info["Category"].fillna(""), strict=True)
    }


def task_seed(seed: int, task: str) -> np.random.SeedSequence:
    """A seed for one task's draws that depends on the task name only (not on which other tasks exist)."""
    digest = int.from_bytes(hashlib.sha256(task.encode()).digest()[:8], "little")
    return np.random.SeedSequence([seed, digest])


def draw_instances(task: SniTask, *, n_eval: int, n_heldout: int, n_pool: int, seed: int) -> pd.DataFrame:
    """The task's held-out, pool and evaluation instances: disjoint, seeded and stable.

    One seeded permutation of the instances gives the first ``n_heldout`` to
    BiasScore, the next ``n_pool`` to demonstrations and fine-tuning (in that
    order, so demonstration sets are slices of it) and up to ``n_eval`` of the
    rest to evaluation. Returns ``task, row_id, split, order, input, gold``.
    """
    rng = np.random.default_rng(task_seed(seed, task.name))
    perm = rng.permutation(len(task.instances))
    sizes = {"heldout": n_heldout, "pool": n_pool, "eval": n_eval}
    parts, start = [], 0
    for split in SPLITS:
        idx = perm[start : start + sizes[split]]
        start += len(idx)
        chosen = task.instances.iloc[idx]
        parts.append(
            pd.DataFrame(
                {
                    "task": task.name,
                    "row_id": chosen["id"].to_numpy(),
                    "split": split,
                    "order": np.arange(len(idx)),
                    "input": chosen["input"].to_numpy(),
                    "gold": chosen["output"].to_numpy(),
                }
            )
        )
    out = pd.concat(parts, ignore_index=True)
    if out["row_id"].duplicated().any():
        dup = out.loc[out["row_id"].duplicated(), "row_id"].iloc[0]
        raise ValueError(f"task {task.name}: instance id {dup!r} appears more than once")
    return out


def select_tasks(
    raw_dir: str | os.PathLike[str],
    *,
    n_eval: int,
    n_heldout: int,
    n_pool: int,
    min_eval_instances: int,
    max_labels: int,
    seed: int,
    task_info: str | os.PathLike[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Apply the filter to every task of an SNI raw directory and draw the kept tasks' instances.

    Returns ``(tasks, instances)``: one row per task read (``selected`` and the
    ``reason`` when not, label set, definition, whether the labels are
    interchangeable, whether the task is in the paper's semantically-equivalent
    subset by its metadata category) and the drawn instances of the selected tasks.
    """
    summaries = read_summaries(task_info)
    categories = read_categories(task_info)
    root = Path(raw_dir)
    rows, drawn = [], []
    for name in task_names(root):
        summary = summaries.get(name, "")
        path = root / "tasks" / f"{name}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: listed in {root / TASK_LIST} but missing")
        task = read_task(path)
        reason = rejection(
            task, summary=summary, min_instances=min_eval_instances + n_heldout + n_pool, max_labels=max_labels
        )
        labels = task.labels
        rows.append(
            {
                "task": name,
                "selected": not reason,
                "reason": reason,
                "n_instances": len(task.instances),
                "n_labels": len(labels),
                "labels": list(labels),
                "interchangeable": interchangeable_labels(labels),
                "semantically_equivalent": semantically_equivalent(name, categories.get(name, task.categories), labels),
                "category": "; ".join(task.categories),
                "definition": task.definition,
            }
        )
        if not reason:
            drawn.append(draw_instances(task, n_eval=n_eval, n_heldout=n_heldout, n_pool=n_pool, seed=seed))
    tasks = pd.DataFrame(rows)
    if tasks.empty or not tasks["selected"].any():
        raise ValueError(f"{root}: no task passes the label-bias task filter (see studies.labelbias sizes)")
    return tasks, pd.concat(drawn, ignore_index=True)
