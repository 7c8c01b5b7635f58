from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _reset_examples():
    """The example steps' call log and scripted failures start empty in every test."""
    from tests import examples

    examples.CALLS.clear()
    examples.FAIL.clear()
    yield
    examples.FAIL.clear()


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path, monkeypatch):
    """Every test runs in its own directory, so the default store `.fxtr` is never shared."""
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """The runs a test starts behave as on a developer's machine, whatever CI this suite runs
    under: ``CI=true`` changes the plugin's defaults (DESIGN §13). Tests of CI set it back."""
    monkeypatch.delenv("CI", raising=False)


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


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL cluster for the session (skipped without one, failed under CI)."""
    from tests.pgserver import server_bin, throwaway_postgres

    missing = []
    if server_bin() is None:
        missing.append("PostgreSQL's server (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing.append("psycopg (pip install -e '.[postgres]')")
    if missing:
        message = "PostgreSQL tests need " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with throwaway_postgres() as url:
        yield url
