"""The contexts a workflow or step body receives: the authoring API, over the runner."""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fxtr.experiment import _hermetic as hermetic
from fxtr.experiment._array import Array, align_keys
from fxtr.experiment._entity import BoundID, Entity
from fxtr.experiment._graph import Node, Value, format_key
from fxtr.experiment._handle import ArrayHandle, make_handle
from fxtr.experiment._types import Dim
from fxtr.tracing._recorder import recording_into

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition, WorkflowDefinition
    from fxtr.experiment._engine import Run
    from fxtr.experiment._records import Invocation, WorkflowRun

E = TypeVar("E", bound=Entity)

current_step: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "fxtr_current_step", default=None
)
"""The context of the step whose body runs here (the kit's ``call`` batches through it, so
the kit's step bodies stay as they were and their cached entries keep their fingerprints)."""
_OP_NAME = re.compile(r"[^/\[\]]+(\[\d+(,\d+)*\])?")
"""An operation's name: no address syntax, but an index may end it (an agent's ``turn[3]``,
scheduled one at a time, where a mapped step would have keys ``[dim=key]``)."""
R = TypeVar("R")
log = logging.getLogger("fxtr")


class _Entities:
    """Entity storage, the same for workflow and step bodies."""

    _run: Run

    async def store(self, entity: E) -> BoundID[E]:
        """Store an entity; its reference's id is its content hash (so storing is deterministic)."""
        return await self._run.store_entity(entity)

    async def load(self, ref: BoundID[E]) -> E:
        """Load a stored entity."""
        entity: E = await self._run.load_entity(ref)
        return entity


class WorkflowContext(_Entities):
    """What a workflow body schedules with: steps, child workflows, sources, entities, logs."""

    def __init__(self, run: Run, record: WorkflowRun, sample: int | None = None) -> None:
        self._run = run
        self._record = record
        self._names: set[str] = set()
        self._sample = sample

    @property
    def address(self) -> str:
        """This workflow invocation's address."""
        return self._record.address

    @property
    def workflow_name(self) -> str:
        """The ``name=`` of the running ``@workflow``."""
        return self._record.workflow

    @property
    def job_id(self) -> str:
        """The job this invocation belongs to."""
        return self._run.job_id

    @property
    def sample(self) -> int | None:
        """The sample index of this workflow invocation (``None`` when it is not sampled)."""
        return self._sample

    def _child_address(self, name: str) -> str:
        if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
            msg = (
                f"Operation name {name!r} in workflow {self.workflow_name!r} must be a "
                "non-empty str without '/', '[' or ']' (but for a trailing index such as "
                "'turn[3]' or 'tool[3,0]')."
            )
            raise ValueError(msg)
        if name in self._names:
            msg = (
                f"Workflow {self.workflow_name!r} scheduled {name!r} twice in one invocation. "
                "Give every operation a unique, stable name (e.g. f'review_{round}')."
            )
            raise ValueError(msg)
        self._names.add(name)
        return f"{self._record.address}/{name}"

    def run_step(
        self,
        name: str,
        step: StepDefinition[..., Any],
        inputs: Mapping[str, Any],
        map_over: str | Sequence[str] = (),
        *,
        samples: int | None = None,
    ) -> ArrayHandle[Any]:
        """Schedule a step and return a handle to its result at once.

        Args:
            name: the operation's stable name in this workflow (part of its address).
            step: a ``@step``.
            inputs: per parameter, a handle, an ``Array`` or a plain value (a scalar).
            map_over: run the step once per combination of keys of these dimensions;
                inputs without them are broadcast. One name may be given as a str
                (``map_over="model"`` is ``["model"]``).
            samples: run every mapped cell this many times (an int >= 1, e.g. a workflow's
                ``samples: int`` parameter). The handle gets a trailing dimension
                ``sample: int`` with keys ``0..samples-1``; each sample has its own address
                (``...[model=a,sample=3]``) and ``StepContext.sample`` is its index.

        Returns:
            A handle whose dimensions are ``map_over`` followed by the step's own result
            dimensions (and ``sample`` last when sampled).

        Raises:
            SignatureError: an input is missing, unknown, or of the wrong type or dimensions;
                or ``samples`` is given for inputs that already carry a ``sample`` dimension.
            ValueError: ``name`` was already scheduled in this invocation, or ``samples < 1``.
        """
        __tracebackhide__ = True
        handle = self._run.schedule(self, name, step, inputs, map_over, "step", samples)
        assert handle is not None
        return handle

    def run_child_workflow(
        self,
        name: str,
        workflow: WorkflowDefinition[..., Any],
        inputs: Mapping[str, Any],
        map_over: str | Sequence[str] = (),
        *,
        samples: int | None = None,
    ) -> ArrayHandle[Any] | None:
        """Schedule a child workflow; like ``run_step``. Its body runs when scheduled.

        With ``samples``, the body runs once per mapped cell and sample; steps it schedules
        without samples of their own see that index as ``StepContext.sample``.
        """
        __tracebackhide__ = True
        return self._run.schedule(self, name, workflow, inputs, map_over, "workflow", samples)

    def add_source_array(self, name: str, array: Array[Any]) -> ArrayHandle[Any]:
        """Bring fixed data into the graph as a handle (recorded under ``name``)."""
        return self._run.add_source(self, name, array)

    def combine(self, handles: Mapping[str, ArrayHandle[Any]]) -> ArrayHandle[dict[str, Any]]:
        """Put handles side by side: each value becomes ``{name: value, ...}``.

        The result has every dimension of the inputs (shared dimensions must agree on keys;
        the others are broadcast). A missing cell of any input is missing in the result.
        """
        nodes = {k: h._node for k, h in handles.items()}
        dims: list[Dim] = []
        for node in nodes.values():
            for d in node.dims:
                if d not in dims:
                    dims.append(d)
        label = "combine(" + ",".join(f"{k}={n.label}" for k, n in nodes.items()) + ")"
        out = Node(self._run, tuple(dims), dict[str, Any], label, "combine")
        names = [d.name for d in dims]

        async def resolve() -> None:
            values = {k: await n.future for k, n in nodes.items()}
            cause = next((v.cause for v in values.values() if v.cause), None)
            if cause is not None:
                out.future.set_result(Value(None, cause=cause))
                return
            spec = {k: (nodes[k].dims, v.array._keys) for k, v in values.items()}  # type: ignore[union-attr]
            keys = align_keys(spec, names)
            import itertools

            cells: dict[tuple[Any, ...], Any] = {}
            missing: dict[tuple[Any, ...], str] = {}
            for combo in itertools.product(*keys):
                cell: dict[str, Any] = {}
                for k, v in values.items():
                    pos = [names.index(d.name) for d in nodes[k].dims]
                    key = tuple(combo[i] for i in pos)
                    assert v.array is not None
                    cell[k] = v.array._cells[key]
                    if key in v.missing:
                        missing[combo] = v.missing[key]
                cells[combo] = cell
            out.future.set_result(
                Value(Array(tuple(dims), tuple(keys), cells, dict[str, Any]), missing)
            )

        self._run.spawn(resolve())
        return make_handle(out)

    def stack(self, handles: Mapping[str | int, ArrayHandle[Any]], dim: str) -> ArrayHandle[Any]:
        """Stack handles of the same type along a new leading dimension ``dim``.

        Raises:
            ValueError: the handles differ in dimensions or ``dim`` already exists.
        """
        nodes = list(handles.values())
        if not nodes:
            msg = "stack() needs at least one handle."
            raise ValueError(msg)
        first = nodes[0]
        for n in nodes[1:]:
            if n._node.dims != first._node.dims:
                msg = (
                    f"stack() needs handles with the same dimensions; {n!r} differs from {first!r}."
                )
                raise ValueError(msg)
        if any(d.name == dim for d in first._node.dims):
            msg = f"stack(dim={dim!r}): the handles already have a dimension {dim!r}."
            raise ValueError(msg)
        keys = tuple(handles)
        key_type = int if all(type(k) is int for k in keys) else str
        if key_type is str and not all(isinstance(k, str) for k in keys):
            msg = f"stack() keys must all be str or all be int, got {keys!r}."
            raise TypeError(msg)
        new_dim = Dim(dim, key_type)
        label = (
            f"stack[{dim}]("
            + ",".join(f"{format_key(k)}={h._node.label}" for k, h in handles.items())
            + ")"
        )
        out = Node(self._run, (new_dim, *first._node.dims), first._node.value_type, label, "stack")

        async def resolve() -> None:
            values = [await h._node.future for h in nodes]
            cause = next((v.cause for v in values if v.cause), None)
            if cause is not None:
                out.future.set_result(Value(None, cause=cause))
                return
            inner = values[0].array
            assert inner is not None
            cells: dict[tuple[Any, ...], Any] = {}
            missing: dict[tuple[Any, ...], str] = {}
            for k, v in zip(keys, values, strict=True):
                assert v.array is not None
                if v.array._keys != inner._keys:
                    out.future.set_exception(
                        ValueError(f"stack(dim={dim!r}): inputs have different keys.")
                    )
                    return
                for key, cell in v.array.items():
                    cells[(k, *key)] = cell
                    if key in v.missing:
                        missing[(k, *key)] = v.missing[key]
            array = Array(out.dims, (keys, *inner._keys), cells, out.value_type)
            out.future.set_result(Value(array, missing))

        self._run.spawn(resolve())
        return make_handle(out)

    def log(self, message: str) -> None:
        """Write a line to this workflow invocation's log."""
        self._record.logs.append(str(message))
        log.info("%s: %s", self.address, message)


class StepContext(_Entities):
    """What a step body receives: its address, entity storage and a log."""

    def __init__(
        self,
        run: Run,
        step: StepDefinition[..., Any],
        invocation: Invocation,
        sample: int | None = None,
    ) -> None:
        self._run = run
        self._step = step
        self._invocation = invocation
        self._sample = sample
        self._blobs: dict[str, bytes] = {}
        """Parts queued by ``put_blobs``: written with this invocation's result, which names
        them (served only while they are all in the store)."""

    @property
    def sample(self) -> int | None:
        """The sample index of this invocation, for seeds (``None`` when not sampled).

        Set by ``run_step(..., samples=K)`` (``0..K-1``), or inherited from a sampled child
        workflow that scheduled this step.
        """
        return self._sample

    @property
    def cache_key(self) -> str:
        """The address this invocation's result is stored at."""
        return self._invocation.address

    address = cache_key

    @property
    def step_name(self) -> str:
        """The ``name=`` of the running ``@step``."""
        return self._step.name

    @property
    def attempt(self) -> int:
        """The job attempt this invocation runs in (from 1)."""
        return self._run.attempt

    @property
    def job_id(self) -> str:
        """The job this invocation belongs to."""
        return self._run.job_id

    def log(self, message: str) -> None:
        """Write a line to this invocation's log (shown beside it in reports)."""
        self._invocation.logs.append(str(message))
        log.info("%s: %s", self.cache_key, message)

    def put_blobs(self, blobs: Mapping[str, bytes]) -> None:
        """Queue content-addressed parts to be stored with this invocation's result.

        Each key must be its bytes' digest (``fxtr.store.blob_digest``). The parts are written
        in the same transaction as the result (none when the step fails), a part the store
        holds already is not written again, and the cached result names them: it is served
        only while every one is in the store (a missing or damaged part makes it a miss).

        Raises:
            ValueError: a key is not the digest of its bytes.
        """
        from fxtr.store import blob_digest

        for digest, data in blobs.items():
            if not isinstance(data, bytes) or blob_digest(data) != digest:
                msg = (
                    f"put_blobs got a part under {digest!r:.20} that is not the digest of its "
                    "bytes; name each part by fxtr.store.blob_digest(data)."
                )
                raise ValueError(msg)
        self._blobs.update(blobs)

    async def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The parts present among ``digests``; a missing or damaged one is absent.

        Parts queued by this invocation, or by others of this run and not yet written, are
        read from memory; the rest from the store.
        """
        wanted = list(dict.fromkeys(digests))
        pending = self._run._batch.blobs if self._run._batch is not None else {}
        out = {d: b for d in wanted if (b := self._blobs.get(d, pending.get(d))) is not None}
        rest = [d for d in wanted if d not in out]
        if rest:
            out.update(self._run.store.get_blobs(rest))
        return out

    async def _enter(self, body: Awaitable[R]) -> R:
        watch = hermetic.watching.set(self._invocation.warnings if self._run.hermetic else None)
        step_token = current_step.set(self)
        try:
            with recording_into(self._invocation):
                return await body
        finally:
            current_step.reset(step_token)
            hermetic.watching.reset(watch)
