"""Exporting a 10,000-invocation job to OpenTelemetry, against the job's own cold run.

Two jobs of 10,000 invocations each, run cold in this process, then exported with
``fxtr.telemetry.export_jobs`` (the SDK's OTLP/HTTP exporter, protobuf) to a receiver on
127.0.0.1 that reads every request:

- a kit eval: 2 mock models x 2,500 cases, ``generate`` + ``score`` (5,000 model calls, so
  20,000 spans and 5,000 evaluation events);
- the engine's grid of 10,000 trivial steps (``bench_engine``): 10,001 spans.

Prints, per job, the cold time, the export time (reading the record, building the spans,
encoding and sending them) and their ratio (target < 0.10). Compare ratios, not seconds.

    .venv/bin/python -m benchmarks.bench_otel
"""

from __future__ import annotations

import asyncio
import http.server
import os
import tempfile
import threading
import time
from typing import Any

from benchmarks.bench_engine import grid
from fxtr import Array, launch
from fxtr.evals import Case, Model, evaluate, includes, register_mock
from fxtr.store import open_store
from fxtr.telemetry import export_jobs


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bytes += int(self.headers["Content-Length"])  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _kit_inputs() -> dict[str, Any]:
    cases = [
        Case(id=f"c{i:05d}", input=f"What is {i} + 1?", target=str(i + 1)) for i in range(2500)
    ]
    models = [
        register_mock("bench-otel-a", "The answer is 7."),
        register_mock("bench-otel-b", "42"),
    ]
    return {
        "model": Array.from_mapping({m.name: m for m in models}, dims=["model"], value_type=Model),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"], value_type=Case),
        "scorer": includes(),
    }


def _grid_inputs() -> dict[str, Any]:
    xs = Array.from_mapping({i: i for i in range(100)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: 10 * i for i in range(100)}, dims=["y"], value_type=int)
    return {"xs": xs, "ys": ys}


def main() -> None:
    started = time.perf_counter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: F401

    imported = time.perf_counter() - started
    print(f"importing the OTLP/HTTP exporter (once per process): {imported:.2f} s")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.bytes = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    print(f"{'job':<34}{'cold s':>8}{'export s':>10}{'spans':>8}{'ratio':>8}")
    for label, wf, inputs in (
        ("kit eval, 2 x 2,500 cases", evaluate, _kit_inputs()),
        ("engine grid, 10,000 trivial steps", grid, _grid_inputs()),
    ):
        store = tempfile.mkdtemp()
        started = time.perf_counter()
        result = asyncio.run(launch(wf, inputs, store=store))
        cold = time.perf_counter() - started
        assert result.status == "succeeded" and len(result.invocations) == 10_000
        started = time.perf_counter()
        outcome = export_jobs(open_store(store), [result.job_id])
        export = time.perf_counter() - started
        assert outcome.ok, outcome.error
        print(f"{label:<34}{cold:>8.2f}{export:>10.2f}{outcome.spans:>8}{export / cold:>8.3f}")
    server.shutdown()


if __name__ == "__main__":
    main()
