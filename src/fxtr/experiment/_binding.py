"""Scheduling and binding: an operation's inputs checked against its callee, and planned.

``bind`` checks handles and values against a step's or workflow's parameters at scheduling
time (types, dimensions, broadcasting) and raises one ``SignatureError`` listing every
problem. ``plan_stream`` expands a resolved operation into one ``Plan`` per combination
of mapped keys (and sample), a chunk at a time: its address, arguments and fingerprints.
Called by the runner (``_engine``) and by ``_jobs`` for a job's root inputs; calls only
``_graph`` and the types.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fxtr.experiment._array import Array, align_keys
from fxtr.experiment._encoding import EncodingError, encode_text, fingerprint_text
from fxtr.experiment._entity import BoundID, Entity
from fxtr.experiment._graph import SAMPLE, Node, Value, describe_node, format_key
from fxtr.experiment._handle import ArrayHandle
from fxtr.experiment._signature import NO_DEFAULT, Param
from fxtr.experiment._types import (
    Dim,
    bound_target,
    check_value,
    format_dims,
    is_assignable,
    is_entity_type,
    type_name,
)
from fxtr.experiment.errors import SignatureError

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run


class Binding:
    """How one input of an operation reaches the callee's parameter."""

    __slots__ = ("loads", "mapped", "node", "param", "rest")

    def __init__(self, param: Param, node: Node, map_over: Sequence[str], loads: bool) -> None:
        self.param = param
        self.node = node
        self.loads = loads
        names = [d.name for d in node.dims]
        self.mapped = [(map_over.index(n), i) for i, n in enumerate(names) if n in map_over]
        """(position in map_over, position in the node's dims) of each mapped dimension."""
        order = [d.name for d in param.dims]
        self.rest = [names.index(n) for n in order]
        """Positions in the node's dims of the dimensions the parameter keeps, in its order."""


class Operation:
    """One scheduled operation: where it is, what feeds it, and how it expands."""

    __slots__ = ("address", "bindings", "inherited", "map_over", "samples")

    def __init__(
        self,
        address: str,
        bindings: list[Binding],
        map_over: list[str],
        samples: int | None,
        inherited: int | None,
    ) -> None:
        self.address = address
        self.bindings = bindings
        self.map_over = map_over
        self.samples = samples
        """``samples=K`` of ``run_step``/``run_child_workflow``, or None."""
        self.inherited = inherited
        """The sample index of the workflow invocation that scheduled it, if sampled."""

    def expand(self, keylists: list[tuple[Any, ...]]) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The dimensions and key lists an operation's invocations range over (sample last)."""
        if self.samples is None:
            return self.map_over, keylists
        return [*self.map_over, SAMPLE], [*keylists, tuple(range(self.samples))]

    def sample_of(self, combo: tuple[Any, ...]) -> int | None:
        """The sample index an invocation at ``combo`` sees."""
        return combo[-1] if self.samples is not None else self.inherited  # type: ignore[no-any-return]


Chunk = tuple[int, list["Plan"], dict[str, str]]
"""What ``plan_stream`` yields: where the chunk starts, its plans, its new input texts."""


class Plan:
    """One invocation an operation expands into, before it is resolved."""

    __slots__ = ("address", "fingerprint", "fps", "kwargs", "sample", "skip")

    def __init__(
        self,
        address: str,
        kwargs: dict[str, Any],
        fps: dict[str, str],
        fingerprint: str | None,
        skip: str | None = None,
        sample: int | None = None,
    ) -> None:
        self.address = address
        self.kwargs = kwargs
        self.fps = fps
        """Fingerprint of each input."""
        self.fingerprint = fingerprint
        self.skip = skip
        """Why it cannot run (an input failed, or cannot be encoded)."""
        self.sample = sample


def const_node(run: Run, value: Any, label_hint: str) -> Node:
    """A resolved node for a value given directly (an Array, or a plain value)."""
    if isinstance(value, Array):
        array = value
        dims = value.dim_specs
        value_type = value.value_type
    else:
        if isinstance(value, Entity):
            msg = (
                f"Input {label_hint!r} is an Entity object; store it first "
                "(ref = await context.store(obj)) and pass the reference."
            )
            raise SignatureError(msg)
        array = Array.scalar(value)
        dims = ()
        value_type = static_type(value)
    try:
        fp = fingerprint_text(encode_text(array))
    except (EncodingError, ValueError, RecursionError) as exc:
        # ValueError: an int over Python's 4,300-digit string limit; UnicodeEncodeError (a
        # ValueError): a lone surrogate; RecursionError: nesting deeper than the stack.
        reason = "nested too deeply to encode" if isinstance(exc, RecursionError) else str(exc)
        msg = (
            f"Input {label_hint!r} cannot be recorded: {reason}. Pass JSON-like values "
            "(str without lone surrogates, int under 4,300 digits, bounded nesting), "
            "entities or Arrays of them."
        )
        raise SignatureError(msg) from None
    return Node(run, dims, value_type, f"value:{fp[:16]}", f"value {label_hint!r}", Value(array))


def bind(
    run: Run,
    where: str,
    callee: str,
    params: Mapping[str, Param],
    inputs: Mapping[str, Any],
    map_over: Sequence[str],
    *,
    concrete_ok: bool,
) -> tuple[list[Binding], tuple[Dim, ...], dict[str, Any]]:
    """Check inputs against a callee's parameters; all problems in one SignatureError.

    Returns:
        The bindings, the mapped dimensions with key types, and the concrete values of
        parameters that take plain values (workflows only).
    """
    problems: list[str] = []
    if not isinstance(inputs, Mapping):
        msg = f"{where}: inputs must be a dict of parameter name to handle or value."
        raise SignatureError(msg)
    if isinstance(map_over, str) or len(set(map_over)) != len(map_over):
        msg = f"{where}: map_over must be a list of distinct dimension names, got {map_over!r}."
        raise SignatureError(msg)
    for name in inputs:
        if name not in params:
            problems.append(
                f"{callee} has no parameter {name!r} (its parameters: "
                f"{', '.join(params) or 'none'}); remove it or rename it"
            )
    bindings: list[Binding] = []
    concrete: dict[str, Any] = {}
    mapped_types: dict[str, Dim] = {}
    for name, param in params.items():
        if name not in inputs and concrete_ok and param.default is not NO_DEFAULT:
            concrete[name] = param.default
            continue
        if name not in inputs:
            problems.append(f"{callee} needs input {name!r} ({param.describe()}); pass it")
            continue
        value = inputs[name]
        if param.kind == "value" and concrete_ok:
            if isinstance(value, ArrayHandle):
                problems.append(
                    f"{callee} takes {param.describe()} as a plain value but got a handle; "
                    "annotate the parameter ScalarHandle[...] to pass a handle"
                )
            elif not check_value(value, param.value_type):
                problems.append(
                    f"{callee} expects {param.describe()} but got {type(value).__name__} "
                    f"{value!r:.60}"
                )
            else:
                concrete[name] = value
            continue
        if isinstance(value, ArrayHandle):
            node = value._node
            if node.run is not run:
                problems.append(f"input {name!r} is a handle from another job or pass")
                continue
        else:
            try:
                node = const_node(run, value, name)
            except SignatureError as exc:
                problems.append(str(exc))
                continue
        for dim in node.dims:
            if dim.name in map_over:
                seen = mapped_types.setdefault(dim.name, dim)
                if seen.key_type is not dim.key_type:
                    problems.append(
                        f"dimension {dim.name!r} has {seen.key_type.__name__} keys in one "
                        f"input and {dim.key_type.__name__} keys in {name!r}"
                    )
        rest = [d for d in node.dims if d.name not in map_over]
        want = param.dims
        if sorted(rest) != sorted(want):
            extra = [d.name for d in rest if d not in want]
            lacking = [d.name for d in want if d not in rest]
            fix = []
            if extra:
                fix.append(f"Map over {', '.join(map(repr, extra))}")
            if lacking:
                fix.append(f"give it dimension(s) {', '.join(map(repr, lacking))}")
            problems.append(
                f"{callee} expects {param.describe()!r} but got {describe_node(node)}"
                + (f" (mapped over {list(map_over)!r})" if map_over else "")
                + ". "
                + " or ".join(fix)
                + " or change the annotation"
            )
            continue
        if not is_assignable(node.value_type, param.value_type):
            problems.append(
                f"{callee} expects {param.describe()!r} but got {describe_node(node)}. "
                f"Pass {type_name(param.value_type)} values or change the annotation"
            )
            continue
        loads = bound_target(node.value_type) is not None and is_entity_type(param.value_type)
        bindings.append(Binding(param, node, map_over, loads))
    for name in map_over:
        if name not in mapped_types and not problems:
            have = sorted({d.name for b in bindings for d in b.node.dims})
            problems.append(
                f"map_over names dimension {name!r} but no input has it (inputs have "
                f"{have!r}); map over one of those"
            )
    if problems:
        msg = f"{where}: " + "; ".join(problems) + "."
        raise SignatureError(msg)
    return bindings, tuple(mapped_types[d] for d in map_over), concrete


def align(
    address: str, bindings: list[Binding], values: list[Value], map_over: list[str]
) -> list[tuple[Any, ...]]:
    spec = {
        b.param.name: (b.node.dims, v.array._keys)  # type: ignore[union-attr]
        for b, v in zip(bindings, values, strict=True)
    }
    try:
        return align_keys(spec, map_over)
    except ValueError as exc:
        msg = f"Operation {address!r}: {exc}"
        raise ValueError(msg) from None


def slicer(
    b: Binding, value: Value
) -> tuple[Callable[[tuple[Any, ...]], Any], Callable[[tuple[Any, ...]], Any]]:
    """Functions giving, per mapped combination, the parameter's value and its missing cells."""
    array = value.array
    assert array is not None
    cells = array._cells
    missing = value.missing
    nd = len(b.node.dims)
    if not b.rest:
        if not b.mapped:
            only = cells[()] if nd == 0 else None
            cause = missing.get(())
            return (lambda combo: only), (lambda combo: cause)
        if len(b.mapped) == nd and [j for _, j in b.mapped] == list(range(nd)):
            picks = [i for i, _ in b.mapped]
            if nd == 1:
                # the common case (one mapped dimension): index by the bare key
                (pick,) = picks
                flat = {k[0]: v for k, v in cells.items()}
                flat_missing = {k[0]: c for k, c in missing.items()}
                return (
                    lambda combo: flat[combo[pick]],
                    (lambda combo: flat_missing.get(combo[pick]))
                    if flat_missing
                    else (lambda combo: None),
                )

            def full_key(combo: tuple[Any, ...]) -> tuple[Any, ...]:
                return tuple(combo[i] for i in picks)

            return (
                lambda combo: cells[full_key(combo)],
                (lambda combo: missing.get(full_key(combo))) if missing else (lambda c: None),
            )
    # general case: group cells by their mapped keys once
    keep_dims = tuple(b.node.dims[j] for j in b.rest)
    keep_keys = tuple(array._keys[j] for j in b.rest)
    groups: dict[tuple[Any, ...], dict[tuple[Any, ...], Any]] = {}
    group_missing: dict[tuple[Any, ...], dict[tuple[Any, ...], str]] = {}
    mapped_pos = [j for _, j in sorted(b.mapped)]
    for key, v in cells.items():
        mk = tuple(key[j] for j in mapped_pos)
        rk = tuple(key[j] for j in b.rest)
        groups.setdefault(mk, {})[rk] = v
        if key in missing:
            group_missing.setdefault(mk, {})[rk] = missing[key]
    order = [i for i, _ in sorted(b.mapped)]
    built: dict[tuple[Any, ...], Array[Any]] = {}

    def get(combo: tuple[Any, ...]) -> Any:
        mk = tuple(combo[i] for i in order)
        sub = built.get(mk)
        if sub is None:
            group = groups[mk]
            sub = built[mk] = Array(
                keep_dims,
                keep_keys,
                {k: group[k] for k in itertools.product(*keep_keys)},
                b.node.value_type,
            )
        return sub

    def missing_of(combo: tuple[Any, ...]) -> Any:
        return group_missing.get(tuple(combo[i] for i in order))

    return get, missing_of


def plan_stream(
    run: Run,
    op: Operation,
    step: StepDefinition[..., Any],
    values: list[Value],
    chunk: int,
) -> tuple[list[tuple[Any, ...]], Iterator[Chunk]]:
    """The invocations a step operation expands into, planned ``chunk`` at a time.

    Nothing is planned before the iterator is advanced: each ``next`` plans the following
    ``chunk`` combinations (addresses, arguments, fingerprints), so the first invocations
    can be resolved and started while the rest of a large operation is still unplanned, and
    at most the chunks in flight are held.

    Returns:
        Every combination of mapped keys (and sample), in order, and an iterator of
        ``(position of the chunk's first combination, its plans, the canonical texts of
        inputs this pass has not met before by fingerprint)``: the caller queues the texts
        for the store before any of the chunk's records (an earlier attempt's records name
        values already stored).
    """
    address, bindings = op.address, op.bindings
    keylists = align(address, bindings, values, op.map_over) if op.map_over else []
    map_over, keylists = op.expand(keylists)
    combos = list(itertools.product(*keylists))
    slices = [slicer(b, v) for b, v in zip(bindings, values, strict=True)]
    return combos, _plans(run, op, step, bindings, slices, combos, map_over, keylists, chunk)


def _plans(
    run: Run,
    op: Operation,
    step: StepDefinition[..., Any],
    bindings: list[Binding],
    slices: list[tuple[Callable[[tuple[Any, ...]], Any], Callable[[tuple[Any, ...]], Any]]],
    combos: list[tuple[Any, ...]],
    map_over: list[str],
    keylists: list[tuple[Any, ...]],
    chunk: int,
) -> Iterator[Chunk]:
    base_hash = hashlib.sha256(f"{step.name}\0{step.version!r}\0{step.code_id}".encode())
    names = sorted(b.param.name for b in bindings)
    fp_memo: list[dict[Any, str]] = [{} for _ in bindings]
    verify = run.mode == "verify"
    values_seen = run.values_seen
    pairs = list(enumerate(zip(bindings, slices, strict=True)))
    plans: list[Plan] = []
    texts: dict[str, str] = {}
    start = 0
    for combo, inv_address in zip(combos, addresses(op.address, map_over, keylists), strict=True):
        if len(plans) >= chunk:
            yield start, plans, texts
            start += len(plans)
            plans, texts = [], {}
            for memo in fp_memo:
                if len(memo) > MEMO_MAX:  # a memo of every key would grow with the job
                    memo.clear()
        kwargs: dict[str, Any] = {}
        fps: dict[str, str] = {}
        skip: str | None = None
        for i, (b, (get, missing_of)) in pairs:
            gone = missing_of(combo)
            if gone:
                skip = gone if isinstance(gone, str) else next(iter(gone.values()))
                break
            value = kwargs[b.param.name] = get(combo)
            if verify:
                # replayed inputs come from the record and the already-compared operation
                # descriptors, so they equal the recorded ones; no need to hash them again
                continue
            key = id(value) if type(value) is Array else memo_key(value)
            fp = fp_memo[i].get(key) if key is not None else None
            if fp is None:
                try:
                    text = encode_text(value)
                except EncodingError as exc:
                    skip = f"input {b.param.name!r} cannot be encoded: {exc}"
                    break
                fp = fingerprint_text(text)
                if fp not in values_seen:
                    run.see_value(fp)
                    texts[fp] = text
                if key is not None:
                    fp_memo[i][key] = fp
            fps[b.param.name] = fp
        if skip is not None:
            plans.append(Plan(inv_address, {}, {}, None, skip))
            continue
        sample = op.sample_of(combo)
        if verify:
            fingerprint = None
        else:
            h = base_hash.copy()
            for name in names:
                h.update(f"\0{name}={fps[name]}".encode())
            if sample is not None:  # a sample's index is an input (steps seed from it)
                h.update(f"\0#sample={sample}".encode())
            fingerprint = h.hexdigest()
        plans.append(Plan(inv_address, kwargs, fps, fingerprint, sample=sample))
    if plans or not start:
        yield start, plans, texts


MEMO_MAX = 4096
"""Input fingerprints a stream remembers per parameter before it starts afresh."""


def memo_key(value: Any) -> Any:
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return (t, value)
    if t is BoundID:
        return (t, value.id)
    return None


def addresses(
    address: str, map_over: Sequence[str], keylists: Sequence[tuple[Any, ...]]
) -> Iterator[str]:
    """The address of every combination of keys, in ``itertools.product`` order (lazily)."""
    if not map_over:
        return iter([address])
    parts = [
        [f"{d}={format_key(k)}" for k in keys] for d, keys in zip(map_over, keylists, strict=True)
    ]
    return (f"{address}[{','.join(p)}]" for p in itertools.product(*parts))


def key_suffix(map_over: Sequence[str], combo: tuple[Any, ...]) -> str:
    return (
        "[" + ",".join(f"{d}={format_key(k)}" for d, k in zip(map_over, combo, strict=True)) + "]"
    )


def check_samples(where: str, samples: Any, inputs: Mapping[str, Any]) -> int | None:
    """``samples=`` as given to ``run_step``/``run_child_workflow``, checked."""
    if samples is None:
        return None
    if isinstance(samples, ArrayHandle):
        msg = (
            f"{where}: samples= takes an int, got a handle. Declare the workflow parameter as "
            "a plain value ('samples: int') and pass it."
        )
        raise SignatureError(msg)
    if isinstance(samples, bool) or not isinstance(samples, int):
        msg = f"{where}: samples= must be an int >= 1, got {type(samples).__name__} {samples!r}."
        raise SignatureError(msg)
    if samples < 1:
        msg = f"{where}: samples= must be at least 1, got {samples}."
        raise ValueError(msg)
    for name, value in inputs.items() if isinstance(inputs, Mapping) else ():
        if isinstance(value, ArrayHandle):
            dims, shown = value._node.dims, describe_node(value._node)
        elif isinstance(value, Array):
            dims, shown = value.dim_specs, f"an Array with dims {format_dims(value.dim_specs)}"
        else:
            continue
        if any(d.name == SAMPLE for d in dims):
            msg = (
                f"{where}: input {name!r} already has a dimension 'sample' ({shown}), so "
                "samples= would sample samples. Map over 'sample' instead "
                "(map_over=[..., 'sample']) and leave out samples=."
            )
            raise SignatureError(msg)
    return samples


def result_dims(where: str, mapped: tuple[Dim, ...], own: tuple[Dim, ...]) -> tuple[Dim, ...]:
    clash = {d.name for d in mapped} & {d.name for d in own}
    if clash:
        msg = (
            f"{where}: the result would have dimension(s) {sorted(clash)!r} twice (mapped over "
            "and returned by the callee). Rename one of them."
        )
        raise SignatureError(msg)
    return mapped + own


def static_type(value: Any) -> Any:
    if isinstance(value, BoundID):
        return BoundID[value.entity_type]  # type: ignore[name-defined]
    if value is None:
        return type(None)
    if type(value) in (str, int, float, bool):
        return type(value)
    return Any
