"""Replay and verification: operations compared with the record, with a diff when they differ.

The runner calls ``record_op`` for every operation a workflow body schedules and
``check_ops_complete`` when a body returns; in a verifying pass, resolution calls
``replayed`` for every step invocation instead of consulting the cache. Everything here
reads the runner's record (``prior``, ``expected_ops``) and raises ``DeterminismError``; it
never runs a step or writes to the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fxtr.experiment._graph import Value, decoded
from fxtr.experiment.errors import DeterminismError

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run
    from fxtr.experiment._records import WorkflowRun


def record_op(run: Run, workflow: WorkflowRun, desc: dict[str, Any]) -> None:
    """Append an operation to a workflow invocation's list; compare with the record."""
    ops = run.ops.setdefault(workflow.address, [])
    position = len(ops)
    ops.append(desc)
    expected = run.expected_ops.get(workflow.address)
    if expected is not None and position < len(expected):
        if expected[position] != desc:
            raise DeterminismError(
                determinism_message(workflow, position, desc, expected[position])
            )
    elif run.mode == "verify":
        msg = (
            f"Workflow {workflow.workflow!r} at {workflow.address!r} is not deterministic: "
            f"on replay, operation {position} is {op_str(desc)} but the record ends after "
            f"{position} operation(s). Move randomness, time and I/O into a step."
        )
        raise DeterminismError(msg)


def check_ops_complete(run: Run, workflow: WorkflowRun) -> None:
    """In a verifying replay, the body must schedule every recorded operation."""
    if run.mode != "verify":
        return
    expected = run.expected_ops.get(workflow.address, [])
    done = len(run.ops.get(workflow.address, []))
    if done < len(expected):
        msg = (
            f"Workflow {workflow.workflow!r} at {workflow.address!r} is not deterministic: "
            f"on replay it scheduled {done} operation(s), but the record has "
            f"{len(expected)}; the first missing is {op_str(expected[done])}. Move "
            "randomness, time and I/O into a step."
        )
        raise DeterminismError(msg)


def replayed(
    run: Run, step: StepDefinition[..., Any], address: str, fps: dict[str, str], fp: str | None
) -> Value:
    recorded = run.prior.get(address)
    if recorded is None:
        msg = (
            f"Replay scheduled step {step.name!r} at {address!r}, which the record of this "
            "attempt lacks: the workflow is not deterministic. Move randomness, time and "
            "I/O into a step."
        )
        raise DeterminismError(msg)
    if fp is not None and recorded.fingerprint is not None and recorded.fingerprint != fp:
        changed = sorted(
            k
            for k in set(fps) | set(recorded.input_fingerprints)
            if fps.get(k) != recorded.input_fingerprints.get(k)
        )
        msg = (
            f"Replay of step {step.name!r} at {address!r} got different inputs than the "
            f"record (changed: {', '.join(changed) or 'code'}): the workflow is not "
            "deterministic. Move randomness, time and I/O into a step."
        )
        raise DeterminismError(msg)
    # the record is the pass's outcome; a verifying pass keeps no second index of it (a
    # 200,000-invocation job's replay would hold one more entry per invocation)
    if recorded.status == "succeeded":
        return Value(decoded(recorded.result_text))
    return Value(None, cause=f"{recorded.status} at {address!r}: {recorded.error}")


def op_str(desc: dict[str, Any]) -> str:
    callee = f" ({desc['kind']} {desc['callee']})" if "callee" in desc else f" ({desc['kind']})"
    return f"{desc['name']!r}{callee}"


def determinism_message(
    workflow: WorkflowRun, position: int, got: dict[str, Any], want: dict[str, Any]
) -> str:
    diffs = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            diffs.append(f"{key}: recorded {want.get(key)!r}, replayed {got.get(key)!r}")
    return (
        f"Workflow {workflow.workflow!r} is not deterministic: on replay, operation {position} "
        f"at {workflow.address!r} is {op_str(got)} but the record has {op_str(want)}. "
        f"Differences: {'; '.join(diffs)}. Move randomness, time and I/O into a step."
    )
