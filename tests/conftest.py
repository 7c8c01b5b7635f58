from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path, monkeypatch):
    """Every test runs in its own directory, so the default store `.fxtr` is never shared."""
    monkeypatch.chdir(tmp_path)
    yield


def pytest_report_header(config):
    """The browser tests' versions: Playwright and Debian's Chromium."""
    import shutil
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    try:
        playwright = version("playwright")
    except PackageNotFoundError:
        playwright = "not installed"
    chromium = shutil.which("chromium")
    if chromium:
        try:
            chromium = subprocess.run(
                [chromium, "--version"], capture_output=True, text=True, timeout=20
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            chromium = "unknown version"
    return f"browser tests: playwright {playwright}, {chromium or 'chromium not installed'}"
