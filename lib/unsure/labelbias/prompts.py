"""The SNI prompt, demonstration sets, and every item a model scores.

The prompt is the study's: the task definition, then k demonstrations
(``Input: x.`` / `` Output: y.``), then the test input and ``Output:``; a label
is scored as the continuation `` <label>``. Demonstration set ``s`` of ``k``
shots is slice ``[s·k, (s+1)·k)`` of the task's pool, so the sets of one k are
disjoint. Items are the rows an inference job scores: evaluation and held-out
instances and the calibration inputs (content-free, domain-context) under every
(k, set) context, and each leave-one-out item under its own context. Under the
authors' protocol a prompt is fitted to their token limit (:func:`fit_prompt`).
"""

from __future__ import annotations

import os
import re
import string
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from unsure.config import Protocol
from unsure.labelbias.tasks import task_seed

Demo = tuple[str, str]
"""A demonstration: (input, output)."""

ITEM_COLUMNS = ("row_id", "task", "kind", "input", "gold", "k", "set", "left_out")
KINDS = ("eval", "heldout", "cc", "dc", "looc")
"""Item kinds: evaluation and held-out instances, content-free, domain-context and leave-one-out inputs."""


def _end(text: str) -> str:
    """The text with a full stop added unless it ends in punctuation (as the study's template does)."""
    text = text.rstrip()
    return text if text and text[-1] in string.punctuation else text + "."


def _stop(text: str) -> str:
    """The authors' rule: a full stop unless the last character (a space included) is punctuation."""
    return text if text and text[-1] in string.punctuation else text + "."


def _prompt_parts(definition: str, demos: Sequence[Demo], query: str, paper: bool) -> tuple[str, list[str], str]:
    """The prompt's head (definition), one block per demonstration, and its tail (input, ``Output:``)."""
    end = _stop if paper else _end
    head = _end(definition.strip() if paper else definition) + "\n\n" if definition.strip() else ""
    blocks = [f"{end('Input: ' + x.strip())}\n{end(' Output: ' + y.strip())}\n\n" for x, y in demos]
    return head, blocks, f"{end('Input: ' + query.strip())}\n\nOutput:"


def sni_prompt(
    definition: str,
    demos: Sequence[Demo],
    query: str,
    *,
    paper: bool = False,
    fit: PromptFit | None = None,
) -> str:
    """The study's SNI prompt, ending in ``Output:`` (the label follows after a space).

    ``paper`` renders an empty input as the authors' collator does, ``Input: .``
    (their full-stop rule looks at the space after the colon); otherwise ``Input:``.
    Non-empty inputs render the same either way. ``fit`` makes the prompt fit a
    token limit as the authors' collator does (:func:`fit_prompt`).
    """
    head, blocks, tail = _prompt_parts(definition, demos, query, paper)
    if fit is not None:
        return fit_prompt(head, blocks, tail, fit)
    return head + "".join(blocks) + tail


def demonstration_heads(definition: str, demos: Sequence[Demo], query: str, *, paper: bool = False) -> list[str]:
    """The text of :func:`sni_prompt` up to each demonstration's label (``... Output:``), where
    :func:`~unsure.labelbias.requests.continuation` of that label follows in the prompt."""
    head, blocks, _ = _prompt_parts(definition, demos, query, paper)
    marker = " Output:"
    return [head + "".join(blocks[:j]) + block[: block.index(marker) + len(marker)] for j, block in enumerate(blocks)]


class TokenCounter(typing.Protocol):
    """What fitting a prompt needs of the model's tokenizer."""

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text, special tokens included, as ``tokenizer(text)`` gives it."""
        ...

    def head(self, text: str, n: int) -> str:
        """The text of the first ``n`` tokens of ``text``, decoded without special tokens."""
        ...


@dataclass(frozen=True)
class PromptFit:
    """A token limit and the tokenizer that counts against it (the authors': ``max_source_length`` 2,000)."""

    tokens: TokenCounter
    max_tokens: int


def fit_prompt(head: str, blocks: Sequence[str], tail: str, fit: PromptFit) -> str:
    """A prompt within ``fit.max_tokens`` tokens, as the authors' collator builds it.

    Demonstrations are added in order while the definition, the ones added so far
    joined by single spaces (their count joins them so, though the prompt does
    not), the next one and the input fit; the first that does not ends the list.
    A prompt still too long (a long definition or input) keeps its first
    ``max_tokens`` tokens, decoded: the cut falls at the end, ``Output:`` included.
    """
    checks = [head + " ".join(blocks[:i]) + block + tail for i, block in enumerate(blocks)]
    counts = fit.tokens.counts(checks) if checks else []
    n = next((i for i, c in enumerate(counts) if c > fit.max_tokens), len(blocks))
    prompt = head + "".join(blocks[:n]) + tail
    if fit.tokens.counts([prompt])[0] <= fit.max_tokens:
        return prompt
    return fit.tokens.head(prompt, fit.max_tokens)


def variants(shots: Sequence[int], sets: int) -> list[tuple[int, int]]:
    """Every (k, demonstration set) scored; k = 0 has one set."""
    return [(k, s) for k in shots for s in range(1 if k == 0 else sets)]


def demonstrations(pool: Sequence[Demo], k: int, s: int) -> list[Demo]:
    """Demonstration set ``s`` of ``k`` shots: a slice of the pool, disjoint from the other sets of ``k``."""
    if (s + 1) * k > len(pool):
        raise ValueError(f"a pool of {len(pool)} cannot give demonstration set {s} of {k} shots")
    return list(pool[s * k : (s + 1) * k])


def leave_one_out(demos: Sequence[Demo], j: int) -> list[Demo]:
    """The demonstrations without the ``j``-th: the context LOOC scores demonstration ``j`` in."""
    return [d for i, d in enumerate(demos) if i != j]


def training_examples(pool: Sequence[Demo], k: int, s: int, n: int) -> list[Demo]:
    """Fine-tuning examples for the (k, s) context: the first ``n`` pool items not among its demonstrations."""
    shown = set(range(s * k, (s + 1) * k))
    rest = [d for i, d in enumerate(pool) if i not in shown]
    if len(rest) < n:
        raise ValueError(f"a pool of {len(pool)} leaves {len(rest)} examples besides set {s} of {k}, not {n}")
    return rest[:n]


def training_examples_paper(pool: Sequence[Demo], k: int, s: int, n: int) -> list[Demo]:
    """Fine-tuning examples for the (k, s) context as the authors' code picks them: ``n`` consecutive
    pool items from ``n·s`` (k = 0), ``k·(s+1)`` (k ≥ n) or ``k + n·s`` (else), wrapping round the
    pool's end; none is a demonstration of the context while the sets fit in the pool."""
    if len(pool) < n:
        raise ValueError(f"a pool of {len(pool)} cannot give {n} fine-tuning examples")
    start = n * s if k == 0 else k * (s + 1) if k >= n else k + n * s
    return [pool[i % len(pool)] for i in range(start, start + n)]


def domain_inputs(texts: Sequence[str], n: int, seed: np.random.SeedSequence) -> list[str]:
    """Domain-context calibration inputs: ``n`` strings of L random words from ``texts``.

    L is the mean number of words per text; words are drawn with replacement
    from all the texts' words, so the inputs carry the task's vocabulary but no
    instance's meaning.
    """
    words = [w for t in texts for w in t.split()]
    if not words:
        raise ValueError("domain-context calibration needs evaluation inputs with words")
    length = max(1, round(len(words) / len(texts)))
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=length, replace=True)) for _ in range(n)]


TEMPLATE_SLOT = "{INPUT}"
_TASK_NUMBER = re.compile(r"^(task\d+)(?:_|$)")


def task_number(name: str) -> str:
    """``task1216`` of ``task1216_atomic_classification_causes``: what the study's template file
    shares with the SNI file names (its names are not the task files' names)."""
    found = _TASK_NUMBER.match(name)
    if not found:
        raise ValueError(f"{name!r} is not an SNI task name (taskNNN_...)")
    return found.group(1)


def read_templates(path: str | os.PathLike[str] | None) -> dict[str, str]:
    """The study's input templates (CSV ``task``, ``template``) keyed by task number; empty without one."""
    if path is None:
        return {}
    table = pd.read_csv(path, keep_default_na=False)
    missing = {"task", "template"} - set(table.columns)
    if missing:
        raise ValueError(f"{path} (studies.labelbias.input_templates): missing column(s) {', '.join(sorted(missing))}")
    out = {}
    for row in table.itertuples(index=False):
        if TEMPLATE_SLOT not in str(row.template):
            raise ValueError(f"{path}: template of {row.task} has no {TEMPLATE_SLOT} slot")
        out[task_number(str(row.task))] = str(row.template)
    return out


def split_by_template(text: str, markers: Sequence[str]) -> list[str]:
    """The parts of ``text`` around the template's markers, as the authors cut them.

    Each marker is looked for in what is left (then its stripped form, then that
    with double spaces made single); the text before it is a part, and the
    search goes on from the marker's last character (from the marker itself
    when it is empty). A marker not found is skipped. What is left is the last
    part. All parts are stripped.
    """
    parts: list[str] = []
    rest = text
    for marker in markers:
        at = rest.find(marker)
        if at == -1:
            at = rest.find(marker.strip())
            if at == -1:
                at = rest.find(marker.strip().replace("  ", " "))
            if at == -1:
                continue
        elif not marker:
            parts.append(rest[:at].strip())
            rest = rest[at:]
            continue
        parts.append(rest[:at].strip())
        rest = rest[at + len(marker) - 1 :]
    parts.append(rest.strip())
    return parts


def domain_inputs_paper(texts: Sequence[str], template: str | None, n: int, seed: np.random.SeedSequence) -> list[str]:
    """Domain-context inputs as the authors build them: one bag of words per template part.

    Each text is cut at the template's markers (:func:`split_by_template`);
    part i's words (lower-cased, split on whitespace) form its bag and its
    length is the ceiling of the mean word count. An input is the template's
    markers with that many words drawn without replacement from each part's bag
    in place of the part. Without a template the whole text is one part.
    """
    if not texts:
        raise ValueError("domain-context calibration needs evaluation inputs")
    markers = (template or TEMPLATE_SLOT).split(TEMPLATE_SLOT)
    cut = [[part.lower().split() for part in split_by_template(t, markers)] for t in texts]
    n_parts = len(cut[0])  # the first text's parts, as the authors count them
    bags, lengths = [], []
    for i in range(n_parts):
        having = [parts[i] for parts in cut if i < len(parts)]
        bags.append([w for words in having for w in words])
        lengths.append(int(np.ceil(np.mean([len(words) for words in having]))))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        text = ""
        for i in range(n_parts):
            if 0 < i <= len(markers):
                text += markers[i - 1]
            if lengths[i]:
                text += " ".join(rng.choice(bags[i], lengths[i], replace=False))
        out.append(text)
    return out


def build_items(
    instances: pd.DataFrame,
    *,
    shots: Sequence[int],
    sets: int,
    content_free: Sequence[str],
    n_domain: int,
    seed: int,
    protocol: Protocol,
    templates: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Every row the inference jobs score, with a stable ``row_id``.

    ``eval``/``heldout``/``cc``/``dc`` rows are scored under every (k, set)
    context (``k``, ``set``, ``left_out`` are -1); ``looc`` rows score
    demonstration ``left_out`` of set (``k``, ``set``) with the others as context.
    Domain-context inputs are :func:`domain_inputs_paper` (per template part,
    ``templates`` keyed by task number) under ``protocol: paper``, else
    :func:`domain_inputs`.
    """
    rows: list[pd.DataFrame] = []
    for task, part in instances.groupby("task", sort=True):
        part = part.sort_values("order", kind="stable")
        scored = part[part["split"].isin(["eval", "heldout"])]
        rows.append(
            pd.DataFrame(
                {
                    "row_id": scored["row_id"],
                    "task": task,
                    "kind": scored["split"],
                    "input": scored["input"],
                    "gold": scored["gold"],
                }
            )
        )
        cf = [(f"{task}:cc:{i}", x) for i, x in enumerate(content_free)]
        dc_seed = task_seed(seed, f"{task}:dc")
        evals = part.loc[part["split"] == "eval", "input"].tolist()
        if protocol == "paper":
            template = (templates or {}).get(task_number(str(task)))
            dc_inputs = domain_inputs_paper(evals, template, n_domain, dc_seed)
        else:
            dc_inputs = domain_inputs(evals, n_domain, dc_seed)
        dc = [(f"{task}:dc:{i}", x) for i, x in enumerate(dc_inputs)]
        for kind, pairs in (("cc", cf), ("dc", dc)):
            rows.append(
                pd.DataFrame(
                    {
                        "row_id": [r for r, _ in pairs],
                        "task": task,
                        "kind": kind,
                        "input": [x for _, x in pairs],
                        "gold": None,
                    }
                )
            )
        pool = list(part.loc[part["split"] == "pool", ["input", "gold"]].itertuples(index=False, name=None))
        looc = []
        for k, s in variants(shots, sets):
            for j, (x, y) in enumerate(demonstrations(pool, k, s)):
                looc.append(
                    {"row_id": f"{task}:looc:{k}:{s}:{j}", "input": x, "gold": y, "k": k, "set": s, "left_out": j}
                )
        if looc:
            rows.append(pd.DataFrame(looc).assign(task=task, kind="looc"))
    items = pd.concat(rows, ignore_index=True).reindex(columns=list(ITEM_COLUMNS))
    for col in ("k", "set", "left_out"):
        items[col] = items[col].fillna(-1).astype(np.int64)
    return items


def pools(instances: pd.DataFrame) -> dict[str, list[Demo]]:
    """Each task's pool of (input, gold) in draw order."""
    pool = instances[instances["split"] == "pool"].sort_values(["task", "order"], kind="stable")
    return {
        str(task): list(part[["input", "gold"]].itertuples(index=False, name=None))
        for task, part in pool.groupby("task", sort=True)
    }


def item_context(
    definition: str,
    pool: Sequence[Demo],
    query: str,
    k: int,
    s: int,
    left_out: int = -1,
    *,
    paper: bool = False,
    fit: PromptFit | None = None,
) -> str:
    """The prompt of one item under (k, s); a LOOC item leaves its own demonstration out."""
    demos = demonstrations(pool, k, s)
    if left_out >= 0:
        demos = leave_one_out(demos, left_out)
    return sni_prompt(definition, demos, query, paper=paper, fit=fit)
