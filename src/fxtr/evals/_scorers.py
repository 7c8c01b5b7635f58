"""``Score`` and ``Scorer``: how an answer is graded, as a value that is part of the inputs."""

from __future__ import annotations

from fxtr.evals import _judge, _text
from fxtr.evals._cases import Case
from fxtr.evals._models import Model
from fxtr.experiment._entity import Entity


class Score(Entity):
    """A graded answer.

    ``value`` is 1.0 correct, 0.0 incorrect, or a fraction; ``answer`` what the scorer
    extracted; ``explanation`` the details (a judge's raw reply).
    """

    value: float
    answer: str | None = None
    explanation: str | None = None


JUDGES = ("model_graded_qa", "model_graded_fact")
KINDS = ("exact", "includes", "match", "pattern", "f1", "choice", "numeric", *JUDGES)


class Scorer(Entity):
    """How to grade an answer.

    Build one with ``exact()``, ``includes()``, ``match()``, ``pattern()``, ``f1()``,
    ``choice()``, ``numeric()``, ``model_graded_qa()`` or ``model_graded_fact()``.

    Every setting is a field, a judge's template, instructions and grade pattern included, so
    changing one changes the score step's inputs: cached scores go through the conflict policy
    instead of being served stale.
    """

    kind: str
    ignore_case: bool = True
    location: str = "end"
    regex: str | None = None
    match_all: bool = False
    tolerance: float = 0.0
    multiple_correct: bool = False
    judge: Model | None = None
    template: str | None = None
    instructions: str | None = None
    grade_pattern: str | None = None
    grade_words: bool = False
    grades: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"Unknown scorer kind {self.kind!r}: use one of {', '.join(KINDS)}."
            raise ValueError(msg)

    def __fxtr_id__(self) -> str:
        """The scorer's kind (and judge) in pytest node ids."""
        return f"{self.kind}[{self.judge.name}]" if self.judge else self.kind

    def grade(self, case: Case, completion: str) -> Score:
        """Grade a completion without a model (every kind but the judges).

        Raises:
            ValueError: a judge (use the ``score`` step), or a case without the target or
                choices this scorer needs.
        """
        if self.kind in JUDGES:
            msg = f"{self.kind} calls a model: grade with the fxtr.evals.score step."
            raise ValueError(msg)
        targets = _targets(self, case)
        if self.kind == "exact":
            return Score(value=_text.exact_value(completion, targets), answer=completion)
        if self.kind == "f1":
            return Score(value=_text.f1_value(completion, targets), answer=completion)
        if self.kind == "includes":
            value = _text.includes_value(completion, targets, ignore_case=self.ignore_case)
            return Score(value=value, answer=completion)
        if self.kind == "match":
            value = _text.match_value(
                completion, targets, location=self.location, ignore_case=self.ignore_case
            )
            return Score(value=value, answer=completion.strip())
        if self.kind == "pattern":
            assert self.regex is not None
            value, found = _text.pattern_value(
                completion,
                targets,
                regex=self.regex,
                ignore_case=self.ignore_case,
                match_all=self.match_all,
            )
            return Score(value=value, answer=found, explanation=completion)
        if self.kind == "numeric":
            value, number = _text.numeric_value(completion, targets, tolerance=self.tolerance)
            return Score(value=value, answer=number)
        if not case.choices:
            msg = f"choice() needs cases with choices; case {case.id!r} has none."
            raise ValueError(msg)
        value, picked = _text.choice_value(
            completion, targets, len(case.choices), multiple=self.multiple_correct
        )
        return Score(value=value, answer=picked, explanation=completion)


def _targets(scorer: Scorer, case: Case) -> list[str]:
    targets = case.targets
    if not targets:
        msg = (
            f"{scorer.kind}() compares with the case's target, and case {case.id!r} has none: "
            "give the dataset a target column (load_cases(..., target=NAME))."
        )
        raise ValueError(msg)
    return targets


def exact() -> Scorer:
    """1.0 when the answer equals a target once both are normalised, as inspect_ai's.

    Casefolded, punctuation and articles removed, numbers compared as numbers.
    """
    return Scorer(kind="exact")


def includes(ignore_case: bool = True) -> Scorer:
    """1.0 when a target appears in the answer, as inspect_ai's ``includes()``."""
    return Scorer(kind="includes", ignore_case=ignore_case)


def match(location: str = "end", ignore_case: bool = True) -> Scorer:
    """1.0 when a target is at the ``location`` of the answer, as inspect_ai's ``match()``.

    ``location`` is ``begin``, ``end``, ``any`` or ``exact``; whitespace and punctuation at
    the edges are ignored.
    """
    if location not in _text.LOCATIONS:
        msg = f"match(location={location!r}): use one of {', '.join(_text.LOCATIONS)}."
        raise ValueError(msg)
    return Scorer(kind="match", location=location, ignore_case=ignore_case)


def pattern(regex: str, ignore_case: bool = True, match_all: bool = False) -> Scorer:
    """1.0 when what ``regex`` extracts equals a target, as inspect_ai's ``pattern()``.

    The extract is a group (every group with ``match_all``), or the whole match without
    groups.
    """
    import re

    try:
        re.compile(regex)
    except re.error as exc:
        msg = f"pattern({regex!r}) is not a valid regular expression: {exc}."
        raise ValueError(msg) from None
    return Scorer(kind="pattern", regex=regex, ignore_case=ignore_case, match_all=match_all)


def f1() -> Scorer:
    """The bag-of-words F1 against the best target, as inspect_ai's ``f1()`` (two places)."""
    return Scorer(kind="f1")


def choice(multiple_correct: bool = False) -> Scorer:
    """For cases with ``choices``: 1.0 when the answer picks exactly the target's letters.

    The pick is the answer's ``ANSWER: X`` line, read as inspect_ai's ``multiple_choice()``
    solver does before its ``choice()`` scorer. With ``multiple_correct``, ``ANSWER: A, C``
    picks several.
    """
    return Scorer(kind="choice", multiple_correct=multiple_correct)


def numeric(tolerance: float = 0.0) -> Scorer:
    """1.0 when the answer's last number is within ``tolerance`` (absolute) of a target.

    ``$1,234.50`` reads 1234.5.
    """
    if not tolerance >= 0:
        msg = f"numeric(tolerance={tolerance!r}) needs a tolerance >= 0."
        raise ValueError(msg)
    return Scorer(kind="numeric", tolerance=float(tolerance))


def model_graded_qa(
    judge: Model,
    *,
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str | None = None,
    partial_credit: bool = False,
) -> Scorer:
    """A judge model grades the answer against the case's target as a criterion.

    By default with inspect_ai's ``model_graded_qa`` template, instructions and grade rules.

    Args:
        judge: the grading model.
        template: the prompt, with ``{question}``, ``{answer}``, ``{criterion}``,
            ``{instructions}`` and any ``Case.metadata`` key.
        instructions: how to answer; must make the judge write a grade ``grade_pattern``
            finds (default: reason, then end with ``GRADE: C`` or ``GRADE: I``).
        grade_pattern: a regex whose first group is the grade letter (C 1.0, P 0.5, I 0.0).
        partial_credit: offer ``P`` (0.5) in the default instructions.
    """
    return _judge_scorer(
        "model_graded_qa",
        judge,
        template or _judge.DEFAULT_MODEL_GRADED_QA_TEMPLATE,
        instructions,
        grade_pattern,
        partial_credit,
    )


def model_graded_fact(
    judge: Model,
    *,
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str | None = None,
    partial_credit: bool = False,
) -> Scorer:
    """A judge model checks that the answer contains the facts of the target.

    The target is the expert answer; inspect_ai's ``model_graded_fact`` template by default;
    the other arguments are ``model_graded_qa``'s.
    """
    return _judge_scorer(
        "model_graded_fact",
        judge,
        template or _judge.DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
        instructions,
        grade_pattern,
        partial_credit,
    )


def _judge_scorer(
    kind: str,
    judge: Model,
    template: str,
    instructions: str | None,
    grade_pattern: str | None,
    partial_credit: bool,
) -> Scorer:
    if not isinstance(judge, Model):
        msg = f"{kind}(judge) takes a fxtr.evals.Model, got {judge!r}: write Model({judge!r})."
        raise TypeError(msg)
    default_instructions = not instructions
    default_pattern = grade_pattern is None
    offered: tuple[str, ...] = ()
    if default_pattern and default_instructions:
        resolved = _judge.WORD_GRADE_PATTERN
        offered = ("C", "P", "I") if partial_credit else ("C", "I")
    else:
        resolved = grade_pattern or _judge.DEFAULT_GRADE_PATTERN
    return Scorer(
        kind=kind,
        judge=judge,
        template=template,
        instructions=instructions or _judge.default_instructions(partial_credit),
        grade_pattern=resolved,
        grade_words=default_pattern,
        grades=offered,
    )
