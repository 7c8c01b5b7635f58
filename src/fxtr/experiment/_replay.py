"""Replay and verification: operations compared with the record, with a diff when they differ.

The runner calls ``record_op`` for every operation a workflow body schedules and
``check_ops_complete`` when a body returns; in a verifying pass, resolution calls
``replayed`` for every step invocation instead of consulting the cache. Everything here
reads the runner's record (``prior``, ``expected_ops``) and raises ``DeterminismError``; it
never runs a step or writes to the store.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from fxtr.experiment._graph import Value, decoded
from fxtr.experiment.errors import DeterminismError

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run
    from fxtr.experiment._records import WorkflowRun


def record_op(run: Run, workflow: WorkflowRun, desc: dict[str, Any]) -> None:
    """Append an operation to a workflow invocation's list; compare it with the record.

    Operations are matched by name, never by position ("Names are how fxtr matches a replayed
    operation with the recorded one"): a body that schedules from concurrent branches
    (``asyncio.gather``, a task group) may schedule in another order and still replays.
    """
    run.ops.setdefault(workflow.address, []).append(desc)
    expected = _recorded_by_name(run, workflow.address)
    want = None if expected is None else expected.get(desc["name"])
    if want is not None:
        if want != desc:
            raise DeterminismError(determinism_message(workflow, desc, want))
    elif run.mode == "verify":
        expected = expected or {}
        recorded = list(expected)
        names = ", ".join(repr(n) for n in recorded[:10]) or "none"
        close = difflib.get_close_matches(desc["name"], recorded, n=1)
        hint = f" (the record has {op_str(expected[close[0]])} instead?)" if close else ""
        msg = (
            f"Workflow {workflow.workflow!r} is not deterministic: on replay, at "
            f"{workflow.address!r}, it schedules {op_str(desc)}, which the record "
            f"lacks{hint}; recorded operations: {names}{' ...' if len(recorded) > 10 else ''}. "
            "Move randomness, time and I/O into a step."
        )
        raise DeterminismError(msg)


def _recorded_by_name(run: Run, address: str) -> dict[str, dict[str, Any]] | None:
    """The recorded operations of a workflow invocation by name (made once a pass)."""
    index = run.expected_by_name.get(address)
    if index is None:
        expected = run.expected_ops.get(address)
        if expected is None:
            return None
        index = run.expected_by_name[address] = {op["name"]: op for op in expected}
    return index


def check_ops_complete(run: Run, workflow: WorkflowRun) -> None:
    """In a verifying replay, the body must schedule every recorded operation (by name)."""
    if run.mode != "verify":
        return
    expected = run.expected_ops.get(workflow.address, [])
    done = {op["name"] for op in run.ops.get(workflow.address, [])}
    missing = [op for op in expected if op["name"] not in done]
    if missing:
        msg = (
            f"Workflow {workflow.workflow!r} is not deterministic: on replay, at "
            f"{workflow.address!r}, it scheduled {len(done)} operation(s), but the record has "
            f"{len(expected)}; missing: {', '.join(op_str(op) for op in missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''}. Move randomness, time and I/O into a step."
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


def determinism_message(workflow: WorkflowRun, got: dict[str, Any], want: dict[str, Any]) -> str:
    diffs = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            diffs.append(f"{key}: recorded {want.get(key)!r}, replayed {got.get(key)!r}")
    return (
        f"Workflow {workflow.workflow!r} is not deterministic: on replay, the operation named "
        f"{got['name']!r} at {workflow.address!r} is {op_str(got)} but the record has "
        f"{op_str(want)}. Differences: {'; '.join(diffs)}. Move randomness, time and I/O "
        "into a step."
    )
