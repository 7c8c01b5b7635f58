"""The fxtr pytest plugin: evals as parametrized tests, one job per eval per run."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the fxtr option group."""
    parser.getgroup("fxtr", "fxtr evaluation harness")
