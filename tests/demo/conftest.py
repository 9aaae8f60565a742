"""Known-truth checks on the demo's own outputs (issue 19), run by ``make demo-checks``
after ``make demo``: they read ``$UNSURE_DEMO_RESULTS`` (the demo's ``results/``) and
skip when it is unset, so the plain ``pytest`` run never reads stale results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_results() -> Path:
    """The demo's ``results/`` folder (``$UNSURE_DEMO_RESULTS``); skips when unset."""
    value = os.environ.get("UNSURE_DEMO_RESULTS")
    if not value:
        pytest.skip("UNSURE_DEMO_RESULTS is not set: run `make demo-checks` after `make demo`")
    path = Path(value)
    if not path.is_dir():
        pytest.fail(f"UNSURE_DEMO_RESULTS={value} is not a folder")
    return path
