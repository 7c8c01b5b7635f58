"""The job's value graph: nodes that handles point at, and the values they resolve to.

A ``Node`` resolves once to a ``Value``: an ``Array`` whose missing cells name their cause.
Scheduling (``_binding``) makes nodes; the runner (``_engine``) resolves them; handles
(``_handle``) and the authoring contexts (``_context``) read them. This module calls none of
those: it knows the runner only as the thing that spawns tasks and loads entities.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import types
import typing
from typing import TYPE_CHECKING, Any

from fxtr.experiment._array import Array
from fxtr.experiment._encoding import decode_text
from fxtr.experiment._entity import BoundID
from fxtr.experiment._types import (
    Dim,
    bound_target,
    format_dims,
    is_entity_type,
    record_fields,
    type_name,
)
from fxtr.experiment.errors import SignatureError, UpstreamFailedError

if TYPE_CHECKING:
    from fxtr.experiment._engine import Run

SAMPLE = "sample"
"""The dimension ``samples=K`` adds: ``sample: int`` with keys ``0..K-1``."""
SAMPLE_DIM = Dim(SAMPLE, int)
_KEY_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:@+")
_NO_MISSING: dict[tuple[Any, ...], str] = {}
"""The ``missing`` of every complete value (shared, never written to)."""


def format_key(key: str | int) -> str:
    """A map key as it appears in an address; quoted when it holds address syntax."""
    if isinstance(key, int) or (key and all(c in _KEY_SAFE for c in key)):
        return str(key)
    return json.dumps(key, ensure_ascii=False)


class Value:
    """What a node resolves to: an array whose missing cells name their cause.

    ``cause`` set means the whole array is missing (even its keys are unknown).
    """

    __slots__ = ("array", "cause", "missing")

    def __init__(
        self,
        array: Any,
        missing: dict[tuple[Any, ...], str] | None = None,
        cause: str | None = None,
    ) -> None:
        self.array = array
        """The ``Array`` a node resolves to; for one invocation's outcome, its bare value."""
        self.missing = missing if missing else _NO_MISSING
        self.cause = cause


class Node:
    """A value in the job's graph that handles point at; resolves once."""

    __slots__ = ("dims", "future", "label", "producer", "run", "value_type")

    def __init__(
        self,
        run: Run,
        dims: tuple[Dim, ...],
        value_type: Any,
        label: str,
        producer: str,
        value: Value | None = None,
    ) -> None:
        self.run = run
        self.dims = dims
        self.value_type = value_type
        self.label = label
        """Stable name of the operation that makes it (used to compare replays)."""
        self.producer = producer
        """How error messages name its origin: "step 'qa.answer'", "input 'prompts'"."""
        self.future: asyncio.Future[Value] = asyncio.get_running_loop().create_future()
        if value is not None:
            self.future.set_result(value)

    async def observe(self) -> Array[Any]:
        value = await self.future
        if value.cause is not None:
            msg = f"{self.label!r} has no value: {value.cause}"
            raise UpstreamFailedError(msg)
        if value.missing:
            key, cause = next(iter(value.missing.items()))
            assert value.array is not None
            msg = (
                f"{self.label!r} has no value at {len(value.missing)} of {len(value.array)} "
                f"cell(s); first at {key!r}: {cause}. Catch UpstreamFailedError to go on "
                "without them."
            )
            raise UpstreamFailedError(msg)
        array: Array[Any] = value.array
        return array


def describe_node(node: Node) -> str:
    """A node as error messages show it: type, dimensions and origin."""
    kind = "ScalarHandle" if not node.dims else "ArrayHandle"
    dims = f" with dims {format_dims(node.dims)}" if node.dims else ""
    return f"{kind}[{type_name(node.value_type)}]{dims} from {node.producer}"


def decoded(text: str | None) -> Any:
    """A recorded or cached result's value."""
    assert text is not None
    return decode_text(text)


def field_node(source: Node, path: tuple[str, ...]) -> Node:
    """A node projecting fields of each value of ``source`` (entities loaded)."""
    value_type = source.value_type
    for name in path:
        target = bound_target(value_type)
        if target is not None:
            value_type = target
        optional = False
        if typing.get_origin(value_type) in (
            typing.Union,
            types.UnionType,
        ):
            members = [a for a in typing.get_args(value_type) if a is not type(None)]
            optional = len(members) != len(typing.get_args(value_type))
            if len(members) == 1:
                value_type = members[0]
                target = bound_target(value_type)
                if target is not None:
                    value_type = target
        # an entity's fields, or a dataclass's or a TypedDict's
        fields = value_type.field_types() if is_entity_type(value_type) else None
        fields = record_fields(value_type) if fields is None else fields
        if fields is not None:
            if name not in fields:
                msg = (
                    f"field({name!r}): {type_name(value_type)} has no field {name!r}; its fields "
                    f"are {', '.join(fields)}."
                )
                raise SignatureError(msg)
            value_type = fields[name]
        elif value_type is Any or typing.get_origin(value_type) is dict or value_type is dict:
            args = typing.get_args(value_type)
            value_type = args[1] if len(args) == 2 else Any
        else:
            msg = f"field({name!r}): values of type {type_name(value_type)} have no fields."
            raise SignatureError(msg)
        if optional:
            value_type = value_type | None
    run = source.run
    label = f"{source.label}.{'.'.join(path)}"
    node = Node(run, source.dims, value_type, label, source.producer)

    async def project() -> None:
        value = await source.future
        if value.cause is not None or value.array is None:
            node.future.set_result(value)
            return
        out: dict[tuple[Any, ...], Any] = {}
        for key, v in value.array.items():
            if key in value.missing:
                out[key] = None
                continue
            for name in path:
                if v is None:
                    break
                if isinstance(v, BoundID):
                    v = await run.load_entity(v)
                v = v[name] if isinstance(v, dict) else getattr(v, name)
            out[key] = v
        array = Array(value.array.dim_specs, value.array._keys, out, node.value_type)
        node.future.set_result(Value(array, value.missing))

    run.start_work(project())
    return node


def assemble(
    address: str,
    node: Node,
    combos: list[tuple[Any, ...]],
    own_dims: tuple[Dim, ...],
    outcomes: list[Value],
    label: str,
    sampled: bool = False,
) -> Value:
    """The operation's result: mapped keys (and ``sample``), then the callee's own dims.

    A sampled operation's ``sample`` dimension comes last in its node; invocations range
    over it with the mapped keys, so the cells are put together with it there and moved.
    """
    if own_dims and sampled:
        inner = (*node.dims[: -1 - len(own_dims)], SAMPLE_DIM, *own_dims)
        value = _assemble_cells(address, inner, node.value_type, combos, own_dims, outcomes, label)
        return transposed(value, node.dims)
    return _assemble_cells(address, node.dims, node.value_type, combos, own_dims, outcomes, label)


def transposed(value: Value, dims: tuple[Dim, ...]) -> Value:
    """``value`` with its array's dimensions in the order of ``dims`` (missing cells too)."""
    array = value.array
    names = [d.name for d in dims]
    if array is None or list(array.dims) == names:
        return value
    order = [list(array.dims).index(n) for n in names]
    missing = {tuple(k[i] for i in order): c for k, c in value.missing.items()}
    return Value(array.transpose(names), missing, value.cause)


def _assemble_cells(
    address: str,
    dims: tuple[Dim, ...],
    value_type: Any,
    combos: list[tuple[Any, ...]],
    own_dims: tuple[Dim, ...],
    outcomes: list[Value],
    label: str,
) -> Value:
    mapped_n = len(dims) - len(own_dims)
    if not own_dims:
        cells: dict[tuple[Any, ...], Any] = {}
        missing: dict[tuple[Any, ...], str] = {}
        for combo, v in zip(combos, outcomes, strict=True):
            if v.cause is not None:
                cells[combo] = None
                missing[combo] = v.cause
            else:
                cells[combo] = v.array
        keys = _mapped_keys(combos, mapped_n)
        return Value(Array(dims, keys, cells, value_type), missing)
    own_keys: tuple[tuple[Any, ...], ...] | None = None
    for v in outcomes:
        if v.cause is None and v.array is not None:
            arr = v.array
            if own_keys is None:
                own_keys = arr._keys
            elif arr._keys != own_keys:
                msg = (
                    f"Operation {address!r} ({label}) returned arrays with different keys in "
                    "different invocations; an operation's result must be dense. Return the "
                    "same keys from every invocation."
                )
                raise ValueError(msg)
    if own_keys is None:
        first = next((v.cause for v in outcomes if v.cause), "no invocation succeeded")
        return Value(None, cause=first)
    cells = {}
    missing = {}
    for combo, v in zip(combos, outcomes, strict=True):
        for own in itertools.product(*own_keys):
            key = combo + own
            if v.cause is not None or v.array is None:
                cells[key] = None
                missing[key] = v.cause or "missing"
            else:
                cells[key] = v.array._cells[own]
                if own in v.missing:
                    missing[key] = v.missing[own]
    keys = _mapped_keys(combos, mapped_n) + own_keys
    ordered = {k: cells[k] for k in itertools.product(*keys)}
    return Value(Array(dims, keys, ordered, value_type), missing)


def _mapped_keys(combos: list[tuple[Any, ...]], n: int) -> tuple[tuple[Any, ...], ...]:
    keys: list[dict[Any, None]] = [{} for _ in range(n)]
    for combo in combos:
        for i in range(n):
            keys[i][combo[i]] = None
    return tuple(tuple(k) for k in keys)
