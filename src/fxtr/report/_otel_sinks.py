"""Where a job's spans go: the SDK's ``ReadableSpan``s, or OTLP requests built in bulk.

``fxtr.report._otel`` turns a job's record into spans and hands each to a sink: ``ReadableSpans``
for any ``SpanExporter``, or ``Requests``, which builds the ``ExportTraceServiceRequest``s the SDK's
``encode_spans`` would make (equal message for message) directly with opentelemetry-proto's
classes, each repeated attribute encoded once per job. This module needs the ``otel`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    InstrumentationScope as PB2Scope,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PB2Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, SpanFlags
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

_SCOPE = InstrumentationScope("fxtr")
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET = Status(StatusCode.UNSET)


class Sink(Protocol):
    """Where the builder puts each span, parents before their children."""

    def span(
        self,
        name: str,
        span_id: int,
        parent_id: int | None,
        attributes: dict[str, Any],
        start: int | None,
        end: int | None,
        kind: SpanKind,
        status: Status | None,
        events: Sequence[Event],
    ) -> None: ...


class ReadableSpans:
    """Spans as the SDK's ``ReadableSpan``s, for any ``SpanExporter``."""

    def __init__(self, trace_id: int, resource: Resource) -> None:
        self.trace_id = trace_id
        self.resource = resource
        self.spans: list[ReadableSpan] = []
        self._contexts: dict[int, SpanContext] = {}

    def _context(self, span_id: int) -> SpanContext:
        context = self._contexts.get(span_id)
        if context is None:
            context = self._contexts[span_id] = SpanContext(self.trace_id, span_id, False, _SAMPLED)
        return context

    def span(
        self,
        name: str,
        span_id: int,
        parent_id: int | None,
        attributes: dict[str, Any],
        start: int | None,
        end: int | None,
        kind: SpanKind,
        status: Status | None,
        events: Sequence[Event],
    ) -> None:
        self.spans.append(
            ReadableSpan(
                name=name,
                context=self._context(span_id),
                parent=None if parent_id is None else self._context(parent_id),
                resource=self.resource,
                attributes=attributes,
                events=events,
                kind=kind,
                status=status or _UNSET,
                start_time=start,
                end_time=end if end is not None else start,
                instrumentation_scope=_SCOPE,
            )
        )


_KINDS = {  # the SDK's span kinds as OTLP's, as the SDK's encoder maps them
    SpanKind.INTERNAL: Span.SpanKind.SPAN_KIND_INTERNAL,
    SpanKind.SERVER: Span.SpanKind.SPAN_KIND_SERVER,
    SpanKind.CLIENT: Span.SpanKind.SPAN_KIND_CLIENT,
    SpanKind.PRODUCER: Span.SpanKind.SPAN_KIND_PRODUCER,
    SpanKind.CONSUMER: Span.SpanKind.SPAN_KIND_CONSUMER,
}
_FLAGS = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK  # a job's spans have no remote parent
_DISTINCT = 256
"""Values of one attribute key kept for reuse in a request; past that many the key's values
are built each time (an address, a job id: each is used once)."""


def _any(value: Any) -> AnyValue:
    """An attribute value as OTLP's ``AnyValue``, as the SDK encodes it."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Sequence):
        return AnyValue(array_value=ArrayValue(values=[_any(v) for v in value]))
    if isinstance(value, Mapping):
        pairs = [KeyValue(key=str(k), value=_any(v)) for k, v in value.items()]
        return AnyValue(kvlist_value=KeyValueList(values=pairs))
    msg = f"attribute value {value!r} of type {type(value).__name__} has no OTLP encoding"
    raise TypeError(msg)


class _Pairs:
    """Attributes into one kind of message (a span's, an event's), each known pair as bytes.

    A pair seen before is kept as the serialized ``holder`` message holding just that pair:
    protobuf's own merge of serialized messages appends repeated fields, so the known pairs
    of a span (and its fixed fields, see ``Requests``) go in with one ``MergeFromString``
    of their joined bytes, parsed by the runtime (seven times faster than copying the
    ``KeyValue`` messages). A new pair is made in place.
    """

    def __init__(self, holder: Any) -> None:
        self._holder = holder
        self._known: dict[tuple[str, type, Any], bytes] = {}
        self._distinct: dict[str, int] = {}

    def put(self, message: Any, attributes: Mapping[str, Any] | None, head: bytes = b"") -> None:
        """Merge ``head`` (serialized fields) into ``message``, then its attributes, in order."""
        known = self._known
        merged = [head] if head else []
        for key, value in (attributes or {}).items():
            index: tuple[str, type, Any] | None = (key, value.__class__, value)
            try:
                fragment = known.get(index)  # type: ignore[arg-type]
            except TypeError:  # a list: not hashable, built each time
                fragment, index = None, None
            if fragment is not None:
                merged.append(fragment)
                continue
            if merged:
                message.MergeFromString(b"".join(merged))
                merged = []
            pair = message.attributes.add(key=key)
            if value.__class__ is str:
                pair.value.string_value = value
            else:
                pair.value.CopyFrom(_any(value))
            seen = self._distinct.get(key, 0)
            if index is not None and seen < _DISTINCT:
                self._distinct[key] = seen + 1
                known[index] = self._holder(attributes=[pair]).SerializeToString()
        if merged:
            message.MergeFromString(b"".join(merged))


class Requests:
    """Spans as OTLP ``ExportTraceServiceRequest``s of ``batch`` spans each.

    The fields spans share (trace id, name, kind, flags, an unset status) are serialized once
    per ``(name, kind, unset)`` and merged in with the span's known attribute pairs; its own
    ids and times are set on it.
    """

    def __init__(self, trace_id: int, resource: Resource, batch: int) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self._trace_id = trace_id.to_bytes(16, "big")
        self._batch = max(1, batch)
        self._left = 0
        self._pairs = _Pairs(Span)
        self._event_pairs = _Pairs(Span.Event)
        self._heads: dict[tuple[str, SpanKind, bool], bytes] = {}
        self._resource = PB2Resource(
            attributes=[KeyValue(key=k, value=_any(v)) for k, v in _items(resource)]
        )
        self._resource_schema = resource.schema_url
        self._scope = PB2Scope(name=_SCOPE.name, version=_SCOPE.version or "")
        self._add: Any = None

    def _request(self) -> None:
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add(
            resource=self._resource, schema_url=self._resource_schema
        )
        scope_spans = resource_spans.scope_spans.add(
            scope=self._scope, schema_url=_SCOPE.schema_url
        )
        self.requests.append(request)
        self._add = scope_spans.spans.add
        self._left = self._batch

    def _head(self, name: str, kind: SpanKind, unset: bool) -> bytes:
        """The serialized fields shared by spans of one name, kind and (unset) status."""
        index = (name, kind, unset)
        head = self._heads.get(index)
        if head is None:
            span = Span(trace_id=self._trace_id, name=name, kind=_KINDS[kind], flags=_FLAGS)
            if unset:
                span.status.SetInParent()  # the SDK sends an UNSET status as an empty message
            head = span.SerializeToString()
            if len(self._heads) < _DISTINCT * 4:
                self._heads[index] = head
        return head

    def span(
        self,
        name: str,
        span_id: int,
        parent_id: int | None,
        attributes: dict[str, Any],
        start: int | None,
        end: int | None,
        kind: SpanKind,
        status: Status | None,
        events: Sequence[Event],
    ) -> None:
        if not self._left:
            self._request()
        self._left -= 1
        span = self._add()
        span.span_id = span_id.to_bytes(8, "big")
        if parent_id is not None:
            span.parent_span_id = parent_id.to_bytes(8, "big")
        if start is not None:
            span.start_time_unix_nano = start
            span.end_time_unix_nano = end if end is not None else start
        elif end is not None:
            span.end_time_unix_nano = end
        if status is not None:
            span.status.code = status.status_code.value
            if status.description:
                span.status.message = status.description
        self._pairs.put(span, attributes, self._head(name, kind, status is None))
        for event in events:
            added = span.events.add(name=event.name, time_unix_nano=event.timestamp)
            self._event_pairs.put(added, event.attributes)


def _items(resource: Resource) -> Iterable[tuple[str, Any]]:
    return (resource.attributes or {}).items()
