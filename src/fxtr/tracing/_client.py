"""``Client``: tasks, steps and model calls recorded as one graph, and resume of failed nodes."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from fxtr.experiment.errors import FxtrError
from fxtr.tracing._graph import Node, TaskGraph
from fxtr.tracing._recorder import current_frame, node_scope, retry_of
from fxtr.tracing._route import candidates, reroutable


class FluxRecoveryNotInstalled(FxtrError):
    """Resuming a task this process does not hold, with no store to recover it from.

    Give the client a store (``Client(models, store=".fxtr")``) to resume across processes.
    Not a ``KeyError``: an unknown task in a store is the ``KeyError``.
    """


class NodeNotResumableWarning(UserWarning):
    """A failed node cannot be re-run by ``resume`` (a ``with`` block cannot be re-entered)."""


class TaskScope:
    """The task a ``with client.task(...)`` block records into."""

    def __init__(self, graph: TaskGraph, node: Node) -> None:
        self.graph = graph
        self.node = node
        self.task_id = graph.task_id

    def __repr__(self) -> str:
        return f"TaskScope({self.task_id!r}, {self.node.name!r})"


def _to_request(messages: Sequence[Any], sampling: dict[str, Any]) -> Any:
    from fxtr.models._types import (
        AssistantMessage,
        ContentText,
        ModelRequest,
        Sampling,
        SystemMessage,
        UserMessage,
    )

    context: list[Any] = []
    for m in messages:
        if not isinstance(m, Mapping):
            context.append(m)
            continue
        content = m.get("content", "")
        blocks: tuple[ContentText, ...]
        if isinstance(content, str):
            blocks = (ContentText(text=content),)
        else:
            blocks = tuple(ContentText(text=b["text"]) for b in content if b.get("type") == "text")
        role = m.get("role")
        kinds = {
            "system": SystemMessage,
            "developer": SystemMessage,
            "user": UserMessage,
            "assistant": AssistantMessage,
        }
        if role not in kinds:
            msg = f"Message role {role!r} is not one of system, user, assistant."
            raise ValueError(msg)
        context.append(kinds[role](content=blocks))
    known = {"temperature", "max_tokens", "top_p", "seed", "stop"}
    unknown = set(sampling) - known
    if unknown:
        msg = (
            f"messages.create() got unknown options {sorted(unknown)!r}; known: {sorted(known)!r}."
        )
        raise TypeError(msg)
    stop = sampling.get("stop")
    sampling = {**sampling, "stop": tuple(stop) if stop else None}
    return ModelRequest(
        context=tuple(context),
        sampling=Sampling(**sampling) if any(v is not None for v in sampling.values()) else None,
    )


class Messages:
    """``client.messages.create(...)``: one request per call, recorded, never retried."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def create(
        self,
        *,
        model: str = "auto",
        messages: Sequence[Any],
        max_cost: float | None = None,
        **sampling: Any,
    ) -> Any:
        """Send one request to a model and return its ``ModelResponse``.

        Args:
            model: a key of the client's ``models``, or ``"auto"``: the first model whose
                context window fits the request (and whose forecast price is within
                ``max_cost``); a failure for context overflow or a retired or unknown model
                id goes on to the next such model, as a node that depends on the failed one.
            messages: dicts ``{"role": ..., "content": ...}`` or ``fxtr.models`` messages.
            max_cost: dollars the call may cost at most (``model="auto"`` only).
            **sampling: temperature, max_tokens, top_p, seed, stop.

        Raises:
            ModelCallError: the call failed (after its node was recorded as failed).
            LookupError: no model fits the request (each one's reason is said).
        """
        request = _to_request(messages, sampling)
        if model != "auto":
            return await self._client._api(model, request).generate(request)
        return await self._client._routed(request, max_cost)


class Client:
    """Records tasks, steps and model calls as one execution graph per task.

    Args:
        models: model APIs by name (``MockModelAPI``, ``OpenAIResponsesAPI``, ...).
        store: a store directory (the step cache's ``.fxtr`` works); graphs are written as
            nodes change, so ``resume`` and ``get_task_graph`` work from other processes.
            ``None`` keeps graphs in this process only.
        route: ``route(models, request) -> name`` for ``model="auto"``; default: the rules
            (the first model whose context window fits, and price, when a call gives
            ``max_cost``). A routed call that fails for context overflow or a retired model
            id goes on to the next model that fits either way.
        context_windows: tokens of each model's context window, by name (else the API's
            ``context_window`` attribute; a model with neither fits any request).
    """

    def __init__(
        self,
        models: Mapping[str, Any],
        *,
        store: str | os.PathLike[str] | None = None,
        route: Callable[[Mapping[str, Any], Any], str] | None = None,
        context_windows: Mapping[str, int] | None = None,
    ) -> None:
        if not models:
            msg = "Client needs at least one model: Client({'name': MockModelAPI(...)})."
            raise ValueError(msg)
        self.models = dict(models)
        self.route = route
        self.context_windows = dict(context_windows or {})
        self._store = None
        if store is not None:
            from fxtr.store import open_store

            self._store = open_store(store)
        self._graphs: dict[str, TaskGraph] = {}
        self._callables: dict[str, Callable[..., Any]] = {}
        self._thread_tasks: dict[int, TaskScope] = {}
        self._lock = threading.Lock()
        self.messages = Messages(self)

    def __repr__(self) -> str:
        return f"Client(models={list(self.models)!r}, store={self._store!r})"

    # graphs ---------------------------------------------------------------------------

    def _new_graph(self, task_id: str, nodes: list[Node] | None = None) -> TaskGraph:
        graph = TaskGraph(task_id, nodes)
        if self._store is not None:
            store = self._store
            seqs = {n.id: i for i, n in enumerate(graph.nodes)}

            def persist(node: Node) -> None:
                from fxtr.store._base import redact_json

                seq = seqs.get(node.id)
                if seq is None:
                    seq = seqs[node.id] = store.next_trace_seq(task_id)
                # credentials never reach the store, as for the invocations' records
                store.put_trace_node(task_id, seq, redact_json(node.to_json()))

            graph.on_change = persist
        with self._lock:
            self._graphs[task_id] = graph
        return graph

    def _load(self, task_id: str, *, for_resume: bool) -> TaskGraph:
        graph = self._graphs.get(task_id)
        if graph is not None:
            return graph
        if self._store is None:
            if for_resume:
                msg = (
                    f"Task {task_id!r} is not held by this process and the client has no "
                    "store to recover it from. Create the client with a store "
                    "(Client(models, store='.fxtr')) to resume across processes."
                )
                raise FluxRecoveryNotInstalled(msg)
            msg = f"No task {task_id!r} in this process."
            raise KeyError(msg)
        nodes = self._store.get_trace_nodes(task_id)
        if not nodes:
            msg = f"No task {task_id!r} in the store at {self._store.path}."
            raise KeyError(msg)
        return self._new_graph(task_id, [Node.from_json(data) for data in nodes])

    def get_task_graph(self, task_id: str) -> TaskGraph:
        """The graph of a task, from this process or the store.

        Raises:
            KeyError: neither holds the task.
        """
        return self._load(task_id, for_resume=False)

    # scopes ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def task(self, name: str) -> Iterator[TaskScope]:
        """Record everything inside the block as one task's graph."""
        graph = self._new_graph(uuid.uuid4().hex[:16])
        with node_scope(graph, "task", name, None) as node:
            yield TaskScope(graph, node)

    def thread_task(self, name: str) -> TaskScope:
        """The task of the current thread for code running outside any ``task()``."""
        key = threading.get_ident()
        with self._lock:
            scope = self._thread_tasks.get(key)
        if scope is None:
            graph = self._new_graph(uuid.uuid4().hex[:16])
            node = graph.start("task", name, None)
            scope = TaskScope(graph, node)
            with self._lock:
                self._thread_tasks[key] = scope
        return scope

    def step(
        self, name: str, fn: Callable[..., Any] | None = None, /, *args: Any, **kwargs: Any
    ) -> Any:
        """A step node, around a block or around a call.

        ``with client.step(name):`` around a block, or
        ``client.step(name, fn, *args, **kwargs)`` to call ``fn`` as a step (awaitable
        when ``fn`` is async). A callable step can be re-run by ``resume`` from its recorded
        arguments; a ``with`` block cannot be re-entered.
        """
        if fn is None:
            return self._block(name)
        if inspect.iscoroutinefunction(fn):
            return self._acall(name, fn, args, kwargs)
        with self._callable_scope(name, fn, args, kwargs):
            return fn(*args, **kwargs)

    @contextlib.contextmanager
    def _block(self, name: str) -> Iterator[Node]:
        frame = current_frame.get()
        if frame is None:
            scope = self.thread_task(name)
            frame = (scope.graph, scope.node.id)
        graph, parent = frame
        with node_scope(graph, "step", name, parent, resumable=False) as node:
            yield node

    @contextlib.contextmanager
    def _callable_scope(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Iterator[Node]:
        from fxtr.experiment._encoding import EncodingError, encode_text

        frame = current_frame.get()
        if frame is None:
            scope = self.thread_task(name)
            frame = (scope.graph, scope.node.id)
        graph, parent = frame
        attrs: dict[str, Any] = {
            "resumable": True,
            "function": f"{fn.__module__}:{fn.__qualname__}",
        }
        try:
            attrs["arguments"] = encode_text([list(args), kwargs])
        except EncodingError as exc:
            attrs["resumable"] = False
            attrs["not_resumable_because"] = f"its arguments cannot be recorded: {exc}"
        with node_scope(graph, "step", name, parent, **attrs) as node:
            self._callables[node.id] = fn
            yield node

    async def _acall(
        self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        with self._callable_scope(name, fn, args, kwargs):
            return await fn(*args, **kwargs)

    def _api(self, model: str, request: Any) -> Any:
        name = self._route(request)[0] if model == "auto" else model
        if name not in self.models:
            msg = f"Model {name!r} is not one of this client's models: {sorted(self.models)!r}."
            raise KeyError(msg)
        return self.models[name]

    def _route(
        self, request: Any, max_cost: float | None = None, skip: frozenset[str] = frozenset()
    ) -> list[str]:
        """The models to try for ``model="auto"``, in order."""
        fit, why = candidates(self.models, self.context_windows, request, max_cost, skip)
        if self.route is not None:
            pick = self.route(self.models, request)
            fit = [pick, *(n for n in fit if n != pick)]
        if not fit:
            msg = f"No model of this client fits the request: {'; '.join(why)}."
            raise LookupError(msg)
        return fit

    async def _routed(
        self, request: Any, max_cost: float | None = None, skip: frozenset[str] = frozenset()
    ) -> Any:
        """Send to the first model that fits; on a reroutable failure, to the next one."""
        names = self._route(request, max_cost, skip)
        for i, name in enumerate(names):
            api = self._api(name, request)
            frame = current_frame.get()
            before = len(frame[0].nodes) if frame is not None else 0
            try:
                return await api.generate(request)
            except Exception as exc:
                if i == len(names) - 1 or not reroutable(exc):
                    raise
                failed = _failed_call(frame, before, api.model_name)
                if failed is not None:
                    retry_of.set(failed)  # the next call's node depends on this one
        msg = "routing ended without a call"
        raise AssertionError(msg)  # pragma: no cover

    # resume ---------------------------------------------------------------------------

    async def resume(self, task_id: str, *, model: str | None = None) -> Any:
        """Re-run only the failed nodes of a task, each from what was recorded for it.

        A model call is re-sent from its recorded request (routed again, or to ``model``); a
        callable step is called again with its recorded arguments. Each retry is a new node
        whose ``depends_on`` is the node it replaces.

        Returns:
            The last retry's result, or ``None`` when nothing could be re-run.

        Raises:
            FluxRecoveryNotInstalled: no store, and this process does not hold the task.
            KeyError: the store does not hold the task.
            Exception: the last retry's own failure, after it was recorded.
        """
        graph = self._load(task_id, for_resume=True)
        retried = {dep for n in graph.nodes for dep in n.depends_on}
        failed = [n for n in graph.nodes if n.status == "failed" and n.id not in retried]
        result: Any = None
        last_error: BaseException | None = None
        ran = False
        for node in failed:
            retry = self._retry_for(node, model)
            if retry is None:
                if node.kind == "step":
                    why = node.attrs.get(
                        "not_resumable_because", "a `with` block cannot be re-entered"
                    )
                    warnings.warn(
                        f"Failed step {node.name!r} (node {node.id}) was not re-run: {why}. "
                        f"Pass it as a callable, client.step({node.name!r}, fn, *args), to make "
                        "it resumable.",
                        NodeNotResumableWarning,
                        stacklevel=2,
                    )
                continue
            frame = current_frame.set((graph, node.parent_id or ""))
            replaces = retry_of.set(node.id)
            try:
                result = await retry
                last_error = None
            except Exception as exc:
                last_error = exc
            finally:
                retry_of.reset(replaces)
                current_frame.reset(frame)
            ran = True
        if last_error is not None:
            raise last_error
        return result if ran else None

    def _retry_for(self, node: Node, model: str | None) -> Any:
        """A coroutine re-running a failed node from its record, or None if it cannot be."""
        from fxtr.experiment._encoding import decode_text

        if node.kind == "model_call":
            if not node.attrs.get("request"):
                return None  # an SDK call: its step re-runs it, fxtr cannot re-send it
            request = decode_text(node.attrs["request"])
            if model is not None:
                return self._api(model, request).generate(request)
            # routed again, without the models that failed it for a reason routing moves on
            moved_on = _retired(node)
            skip = frozenset(
                name
                for name, api in self.models.items()
                if moved_on and getattr(api, "model_name", name) == node.name
            )
            return self._routed(request, skip=skip)
        if node.kind == "step" and node.attrs.get("resumable"):
            fn = self._callables.get(node.id) or _import(node.attrs["function"])
            args, kwargs = decode_text(node.attrs["arguments"])
            return self._retry_step(node.name, fn, args, kwargs)
        return None

    async def _retry_step(
        self, name: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await self._acall(name, fn, tuple(args), kwargs)
        with self._callable_scope(name, fn, tuple(args), kwargs):
            return fn(*args, **kwargs)


def _failed_call(frame: Any, before: int, model_name: str) -> str | None:
    """The id of the failed model-call node a routed call just recorded."""
    if frame is None:
        return None
    for node in frame[0].nodes[before:]:
        if node.kind == "model_call" and node.name == model_name and node.status == "failed":
            return str(node.id)
    return None


def _retired(node: Node) -> bool:
    """Whether a model-call node failed for a reason routing moves on from.

    Context overflow, or a retired or unknown model id.
    """
    from fxtr.models import ModelCallError, ModelCallFailure

    if node.reason == "context_overflow":
        return True
    failure = ModelCallFailure(category=node.category or "", description=str(node.error or ""))
    return reroutable(ModelCallError(failure))


def _import(path: str) -> Callable[..., Any]:
    module, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        msg = f"Step function {path!r} can no longer be imported; it cannot be re-run."
        raise LookupError(msg) from None
    return obj  # type: ignore[no-any-return]
