"""The zoo's derived seeds: one per model and one per study's corpus, from the zoo's seed.

Each is a hash of the zoo seed and a name, so adding a zoo entry or a study leaves the
others' weights and examples unchanged.
"""

from __future__ import annotations

import hashlib


def model_seed(zoo_seed: int, name: str) -> int:
    """A per-model seed, so adding a zoo entry leaves the others unchanged."""
    digest = hashlib.sha256(f"{zoo_seed}:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def corpus_seed(seed: int, study: str) -> int:
    """A per-study seed, so adding a study leaves the others' examples unchanged."""
    return model_seed(seed, f"corpus:{study}")
