"""What labelbias asks the engine: one place that says it.

Each (item, context) is one :class:`~unsure.engine.ContinuationRequest` whose
continuations are the task's labels as they follow ``Output:``, the EOS token scored
after each (the authors' scoring reads it). The scorer, the fine-tuning's evaluation,
the zoo's examples and the cost estimate take the requests and label texts from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from unsure.engine import ContinuationRequest


def continuation(label: str) -> str:
    """How a label follows ``Output:``."""
    return " " + label.strip()


def label_requests(contexts: Sequence[str], labels: Sequence[Sequence[str]], *, eos: bool) -> list[ContinuationRequest]:
    """One request per context, its labels (``labels[i]`` for ``contexts[i]``) as continuations;
    ``eos``: the EOS token is scored after each label too (the ``paper`` scoring needs it)."""
    return [
        ContinuationRequest(ctx, tuple(continuation(lab) for lab in labs), eos=eos)
        for ctx, labs in zip(contexts, labels, strict=True)
    ]
