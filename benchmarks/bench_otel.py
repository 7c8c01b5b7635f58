"""Exporting a 10,000-invocation job to OpenTelemetry, against the job's own cold run.

Three jobs of 10,000 invocations, each run cold in this process, then exported with
``fxtr.telemetry.export_jobs`` (what ``--fxtr-otel`` calls after the run) to an OTLP/HTTP
receiver on 127.0.0.1 that reads every request:

- ``pytest evals/``: the target's job. An eval written as ``evals/test_capitals.py`` is (2
  models x 2,500 cases, ``generate`` + a ``model_graded_fact`` judge, a threshold), run by
  ``pytest.main`` in this process (imports already paid, so the cold time is the smallest
  ``pytest evals/`` could take): 10,000 model calls, so 20,001 spans and 5,000 evaluation
  events;
- the same eval launched directly (``fxtr.launch``, no pytest): a stricter denominator;
- the engine's grid of 10,000 trivial steps (``bench_engine``): 10,001 spans, the hardest
  ratio (the steps cost nothing, so the cold run is the engine alone).

Prints, per job, the cold time, the export time (reading the record, building the requests,
encoding and sending them) and its ratio to the cold run (target < 0.10), then the export
through the SDK's own encoding of ``ReadableSpan``s (an ``OTLPSpanExporter`` subclass, which
fxtr leaves to the SDK; the path every export took before the bulk requests) and its ratio.
Each ratio is also given in this process's CPU time, in brackets. Compare ratios, not seconds.

Measured in six runs on the 2-core machine shared with other sessions (load average
0.9-5.2, 2026-12-01; docs/benchmarks.md, docs/telemetry.md): the ``pytest evals/`` job
0.039-0.078 (CPU 0.049-0.058; SDK encoding 0.068-0.185); the eval launched 0.076-0.212
(SDK 0.21-0.40); the trivial steps 0.10-0.25 (SDK 0.24-0.46), about half of it reading the
record. Before the bulk requests (load 5): a kit eval of 15,001 spans 0.25-0.40, the trivial
steps 0.31-0.50.

    .venv/bin/python -m benchmarks.bench_otel
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import io
import os
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from benchmarks.bench_engine import grid
from fxtr import Array, launch
from fxtr.evals import (
    Case,
    Model,
    evaluate,
    mock_judge,
    model_graded_fact,
    register_mock,
    user_text,
)
from fxtr.store import open_store
from fxtr.telemetry import export_jobs

CASES = 2500

EVAL = textwrap.dedent(
    f"""
    import pytest

    from fxtr.evals import Case, evaluate, mock_judge, model_graded_fact, register_mock
    from benchmarks.bench_otel import answer, sometimes

    CASES = [Case(id=f"c{{i:05d}}", input=f"What is {{i}} + 1?", target=str(i + 1))
             for i in range({CASES})]
    MODELS = [register_mock("bench-otel-right", answer),
              register_mock("bench-otel-sometimes", sometimes)]


    @pytest.mark.fxtr(evaluate, dims={{"model": "model", "case": "case"}}, threshold=0.5,
                      inputs={{"scorer": model_graded_fact(mock_judge())}})
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("case", CASES)
    def test_bench(model, case, result):
        assert len(result.keys("sample")) == 1
    """
)


def answer(request: Any) -> str:
    """The right answer to ``What is N + 1?``."""
    return f"The answer is {int(user_text(request).split()[2]) + 1}."


def sometimes(request: Any) -> str:
    """The right answer but for one question in five."""
    n = int(user_text(request).split()[2])
    return "I do not know." if n % 5 == 0 else f"It is {n + 1}."


class SdkEncoded(OTLPSpanExporter):
    """The SDK's exporter under another class: fxtr gives it ``ReadableSpan``s to encode."""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _pytest_job(root: Path) -> tuple[str, str]:
    """Run the eval with ``pytest evals/`` in this process; its store and job id."""
    import pytest

    (root / "evals").mkdir()
    (root / "evals" / "test_bench.py").write_text(EVAL)
    (root / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    store = str(root / "store")
    here = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            args = ["evals/", "-q", "-p", "no:cacheprovider", "--fxtr-cache-dir", store]
            code = pytest.main(args)
    finally:
        os.chdir(here)
    assert code == 0, out.getvalue()[-3000:]
    (job,) = open_store(store).iter_jobs()
    return store, str(job["job_id"])


def _kit_inputs() -> dict[str, Any]:
    cases = [
        Case(id=f"c{i:05d}", input=f"What is {i} + 1?", target=str(i + 1)) for i in range(CASES)
    ]
    models = [register_mock("bench-otel-a", answer), register_mock("bench-otel-b", sometimes)]
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"], value_type=Model),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"], value_type=Case),
        "scorer": model_graded_fact(mock_judge("bench-otel-judge")),
    }


def _launched(wf: Any, inputs: dict[str, Any]) -> tuple[str, str]:
    store = tempfile.mkdtemp()
    result = asyncio.run(launch(wf, inputs, store=store))
    assert result.status == "succeeded" and len(result.invocations) == 10_000
    return store, result.job_id


def _grid_inputs() -> dict[str, Any]:
    xs = Array.from_mapping({i: i for i in range(100)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: 10 * i for i in range(100)}, dims=["y"], value_type=int)
    return {"xs": xs, "ys": ys}


def _timed(fn: Any) -> tuple[Any, float, float]:
    """``fn()``, its wall time and this process's CPU time (less shaken by other load)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("ratio: export / cold run, wall time (CPU time of this process in brackets)")
    print(f"{'job':<40}{'cold s':>8}{'export s':>9}{'spans':>7}{'ratio':>15}{'SDK ratio':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = (
            ("pytest evals/, 2 x 2,500 cases, judged", lambda: _pytest_job(Path(tmp))),
            ("the same eval launched, no pytest", lambda: _launched(evaluate, _kit_inputs())),
            ("engine grid, 10,000 trivial steps", lambda: _launched(grid, _grid_inputs())),
        )
        for label, job in jobs:
            (path, job_id), cold, cold_cpu = _timed(job)
            store = open_store(path)
            assert len(store.job_invocations(job_id)) == 10_000
            outcome, export, export_cpu = _timed(functools.partial(export_jobs, store, [job_id]))
            assert outcome.ok, outcome.error
            sdk_exporter = SdkEncoded()
            sdk_outcome, sdk, sdk_cpu = _timed(
                functools.partial(export_jobs, store, [job_id], exporter=sdk_exporter)
            )
            sdk_exporter.shutdown()
            assert sdk_outcome.ok and sdk_outcome.spans == outcome.spans
            ratio = f"{export / cold:.3f} ({export_cpu / cold_cpu:.3f})"
            sdk_ratio = f"{sdk / cold:.3f} ({sdk_cpu / cold_cpu:.3f})"
            print(
                f"{label:<40}{cold:>8.2f}{export:>9.2f}{outcome.spans:>7}{ratio:>15}{sdk_ratio:>15}"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    server.shutdown()


if __name__ == "__main__":
    main()
