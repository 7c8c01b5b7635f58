"""How the kit asks a model: the request, the call with retries, and a judge's grade.

Used by the kit's steps (``fxtr.evals._evaluate``) and the judge-audit steps
(``fxtr.evals._judging``), which import it and not each other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Iterator
from typing import Any

from fxtr.evals import _judge
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.evals._scorers import Score, Scorer
from fxtr.experiment.steps import StepContext
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
from fxtr.models._budget import Graders


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


_JUDGES: weakref.WeakKeyDictionary[Any, Scorer] = weakref.WeakKeyDictionary()
"""Per run of an ``evaluate`` job, the judge scorer that grades its answers."""


def expect_judges(context: Any, scorer: Scorer) -> None:
    """The answers of this run's ``generate`` steps will be graded by ``scorer``'s judge.

    Under a budget, each answer's call then reserves the forecast of its judge calls, so an
    answer paid for is graded before a new case starts (DESIGN §14).
    """
    from fxtr.evals._scorers import JUDGES

    if scorer.kind in JUDGES and scorer.judge is not None:
        _JUDGES[context._run] = scorer


def _judge_forecast(scorer: Scorer, model: Model, request: ModelRequest) -> Graders:
    """The judge calls that will grade the answer to ``request``, for the budget.

    The judge's prompt is its template filled with the question and an answer of the
    answer's length once it came, else of its forecast length (the sampling's
    ``max_tokens``, else the model's median output in the run or the store, else 256), as
    many times as it grades an answer (``judge_samples``; both orders for ``pairwise``). An
    unpriced judge costs nothing here.
    """
    from fxtr.evals._models import pricing_api
    from fxtr.evals._scorers import PAIRWISE, AuditedScorer
    from fxtr.models._batch import BATCH_PRICE, settings_for
    from fxtr.models._budget import DEFAULT_OUTPUT_TOKENS, estimate_call, request_chars

    judge = scorer.judge
    assert judge is not None
    times = scorer.judge_samples if isinstance(scorer, AuditedScorer) else 1
    times *= 2 if scorer.kind == PAIRWISE else 1
    question = request_chars(request)
    prompt = (
        _judge.fill(
            scorer.template or "",
            values={"question": "", "answer": "", "answer_a": "", "answer_b": "", "criterion": ""},
            instructions=scorer.instructions or "",
            metadata={},
        )
        if scorer.template
        else ""
    )
    judged = request_for(judge, prompt, None)
    api = pricing_api(judge)
    price = BATCH_PRICE if settings_for(judge.name, judge.base_url, judge.provider) else 1.0
    answers = 2 if scorer.kind == PAIRWISE else 1

    def forecast(budget: Any, answered: int | None) -> float:
        sampling = request.sampling
        if answered is not None:  # the answer came: its own size
            answer = answered
        elif sampling is not None and sampling.max_tokens:
            answer = sampling.max_tokens
        else:
            median = budget.median_output(model.model)
            answer = DEFAULT_OUTPUT_TOKENS if median is None else round(median)
        extra = question + 4 * answer * answers
        _, _, usd = estimate_call(api, judged, budget.median_output(judge.model), extra)
        return 0.0 if usd is None else usd * price

    return Graders(forecast, times)


@contextlib.contextmanager
def _budgeted(model: Model, request: ModelRequest, context: Any) -> Iterator[None]:
    """Around a kit call under a budget: its place in its case, for the budget.

    A subject's answer reserves its judges' calls; a judge's call draws on what was
    reserved (``fxtr.models._budget``).
    """
    from fxtr.models._budget import current_budget, waiting_slot

    step = getattr(context, "step_name", None)
    if current_budget.get() is None or step is None:
        yield
        return
    slot = waiting_slot.set(getattr(getattr(context, "_run", None), "sem", None))
    try:
        with _budgeted_in_case(context, step, model, request):
            yield
    finally:
        waiting_slot.reset(slot)


@contextlib.contextmanager
def _budgeted_in_case(
    context: Any, step: str, model: Model, request: ModelRequest
) -> Iterator[None]:
    """The budget's view of a call's place in its case (see ``_budgeted``)."""
    from fxtr.models._budget import paid_for, then_calls

    if step == "fxtr.generate":
        scorer = _JUDGES.get(context._run)
        if scorer is None or "/against[" in context.address:  # the reference's answers
            yield
            return
        token = then_calls.set(_judge_forecast(scorer, model, request))
        try:
            yield
        finally:
            then_calls.reset(token)
        return
    if step == "fxtr.judge_gold":  # a gold case: no answer of the run paid for it
        yield
        return
    paying = paid_for.set(True)
    try:
        yield
    finally:
        paid_for.reset(paying)


async def call(
    model: Model, request: ModelRequest, context: Any = None, *, batch: bool = True
) -> ModelResponse:
    """Call the model with retries (or through its provider's batch API, when batched).

    A batched model's call goes through the batch API when ``batch`` is true and a step runs
    (``context``, else the step whose body runs here); agent turns pass ``batch=False``.

    Raises:
        ModelCallError: the call still failed, so the invocation fails with its classified
            reason and nothing is cached.
    """
    from fxtr.experiment._context import current_step
    from fxtr.models._batch import settings_for

    step = context if context is not None else current_step.get()
    if context is None and batch:
        context = step
    api = model.api()
    try:
        batching = settings_for(model.name, model.base_url, model.provider)
        with _budgeted(model, request, step):
            if batching is not None and batch and context is not None:
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
            api,
            request,
            key=key,
            settings=batching,
            store=getattr(run, "store", None),
            slot=getattr(run, "sem", None),  # no slot held while waiting for the batch
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


async def _judged(
    context: StepContext,
    scorer: Scorer,
    case: Case,
    completion: str,
    judge_sample: int | None = None,
) -> Score:
    """The judge's grade of ``completion`` for ``case`` (its call recorded with role judge).

    ``judge_sample`` (one of K grades of the same answer) seeds a mock judge's reply like a
    sample index does. (The ``score`` step's body is unchanged since before judge audits, so
    its cached grades keep their fingerprints: new behaviour goes here and in the
    ``fxtr.evals._judging`` steps.)

    Raises:
        ValueError: as the ``score`` step.
    """
    assert scorer.judge is not None and scorer.template is not None
    assert scorer.instructions is not None and scorer.grade_pattern is not None
    if not case.targets:
        msg = (
            f"{scorer.kind} grades against the case's target, and case {case.id!r} has none: "
            "give the dataset a target column."
        )
        raise ValueError(msg)
    values = {"question": case.input, "answer": completion, "criterion": "".join(case.targets)}
    reply = await ask_judge(context, scorer, case, values, judge_sample)
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


async def ask_judge(
    context: StepContext,
    scorer: Scorer,
    case: Case,
    values: dict[str, str],
    judge_sample: int | None,
) -> str:
    """Fill the judge's template with ``values`` and the case's metadata; the judge's reply.

    The call is recorded with the role ``judge``.

    Raises:
        ValueError: the template names a variable the case does not have.
    """
    assert scorer.judge is not None and scorer.template is not None
    assert scorer.instructions is not None
    try:
        prompt = _judge.fill(
            scorer.template,
            values=values,
            instructions=scorer.instructions,
            metadata=case.metadata,
        )
    except (KeyError, IndexError, ValueError) as exc:
        names = ", ".join("{" + name + "}" for name in (*values, "instructions"))
        msg = (
            f"The {scorer.kind} template cannot be filled for case {case.id!r} ({exc!r}): it "
            f"may use {names} and the case's metadata keys; "
            "double other braces ({{ }})."
        )
        raise ValueError(msg) from None
    with judge_role():
        request = request_for(scorer.judge, prompt, judge_sample)
        return (await call(scorer.judge, request, context)).text
