from __future__ import annotations

from typing import Annotated

import pytest

from fxtr import Array, ArrayHandle, BoundID, ScalarHandle, SignatureError, step, workflow
from fxtr.experiment._types import Dim
from tests.examples import Answer, ModelConfig


def test_step_signature_reads_values_entities_refs_and_arrays():
    """Each annotation kind of the table is understood."""

    @step(name="t.ok")
    async def ok(
        context,
        a: str,
        b: int | None,
        c: list[dict[str, float]],
        d: ModelConfig,
        e: BoundID[Answer],
        f: Annotated[Array[float], "[sample: int]"],
    ) -> Annotated[Array[str], "[k: str]"]:
        raise NotImplementedError

    params = ok.signature.params
    assert params["a"].kind == "value" and params["a"].dims == ()
    assert params["d"].value_type is ModelConfig
    assert params["f"].kind == "array" and params["f"].dims == (Dim("sample", int),)
    assert ok.signature.result.dims == (Dim("k", str),)


def test_workflow_signature_reads_handles():
    """Workflows take handles (and plain values); results are handles."""

    @workflow(name="t.wf")
    async def wf(
        context, xs: Annotated[ArrayHandle[str], "[x: str]"], n: ScalarHandle[int], rounds: int
    ) -> ScalarHandle[float]:
        raise NotImplementedError

    params = wf.signature.params
    assert params["xs"].kind == "handle"
    assert params["n"].dims == ()
    assert params["rounds"].kind == "value"


@pytest.mark.parametrize(
    ("make", "fragments"),
    [
        (lambda: step(name="t.sync")(lambda context: 1), ["must be an 'async def'"]),
    ],
)
def test_sync_function_is_refused(make, fragments):
    """A non-coroutine is a SignatureError."""
    with pytest.raises(SignatureError) as info:
        make()
    for f in fragments:
        assert f in str(info.value)


def test_missing_annotation_names_function_parameter_and_fix():
    """A missing annotation is a SignatureError naming the step, the parameter and the fix."""
    with pytest.raises(SignatureError) as info:

        @step(name="t.bad")
        async def bad(context, question) -> str:
            return ""

    msg = str(info.value)
    assert "'t.bad'" in msg and "parameter 'question' has no annotation" in msg
    assert "question: str" in msg


def test_every_problem_is_listed_once():
    """Several bad annotations are reported together."""
    with pytest.raises(SignatureError) as info:

        @step(name="t.bad2")
        async def bad(context, a: complex, b: Array[int], c: ScalarHandle[int]):
            return ""

    msg = str(info.value)
    assert "parameter 'a'" in msg and "complex" in msg
    assert "parameter 'b' is Array[int] without dimensions" in msg
    assert "parameter 'c' is a ScalarHandle" in msg
    assert "the result has no annotation" in msg


def test_first_parameter_must_be_context():
    """The first parameter is `context`."""
    with pytest.raises(SignatureError, match="must take 'context: StepContext'"):

        @step(name="t.noctx")
        async def bad(question: str) -> str:
            return question


def test_handles_in_steps_and_arrays_in_workflows_are_refused():
    """Steps receive data (Array); workflows schedule on handles (ArrayHandle)."""
    with pytest.raises(SignatureError, match="annotate it Annotated\\[Array\\[T\\]"):

        @step(name="t.h")
        async def bad(context, a: Annotated[ArrayHandle[int], "[x: str]"]) -> int:
            return 1

    with pytest.raises(SignatureError, match="annotate it Annotated\\[ArrayHandle\\[T\\]"):

        @workflow(name="t.w")
        async def badw(context, a: Annotated[Array[int], "[x: str]"]) -> ScalarHandle[int]:
            raise NotImplementedError


def test_bad_dimension_string_is_a_signature_error():
    """A malformed dimension string names the parameter."""
    with pytest.raises(SignatureError, match="parameter 'a'.*'\\[x: float\\]'"):

        @step(name="t.d")
        async def bad(context, a: Annotated[Array[int], "[x: float]"]) -> int:
            return 1


def test_workflow_must_return_a_handle():
    """A workflow result annotated as a plain value is refused."""
    with pytest.raises(SignatureError, match="a workflow returns a handle"):

        @workflow(name="t.r")
        async def bad(context) -> int:
            return 1


def test_decorator_names_are_checked():
    """Names must be non-empty and free of address syntax."""
    with pytest.raises(TypeError, match="non-empty name"):
        step(name="")
    with pytest.raises(ValueError, match="contains '/'"):
        workflow(name="a/b")


def test_calling_a_step_directly_explains_how_to_schedule_it():
    """A step called like a function says to use run_step."""

    @step(name="t.direct")
    async def direct(context, a: int) -> int:
        return a

    with pytest.raises(TypeError, match="run_step"):
        direct(None, a=1)
