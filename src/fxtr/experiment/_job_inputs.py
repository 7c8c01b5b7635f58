"""A job's inputs: checked, encoded for its record, entities stored, bound to the root.

``launch`` prepares what it was given here before the root workflow runs: entities given
where the workflow expects references are stored (``prepare_inputs``), every input gets its
canonical text for the job record (``encoded_inputs``), and the inputs are bound to the root
workflow's parameters as handles (``root_kwargs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fxtr.experiment._array import Array, origin_of
from fxtr.experiment._definition import WorkflowDefinition
from fxtr.experiment._encoding import EncodingError, encode_text, fingerprint_text
from fxtr.experiment._engine import Run
from fxtr.experiment._entity import Entity
from fxtr.experiment._handle import make_handle
from fxtr.experiment._types import bound_target, check_value, is_entity_type, type_name
from fxtr.experiment.errors import SignatureError


def check_root(root: Any) -> str:
    if not isinstance(root, str) or not root.strip() or any(c in root for c in "/[]"):
        msg = (
            f"root={root!r}: the root of every address must be a non-empty str without '/', "
            "'[' or ']' (for example an eval's id 'evals.test_qa::test_qa')."
        )
        raise ValueError(msg)
    return root


def encoded_inputs(prepared: dict[str, Any]) -> dict[str, str]:
    """The launch inputs' canonical texts; an input with none is refused by name."""
    out = {}
    for name, value in prepared.items():
        try:
            text = encode_text(value)
            text.encode()
        except (EncodingError, UnicodeError) as exc:
            reason = "a str with a lone surrogate" if isinstance(exc, UnicodeError) else exc
            msg = (
                f"Input {name!r} cannot be recorded: {reason}. Pass JSON-like values, "
                "entities or Arrays of them."
            )
            raise SignatureError(msg) from None
        out[name] = text
    return out


async def prepare_inputs(
    wf: WorkflowDefinition[..., Any], inputs: Mapping[str, Any], run: Run
) -> dict[str, Any]:
    """Store entities given where references are expected; keep everything else."""
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if hasattr(type(value), "__fxtr_array__"):  # a project array's snapshot
            value = value.__fxtr_array__()
        param = wf.signature.params.get(name)
        wants_ref = param is not None and (
            bound_target(param.value_type) is not None or is_entity_type(param.value_type)
        )
        if wants_ref and isinstance(value, Entity):
            value = await run.store_entity(value)
        elif (
            wants_ref
            and isinstance(value, Array)
            and any(isinstance(v, Entity) for v in value.values())
        ):
            refs = [
                await run.store_entity(v) if isinstance(v, Entity) else v for v in value.values()
            ]
            value = Array.from_cells(value.dim_specs, value._keys, refs, param.value_type)  # type: ignore[union-attr]
        out[name] = value
    return out


def input_sources(inputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The project-array snapshots the inputs come from, by input name (for the record).

    A ``Snapshot`` given as an input, an ``Array`` a snapshot made (``Snapshot.array()``),
    or an array whose every value was read from one snapshot (``load_cases("array:...")``
    cases parametrized into an eval): ``{"array": NAME, "snapshot": N, "digest": ...}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, value in inputs.items():
        source = getattr(value, "source", None) if hasattr(type(value), "__fxtr_array__") else None
        if isinstance(value, Array):
            source = value.source or origin_of(value.values())
        if source:
            out[name] = dict(source)
    return out


def root_kwargs(
    wf: WorkflowDefinition[..., Any], inputs: Mapping[str, Any], run: Run
) -> dict[str, Any]:
    bindings, _, concrete = run.bind(
        f"Launching workflow {wf.name!r}",
        f"Workflow {wf.name!r}",
        wf.signature.params,
        inputs,
        [],
        concrete_ok=True,
    )
    for b in bindings:
        b.node.producer = f"input {b.param.name!r}"
        b.node.label = f"input:{b.param.name}:{b.node.label}"
        if b.node.value_type is Any:
            # an Array built without value_type: check its values against the parameter
            array = b.node.future.result().array
            assert array is not None
            bad = [(k, v) for k, v in array.items() if not check_value(v, b.param.value_type)]
            if bad:
                key, value = bad[0]
                msg = (
                    f"Launching workflow {wf.name!r}: input {b.param.name!r} should hold "
                    f"{type_name(b.param.value_type)} values, but {len(bad)} do not; first at "
                    f"{key!r}: {type(value).__name__} {value!r:.60}."
                )
                if isinstance(value, list | tuple) and not b.param.dims:
                    msg = (
                        f"Launching workflow {wf.name!r}: input {b.param.name!r} takes one "
                        f"{type_name(bound_target(b.param.value_type) or b.param.value_type)}, "
                        f"got a {type(value).__name__} of {len(value)}."
                    )
                    msg += " " + getattr(wf, "input_help", {}).get(b.param.name, "")
                raise SignatureError(msg.rstrip())
            b.node.value_type = b.param.value_type
    return {**{b.param.name: make_handle(b.node) for b in bindings}, **concrete}


def input_fingerprint(inputs: Mapping[str, Any]) -> str:
    """A fingerprint of a job's inputs (the plugin keys its resume pointer on it)."""
    return fingerprint_text(encode_text(dict(inputs)))
