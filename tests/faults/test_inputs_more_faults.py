"""Clear errors of issue 15: a result with no encoding fails its invocation, ``map_over`` of a
bare string is one dimension, a step that blocks the loop is named, hostile inputs and a
``timeout`` given as text are refused naming the parameter."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

import fxtr
from fxtr.experiment.arrays import Array
from fxtr.experiment.steps import StepContext, step
from tests.faults.flows import batch, mapstr
from tests.faults.test_inputs_faults import HOSTILE, check_refused


@pytest.mark.parametrize("kind", ["surrogate", "bigint", "deep"])
def test_unencodable_result_fails_that_invocation(kind: str, store: Path) -> None:
    """A step result with no encoding fails its invocation (tool_error), not the job's store."""
    keys = Array.from_mapping({"k1": "k1", "k2": "k2"}, dims=["case"], value_type=str)
    result = fxtr.run(batch, {"keys": keys, "payload": f"{kind}@k1", "gate": ""}, store=str(store))
    invs = {inv.address: inv for inv in result.invocations}
    bad = invs["faults.batch/work[case=k1]"]
    assert result.status == "failed"
    assert bad.status == "failed"
    assert bad.reason == "tool_error", bad.reason
    assert "faults.work" in str(bad.error), bad.error
    assert invs["faults.batch/work[case=k2]"].status == "succeeded"
    again = fxtr.run(batch, {"keys": keys, "payload": f"{kind}@k1", "gate": ""}, store=str(store))
    assert {inv.address: inv.from_cache for inv in again.invocations}[
        "faults.batch/work[case=k2]"
    ] is True


def test_map_over_a_bare_string_is_one_dimension(store: Path) -> None:
    """``map_over="model"`` is refused or read as ``["model"]``, never as m, o, d, e, l."""
    keys = Array.from_mapping({"a": "a", "b": "b"}, dims=["model"], value_type=str)
    try:
        result = fxtr.run(mapstr, {"keys": keys}, store=str(store))
    except (TypeError, ValueError, fxtr.FxtrError) as exc:
        assert "map_over" in str(exc) and "['model']" in str(exc), str(exc)
        return
    assert result.status == "succeeded", [inv.error for inv in result.invocations]
    assert result.output is not None and result.output.to_dict() == {"a": "ok:a", "b": "ok:b"}


def test_a_step_that_blocks_the_event_loop_is_named(store: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A step that blocks (time.sleep) is named in a warning or a logged warning."""
    keys = Array.from_mapping({"k1": "k1"}, dims=["case"], value_type=str)
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fxtr.run(batch, {"keys": keys, "payload": "block", "gate": ""}, store=str(store))
    assert result.status == "succeeded"
    texts = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert any("faults.work" in t and "block" in t.lower() for t in texts), texts


@pytest.mark.parametrize("kind", ["bigint", "deep900", "surrogate"])
def test_hostile_input_is_refused_naming_the_parameter(kind: str, store: Path) -> None:
    """F3: a huge int, 900-deep nesting or a lone surrogate is refused naming the parameter
    (once a bare ValueError, RecursionError or UnicodeEncodeError)."""
    check_refused(HOSTILE[kind], store)


def test_step_timeout_given_as_a_str_is_named() -> None:
    """F10: ``@step(timeout="5")`` says what is wrong with ``timeout``."""
    with pytest.raises((TypeError, ValueError)) as info:

        @step(name="faults.str_timeout", timeout="5")  # type: ignore[arg-type]
        async def bad(context: StepContext) -> int:
            return 1

    assert "timeout" in str(info.value)
