"""The kit's steps (``generate``, ``score``) and workflow (``evaluate``: ``fxtr.evaluate``)."""

from __future__ import annotations

from typing import Annotated, Any

from fxtr.agents._types import RUNNERS, Agent
from fxtr.evals._calls import _judged as _judged  # re-exported: the agents' scorers use it
from fxtr.evals._calls import call as call
from fxtr.evals._calls import judge_role as judge_role
from fxtr.evals._calls import request_for as request_for
from fxtr.evals._cases import Case
from fxtr.evals._judging import audited_scores
from fxtr.evals._models import Model
from fxtr.evals._scorers import JUDGES, AuditedScorer, Score, Scorer
from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID
from fxtr.experiment.handles import ArrayHandle, ScalarHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from fxtr.models import ModelResponse

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


@step(name="fxtr.generate")
async def generate(context: StepContext, model: Model, case: Case) -> ModelResponse:
    """Ask ``model`` the case's input (as one user message, after its system prompt)."""
    return await call(model, request_for(model, case_prompt(case), context.sample))


SANDBOX_GRADERS: dict[str, Any] = {}
"""``sandbox_check``'s grader of an answer, registered by ``fxtr.sandbox`` when imported."""


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


@step(name="fxtr.score_in_sandbox")
async def score_in_sandbox(
    context: StepContext, scorer: Scorer, case: Case, response: ModelResponse
) -> Score:
    """Grade one response in a sandbox (``sandbox_check(..., answer_to=PATH)``).

    The answer is written into the sandbox's tree, then its command runs there. A step of
    its own, not a branch of ``score``: a step's code is in the fingerprint of every score a
    store holds, so ``score`` keeps its code.
    """
    grade_answer = SANDBOX_GRADERS["answer"]
    graded: Score = await grade_answer(context, scorer, case, response.text)
    return graded


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
    A judge with a gold set, ``judge_samples`` or ``pairwise`` is scheduled by
    ``fxtr.evals._judging`` (DESIGN §15).
    """
    if agent is not None:
        run_agents: Any = RUNNERS["evaluate"]
        return run_agents(context, agent, model, case, scorer, samples)  # type: ignore[no-any-return]
    asked = await _as_asked(context, case)
    responses = context.run_step(
        "generate",
        generate,
        {"model": model, "case": asked},
        map_over=["model", "case"],
        samples=samples,
    )
    ref = await scorer.item()
    spec = ref if isinstance(ref, Scorer) else await context.load(ref)
    if isinstance(spec, AuditedScorer):  # a gold set, K verdicts or pairs (DESIGN §15)
        handles = (case, asked, responses)
        return await audited_scores(context, spec, handles, samples, (generate, score))
    return context.run_step(
        "score",
        score_in_sandbox if spec.kind == "sandbox_check" else score,
        {"scorer": scorer, "case": case, "response": responses},
        map_over=["model", "case", "sample"],
    )


evaluate.input_help = {  # type: ignore[attr-defined]  # read by launch's input check
    "scorer": (
        "An eval scores with one scorer: for several, write one eval (test function) per "
        "scorer, each with its own threshold (test_qa_includes with inputs={'scorer': "
        "includes()}, test_qa_exact with inputs={'scorer': exact()}); each eval's score "
        "group, gate and viewer page are its own. With an agent, scorer(FUNCTION) may also "
        "grade several things into one Score."
    )
}
