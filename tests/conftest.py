"""Shared pytest fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """The real public data in ``../shared/data``; skips the test when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available: {SHARED_DATA} does not exist")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small GPT-2 and Llama models of the zoo, built once per test session."""
    from engine_models import build_all

    return build_all(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def demo_zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's zoo models, untrained, built once per test session (tests that run the
    workflow copy them in with ``workflow_helpers.install_demo_zoo`` instead of building them)."""
    from workflow_helpers import build_demo_zoo

    return build_demo_zoo(tmp_path_factory.mktemp("demo-zoo"))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A throwaway copy of the workflow (no resources/ or results/)."""
    from workflow_helpers import copy_workflow

    return copy_workflow(tmp_path / "repo")


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """``logged`` reconfigures the root logger for a job; put back pytest's handlers after the test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], root.level = handlers, level
    logging.captureWarnings(False)
