"""One way to get an engine for a ``models:`` entry, whatever its backend."""

from __future__ import annotations

from typing import Any

from unsure.config import Model
from unsure.engine.backend import Engine


def load_engine(entry: Model, **kwargs: Any) -> Engine:
    """The engine for one ``models:`` entry: ``transformers`` or an OpenAI-compatible API."""
    # each backend imported only when asked for: the API's pulls in pandas (through unsure.logs),
    # transformers' torch; the engine's request types load without either
    if entry.backend == "openai":
        from unsure.engine.api import APIEngine

        return APIEngine.from_config(entry, **kwargs)
    from unsure.engine.hf import HFEngine

    return HFEngine.from_config(entry, **kwargs)
