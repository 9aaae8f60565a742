"""Job logs say a repeated warning once, with its count, and its total when the job ends."""

from __future__ import annotations

import gc
import logging
import warnings
from pathlib import Path

from unsure.logs import COUNT, Tally, logged


def test_a_tally_logs_each_message_once_with_its_count_and_the_totals_at_the_end(
    tmp_path: Path, restore_logging: None
) -> None:
    before = Tally(logging.getLogger("unsure.test"))  # made before the job: not this job's
    before.add(f"old: NaN for {COUNT}", 1, 1)
    log = tmp_path / "job.log"
    with logged(log):
        before.add(f"old: NaN for {COUNT}", 1, 1)
        tally = Tally(logging.getLogger("unsure.test"))
        for _ in range(5):  # five chunks of 4 prompts, 3 NaN each
            tally.add(f"m: NaN for {COUNT}: no digit", 3, 4)
        tally.add(f"m: NaN for {COUNT}: no letter", 0, 4)  # never bad: never logged
        dropped = Tally(logging.getLogger("unsure.test"))  # an engine gone before the job ends
        dropped.add(f"d: NaN for {COUNT}", 1, 2, "replies")
        dropped.add(f"d: NaN for {COUNT}", 0, 2, "replies")
        del dropped
        gc.collect()
    lines = [line.split(": ", 1)[1] for line in log.read_text().splitlines()]
    assert lines == [
        "m: NaN for 3 of 4 prompts so far: no digit; further ones are counted, not logged "
        "(the totals come when the job ends)",
        "d: NaN for 1 of 2 replies so far; further ones are counted, not logged (the totals come when the job ends)",
        "d: NaN for 1 of 4 replies in all",
        "m: NaN for 15 of 20 prompts in all: no digit",
    ]


def test_a_library_warning_repeated_on_every_call_is_logged_once_with_a_count(
    tmp_path: Path, restore_logging: None
) -> None:
    """A library warning per forward pass (a ``catch_warnings`` elsewhere resets the registry that
    would show it once) filled a job's log; it is now logged once, its repeats counted at the end."""
    log = tmp_path / "job.log"
    with logged(log):
        for _ in range(50):
            with warnings.catch_warnings():
                warnings.simplefilter("always")
                warnings.warn("`old_name` is deprecated", FutureWarning, stacklevel=1)
    text = log.read_text()
    assert text.count("FutureWarning: `old_name` is deprecated") == 2, text  # the warning, and its count
    assert "repeated 49 more time(s), not logged: " in text.splitlines()[-1]


def test_a_job_freezes_its_imports_and_then_its_own_objects_out_of_the_collector(
    tmp_path: Path, restore_logging: None
) -> None:
    """The interpreter's last collection walked every object of torch and transformers (about
    2 s of each job that imports them): what exists when the job starts and what it made are frozen."""
    gc.unfreeze()
    try:
        with logged(tmp_path / "job.log"):
            at_start = gc.get_freeze_count()
            made = [[n] for n in range(10_000)]
        assert at_start > 0
        assert gc.get_freeze_count() >= at_start + len(made)
    finally:
        gc.unfreeze()
