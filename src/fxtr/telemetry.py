"""OpenTelemetry export of finished jobs, from their records (``--fxtr-otel``, DESIGN §16).

A job becomes one trace that follows the GenAI semantic conventions:

- a span for the job (``job {eval}``), its child workflows as spans, and each agent
  trajectory (a child workflow whose steps are ``turn[i]``, ``tool[i,j]``, ``user[i]``) as
  an ``invoke_agent`` span;
- a span per step invocation (``fxtr.address``, ``fxtr.status``, ``fxtr.reason``,
  ``fxtr.cached``); an agent's tool call is an ``execute_tool {name}`` span;
- a ``chat {model}`` span per model call made inside a step (``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``);
- each ``Score`` as a ``gen_ai.evaluation.result`` event on its invocation's span.

Everything is read from the store after the job ended, so the export never slows the job and
never changes it. Cached invocations keep the timings (and model calls) of the run that
computed them, with ``fxtr.cached=true``. Message contents are exported only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; credentials never (every text
goes through ``fxtr.secrets.redact``). Needs the ``otel`` extra:
``pip install 'pytest-fxtr[otel]'``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "fxtr's OpenTelemetry export needs the otel extra: pip install 'pytest-fxtr[otel]' "
        f"(opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http); {exc}"
    )
    raise ImportError(msg) from exc

from fxtr.report._otel import (
    CAPTURE_CONTENT_VARIABLE,
    _no_gc,
    _resource,
    capture_content,
    job_requests,
    job_spans,
    otlp_endpoint,
    trace_id_of,
)
from fxtr.secrets import redact
from fxtr.store import Store

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "ExportOutcome",
    "capture_content",
    "export_jobs",
    "job_requests",
    "job_spans",
    "otlp_endpoint",
    "trace_id_of",
]

BATCH = 2_000
"""Spans per OTLP request."""
_LOG = logging.getLogger("fxtr.telemetry")


@dataclasses.dataclass
class ExportOutcome:
    """What an export did: spans sent, and the one problem that stopped it (if any)."""

    jobs: int = 0
    spans: int = 0
    error: str | None = None
    """Why the export stopped (the collector unreachable, a job unreadable), else ``None``."""

    @property
    def ok(self) -> bool:
        """Whether every span reached the exporter."""
        return self.error is None


class _Remember(logging.Handler):
    """Keeps the exporter's own error messages (to name the cause in fxtr's one warning)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _otlp_exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _http_client(exporter: SpanExporter) -> Any:
    """The SDK exporter's own HTTP client when it takes a request already encoded, else None.

    The SDK's ``OTLPSpanExporter`` (1.45 and later) sends through a client that posts bytes
    with the exporter's endpoint, headers, compression, TLS, timeout and retries. fxtr hands
    it the requests ``job_requests`` built; any other exporter (or an SDK without that client)
    gets ``ReadableSpan``s through its public ``export``.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if type(exporter) is not OTLPSpanExporter or getattr(exporter, "_shutdown", True):
        return None
    client = getattr(exporter, "_client", None)
    return client if callable(getattr(client, "export", None)) else None


_Part: TypeAlias = "ExportTraceServiceRequest | Sequence[ReadableSpan]"


def _parts(
    store: Store, job_id: str, client: Any, capture: bool | None, resource: Any
) -> list[tuple[_Part, int]]:
    """A job's requests (for the SDK's client) or slices of spans, each with its span count."""
    if client is not None:
        requests = job_requests(store, job_id, capture=capture, resource=resource, batch=BATCH)
        return [(r, _count(r)) for r in requests]
    spans = job_spans(store, job_id, capture=capture, resource=resource)
    return [(spans[i : i + BATCH], len(spans[i : i + BATCH])) for i in range(0, len(spans), BATCH)]


def _count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def _send(exporter: SpanExporter, client: Any, part: _Part) -> SpanExportResult:
    """One request: serialized for the SDK's client, else spans through ``export``."""
    if isinstance(part, ExportTraceServiceRequest):
        result = client.export(part.SerializeToString())
        return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE
    return exporter.export(part)


def export_jobs(
    store: Store,
    job_ids: Iterable[str],
    *,
    exporter: SpanExporter | None = None,
    capture: bool | None = None,
) -> ExportOutcome:
    """Export finished jobs as traces; a failure stops the export and is returned, not raised.

    The default exporter is the SDK's OTLP/HTTP (protobuf) exporter, configured by the
    standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
    ``OTEL_EXPORTER_OTLP_TIMEOUT``, ...). After the first failed request nothing more is sent,
    so an unreachable collector costs one timeout and one warning (logged on
    ``fxtr.telemetry``), never the run.

    Args:
        store: the store holding the jobs.
        job_ids: full job ids.
        exporter: any ``SpanExporter`` (an ``InMemorySpanExporter`` in tests).
        capture: as for :func:`job_spans`.

    Returns:
        The jobs and spans exported, and the error that stopped the export, if any.
    """
    outcome = ExportOutcome()
    own = exporter is None
    quiet = logging.getLogger("opentelemetry.exporter")
    remember = _Remember()
    level, propagate = quiet.level, quiet.propagate
    quiet.addHandler(remember)
    quiet.setLevel(logging.DEBUG)
    quiet.propagate = False  # the exporter's own messages become fxtr's one warning
    try:
        target = _otlp_exporter() if exporter is None else exporter
        client = _http_client(target)
        resource = _resource()
        for job_id in job_ids:
            try:
                parts = _parts(store, job_id, client, capture, resource)
            except Exception as exc:
                outcome.error = f"job {job_id} could not be read: {type(exc).__name__}: {exc}"
                break
            left = sum(n for _, n in parts)
            for part, n in parts:
                try:
                    with _no_gc():
                        result = _send(target, client, part)
                except Exception as exc:
                    result = SpanExportResult.FAILURE
                    remember.messages.append(f"{type(exc).__name__}: {exc}")
                if result is not SpanExportResult.SUCCESS:
                    where = f" to {otlp_endpoint()}" if own else ""
                    cause = f" ({redact(remember.messages[-1])})" if remember.messages else ""
                    outcome.error = (
                        f"the OpenTelemetry export{where} failed{cause}; "
                        f"{left} spans of job {job_id} and any later jobs were not "
                        "sent. Check OTEL_EXPORTER_OTLP_ENDPOINT and that the collector runs."
                    )
                    break
                outcome.spans += n
                left -= n
            if outcome.error is not None:
                break
            outcome.jobs += 1
        if own:
            target.shutdown()
    finally:
        quiet.removeHandler(remember)
        quiet.setLevel(level)
        quiet.propagate = propagate
    if outcome.error is not None:
        _LOG.warning("fxtr: %s The run is unaffected.", outcome.error)
    return outcome
