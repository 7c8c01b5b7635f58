"""A fully cached 10,000-item eval under pytest against plain pytest on the same 10,000
parametrized items with a trivial fixture (issue 14): wall time ratio (target ≤ 1.25) and peak
memory (max RSS) difference (target ≤ +60 MB). Each run is a fresh process; the runs
alternate, and the best of ``ROUNDS`` of each is compared.

Run: .venv/bin/python -m benchmarks.bench_plugin_cached [CASES]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchmarks.bench_plugin import eval_source

CASES = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
ROUNDS = 3

EVAL = eval_source(CASES)

PLAIN = textwrap.dedent(
    f"""
    import pytest

    @pytest.fixture
    def result(x):
        return 2 * x

    @pytest.mark.parametrize("x", list(range({CASES})))
    def test_double(x, result):
        assert result == 2 * x
    """
)

RSS = textwrap.dedent(
    """
    import resource, subprocess, sys
    code = subprocess.call(sys.argv[1:])
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    sys.exit(code)
    """
)


def run(folder: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and max RSS (MB) of one pytest process."""
    cmd = [
        sys.executable,
        "-c",
        RSS,
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *args,
    ]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return elapsed, int(proc.stdout.strip().splitlines()[-1]) / 1024


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fx, plain = Path(tmp, "fx"), Path(tmp, "plain")
        for folder, text in ((fx, EVAL), (plain, PLAIN)):
            folder.mkdir()
            (folder / "test_bench.py").write_text(text)
        cold, _ = run(fx)
        fx_runs, plain_runs = [], []
        for _ in range(ROUNDS):
            fx_runs.append(run(fx))
            plain_runs.append(run(plain))
    fx_t, plain_t = min(t for t, _ in fx_runs), min(t for t, _ in plain_runs)
    fx_m, plain_m = min(m for _, m in fx_runs), min(m for _, m in plain_runs)
    print(f"{CASES}-item eval, fully cached, vs plain pytest with a trivial fixture")
    print(f"  cold fxtr run (fills the cache): {cold:.2f} s")
    print(f"  cached fxtr: {fx_t:.2f} s, {fx_m:.0f} MB; plain: {plain_t:.2f} s, {plain_m:.0f} MB")
    print(
        f"  time ratio {fx_t / plain_t:.2f} (target <= 1.25); memory +{fx_m - plain_m:.0f} MB "
        "(target <= 60)"
    )


if __name__ == "__main__":
    main()
