"""Model-graded scoring: inspect_ai's default grading templates, instructions and grade rules.

The templates are inspect_ai's (themselves after openai/evals' ``closedqa``), pinned here so a
judge's prompt is what inspect's users know. A ``Scorer`` carries the resolved template,
instructions and pattern as fields, so editing any of them changes the judge's inputs.
"""

from __future__ import annotations

import re
from typing import Any

DEFAULT_MODEL_GRADED_QA_TEMPLATE = """
You are assessing a submitted answer on a given task based on a criterion. Here is the data:

[BEGIN DATA]
***
[Task]: {question}
***
[Submission]: {answer}
***
[Criterion]: {criterion}
***
[END DATA]

Does the submission meet the criterion?

{instructions}
"""

DEFAULT_MODEL_GRADED_FACT_TEMPLATE = """
You are comparing a submitted answer to an expert answer on a given question. Here is the data:

[BEGIN DATA]
************
[Question]: {question}
************
[Expert]: {criterion}
************
[Submission]: {answer}
************
[END DATA]

Compare the factual content of the submitted answer with the expert answer. Ignore any differences in style, grammar, or punctuation.

Does the submission contain the content in the expert answer?

{instructions}
"""  # noqa: E501


DEFAULT_PAIRWISE_TEMPLATE = """
You are comparing two answers to the same task based on a criterion. Here is the data:

[BEGIN DATA]
***
[Task]: {question}
***
[Answer A]: {answer_a}
***
[Answer B]: {answer_b}
***
[Criterion]: {criterion}
***
[END DATA]

Which answer meets the criterion better?

{instructions}
"""

DEFAULT_PAIRWISE_INSTRUCTIONS = """
After comparing the two answers, reply with 'GRADE: $VERDICT' (without quotes) where VERDICT is one of A, B or TIE: "A" if answer A is better, "B" if answer B is better, "TIE" if they are equally good (or equally bad). The order in which the answers are shown says nothing about their quality.

First, write out in a step by step manner your reasoning about the criterion to be sure that your conclusion is correct. Then, end with your verdict formatted as 'GRADE: $VERDICT' (without quotes) where VERDICT is one of A, B or TIE.
"""  # noqa: E501

PAIRWISE_GRADE_PATTERN = r"(?is).*(?<!\w)GRADE(?!\w)\s*:\s*\**\s*(TIE|A|B)(?!\w)"
"""The last ``GRADE: A``, ``GRADE: B`` or ``GRADE: TIE`` of a pairwise judge's reply."""


def default_instructions(partial_credit: bool) -> str:
    """The grading instructions: reason step by step, end with ``GRADE: C`` (or P, or I)."""
    p = "P" if partial_credit else ""
    partial = '"P" for partially correct answers,' if partial_credit else ""
    return f"""
After assessing the submitted answer, reply with 'GRADE: $LETTER' (without quotes) where LETTER is one of C{p}I.  Please choose ONE option for the grade: either "C" for correct answers, {partial}or "I" for incorrect answers.

For example, after reviewing a correct answer you might write 'GRADE: C' or after reviewing an incorrect answer you might write 'GRADE: I'.

First, write out in a step by step manner your reasoning about the criterion to be sure that your conclusion is correct. Avoid simply stating the correct answers at the outset. Then, end with your answer formatted as 'GRADE: $LETTER' (without quotes) where LETTER is one of C{p}I.
"""  # noqa: E501


_SPACING = r"[\s\u200b\u200c\u200d\u200e\u200f\u2060\u2063\ufeff]*"
DEFAULT_GRADE_PATTERN = rf"(?is).*(?<!\w)GRADE(?!\w){_SPACING}:{_SPACING}([CPI])"
"""The last ``GRADE: X`` of the reply (the greedy ``.*`` skips earlier mentions)."""
WORD_GRADE_PATTERN = rf"(?is).*(?<!\w)GRADE(?!\w){_SPACING}:{_SPACING}(\w*)"
"""The word after the last ``GRADE:``, checked against the offered grades afterwards."""

GRADE_WORDS = {"c": "C", "correct": "C", "i": "I", "incorrect": "I", "p": "P", "partial": "P"}

_DELIMITER = re.compile(r"\[(BEGIN|END) DATA\]", re.IGNORECASE)


def neutralize(text: str) -> str:
    """``[END DATA]`` → ``[END-DATA]``, so data cannot close the template's block early."""
    return _DELIMITER.sub(lambda m: m.group(0).replace(" ", "-"), text)


def _neutralize_value(value: Any) -> Any:
    if isinstance(value, str):
        return neutralize(value)
    if isinstance(value, dict):
        return {k: _neutralize_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_neutralize_value(v) for v in value)
    return value


def fill(
    template: str, *, values: dict[str, str], instructions: str, metadata: dict[str, Any]
) -> str:
    """A judge's prompt: ``template`` filled with ``values``, the instructions and metadata.

    Every value and metadata entry is neutralized (``[END DATA]`` cannot close the data
    block early); metadata keys are template variables too, except the names of ``values``.

    Raises:
        KeyError: the template names a variable the case does not have.
    """
    reserved = (*values, "instructions")
    extra = {k: _neutralize_value(v) for k, v in metadata.items() if k not in reserved}
    filled = {k: neutralize(v) for k, v in values.items()}
    return template.format(**filled, instructions=instructions, **extra)


def grading_prompt(
    template: str,
    *,
    question: str,
    answer: str,
    criterion: str,
    instructions: str,
    metadata: dict[str, Any],
) -> str:
    """The judge's prompt: the template filled with the case, the answer and the criterion.

    Metadata keys are template variables too.

    Raises:
        KeyError: the template names a variable the case does not have.
    """
    values = {"question": question, "answer": answer, "criterion": criterion}
    return fill(template, values=values, instructions=instructions, metadata=metadata)


def read_grade(
    reply: str, *, grade_pattern: str, grade_words: bool, grades: tuple[str, ...]
) -> str | None:
    """The grade letter in a judge's reply, or ``None`` when it gave none it was offered.

    Args:
        reply: what the judge answered.
        grade_pattern: a regex whose first group is the grade.
        grade_words: map spelled-out verdicts (``Correct``) to their letter and refuse other
            words (the default pattern's rule).
        grades: the grades the instructions offered; empty accepts any.
    """
    found = re.search(grade_pattern, reply)
    value: str | None = found.group(1) if found else None
    if value is not None and grade_words:
        word = value.strip()
        if word.lower() in GRADE_WORDS:
            value = GRADE_WORDS[word.lower()]
        elif len(word) == 1:
            value = word.upper()
        else:
            value = None
    if value is not None and grades and value not in grades:
        value = None
    return value


def grade_value(grade: str) -> float:
    """A grade as a number, as inspect_ai's ``value_to_float``.

    C (and yes/true) 1, P 0.5, I and N (and no/false) 0, a numeric string its number,
    anything else 0.
    """
    if grade == "C":
        return 1.0
    if grade == "P":
        return 0.5
    if grade in ("I", "N"):
        return 0.0
    lowered = grade.lower()
    if lowered in ("yes", "true"):
        return 1.0
    if lowered in ("no", "false"):
        return 0.0
    try:
        number = float(lowered)
    except ValueError:
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0
