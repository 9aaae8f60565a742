"""Logging for rule scripts: everything a job says goes to its rule's log file."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from unsure.io import explained_writes

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def logged(log_path: str | Path | None) -> Iterator[logging.Logger]:
    """Send log records to ``log_path`` and stderr; record a failure's traceback there too.

    Snakemake shows a failed job's log (``--show-failed-logs``), so the reason
    a job died is in the one file a user looks at.
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        with explained_writes(log_path):  # a job's first write: a read-only results/ is named here
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=handlers, force=True)
    logging.captureWarnings(True)  # a metric reported as NA says why in the log, not only on stderr
    logger = logging.getLogger("unsure")
    try:
        yield logger
    except Exception:
        logger.exception("job failed")
        raise
