"""The zoo's training examples, one module per study, in that study's own request formats.

Each module's ``zoo_examples(engine, *, instruct, n, seed)`` draws ``n`` fresh examples from
the study's generator, rendered by the study's own prompt and request builders (the zoo imports
the study's room; the room never imports the zoo). :data:`ZOO_EXAMPLES` is the registry the
trainer (:func:`unsure.zoo.training.corpus`) reads them from.
"""

from __future__ import annotations

from typing import Protocol

from unsure.config import CorpusStudy
from unsure.engine.finetune import Example
from unsure.engine.hf import HFEngine
from unsure.zoo.corpus import decisionrisk, labelbias, nextword, riskscores


class ZooExamples(Protocol):
    """One study's examples for a model: chat formats when ``instruct``; the same seed, the same examples."""

    def __call__(self, engine: HFEngine, *, instruct: bool, n: int, seed: int) -> list[Example]: ...


ZOO_EXAMPLES: dict[CorpusStudy, ZooExamples] = {
    "riskscores": riskscores.zoo_examples,
    "nextword": nextword.zoo_examples,
    "labelbias": labelbias.zoo_examples,
    "decisionrisk": decisionrisk.zoo_examples,
}
"""Each study's examples (``zoo.training.examples`` names the studies; the subgroups study runs no model)."""
