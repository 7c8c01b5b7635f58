"""Helpers for the fault tests: subprocesses of the public API, and the store's files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
FXTR = [PYTHON, "-m", "fxtr.cli"]


def env(**extra: str) -> dict[str, str]:
    """The environment of a child process: this checkout importable, no inherited keys."""
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src")])
    base.pop("PYTEST_ADDOPTS", None)
    base.update(extra)
    return base


def job(spec: dict[str, Any], *, timeout: float = 30) -> dict[str, Any]:
    """Run one fault job in a subprocess and return its result (see driver.py)."""
    proc = subprocess.run(
        [PYTHON, "-m", "tests.faults.driver", json.dumps(spec)],
        capture_output=True, text=True, env=env(), cwd=ROOT, timeout=timeout,
    )
    assert proc.returncode == 0, f"driver failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def start_job(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """The same, without waiting (the result goes to ``spec['out']``, stderr beside it)."""
    with open(spec["out"] + ".err", "wb") as err:
        return subprocess.Popen(
            [PYTHON, "-m", "tests.faults.driver", json.dumps(spec)],
            stdout=subprocess.DEVNULL, stderr=err, env=env(), cwd=ROOT,
        )


def finish(proc: subprocess.Popen[bytes], spec_out: Path) -> dict[str, Any]:
    """Wait for a started job and return its result (its stderr in the failure message)."""
    code = proc.wait(30)
    err = Path(str(spec_out) + ".err").read_text(errors="replace")
    assert code == 0, f"job process exited {code}:\n{err[-4000:]}"
    return json.loads(Path(spec_out).read_text())


def fxtr_cli(*args: str, cwd: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The ``fxtr`` command in a subprocess."""
    return subprocess.run(
        [*FXTR, *args], capture_output=True, text=True, env=env(), cwd=cwd or ROOT,
        timeout=timeout,
    )


def wait_for(predicate: Any, what: str, timeout: float = 60) -> None:
    """Poll an event (a file appearing, a record written) up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def by_address(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {inv["address"]: inv for inv in result["invocations"]}


def cache_keys(store: Path, prefix: str) -> list[str]:
    """Keys of the store's ``cache/cache.db`` (diskcache's ``Cache`` table) with a prefix."""
    with sqlite3.connect(store / "cache" / "cache.db") as db:
        rows = db.execute("SELECT key FROM Cache").fetchall()
    return sorted(k for (k,) in rows if isinstance(k, str) and k.startswith(prefix))


def claim_rows(store: Path) -> list[str]:
    """Addresses claimed in the store's ``FxtrClaims`` table (none once a job has ended)."""
    with sqlite3.connect(store / "cache" / "cache.db") as db:
        rows = db.execute("SELECT address FROM FxtrClaims").fetchall()
    return sorted(a for (a,) in rows)


def all_bytes(folder: Path) -> bytes:
    """Every byte of every file under ``folder`` (SQLite, its WAL, value files)."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


KEYS50 = [f"k{i:02d}" for i in range(50)]
