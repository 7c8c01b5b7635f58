"""The statistics of a 10,000-case report: 2 groups x 5,000 cases x 10 binary samples (one
case in 1,000 with a missing sample), every group's statistics (Wilson/t, verdicts, pass@k and
pass^k for k = 1..10) and a paired comparison with a baseline run of as many cases; then the
same from the cells directly (this run reduced twice), with clusters, and with fractional
scores.

Each variant runs interleaved with the baseline, a plain mean of the same values per group (what
the summary computed before), and the best of several rounds is kept, in CPU time (the machine
is shared; wall time is printed too). DESIGN's budget for the statistics: < 50 ms."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from fxtr.scores import case_scores, compare, key_of, report_groups

GROUPS, CASES, SAMPLES, ROUNDS = ("small", "large"), 5_000, 10, 9


def make_cells(seed: int, *, binary: bool = True) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cells = []
    for model in GROUPS:
        for i in range(CASES):
            p = (i % 97) / 96
            if binary:
                values: list[float | None] = [float(rng.random() < p) for _ in range(SAMPLES)]
            else:
                values = [min(1.0, max(0.0, rng.gauss(p, 0.1))) for _ in range(SAMPLES)]
            if i % 1_000 == 7:
                values[3] = None
            cells.append({"group": {"model": model}, "case": {"case": f"case-{i:05d}"},
                          "values": values, "status": "ok", "addresses": []})
    return cells


def plain_mean(cells: list[dict[str, Any]]) -> None:
    for model in GROUPS:
        statistics.fmean(v for c in cells if c["group"]["model"] == model
                         for v in c["values"] if v is not None)


def measure(fn: Callable[[], object], baseline: Callable[[], object]) -> tuple[float, ...]:
    """Best CPU and wall times of ``fn`` and of ``baseline``, run alternately."""
    cpu, wall, base_cpu, base_wall = [], [], [], []
    for _ in range(ROUNDS):
        for f, c, w in ((baseline, base_cpu, base_wall), (fn, cpu, wall)):
            start_cpu, start_wall = time.process_time(), time.perf_counter()
            f()
            c.append(time.process_time() - start_cpu)
            w.append(time.perf_counter() - start_wall)
    return min(cpu), min(wall), min(base_cpu), min(base_wall)


def main() -> None:
    baseline, cells = make_cells(1), make_cells(2)
    clusters = {key_of({"case": f"case-{i:05d}"}): i // 10 for i in range(CASES)}
    frac_base, frac = make_cells(3, binary=False), make_cells(4, binary=False)

    def alone() -> None:  # a report with no baseline: the run's cells reduced, its groups
        report_groups(case_scores(cells), threshold=0.5)

    def report() -> None:  # the plugin's path: each run's cells reduced once
        scores = case_scores(cells)
        report_groups(scores, threshold=0.5)
        compare(case_scores(baseline), scores, threshold=0.5)

    def from_cells() -> None:  # the convenience path: this run's cells reduced twice
        report_groups(cells, threshold=0.5)
        compare(baseline, cells, threshold=0.5)

    def clustered() -> None:
        scores = case_scores(cells)
        report_groups(scores, threshold=0.5, clusters=clusters)
        compare(case_scores(baseline), scores, threshold=0.5, clusters=clusters)

    def fractional() -> None:
        scores = case_scores(frac)
        report_groups(scores, threshold=0.5)
        compare(case_scores(frac_base), scores, threshold=0.5)

    print(f"{len(cells):,} cases x {SAMPLES} samples in {len(GROUPS)} groups, "
          f"and a baseline of as many; best of {ROUNDS}")
    print(f"{'':34} {'cpu':>9} {'wall':>9} {'plain mean (cpu)':>17} {'ratio':>7}")
    for name, fn in (("statistics, no baseline", alone),
                     ("statistics + compare", report),
                     ("  from cells (reduced twice)", from_cells),
                     ("  with clusters of 10 cases", clustered),
                     ("  fractional scores", fractional)):
        cpu, wall, base_cpu, _ = measure(fn, lambda: plain_mean(cells))
        verdict = "within" if cpu < 0.05 else "OVER"
        print(f"{name:34} {cpu * 1e3:6.1f} ms {wall * 1e3:6.1f} ms {base_cpu * 1e3:14.1f} ms "
              f"{cpu / base_cpu:6.2f}x  {verdict} 50 ms")


if __name__ == "__main__":
    main()
