"""What scoring an eval costs the plugin, against building its output in the same run.

A job's output of 10,000 cases x 10 samples (and its 100,000 invocation addresses) is made
once; then the plugin turns it into the evaluation's cells (values per sample, status, the
addresses behind each cell) and scores them per group with a baseline comparison. The ratio
says how much that adds relative to just building the output Array.

    .venv/bin/python benchmarks/bench_plugin_scores.py
"""

from __future__ import annotations

import statistics
import time
import types
from typing import Any

from fxtr import Array
from pytest_fxtr._cells import evaluation_payload
from pytest_fxtr._evals import Eval
from pytest_fxtr._gates import Baseline, evaluate

CASES, SAMPLES, REPEATS = 10_000, 10, 3


def _mapping() -> dict[str, Any]:
    return {
        "m": {
            f"c{i:05d}": {s: float((i + s) % 3 == 0) for s in range(SAMPLES)} for i in range(CASES)
        }
    }


def _output(mapping: dict[str, Any]) -> Array[Any]:
    dims = [("model", str), ("case", str), ("sample", int)]
    return Array.from_mapping(mapping, dims=dims, value_type=float)


def _eval(output: Array[Any]) -> Eval:
    invocations = [
        types.SimpleNamespace(address=f"e::t/score[model=m,case=c{i:05d},sample={s}]")
        for i in range(CASES)
        for s in range(SAMPLES)
    ]
    ev = Eval(
        nodeid="evals/e.py::t",
        workflow=types.SimpleNamespace(name="w"),
        dims={"model": ("model",), "case": ("case",)},
        inputs={},
        threshold=0.5,
    )
    ev.job = types.SimpleNamespace(
        partial_output=output, missing={}, invocations=invocations, job_id="j"
    )
    ev.job_id = "j"
    return ev


def _best(fn: Any) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Print the times and the ratios."""
    mapping = _mapping()
    output = _output(mapping)
    ev = _eval(output)
    payload = evaluation_payload(ev, None)
    baseline = Baseline("b", "store", payload["cells"])
    build = _best(lambda: _output(mapping))
    cells = _best(lambda: evaluation_payload(ev, None))
    scored = _best(lambda: evaluate(payload, baseline, 0.0))
    print(f"{CASES:,} cases x {SAMPLES} samples (best of {REPEATS})")
    print(f"  build the output Array (baseline): {build:.3f}s")
    print(f"  evaluation cells:                  {cells:.3f}s  ({cells / build:.2f}x)")
    print(f"  group statistics + comparison:     {scored:.3f}s  ({scored / build:.2f}x)")
    print(f"  per case: {statistics.fmean([cells, scored]) / CASES * 1e6:.1f} us")


if __name__ == "__main__":
    main()
