"""Judges you can audit (DESIGN §15): gold sets, repeated verdicts and pairwise grading.

The steps here are what ``fxtr.evaluate`` schedules when its scorer has a ``calibration`` gold
set, ``judge_samples`` above 1, or is ``pairwise``. Every judge call is its own cached step
(role ``judge``), so a gold case, a judge sample or an order of a pair is paid for once and
resumed alone. The audit figures (the gold set's counts, flips, position inconsistency) are
read back from the job's record: every judge call's step returns a plain JSON dict (value,
grade, reply), which :func:`fxtr.evals._audit.judge_payload` gathers, so a partial job is
audited on what it has, and no derived step ever sits in review.

Addresses under the eval's root:

- ``calibration[gold=ID,judge_sample=J]``: the judge grades a gold case's ``completion``.
- ``judge[model=M,case=C,sample=S,judge_sample=J]`` and ``vote_of_K[model=M,case=C,sample=S]``:
  K verdicts of one answer and their majority (the output; named by K, so raising K tops
  the grades up and votes again without a conflict).
- ``against[case=C,sample=S]``: the reference model's answers for ``pairwise``;
  ``pairwise[model=M,case=C,sample=S,judge_sample=J,order=AB|BA]`` and
  ``verdict[model=M,case=C,sample=S]`` (the output; ``verdict_of_K`` with K judge samples).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

from fxtr.evals._calls import _judged as judged
from fxtr.evals._calls import ask_judge
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.evals._scorers import PAIRWISE, AuditedScorer, Score, Scorer, gold_label
from fxtr.experiment.arrays import Array
from fxtr.experiment.entities import BoundID
from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext
from fxtr.models import ModelResponse

JUDGE_SAMPLE = "judge_sample"
ORDERS = ("AB", "BA")
"""``AB``: this model's answer is shown first (as A); ``BA``: the other model's is."""


# --------------------------------------------------------------------------- verdicts


def majority(values: Sequence[float]) -> float:
    """The verdict of K grades: the majority for pass/fail grades, else their mean.

    Grades that are all 0 or 1 give the more common one; an even split gives 0.5 (use an
    odd K). Any other grade (partial credit, a numeric scale) gives the mean.
    """
    if not values:
        msg = "majority() needs at least one grade"
        raise ValueError(msg)
    if all(v in (0.0, 1.0) for v in values):
        ones = sum(1 for v in values if v == 1.0)
        zeros = len(values) - ones
        return 1.0 if ones > zeros else 0.0 if zeros > ones else 0.5
    return sum(values) / len(values)


def mode(values: Sequence[float]) -> float:
    """The most common of a pairwise order's verdicts (1 win, 0.5 tie, 0 loss); 0.5 if split."""
    counts = Counter(values).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return 0.5
    return counts[0][0]


# --------------------------------------------------------------------------- gold set


def _grade(score: Score, **extra: Any) -> dict[str, Any]:
    """One judge call's outcome as plain JSON: what the audit reads back from the record."""
    return {"value": score.value, "grade": score.answer, "reply": score.explanation, **extra}


@step(name="fxtr.judge_gold")
async def judge_gold(
    context: StepContext, scorer: Scorer, case: Case, judge_sample: int
) -> dict[str, Any]:
    """The judge grades a gold case's ``completion`` (``metadata``), as it grades answers.

    ``judge_sample`` is the index of this grade (0 when the judge grades once), so raising
    ``judge_samples`` tops the gold set's grades up.

    Returns:
        ``{"value", "grade", "reply", "label"}``: the judge's grade, the letter, its reply and
        the gold label (1 or 0).
    """
    score = await judged(context, scorer, case, case.metadata["completion"], judge_sample)
    label = gold_label(case.metadata["label"])
    return _grade(score, grade=_letter(score), label=label)


def _letter(score: Score) -> str | None:
    """The letter of a default grade's value (C, P, I); ``None`` for a numeric scale."""
    return {1.0: "C", 0.5: "P", 0.0: "I"}.get(score.value)


# --------------------------------------------------------------------------- judge samples


@step(name="fxtr.judge")
async def judge(
    context: StepContext, scorer: Scorer, case: Case, response: ModelResponse, judge_sample: int
) -> dict[str, Any]:
    """One of the K grades of an answer (the index seeds a mock judge's reply).

    Returns:
        ``{"value", "grade", "reply", "answer"}``.
    """
    score = await judged(context, scorer, case, response.text, judge_sample)
    return _grade(score, grade=_letter(score), answer=score.answer)


@step(name="fxtr.judge_vote")
async def judge_vote(
    context: StepContext, verdicts: Annotated[Array[dict[str, Any]], "[judge_sample: int]"]
) -> Score:
    """The answer's score: the majority of its K verdicts (the mean for numeric grades)."""
    grades = [g for _, g in sorted(verdicts.items(), key=lambda kv: kv[0])]
    value = majority([float(g["value"]) for g in grades])
    listed = ", ".join(str(g.get("grade") or f"{g['value']:g}") for g in grades)
    replies = "\n\n".join(
        f"--- judge sample {i} ---\n{g.get('reply') or ''}" for i, g in enumerate(grades)
    )
    explanation = f"{len(grades)} judge samples: {listed}; score {value:g}\n\n{replies}"
    return Score(value=value, answer=grades[0].get("answer"), explanation=explanation)


# --------------------------------------------------------------------------- pairwise


@step(name="fxtr.pairwise")
async def pairwise_judge(
    context: StepContext,
    scorer: Scorer,
    case: Case,
    response: ModelResponse,
    other: ModelResponse,
    order: str,
    judge_sample: int,
) -> dict[str, Any]:
    """The judge compares two answers shown in one ``order``; 1.0 when this model's wins.

    Returns:
        ``{"value", "grade", "reply"}``: 1.0 (this model's answer is better), 0.5 (a tie) or
        0.0; the grade the judge gave (``A``, ``B`` or ``TIE``, A the answer shown first).

    Raises:
        ValueError: a reply without ``GRADE: A``, ``B`` or ``TIE``.
    """
    assert scorer.judge is not None and scorer.template is not None
    assert scorer.instructions is not None and scorer.grade_pattern is not None
    first, second = (response.text, other.text) if order == "AB" else (other.text, response.text)
    criterion = "".join(case.targets) or "the answer that is more correct, complete and helpful"
    values = {"question": case.input, "answer_a": first, "answer_b": second,
              "criterion": criterion}
    reply = await ask_judge(context, scorer, case, values, judge_sample)
    found = re.search(scorer.grade_pattern, reply)
    grade = found.group(1).upper() if found else None
    if grade not in ("A", "B", "TIE"):
        msg = (
            f"The judge {scorer.judge.name} gave no pairwise grade (A/B/TIE) for case "
            f"{case.id!r}; its reply: {reply[:2000]!r}. Check the instructions ask for "
            "'GRADE: A', 'GRADE: B' or 'GRADE: TIE'."
        )
        raise ValueError(msg)
    context.log(f"judge {scorer.judge.name} ({order}): GRADE {grade}")
    mine = "A" if order == "AB" else "B"
    value = 0.5 if grade == "TIE" else 1.0 if grade == mine else 0.0
    return {"value": value, "grade": grade, "reply": reply}


@step(name="fxtr.pairwise_verdict")
async def pairwise_verdict(
    context: StepContext,
    verdicts: Annotated[Array[dict[str, Any]], "[judge_sample: int, order: str]"],
) -> Score:
    """The pair's score: 1 win, 0 loss, 0.5 tie; a verdict that changes with the order is a tie.

    Each order's verdict is the most common of its judge samples (0.5 on an even split).
    """
    per_order = {}
    for order in ORDERS:
        grades = [verdicts[j, order] for j in verdicts.keys(JUDGE_SAMPLE)]
        per_order[order] = mode([float(g["value"]) for g in grades])
    ab, ba = per_order["AB"], per_order["BA"]
    value = ab if ab == ba else 0.5
    word = {1.0: "wins", 0.5: "ties", 0.0: "loses"}
    note = "" if ab == ba else " (the verdict depends on the order: a tie)"
    lines = [f"shown first it {word.get(ab, ab)}; shown second it {word.get(ba, ba)}{note}"]
    for (j, shown), g in sorted(verdicts.items(), key=lambda kv: kv[0]):
        lines.append(f"--- order {shown}, judge sample {j}: GRADE {g['grade']} ---\n{g['reply']}")
    return Score(value=value, answer=None, explanation="\n\n".join(lines))


# --------------------------------------------------------------------------- the workflow part


async def audited_scores(
    context: WorkflowContext,
    spec: AuditedScorer,
    handles: tuple[
        ArrayHandle[BoundID[Case]], ArrayHandle[BoundID[Case]], ArrayHandle[ModelResponse]
    ],
    samples: int,
    steps: tuple[Any, Any],
) -> ArrayHandle[Score]:
    """Schedule the judge's gold set, its K verdicts or its pairs.

    Args:
        context: the ``fxtr.evaluate`` workflow's context.
        spec: the scorer with its audit.
        handles: the cases (in full), the cases as the models see them, the answers.
        samples: the workflow's ``samples``.
        steps: the kit's ``generate`` step (for ``against``'s answers) and ``score`` step
            (one grade per answer when K is 1), given so that this module needs not import
            the workflow's.

    Returns:
        The ``[model, case, sample]`` scores, as the plain ``score`` step's.
    """
    case, asked, responses = handles
    answer, score = steps
    grader = spec.grader()
    grader_h = context.add_source_array(
        "grader", Array.scalar(await context.store(grader), BoundID[Scorer])
    )
    k = spec.judge_samples
    js = context.add_source_array(
        "judge_samples",
        Array.from_mapping(
            {i: i for i in range(k)}, dims=[(JUDGE_SAMPLE, int)], value_type=int
        ),
    )
    if spec.calibration:
        gold = {c.id: await context.store(c) for c in spec.calibration}
        gold_h = context.add_source_array(
            "gold", Array.from_mapping(gold, dims=["gold"], value_type=BoundID[Case])
        )
        context.run_step(
            "calibration",
            judge_gold,
            {"scorer": grader_h, "case": gold_h, "judge_sample": js},
            map_over=["gold", JUDGE_SAMPLE],
        )
    if spec.kind == PAIRWISE:
        assert spec.against is not None
        against = context.add_source_array(
            "against_model", Array.scalar(await context.store(spec.against), BoundID[Model])
        )
        others = context.run_step(
            "against", answer, {"model": against, "case": asked}, map_over=["case"],
            samples=samples,
        )
        orders = context.add_source_array(
            "orders", Array.from_mapping({o: o for o in ORDERS}, dims=["order"], value_type=str)
        )
        pairs = context.run_step(
            "pairwise",
            pairwise_judge,
            {
                "scorer": grader_h, "case": case, "response": responses, "other": others,
                "order": orders, "judge_sample": js,
            },
            map_over=["model", "case", "sample", JUDGE_SAMPLE, "order"],
        )
        return context.run_step(  # a verdict of K grades per order is another computation
            "verdict" if k == 1 else f"verdict_of_{k}",
            pairwise_verdict,
            {"verdicts": pairs},
            map_over=["model", "case", "sample"],
        )
    if k == 1:
        return context.run_step(
            "score",
            score,
            {"scorer": grader_h, "case": case, "response": responses},
            map_over=["model", "case", "sample"],
        )
    grades = context.run_step(
        "judge",
        judge,
        {"scorer": grader_h, "case": case, "response": responses, "judge_sample": js},
        map_over=["model", "case", "sample", JUDGE_SAMPLE],
    )
    return context.run_step(  # named by K: the vote of 5 grades never replaces that of 3
        f"vote_of_{k}", judge_vote, {"verdicts": grades}, map_over=["model", "case", "sample"]
    )
