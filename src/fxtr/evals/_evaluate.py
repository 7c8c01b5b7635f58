"""The kit's steps (``generate``, ``score``) and workflow (``evaluate``: ``fxtr.evaluate``)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Annotated, Any

from fxtr.agents._types import RUNNERS, Agent
from fxtr.evals import _judge
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.evals._scorers import JUDGES, Score, Scorer
from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID
from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from fxtr.models import (
    ContentText,
    ModelCallError,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    Sampling,
    SystemMessage,
    UserMessage,
    generate_with_retries,
)

SINGLE_ANSWER_TEMPLATE = """
Answer the following multiple choice question. The entire content of your response should be of the following format: 'ANSWER: $LETTER' (without quotes) where LETTER is one of {letters}.

{question}

{choices}
""".strip()  # noqa: E501
"""The prompt for a case with choices (inspect_ai's ``multiple_choice`` template)."""

MULTIPLE_ANSWER_TEMPLATE = """
Answer the following multiple choice question where multiple answers may be correct. The entire content of your response should be of the following format: 'ANSWER: $LETTERS' (without quotes) where LETTERS is one or more of {letters}.

{question}

{choices}
""".strip()  # noqa: E501
"""The prompt for a case with choices and several targets."""


def case_prompt(case: Case) -> str:
    """What the model is asked for a case.

    The input; for a case with choices, the question with its lettered options and the
    ``ANSWER: X`` instruction.
    """
    if not case.choices:
        return case.input
    from fxtr.evals._text import letter

    template = MULTIPLE_ANSWER_TEMPLATE if len(case.targets) > 1 else SINGLE_ANSWER_TEMPLATE
    return template.format(
        letters=",".join(letter(i) for i in range(len(case.choices))),
        question=case.input,
        choices="\n".join(f"{letter(i)}) {c}" for i, c in enumerate(case.choices)),
    )


def request_for(model: Model, text: str, sample: int | None) -> ModelRequest:
    """One user message (after the model's system prompt), with the model's sampling.

    A sampled call to a mock model carries the sample index as ``sampling.seed`` (added to
    the model's own seed), so a scripted reply can vary by sample and stay reproducible.
    """
    messages: list[Any] = []
    if model.system:
        messages.append(SystemMessage(content=(ContentText(text=model.system),)))
    messages.append(UserMessage(content=(ContentText(text=text),)))
    sampling = model.sampling
    if model.provider == "mock" and sample is not None:
        base = sampling or Sampling()
        sampling = dataclasses.replace(base, seed=(base.seed or 0) + sample)
    return ModelRequest(context=tuple(messages), sampling=sampling)


async def call(model: Model, request: ModelRequest, context: Any = None) -> ModelResponse:
    """Call the model with retries (or through its provider's batch API, when batched).

    Raises:
        ModelCallError: the call still failed, so the invocation fails with its classified
            reason and nothing is cached.
    """
    from fxtr.models._batch import settings_for

    api = model.api()
    try:
        batching = settings_for(model.name, model.base_url, model.provider)
        if batching is not None and context is not None:
            result = await _batched(api, request, context, batching)
        else:
            result = await generate_with_retries(api, request)
    finally:
        await api.aclose()
    if isinstance(result, ModelCallFailure):
        raise ModelCallError(result)
    return result


async def _batched(
    api: Any, request: ModelRequest, context: StepContext, batching: Any
) -> ModelResponse | ModelCallFailure:
    """One single-turn call through the batch API; the batch id is kept in the store."""
    from fxtr.experiment._executor import invocation_of
    from fxtr.models._batch import batch_generate

    run = getattr(context, "_run", None)
    key = f"{context.address}|{invocation_of(context).fingerprint}|{api.model_name}"
    try:
        return await batch_generate(
            api, request, key=key, settings=batching, store=getattr(run, "store", None)
        )
    except ModelCallError as exc:
        return exc.failure


@contextlib.contextmanager
def judge_role() -> Iterator[None]:
    """Record the model calls made inside as the judge's, apart from the subject's."""
    from fxtr.tracing import _recorder

    role = getattr(_recorder, "call_role", None)
    if role is None:  # a recorder without roles counts every call as the subject's
        yield
        return
    token = role.set("judge")
    try:
        yield
    finally:
        role.reset(token)


@step(name="fxtr.generate")
async def generate(context: StepContext, model: Model, case: Case) -> ModelResponse:
    """Ask ``model`` the case's input (as one user message, after its system prompt)."""
    return await call(model, request_for(model, case_prompt(case), context.sample), context)


@step(name="fxtr.score")
async def score(context: StepContext, scorer: Scorer, case: Case, response: ModelResponse) -> Score:
    """Grade one response; a judge's call is recorded with the role ``judge``.

    Raises:
        ValueError: the case lacks what the scorer needs, or a judge's reply has no grade it
            was offered (the raw reply is in the message; the cell is missing, not wrong).
    """
    completion = response.text
    if scorer.kind not in JUDGES:
        return scorer.grade(case, completion)
    return await _judged(context, scorer, case, completion)


async def _judged(context: StepContext, scorer: Scorer, case: Case, completion: str) -> Score:
    assert scorer.judge is not None and scorer.template is not None
    assert scorer.instructions is not None and scorer.grade_pattern is not None
    if not case.targets:
        msg = (
            f"{scorer.kind} grades against the case's target, and case {case.id!r} has none: "
            "give the dataset a target column."
        )
        raise ValueError(msg)
    try:
        prompt = _judge.grading_prompt(
            scorer.template,
            question=case.input,
            answer=completion,
            criterion="".join(case.targets),
            instructions=scorer.instructions,
            metadata=case.metadata,
        )
    except (KeyError, IndexError, ValueError) as exc:
        msg = (
            f"The {scorer.kind} template cannot be filled for case {case.id!r} ({exc!r}): it "
            "may use {question}, {answer}, {criterion}, {instructions} and the case's "
            "metadata keys; double other braces ({{ }})."
        )
        raise ValueError(msg) from None
    with judge_role():
        reply = (await call(scorer.judge, request_for(scorer.judge, prompt, None), context)).text
    grade = _judge.read_grade(
        reply,
        grade_pattern=scorer.grade_pattern,
        grade_words=scorer.grade_words,
        grades=scorer.grades,
    )
    if grade is None:
        offered = "/".join(scorer.grades) or "what the pattern accepts"
        msg = (
            f"The judge {scorer.judge.name} gave no grade ({offered}) for case {case.id!r}; "
            f"its reply: {reply[:2000]!r}. Check the instructions ask for 'GRADE: $LETTER' "
            "and the grade_pattern finds it."
        )
        raise ValueError(msg)
    context.log(f"judge {scorer.judge.name}: GRADE {grade}")
    return Score(value=_judge.grade_value(grade), answer=completion, explanation=reply)


async def _as_asked(
    context: WorkflowContext, cases: ArrayHandle[BoundID[Case]]
) -> ArrayHandle[BoundID[Case]]:
    """The cases without what the model never sees (targets, metadata)."""
    asked: dict[Any, BoundID[Case]] = {}
    for (key,), ref in (await cases.observe()).items():
        full = ref if isinstance(ref, Case) else await context.load(ref)
        bare = Case(id=full.id, input=full.input, choices=full.choices)
        asked[key] = await context.store(bare)
    array = Array.from_mapping(asked, dims=["case"], value_type=BoundID[Case])
    return context.add_source_array("asked", array)


@workflow(name="fxtr.evaluate")
async def evaluate(
    context: WorkflowContext,
    model: Annotated[ArrayHandle[BoundID[Model]], "[model: str]"],
    case: Annotated[ArrayHandle[BoundID[Case]], "[case: str]"],
    scorer: ScalarHandle[BoundID[Scorer]],
    samples: int = 1,
    agent: Agent | None = None,
) -> Annotated[ArrayHandle[Score], "[model: str, case: str, sample: int]"]:
    """Generate every (model, case, sample), then score each response.

    The generate step sees what the model is asked (each case's id, input and choices), so
    editing a target or metadata re-grades the cached answers instead of asking again.
    With an ``agent`` (``fxtr.agents.Agent``), each (model, case, sample) runs the agent
    loop instead, as the child workflow ``agent[...]``, and the scorer grades its trajectory.
    """
    if agent is not None:
        run_agents: Any = RUNNERS["evaluate"]
        return run_agents(context, agent, model, case, scorer, samples)  # type: ignore[no-any-return]
    responses = context.run_step(
        "generate",
        generate,
        {"model": model, "case": await _as_asked(context, case)},
        map_over=["model", "case"],
        samples=samples,
    )
    return context.run_step(
        "score",
        score,
        {"scorer": scorer, "case": case, "response": responses},
        map_over=["model", "case", "sample"],
    )
