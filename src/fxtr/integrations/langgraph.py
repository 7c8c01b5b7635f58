"""``FluxCheckpointer``: LangGraph's in-memory saver that mirrors runs into an fxtr graph.

``graph.compile(checkpointer=FluxCheckpointer(client))`` in place of ``InMemorySaver()``:
checkpoints are stored exactly as the in-memory saver stores them (it *is* one), and each
super-step becomes a ``superstep N`` node with one ``step`` node per LangGraph task that ran,
under the current ``client.task()`` (or a task per LangGraph thread id).

What the mirror is told, and by whom:

- ``put_writes(config, writes, task_id, task_path)``: a task finished. ``config`` names the
  checkpoint its super-step started from, ``task_id`` is LangGraph's own id for the task
  (derived from that checkpoint, so a rerun of the same task has the same id). An
  ``__error__`` write carries the exception (a ``CancelledError`` for a sibling LangGraph cut
  short), ``__interrupt__`` an ``interrupt()``.
- ``put(config, checkpoint, metadata)``: a super-step completed; ``config`` names the
  checkpoint it started from (its lineage parent), so every task of that super-step that is
  still open succeeded.
- ``get_tuple(config)`` at the start of every run (and of every subgraph run): a new attempt
  of that thread and namespace; work recorded by an earlier attempt is final.
- A LangChain callback handler (LangGraph runs every task as a LangChain run): a task
  started (its real start time; model calls and ``client.step`` blocks made inside the node
  go under its node), ended, or raised (every ``RetryPolicy`` attempt is a node); the graph's
  run ended. Importing this module installs the one handler for the process, through
  ``langchain_core``'s configure hook; it ignores every run that is not a task of a graph
  whose loop a ``FluxCheckpointer`` opened. Where it is turned off, the checkpointer's calls
  alone still give every outcome.

Events are matched by LangGraph's task ids and checkpoint lineage, never by arrival order:
writes may arrive before their super-step's checkpoint or after the next one (LangGraph saves
in the background). A task id already recorded as finished in an earlier attempt (after
``invoke(None, config)`` or ``Command(resume=...)``) is a new node whose ``depends_on`` is the
earlier node; when the rerun is in another task graph (resumed inside another
``client.task()``), its ``depends_on_task`` attribute names the graph that node is in.

Known limits: errors raised outside any task (input validation, the graph's own code,
``GraphRecursionError``) are not tasks (they fail the thread's own task). Without the
handler: a node that writes nothing is not seen, start times are the super-step's, model
calls made in nodes stay under the enclosing task, ``@task`` calls are named ``task``, only
a ``RetryPolicy``'s last attempt is seen, ``durability="exit"`` shows only the last
super-step, and nodes are made in the order LangGraph's saves arrive (super-step numbers give
the order). Recording is synchronous and thread-safe, and never fails the user's run: a
bookkeeping error is logged and swallowed.

The code, and who calls whom: this module holds the public ``FluxCheckpointer`` (the
checkpointer facade: LangGraph's calls, each handed on through ``_guard``) and the message for
a missing extra. It inherits its bookkeeping from ``_Mirror`` in
``fxtr.integrations._langgraph_mirror``, which keeps its records (``_Step``, ``_Task``,
``_Thread``, the limits ``MAX_TASKS``/``MAX_STEPS``/``MAX_RUNS``) in
``fxtr.integrations._langgraph_records``. The callback handler is
``fxtr.integrations._langgraph_watcher``: ``get_tuple`` here calls its ``claim``, and it calls
the mirror back for the tasks it sees. None of the three imports this module; the limits are
read where they live (set them on ``fxtr.integrations._langgraph_records``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

try:
    from langgraph.checkpoint.memory import InMemorySaver
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "fxtr.integrations.langgraph needs LangGraph, which is not installed. Install it "
        "with `pip install 'pytest-fxtr[langgraph]'`."
    )
    raise ImportError(msg) from exc

from fxtr.integrations._langgraph_mirror import _Mirror
from fxtr.integrations._langgraph_records import _RUNTIME, _Thread
from fxtr.integrations._langgraph_records import MAX_RUNS as MAX_RUNS
from fxtr.integrations._langgraph_records import MAX_STEPS as MAX_STEPS
from fxtr.integrations._langgraph_records import MAX_TASKS as MAX_TASKS
from fxtr.integrations._langgraph_watcher import _WATCHER
from fxtr.integrations._langgraph_watcher import _watching as _watching
from fxtr.tracing import Client

__all__ = ["FluxCheckpointer"]


class FluxCheckpointer(_Mirror, InMemorySaver):
    """A drop-in for ``InMemorySaver`` that mirrors every super-step into ``client``'s graph."""

    def __init__(self, client: Client, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._lock = threading.RLock()
        self._threads: dict[str, _Thread] = {}

    # the calls LangGraph makes --------------------------------------------------------

    def get_tuple(self, config: Any) -> Any:
        """Read a checkpoint; when a run starts, begin a new attempt of its thread."""
        result = super().get_tuple(config)
        if _RUNTIME in config.get("configurable", {}):
            self._guard(self._on_run_start, config)
        return result

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Store the checkpoint, then close the super-steps it completes."""
        result = super().put(config, checkpoint, metadata, new_versions)
        self._guard(self._on_checkpoint, config, checkpoint, metadata)
        return result

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes, then mirror its outcome."""
        super().put_writes(config, writes, task_id, task_path)
        self._guard(self._on_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and what the mirror kept about it."""
        super().delete_thread(thread_id)
        with self._lock:
            self._threads.pop(str(thread_id), None)

    def _on_run_start(self, config: Any) -> None:
        """A run starts: the handler claims it if it saw it start, then a new attempt."""
        configurable = config["configurable"]
        if "thread_id" not in configurable:
            return
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "") or ""
        watched = _WATCHER.claim(self, thread_id, ns)
        self._run_started(thread_id, ns, watched)
