"""Parenting by context variables, and the one place every model call is recorded.

``current_frame`` holds the graph and node that new nodes go under. ``asyncio`` tasks and
``asyncio.to_thread`` copy context variables when they start, so parenting holds across
``gather``, ``create_task`` and threads with no integration code.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from fxtr.tracing._graph import Node, NodeStatus, TaskGraph

if TYPE_CHECKING:
    from fxtr.models._types import ModelRequest, ModelResponse

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
retry_of: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fxtr_trace_retry_of", default=None
)
"""While resuming: the failed node the next node replaces."""


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


class ModelCall:
    """What a model call records; the API sets ``response`` when it has one."""

    __slots__ = ("node", "response")

    def __init__(self, node: Node | None) -> None:
        self.node = node
        self.response: ModelResponse | None = None


@contextlib.asynccontextmanager
async def model_call(model_name: str, request: ModelRequest) -> AsyncIterator[ModelCall]:
    """Record one model call, re-raising whatever the call raised.

    The call is a node in the current graph (if any) and usage on the running step
    invocation (if any).
    """
    from fxtr.experiment._encoding import encode_text

    frame = current_frame.get()
    invocation = current_invocation.get()
    node: Node | None = None
    graph: TaskGraph | None = None
    if frame is not None:
        graph, parent = frame
        node = graph.start(
            "model_call", model_name, parent, _depends(), request=encode_text(request)
        )
    call = ModelCall(node)
    started = time.time()
    try:
        yield call
    except BaseException as exc:
        status: NodeStatus = "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
        if graph is not None and node is not None:
            graph.end(node, status, error=None if status == "cancelled" else exc)
        if invocation is not None:
            _on_invocation(invocation, model_name, None, started, exc)
        raise
    response = call.response
    if graph is not None and node is not None and response is not None:
        node.input_tokens = response.usage.input_tokens
        node.output_tokens = response.usage.output_tokens
        node.cost_usd = response.cost
        graph.end(node, "succeeded")
    if invocation is not None:
        _on_invocation(invocation, model_name, response, started, None)


def _on_invocation(
    invocation: Any,
    model: str,
    response: ModelResponse | None,
    started: float,
    error: BaseException | None,
) -> None:
    from fxtr.tracing._classify import classify, failure_category

    detail: dict[str, Any] = {
        "model": model,
        "started_at": started,
        "ended_at": time.time(),
        "status": "succeeded" if error is None else "failed",
    }
    by_model = invocation.cost_by_model.setdefault(
        model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "usd": None}
    )
    invocation.calls += 1
    by_model["calls"] += 1
    if response is not None:
        usage = response.usage
        detail.update(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=response.cost,
        )
        invocation.input_tokens += usage.input_tokens
        invocation.output_tokens += usage.output_tokens
        by_model["input_tokens"] += usage.input_tokens
        by_model["output_tokens"] += usage.output_tokens
        if response.cost is not None:
            invocation.cost_usd = (invocation.cost_usd or 0.0) + response.cost
            by_model["usd"] = (by_model["usd"] or 0.0) + response.cost
    if error is not None:
        detail.update(
            error=f"{type(error).__name__}: {error}",
            reason=classify(error),
            category=failure_category(error),
        )
    invocation.model_calls.append(detail)
