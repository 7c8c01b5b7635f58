"""The LangChain callback handler that sees LangGraph tasks start and end.

LangGraph runs every task as a LangChain run. Importing this module installs the one
``_TaskWatcher`` for the process, through ``langchain_core``'s configure hook (``_watching``;
set it to ``None`` in a context to turn the handler off there). Who calls whom:
``FluxCheckpointer.get_tuple`` (``fxtr.integrations.langgraph``) calls ``_WATCHER.claim``
when a graph's loop starts; the handler then routes that run's task starts and ends, and the
run's own end, to the claiming checkpointer's bookkeeping
(``fxtr.integrations._langgraph_mirror``: ``_task_started``, ``_task_ended``,
``_on_run_end``). It imports the mirror only for types, so neither imports the other at run
time.
"""

from __future__ import annotations

import collections
import contextvars
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook
from langgraph.errors import GraphBubbleUp, GraphInterrupt

from fxtr.integrations import _langgraph_records as limits
from fxtr.integrations._langgraph_records import _CANCELLED, _INTERNAL, _task_id_of
from fxtr.tracing import NodeStatus, current_frame

if TYPE_CHECKING:
    from fxtr.integrations._langgraph_mirror import _Mirror

log = logging.getLogger("fxtr.langgraph")

_last_run: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "fxtr_langgraph_last_run", default=None
)
"""``[run id, thread id, running]`` of the last LangChain run started in this context (the
graph's run, when a loop's ``get_tuple`` reads it); ``running`` turns false when it ends."""


class _TaskWatcher(BaseCallbackHandler):
    """Sees LangGraph tasks start and end as the LangChain runs they are.

    One handler for the process; each run it sees is routed to the ``FluxCheckpointer`` whose
    ``get_tuple`` claimed the graph's run (runs of other graphs are ignored).
    """

    run_inline = True
    ignore_llm = True
    ignore_chat_model = True
    ignore_retriever = True
    ignore_agent = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graphs: collections.OrderedDict[uuid.UUID, tuple[_Mirror, str, str]] = (
            collections.OrderedDict()
        )
        """Graph runs by run id: their checkpointer, thread id and namespace."""
        self._tasks: collections.OrderedDict[uuid.UUID, tuple[_Mirror, str, str, str, Any]] = (
            collections.OrderedDict()
        )
        """Task runs by run id: checkpointer, thread id, namespace, task id, frame token."""
        self._running: dict[tuple[str, str], tuple[_Mirror, str]] = {}
        """Running tasks by (thread id, task id): checkpointer and namespace."""

    def claim(self, owner: _Mirror, thread_id: str, ns: str) -> bool:
        """A loop of ``owner`` starts: the graph run just started here is its run.

        Returns whether there was one (the handler sees this run, and will see it end).
        """
        last = _last_run.get()
        if last is None or last[1] != thread_id or not last[2]:
            return False
        with self._lock:
            if last[0] in self._graphs:
                return False  # an older run of this context, already claimed
            self._graphs[last[0]] = (owner, thread_id, ns)
            while len(self._graphs) > limits.MAX_RUNS:
                self._graphs.popitem(last=False)
        return True

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A run starts: remember it; when it is a task of a graph we mirror, record it."""
        try:
            self._start(run_id, parent_run_id, metadata or {})
        except Exception:
            log.warning("fxtr could not mirror a LangGraph task start", exc_info=True)

    def _start(
        self, run_id: uuid.UUID, parent_run_id: uuid.UUID | None, metadata: dict[str, Any]
    ) -> None:
        thread = metadata.get("thread_id")
        if thread is None:
            return
        thread_id = thread if type(thread) is str else str(thread)
        _last_run.set([run_id, thread_id, True])
        task_ns = metadata.get("langgraph_checkpoint_ns")
        if type(task_ns) is not str or ":" not in task_ns:
            return
        task_id = _task_id_of(task_ns)
        if (thread_id, task_id) in self._running:
            return  # a run nested in a task that is running
        if metadata.get("langgraph_node") in _INTERNAL:
            return  # the input, or a conditional edge out of START: not a node of the user's
        with self._lock:
            if (thread_id, task_id) in self._running:
                return  # a run nested in a task that is running
            graph = self._graphs.get(parent_run_id) if parent_run_id is not None else None
            if graph is None:
                # Not a task of a graph run we mirror, or a functional-API ``@task`` call:
                # LangGraph hands every call made from one place the same callback manager
                # and rewrites its metadata for each, so the name and id a call's run reports
                # may be a sibling's. Calls are recorded from their writes; what they do
                # goes under the node of the task that called them.
                return
            owner, ns = graph[0], graph[2]
            self._running[(thread_id, task_id)] = (owner, ns)
        step = metadata.get("langgraph_step")
        name = str(metadata.get("langgraph_node", "task"))
        frame = owner._guard(
            owner._task_started,
            thread_id,
            ns,
            step if isinstance(step, int) else None,
            task_id,
            name,
        )
        token = current_frame.set(frame) if frame is not None else None
        with self._lock:
            self._tasks[run_id] = (owner, thread_id, ns, task_id, token)
            while len(self._tasks) > limits.MAX_RUNS:  # runs whose end never came
                _, (_, old_thread, _, old_task, _) = self._tasks.popitem(last=False)
                self._running.pop((old_thread, old_task), None)

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """A run ends: a task succeeded, or a graph's run is over."""
        self._end(run_id, "succeeded", None)

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """A run raised: a task failed, was interrupted or cancelled."""
        if isinstance(error, GraphInterrupt):
            self._end(run_id, "interrupted", None)
        elif isinstance(error, GraphBubbleUp):
            self._end(run_id, "succeeded", None)  # a Command for the parent graph
        elif isinstance(error, _CANCELLED):
            self._end(run_id, "cancelled", None)
        else:
            self._end(run_id, "failed", error)

    def _end(self, run_id: uuid.UUID, status: NodeStatus, error: BaseException | None) -> None:
        last = _last_run.get()
        if last is not None and last[0] == run_id:
            last[2] = False
        if run_id not in self._tasks and run_id not in self._graphs:
            return  # a run nested in a task, or of a graph we do not mirror
        try:
            with self._lock:
                task = self._tasks.pop(run_id, None)
                graph = self._graphs.pop(run_id, None) if task is None else None
                if task is not None:
                    self._running.pop((task[1], task[3]), None)
            if task is not None:
                owner, thread_id, _, task_id, token = task
                if token is not None:
                    _reset(token)
                owner._guard(owner._task_ended, thread_id, task_id, status, error)
            elif graph is not None:
                owner, thread_id, ns = graph
                owner._guard(owner._on_run_end, thread_id, ns, error)
        except Exception:
            log.warning("fxtr could not mirror a LangGraph task end", exc_info=True)


def _reset(token: Any) -> None:
    try:
        current_frame.reset(token)
    except ValueError:  # ended in another context than it started: nothing to restore
        pass


_WATCHER = _TaskWatcher()
_watching: contextvars.ContextVar[_TaskWatcher | None] = contextvars.ContextVar(
    "fxtr_langgraph_watcher", default=_WATCHER
)
"""The handler LangChain adds to every callback manager it configures (in every thread and
task: the default), through ``langchain_core``'s configure hook; ``None`` turns it off in a
context."""
register_configure_hook(_watching, inheritable=True)
