"""Listing jobs costs time in proportion to jobs, not to cached results.

Two stores with the same two jobs; one also holds 100,000 cached results (``--results``).
Prints the time of ``fxtr jobs``, ``fxtr cache`` (the store's volume) and ``iter_jobs`` on
each, and the ratio big / small (target: close to 1; it was ~13-15 s for two jobs on a store
of 100,000 results when listing walked every key).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import tempfile
import time

from fxtr import run
from fxtr.cli import main as fxtr_main
from fxtr.store import Batch, CacheEntry, open_store
from tests.examples import evaluate, qa_inputs


def _fill(location: str, results: int) -> None:
    store = open_store(location)
    for start in range(0, results, 10_000):
        batch = Batch()
        for i in range(start, min(results, start + 10_000)):
            entry = CacheEntry(f"{i:064x}", None, str(i), None, {"step": "bench.fill"})
            batch.entries[f"bench.fill/add[i={i}]"] = entry.to_text()
        store.write(batch)


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    try:
        small, big = f"{tmp}/small", f"{tmp}/big"
        for location in (small, big):
            for models in (("a",), ("b",)):
                run(evaluate, qa_inputs(models=models), store=location)
        _fill(big, args.results)
        print(f"two jobs; one store also holds {args.results} cached results")
        for label, fn in (
            ("fxtr jobs", lambda loc: fxtr_main(["--store", loc, "jobs"])),
            ("fxtr cache", lambda loc: fxtr_main(["--store", loc, "cache"])),
            ("iter_jobs", lambda loc: list(open_store(loc).iter_jobs())),
        ):
            t_small = _best(lambda: fn(small), args.repeat)  # noqa: B023
            t_big = _best(lambda: fn(big), args.repeat)  # noqa: B023
            print(
                f"{label:11} 2 jobs {t_small * 1e3:8.1f} ms   with {args.results} results "
                f"{t_big * 1e3:8.1f} ms   ratio {t_big / t_small:5.2f}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
