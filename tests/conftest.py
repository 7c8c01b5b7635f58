from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path, monkeypatch):
    """Every test runs in its own directory, so the default store `.fxtr` is never shared."""
    monkeypatch.chdir(tmp_path)
    yield
