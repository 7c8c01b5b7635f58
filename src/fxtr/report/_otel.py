"""Spans of a finished job, built from its record.

As the SDK's ``ReadableSpan``s for any ``SpanExporter`` (``job_spans``), or as OTLP requests
built in bulk for the SDK's OTLP/HTTP client (``job_requests``).

The public face is ``fxtr.telemetry`` (see its docstring for the span and attribute names);
this module needs the ``otel`` extra.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from fxtr.report._evals import evaluation_of
from fxtr.report._otel_sinks import ReadableSpans, Requests, Sink
from fxtr.report._views import JobView, load_job
from fxtr.secrets import redact
from fxtr.store import Store

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The standard variable that lets message contents into the export (``true``)."""
_TURN = re.compile(r"turn\[\d+\]")
_TOOL = re.compile(r"tool\[\d+,\d+\]")
_AGENT_WORKFLOWS = frozenset({"fxtr.agent"})
_ERROR_STATUSES = frozenset({"failed"})


def capture_content() -> bool:
    """Whether message contents may be exported (the standard GenAI capture variable)."""
    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def otlp_endpoint() -> str:
    """Where the OTLP/HTTP exporter sends traces, resolved as the exporter resolves it."""
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


class _Resource(Resource):
    """A resource that hashes once: the encoder groups every span by its resource."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


def _resource() -> Resource:
    """``service.name`` from ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``), else fxtr."""
    base = Resource.create()
    name = str((base.attributes or {}).get("service.name") or "")
    if not name or name.startswith("unknown_service"):
        base = base.merge(Resource({"service.name": "fxtr"}))
    return _Resource(base)


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)


def trace_id_of(job_id: str, attempt: int) -> int:
    """The trace id of a job's attempt: derived from both, so a re-export lands in one trace."""
    return int.from_bytes(hashlib.sha256(f"{job_id}|{attempt}".encode()).digest()[:16], "big")


@dataclasses.dataclass
class _Builder:
    """Turns one job's record into spans, handed to its sink."""

    store: Store
    sink: Sink
    capture: bool
    _ids: RandomIdGenerator = dataclasses.field(default_factory=RandomIdGenerator)
    _values: dict[str, Any] = dataclasses.field(default_factory=dict)
    _origins: dict[str, dict[str, dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def context(self) -> int:
        """A new span id."""
        return self._ids.generate_span_id()

    def add(
        self,
        name: str,
        context: int,
        parent: int | None,
        attributes: dict[str, Any],
        start: int | None,
        end: int | None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        status: Status | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        self.sink.span(name, context, parent, attributes, start, end, kind, status, events)

    # values read back from the store (entities, inputs), each once

    def tree(self, text: str | None) -> Any:
        """A stored value's tree with ``$ref``s loaded and ``$entity`` wrappers removed."""
        if text is None:
            return None
        cached = self._values.get(text)
        if cached is None and text not in self._values:
            try:
                cached = self._unwrap(json.loads(text), 0)
            except (ValueError, TypeError, KeyError):
                cached = None
            self._values[text] = cached
        return cached

    def _unwrap(self, tree: Any, depth: int) -> Any:
        if isinstance(tree, list):
            return [self._unwrap(v, depth + 1) for v in tree]
        if not isinstance(tree, dict):
            return tree
        if "$ref" in tree:
            text = self.store.get_entity(tree["id"]) if depth < 6 else None
            body = self._unwrap(json.loads(text), depth + 1) if text is not None else {}
            return {"$type": tree["$ref"], **body} if isinstance(body, dict) else body
        if "$entity" in tree:
            fields = {k: self._unwrap(v, depth + 1) for k, v in tree["v"].items()}
            return {"$type": tree["$entity"], **fields}
        return {k: self._unwrap(v, depth + 1) for k, v in tree.items()}

    def input_value(self, inv: dict[str, Any], name: str) -> Any:
        fp = (inv.get("input_fingerprints") or {}).get(name)
        if fp is None:
            return None
        key = "fp:" + fp
        if key not in self._values:
            self._values[key] = self.tree(self.store.get_value(fp))
        return self._values[key]

    def origins(self, job_id: str, cached: list[tuple[str, dict[str, Any]]]) -> None:
        """Give invocations served from the step cache the timings and calls of their run."""
        if not cached:
            return
        entries = self.store.get_entries([address for address, _ in cached])
        for address, inv in cached:
            entry = entries.get(address)
            if entry is None or entry.damaged or entry.fingerprint != inv.get("fingerprint"):
                continue
            origin_job = entry.meta.get("job_id")
            if not isinstance(origin_job, str) or origin_job == job_id:
                continue
            records = self._origins.get(origin_job)
            if records is None:
                try:
                    records = self.store.job_invocations(origin_job)
                except Exception:  # the origin job may be gone; the timings are then unknown
                    records = {}
                self._origins[origin_job] = records
            origin = records.get(address)
            if origin and origin.get("started_at") and not origin.get("from_cache"):
                inv["started_at"] = origin["started_at"]
                inv["ended_at"] = origin.get("ended_at")
                inv["model_calls"] = origin.get("model_calls") or []


def _text(value: Any) -> str:
    return redact(value if isinstance(value, str) else json.dumps(value, default=str))


def _status(status: str | None, description: str | None) -> Status | None:
    if status in _ERROR_STATUSES:
        return Status(StatusCode.ERROR, redact(description or "") or None)
    return None


def _messages(messages: Iterable[dict[str, Any]]) -> str:
    """Recorded ``{"role", "content"}`` messages as the GenAI ``gen_ai.input.messages``."""
    out = [
        {"role": m.get("role") or "user", "parts": [{"type": "text", "content": m.get("content")}]}
        for m in messages
    ]
    return _text(out)


CACHED_USAGE = "fxtr.cached_usage."
"""Where a cached call's original tokens and cost go: not ``gen_ai.usage.*``, which backends
(Arize Phoenix, Langfuse...) add up as spent."""


def _usage(call: dict[str, Any], cached: bool) -> dict[str, Any]:
    """A chat span's tokens and dollars, as spent or, for a cached call, as first spent.

    A call made by this run carries the GenAI usage attributes (``gen_ai.usage.*``, which the
    conventions recommend, never require) and its cost as ``llm.cost.total`` (OpenInference's
    attribute, which Arize Phoenix and Arize AX read instead of pricing the tokens) and
    ``fxtr.cost_usd``. A call served from the cache spent nothing: it carries none of these,
    and its original figures under ``fxtr.cached_usage.*``, so no backend counts them again.
    """
    usage: dict[str, Any] = {
        "input_tokens": int(call.get("input_tokens") or 0),
        "output_tokens": int(call.get("output_tokens") or 0),
    }
    if call.get("cached_input_tokens"):
        usage["cache_read.input_tokens"] = int(call["cached_input_tokens"])
    cost = call.get("cost_usd")
    if cached:
        out = {CACHED_USAGE + key: value for key, value in usage.items()}
        if cost is not None:
            out[CACHED_USAGE + "cost_usd"] = float(cost)
        return out
    out = {"gen_ai.usage." + key: value for key, value in usage.items()}
    if cost is not None:
        out["llm.cost.total"] = out["fxtr.cost_usd"] = float(cost)
    return out


def _call_span(
    b: _Builder, call: dict[str, Any], parent: int, cached: bool, fallback: int | None
) -> None:
    model = str(call.get("model") or "unknown")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": str(call.get("provider") or "unknown"),
        "gen_ai.request.model": model,
        "fxtr.cached": cached,
    }
    attributes.update(_usage(call, cached))
    if call.get("status") not in (None, "succeeded"):
        attributes["fxtr.status"] = str(call["status"])
    stop = call.get("stop_reason")
    if stop:
        attributes["gen_ai.response.finish_reasons"] = (str(stop),)
    if call.get("role"):
        attributes["fxtr.role"] = str(call["role"])
    if call.get("reason"):
        attributes["fxtr.reason"] = str(call["reason"])
        attributes["error.type"] = str(call.get("category") or call["reason"])
    if b.capture:
        if call.get("messages"):
            attributes["gen_ai.input.messages"] = _messages(call["messages"])
        if call.get("reply") is not None:
            output = [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": call["reply"]}],
                    **({"finish_reason": str(stop)} if stop else {}),
                }
            ]
            attributes["gen_ai.output.messages"] = _text(output)
    start = _ns(call.get("started_at")) or fallback
    b.add(
        f"chat {model}",
        b.context(),
        parent,
        attributes,
        start,
        _ns(call.get("ended_at")) or start,
        kind=SpanKind.CLIENT,
        status=_status(call.get("status"), call.get("error")),
    )


def _score_event(
    b: _Builder, inv: dict[str, Any], bars: dict[str, float | None], when: int | None
) -> Event | None:
    """A ``gen_ai.evaluation.result`` event when the invocation's result is a ``Score``."""
    text = inv.get("result_text")
    if not text or ':Score"' not in text:
        return None
    score = b.tree(text)
    if not isinstance(score, dict) or not str(score.get("$type", "")).endswith(":Score"):
        return None
    value = score.get("value")
    if not isinstance(value, int | float):
        return None
    scorer = b.input_value(inv, "scorer")
    name = scorer.get("kind") if isinstance(scorer, dict) else None
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": str(name or inv.get("step") or "score"),
        "gen_ai.evaluation.score.value": float(value),
    }
    bar = bars.get(inv["address"], 0.5 if 0.0 <= value <= 1.0 else None)
    if bar is not None:
        attributes["gen_ai.evaluation.score.label"] = "pass" if value >= bar - 1e-12 else "fail"
    if b.capture and score.get("explanation"):
        attributes["gen_ai.evaluation.explanation"] = _text(score["explanation"])
    return Event("gen_ai.evaluation.result", attributes, when)


def _bars(record: dict[str, Any]) -> dict[str, float | None]:
    """Each scored address's pass bar: its group's threshold, else 0.5 for a 0-1 score."""
    evaluation = evaluation_of(record)
    if evaluation is None:
        return {}
    thresholds = {
        json.dumps(g.get("group"), sort_keys=True): g.get("threshold")
        for g in evaluation.get("groups") or []
        if isinstance(g, dict)
    }
    out: dict[str, float | None] = {}
    for cell in evaluation["cells"]:
        threshold = thresholds.get(json.dumps(cell.get("group"), sort_keys=True))
        if threshold is None:
            continue
        for address in cell.get("addresses") or []:
            out[address] = float(threshold)
    return out


def _tool_attributes(b: _Builder, inv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    call = b.input_value(inv, "call")
    call = call if isinstance(call, dict) else {}
    name = str(call.get("name") or inv.get("step") or "tool")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    if call.get("id"):
        attributes["gen_ai.tool.call.id"] = str(call["id"])
    outcome = b.tree(inv.get("result_text"))
    result = outcome.get("result") if isinstance(outcome, dict) else None
    if isinstance(result, dict) and result.get("is_error"):
        attributes["error.type"] = "tool_error"
        attributes["fxtr.tool_error"] = True
    if b.capture:
        if "arguments" in call:
            attributes["gen_ai.tool.call.arguments"] = _text(call["arguments"])
        if isinstance(result, dict) and "content" in result:
            attributes["gen_ai.tool.call.result"] = _text(result["content"])
    return f"execute_tool {name}", attributes


def _is_agent(workflow: dict[str, Any], children: list[tuple[dict[str, Any], str]]) -> bool:
    if workflow.get("workflow") in _AGENT_WORKFLOWS:
        return True
    return any(_TURN.fullmatch(last) for _, last in children)


def _parent(address: str, known: set[str]) -> tuple[str | None, str]:
    """The deepest workflow address above ``address``, and the segment below it.

    A workflow's address ends with a whole segment, so a ``/`` inside a quoted map key never
    cuts an address into a known one: trying each ``/`` from the right is exact, and fast.
    """
    i = address.rfind("/")
    while i > 0:
        if address[:i] in known:
            return address[:i], address[i + 1 :]
        i = address.rfind("/", 0, i)
    return None, address


def job_spans(
    store: Store,
    job_id: str,
    *,
    capture: bool | None = None,
    resource: Resource | None = None,
) -> list[ReadableSpan]:
    """The spans of a job's last attempt, read from its record (see the module docstring).

    Args:
        store: the store holding the job.
        job_id: the job's full id.
        capture: export message contents, tool arguments and results, and judges'
            explanations; default: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        resource: the OpenTelemetry resource (default: ``service.name`` ``fxtr``, or
            ``OTEL_SERVICE_NAME``).

    Returns:
        Finished spans, the job's first, ready for any ``SpanExporter``.

    Raises:
        KeyError: the store has no such job.
    """
    view = load_job(store, job_id)
    sink = ReadableSpans(_trace_id(view), resource or _resource())
    with _no_gc():
        _build(view, store, sink, capture)
    return sink.spans


def job_requests(
    store: Store,
    job_id: str,
    *,
    capture: bool | None = None,
    resource: Resource | None = None,
    batch: int = 2_000,
) -> list[ExportTraceServiceRequest]:
    """The OTLP requests of a job's last attempt, ``batch`` spans each, built in bulk.

    The same spans as :func:`job_spans`, as the SDK's ``encode_spans`` would encode them
    (equal message for message), without a ``ReadableSpan`` or the SDK's per-attribute
    encoding in between.

    Args:
        store: the store holding the job.
        job_id: the job's full id.
        capture: as for :func:`job_spans`.
        resource: as for :func:`job_spans`.
        batch: spans per request.

    Returns:
        Requests ready to serialize, the job's span first.

    Raises:
        KeyError: the store has no such job.
    """
    view = load_job(store, job_id)
    sink = Requests(_trace_id(view), resource or _resource(), batch)
    with _no_gc():
        _build(view, store, sink, capture)
    return sink.requests


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic collection while thousands of spans are made (nothing here is a cycle)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _trace_id(view: JobView) -> int:
    return trace_id_of(view.job_id, int(view.attempt.get("attempt") or 0))


def _build(view: JobView, store: Store, sink: Sink, capture: bool | None) -> None:
    job_id = view.job_id
    record = view.record
    attempt = view.attempt
    b = _Builder(store, sink, capture_content() if capture is None else capture)
    evaluation = evaluation_of(record)
    label = (evaluation or {}).get("eval") or record.get("root") or record.get("workflow")
    job_start = _ns(attempt.get("started_at") or record.get("created_at"))
    job_end = _ns(attempt.get("ended_at")) or job_start
    job_ctx = b.context()
    job_attributes: dict[str, Any] = {
        "fxtr.job_id": job_id,
        "fxtr.attempt": int(attempt.get("attempt") or 0),
        "fxtr.workflow": str(record.get("workflow")),
        "fxtr.status": str(view.status),
    }
    if evaluation is not None:
        job_attributes["fxtr.eval"] = str(evaluation.get("eval"))
        gate = evaluation.get("gate") or {}
        if "passed" in gate:
            job_attributes["fxtr.gate.passed"] = bool(gate["passed"])
    if record.get("commit"):
        job_attributes["vcs.ref.head.revision"] = str(record["commit"])
    b.add(
        f"job {label}",
        job_ctx,
        None,
        job_attributes,
        job_start,
        job_end,
        status=_status(view.status, f"job {view.status}"),
    )

    invocations = list(view.invocations.values())
    cached = [
        (inv["address"], inv)
        for inv in invocations
        if inv.get("from_cache") and not inv.get("started_at")
    ]
    b.origins(job_id, cached)

    root = str(record.get("root") or record.get("workflow"))
    known = {root, *(wf["address"] for wf in view.workflows)}
    placed: list[tuple[dict[str, Any], str | None, str]] = []
    children: dict[str | None, list[tuple[dict[str, Any], str]]] = {}
    for inv in invocations:
        parent_key, last = _parent(inv["address"], known)
        placed.append((inv, parent_key, last))
        children.setdefault(parent_key, []).append((inv, last))
    workflows = sorted(view.workflows, key=lambda w: len(w["address"]))
    contexts: dict[str | None, int] = {root: job_ctx}
    agents: set[str | None] = set()
    for wf in workflows:
        address = wf["address"]
        if address in contexts:
            continue
        parent = contexts.get(_parent(address, known)[0], job_ctx)
        ctx = contexts[address] = b.context()
        attributes: dict[str, Any] = {
            "fxtr.address": address,
            "fxtr.status": str(wf.get("status")),
            "fxtr.workflow": str(wf.get("workflow")),
        }
        mine = children.get(address, [])
        name = str(wf.get("workflow"))
        if _is_agent(wf, mine):
            agents.add(address)
            name = "invoke_agent"
            attributes["gen_ai.operation.name"] = "invoke_agent"
            calls = [c for inv, _ in mine for c in inv.get("model_calls") or ()]
            if calls:
                attributes["gen_ai.request.model"] = str(calls[0].get("model"))
                attributes["gen_ai.provider.name"] = str(calls[0].get("provider") or "unknown")
        start = _ns(wf.get("started_at")) or job_start
        b.add(
            name,
            ctx,
            parent,
            attributes,
            start,
            _ns(wf.get("ended_at")) or start,
            status=_status(wf.get("status"), wf.get("error")),
        )

    bars = _bars(record)
    for inv, parent_key, last in placed:
        address = inv["address"]
        parent = contexts.get(parent_key, job_ctx)
        cached_inv = bool(inv.get("from_cache"))
        status = str(inv.get("status"))
        attributes = {
            "fxtr.address": address,
            "fxtr.status": status,
            "fxtr.cached": cached_inv,
        }
        if inv.get("reason"):
            attributes["fxtr.reason"] = str(inv["reason"])
            attributes["error.type"] = str(inv.get("category") or inv["reason"])
        name = str(inv.get("step"))
        if parent_key in agents and _TOOL.fullmatch(last):
            name, extra = _tool_attributes(b, inv)
            attributes.update(extra, **{"fxtr.step": str(inv.get("step"))})
        start = _ns(inv.get("started_at")) or job_start
        end = _ns(inv.get("ended_at")) or start
        event = _score_event(b, inv, bars, end)
        ctx = b.context()
        b.add(
            name,
            ctx,
            parent,
            attributes,
            start,
            end,
            status=_status(status, inv.get("error")),
            events=(event,) if event is not None else (),
        )
        for call in inv.get("model_calls") or ():
            _call_span(b, call, ctx, cached_inv, start)


# --- OTLP requests, built in bulk -------------------------------------------------------------
#
# The SDK's encoder (opentelemetry-exporter-otlp-proto-common) makes two messages per attribute
# of every span through a chain of Python calls: most of an export's time. ``Requests`` puts
# each span into its request with one ``add`` of its fields, and builds each repeated
# ``(key, value)`` (a status, a model, ``fxtr.cached``) once per request, copied from there by
# the protobuf runtime. The result equals ``encode_spans`` of the ``ReadableSpan``s (tested).
