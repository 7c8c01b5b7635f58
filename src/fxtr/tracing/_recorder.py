"""Parenting by context variables, and the one place every model call is recorded.

``current_frame`` holds the graph and node that new nodes go under. ``asyncio`` tasks and
``asyncio.to_thread`` copy context variables when they start, so parenting holds across
``gather``, ``create_task`` and threads with no integration code (``run_in_executor`` and
``executor.submit`` do not copy them: ``fxtr.tracing._capture`` carries these variables
into the worker thread).

Every model call, made with ``fxtr.models`` or with an official SDK, is one ``CallRecord``:
a ``model_call`` node in the current graph (if any) and an entry of the running step
invocation's ``model_calls`` with its tokens and cost added to the invocation (if any).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from fxtr.models import _observe
from fxtr.models._observe import CallSlot
from fxtr.tracing._graph import Node, NodeStatus, TaskGraph

if TYPE_CHECKING:
    from fxtr.models._types import ModelRequest

current_frame: contextvars.ContextVar[tuple[TaskGraph, str] | None] = contextvars.ContextVar(
    "fxtr_trace_frame", default=None
)
"""(graph, node id) that new nodes are parented under."""
current_invocation: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "fxtr_current_invocation", default=None
)
"""The step invocation whose body is running (model calls and notices attach to it).

The engine sets it around a step body; tracing only reads it, so tracing never imports the
engine."""
call_role: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fxtr_call_role", default=None
)
"""The role of the model calls made now: ``"subject"`` (``None``) or ``"judge"``."""
retry_of: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fxtr_trace_retry_of", default=None
)
"""While resuming: the failed node the next node replaces."""

TEXT_LIMIT = 20_000
"""Characters kept of each message and of a reply."""
_usage_lock = threading.Lock()
"""Calls from worker threads add to the same invocation."""


_open: dict[int, dict[int, Callable[[], None]]] = {}
"""Per step invocation (by ``id``), its calls still open (a stream not read to its end yet),
each with the way to record it as cut short when the step ends first."""


def hold_open(record: CallRecord, close: Callable[[], None]) -> None:
    """Have ``close`` record the call if its step ends before the call does."""
    invocation = record.invocation
    if invocation is not None:
        with _usage_lock:
            _open.setdefault(id(invocation), {})[id(record)] = close


def let_go(record: CallRecord) -> None:
    """The call ended on its own: its step need not close it."""
    invocation = record.invocation
    if invocation is not None:
        with _usage_lock:
            held = _open.get(id(invocation))
            if held is not None:
                held.pop(id(record), None)


def end_of_invocation(invocation: Any) -> None:
    """Record the calls a step leaves open as it ends.

    A stream the step never read to its end, nor closed, would otherwise be recorded only
    when garbage collection drops it, after the invocation's record was written.
    """
    if not _open:  # every step ends here: no lock when no call is open anywhere
        return
    with _usage_lock:
        held = _open.pop(id(invocation), None)
    for close in (held or {}).values():
        close()


class recording_into:  # used as a function: ``with recording_into(invocation):``
    """Model calls made in the block (``fxtr.models`` or an official SDK) are ``invocation``'s.

    Calls still open when the block ends are recorded then (``end_of_invocation``). The engine
    wraps every step body in it, here or on an executor's worker (a class, not a generator:
    it is on every step's path).
    """

    __slots__ = ("invocation", "token")

    def __init__(self, invocation: Any) -> None:
        self.invocation = invocation
        self.token: contextvars.Token[Any] | None = None

    def __enter__(self) -> None:
        self.token = current_invocation.set(self.invocation)

    def __exit__(self, *exc: object) -> None:
        end_of_invocation(self.invocation)
        if self.token is not None:
            current_invocation.reset(self.token)


def recording() -> bool:
    """Whether a model call made now would be recorded (a step or a tracing block runs)."""
    return current_frame.get() is not None or current_invocation.get() is not None


def clip(text: str | None) -> str | None:
    """Text cut at ``TEXT_LIMIT`` characters (with a marker saying how much was cut)."""
    if text is None or len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f"... [{len(text) - TEXT_LIMIT} more characters]"


def _depends() -> list[str]:
    failed = retry_of.get()
    if failed is None:
        return []
    retry_of.set(None)
    return [failed]


@contextlib.contextmanager
def node_scope(
    graph: TaskGraph, kind: str, name: str, parent_id: str | None, **attrs: Any
) -> Iterator[Node]:
    """A node for the duration of a block; nodes made inside are its children."""
    node = graph.start(kind, name, parent_id, _depends(), **attrs)
    token = current_frame.set((graph, node.id))
    try:
        yield node
    except (asyncio.CancelledError, GeneratorExit):
        graph.end(node, "cancelled")
        raise
    except BaseException as exc:
        graph.end(node, "failed", error=exc)
        raise
    else:
        if node.status == "running":
            graph.end(node, "succeeded")
    finally:
        current_frame.reset(token)


class CallRecord:
    """One model call being recorded: its node (if a graph runs) and its invocation entry.

    Made by ``begin_call``; finished exactly once by ``succeed``, ``fail`` or ``cancel``
    (later calls are ignored, so a stream closed after it was read is recorded once).
    """

    __slots__ = (
        "_done",
        "graph",
        "invocation",
        "messages",
        "model",
        "node",
        "provider",
        "role",
        "started_at",
    )

    def __init__(
        self,
        model: str,
        provider: str | None,
        messages: list[dict[str, Any]],
        graph: TaskGraph | None,
        node: Node | None,
        invocation: Any,
    ) -> None:
        self.model = model
        self.provider = provider
        self.messages = messages
        self.role = call_role.get() or "subject"
        self.graph = graph
        self.node = node
        self.invocation = invocation
        self.started_at = time.time()
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the call was finished (recorded)."""
        return self._done

    def succeed(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
        cost: float | None = None,
        reply: str | None = None,
        **extra: Any,
    ) -> None:
        """Record a call that answered."""
        self._finish(
            "succeeded", input_tokens, output_tokens, cached_input_tokens, cost, reply, None, extra
        )

    def fail(
        self,
        error: BaseException,
        *,
        reply: str | None = None,
        reason: str | None = None,
        category: str | None = None,
        **usage: Any,
    ) -> None:
        """Record a call that failed with ``error`` (classified; its text redacted).

        A failure costs what its reported tokens cost, $0 when it reported none (providers
        do not bill a refused request): ``None`` stays reserved for an unknown price.
        ``reason`` and ``category`` replace the classifier's when the caller knows better
        (an SDK's own transport failure is a model call's, not a tool's).
        """
        self._finish(
            "failed",
            int(usage.pop("input_tokens", 0)),
            int(usage.pop("output_tokens", 0)),
            int(usage.pop("cached_input_tokens", 0)),
            usage.pop("cost", 0.0),
            reply,
            error,
            usage,
            (reason, category),
        )

    def cancel(self, *, reply: str | None = None, **usage: Any) -> None:
        """Record a call cut short by its caller (cancelled, or a stream closed early)."""
        self._finish(
            "cancelled",
            int(usage.pop("input_tokens", 0)),
            int(usage.pop("output_tokens", 0)),
            int(usage.pop("cached_input_tokens", 0)),
            usage.pop("cost", 0.0),
            reply,
            None,
            usage,
        )

    def _finish(
        self,
        status: NodeStatus,
        input_tokens: int,
        output_tokens: int,
        cached: int,
        cost: float | None,
        reply: str | None,
        error: BaseException | None,
        extra: dict[str, Any],
        why: tuple[str | None, str | None] = (None, None),
    ) -> None:
        if self._done:
            return
        self._done = True
        reason, category = why
        reply = clip(reply)
        error_text = _error_text(error) if error is not None else None
        if error is not None:  # the step that fails with this error takes the call's reason
            from fxtr.models._classify import call_reason, failure_category, mark_call_failure

            reason = reason or call_reason(error)
            category = category or failure_category(error)
            mark_call_failure(error, reason, category)
        node = self.node
        if self.graph is not None and node is not None:
            node.input_tokens = input_tokens
            node.output_tokens = output_tokens
            node.cost_usd = cost
            node.attrs["cached_input_tokens"] = cached
            node.attrs["reply"] = reply
            node.attrs.update(extra)
            self.graph.end(
                node, status, error=error, error_text=error_text, reason=reason, category=category
            )
        if self.invocation is not None:
            detail: dict[str, Any] = {
                "model": self.model,
                "provider": self.provider,
                "role": self.role,
                "status": status,
                "started_at": self.started_at,
                "ended_at": time.time(),
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cached_input_tokens": cached,
                "cost_usd": cost,
                "messages": self.messages,
                "reply": reply,
                **extra,
            }
            if error is not None:
                detail.update(error=error_text, reason=reason, category=category)
            _add_to_invocation(self.invocation, detail)


def _error_text(error: BaseException) -> str:
    from fxtr.secrets import redact

    return redact(f"{type(error).__name__}: {error}")


def _add_to_invocation(invocation: Any, detail: dict[str, Any]) -> None:
    """Add a call's tokens and cost to the invocation's totals, per model and per role."""
    rows = [(invocation.cost_by_model, detail["model"])]
    by_role = getattr(invocation, "cost_by_role", None)
    if by_role is not None:
        rows.append((by_role, detail["role"]))
    cost = detail["cost_usd"]
    with _usage_lock:
        invocation.calls += 1
        invocation.input_tokens += detail["input_tokens"]
        invocation.output_tokens += detail["output_tokens"]
        if cost is not None:
            invocation.cost_usd = (invocation.cost_usd or 0.0) + cost
        for table, key in rows:
            row = table.setdefault(
                key, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": None}
            )
            row["calls"] += 1
            row["input_tokens"] += detail["input_tokens"]
            row["output_tokens"] += detail["output_tokens"]
            if cost is not None:
                row["usd"] = (row["usd"] or 0.0) + cost
        invocation.model_calls.append(detail)


def begin_call(
    model: str,
    *,
    provider: str | None,
    messages: list[dict[str, Any]],
    **attrs: Any,
) -> CallRecord | None:
    """Start recording a model call, or ``None`` when no step or tracing block runs."""
    frame = current_frame.get()
    invocation = current_invocation.get()
    if frame is None and invocation is None:
        return None
    graph: TaskGraph | None = None
    node: Node | None = None
    if frame is not None:
        graph, parent = frame
        node = graph.start(
            "model_call",
            model,
            parent,
            _depends(),
            provider=provider,
            role=call_role.get() or "subject",
            messages=messages,
            **attrs,
        )
    return CallRecord(model, provider, messages, graph, node, invocation)


def request_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """An ``fxtr.models`` request's messages as ``{"role", "content"}`` (content clipped)."""
    from fxtr.models._types import AssistantMessage, SystemMessage, ToolMessage, UserMessage

    out: list[dict[str, Any]] = []
    for m in request.context:
        if isinstance(m, SystemMessage):
            role, text = "system", "".join(b.text for b in m.content)
        elif isinstance(m, UserMessage):
            role, text = "user", "".join(b.text for b in m.content)
        elif isinstance(m, AssistantMessage):
            calls = "".join(f"[tool call {c.name}]" for c in m.tool_calls)
            role, text = "assistant", "".join(b.text for b in m.content) + calls
        elif isinstance(m, ToolMessage):
            role, text = "tool", "\n".join(r.content for r in m.results)
        else:
            continue
        out.append({"role": role, "content": clip(text)})
    return out


@contextlib.asynccontextmanager
async def model_call(
    model_name: str, request: ModelRequest, provider: str | None = None
) -> AsyncIterator[CallSlot]:
    """Record one ``fxtr.models`` call, re-raising whatever the call raised.

    Installed as the models' observer (``fxtr.models._observe``) when tracing is imported.
    """
    if not recording():
        yield CallSlot()
        return
    from fxtr.experiment._encoding import encode_text

    record = begin_call(
        model_name,
        provider=provider,
        messages=request_messages(request),
        request=encode_text(request) if current_frame.get() is not None else None,
    )
    assert record is not None
    slot = CallSlot(record.node)
    try:
        yield slot
    except asyncio.CancelledError:
        record.cancel()
        raise
    except BaseException as exc:
        record.fail(exc)
        raise
    response = slot.response
    code: dict[str, Any] = {"code": slot.code} if slot.code else {}
    if response is None:
        record.succeed(**code)
        return
    usage = response.usage
    record.succeed(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        cost=response.cost,
        reply=response.text,
        stop_reason=response.stop_reason,
        **code,
    )


_observe.set_observer(model_call)
