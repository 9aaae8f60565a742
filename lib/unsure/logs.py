"""Logging for rule scripts: everything a job says goes to its rule's log file.

A warning a job would repeat per chunk, prompt or call (a paper-scale job sends
millions of prompts) is said once, with its count so far, and its total when
the job ends: :class:`Tally` for the project's own warnings, and a filter on
``py.warnings`` for the libraries' Python warnings (a registry reset by any
``warnings.catch_warnings`` elsewhere lets the same one through on every call).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

from unsure import forkserver
from unsure.io import explained_writes

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

COUNT = "{count}"
"""Where a :class:`Tally` message takes its numbers ("3 of 500 prompts so far", "7 of 500 prompts in all")."""

_TALLIES: weakref.WeakSet[Tally] = weakref.WeakSet()
_MADE = itertools.count()


class Tally:
    """Warnings that would repeat per chunk or prompt, each logged once with a count.

    :meth:`add` counts ``bad`` of ``total`` items under a message; the first time
    a message has a bad item it is logged, with the counts so far, and later ones
    are only counted. :meth:`summary` logs the totals of the messages counted
    since; :func:`logged` calls it for every tally made in the job when the job
    ends, and a tally dropped before (its engine gone) says its totals then.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._counts: dict[tuple[str, str], list[int]] = {}
        """(message, unit) -> [bad, total, bad when logged, total when logged] (-1: not logged yet)."""
        self._lock = threading.Lock()
        self.made = next(_MADE)
        """When it was made, among all tallies: :func:`logged` sums up those made in its job, oldest first."""
        _TALLIES.add(self)
        end = weakref.finalize(self, _log_totals, logger, self._counts, self._lock)
        end.atexit = False  # after the job, its log is closed: logged() has said the totals

    def add(self, message: str, bad: int, total: int, unit: str = "prompts") -> None:
        """Count ``bad`` of ``total`` ``unit`` under ``message`` (its :data:`COUNT` is where the numbers go).

        Calls with no bad item count too: the totals are of everything that could have had it.
        """
        with self._lock:
            seen = self._counts.setdefault((message, unit), [0, 0, -1, -1])
            seen[0] += bad
            seen[1] += total
            first = seen[0] > 0 and seen[2] < 0
            if first:
                seen[2], seen[3] = seen[0], seen[1]
            counts = seen[0], seen[1]
        if first:
            self.logger.warning(
                "%s; further ones are counted, not logged (the totals come when the job ends)",
                message.replace(COUNT, f"{counts[0]} of {counts[1]} {unit} so far"),
            )

    def summary(self) -> None:
        """Log the totals of every message logged once and counted again since."""
        _log_totals(self.logger, self._counts, self._lock)


def _log_totals(logger: logging.Logger, counts: dict[tuple[str, str], list[int]], lock: threading.Lock) -> None:
    """:meth:`Tally.summary` of a tally's counts (also called when the tally is dropped, without it)."""
    with lock:
        grown = [(key, seen[:2]) for key, seen in counts.items() if seen[2] >= 0 and seen[:2] != seen[2:]]
        for seen in counts.values():
            if seen[2] >= 0:
                seen[2], seen[3] = seen[0], seen[1]
    for (message, unit), (bad, total) in grown:
        logger.warning("%s", message.replace(COUNT, f"{bad} of {total} {unit} in all"))


def summarise_tallies(made_after: int = -1) -> None:
    """The totals of every live :class:`Tally` made after ``made_after`` (see :meth:`Tally.summary`), oldest first."""
    for tally in sorted((t for t in _TALLIES if t.made > made_after), key=lambda t: t.made):
        tally.summary()


class RepeatedWarnings(logging.Filter):
    """Passes a library's Python warning the first time its text is seen; counts the repeats."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats: dict[str, int] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        with self._lock:
            first = text not in self.repeats
            self.repeats[text] = 0 if first else self.repeats[text] + 1
        return first

    def summary(self, logger: logging.Logger) -> None:
        """One line per warning that came again: how many more times."""
        for text, n in self.repeats.items():
            if n:
                first_line = text.strip().splitlines()[0] if text.strip() else text
                logger.warning("repeated %d more time(s), not logged: %s", n, first_line)


@contextlib.contextmanager
def logged(log_path: str | Path | None) -> Iterator[logging.Logger]:
    """Send log records to ``log_path`` and stderr; record a failure's traceback there too.

    Snakemake shows a failed job's log (``--show-failed-logs``), so the reason
    a job died is in the one file a user looks at. Repeated warnings are logged
    once each; their totals close the log.

    A rule script's process ends with this block. The objects made before it
    (the imports: millions for torch and transformers) and, once it has run,
    those it made are frozen out of the garbage collector, so that neither the
    job's own collections nor the interpreter's last one at exit walks them
    (``gc.freeze``): the last one alone took about 2 s of every job that
    imports torch, a tenth of a short job.
    """
    gc.freeze()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        with explained_writes(log_path):  # a job's first write: a read-only results/ is named here
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=handlers, force=True)
    logging.captureWarnings(True)  # a metric reported as NA says why in the log, not only on stderr
    py_warnings, repeats = logging.getLogger("py.warnings"), RepeatedWarnings()
    py_warnings.addFilter(repeats)
    started = next(_MADE)  # this job's tallies are those made from now on
    logger = logging.getLogger("unsure")
    if forkserver.served():
        logger.info(
            "this job started from the run's fork server (process %d); %s=off starts each job on its own",
            os.getppid(),
            forkserver.ADDRESS,
        )
    try:
        try:
            yield logger
        finally:  # the totals, then (on a failure) the traceback, the log's last word
            py_warnings.removeFilter(repeats)
            summarise_tallies(started)
            repeats.summary(py_warnings)
    except Exception:
        logger.exception("job failed")
        raise
    gc.freeze()
