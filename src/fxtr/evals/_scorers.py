"""``Score`` and ``Scorer``: how an answer is graded, as a value that is part of the inputs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
PAIRWISE = "pairwise"
KINDS = ("exact", "includes", "match", "pattern", "f1", "choice", "numeric", *JUDGES, PAIRWISE)


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

    def grader(self) -> Scorer:
        """What grades one answer: this scorer (an ``AuditedScorer`` drops its audit)."""
        return self

    def __fxtr_id__(self) -> str:
        """The scorer's kind (and judge) in pytest node ids."""
        return f"{self.kind}[{self.judge.name}]" if self.judge else self.kind

    def grade(self, case: Case, completion: str) -> Score:
        """Grade a completion without a model (every kind but the judges).

        Raises:
            ValueError: a judge (use the ``score`` step), or a case without the target or
                choices this scorer needs.
        """
        if self.kind == PAIRWISE:
            msg = "pairwise grades two answers at once: run it with the fxtr.evaluate workflow."
            raise ValueError(msg)
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


class AuditedScorer(Scorer):
    """A judge with a gold set, repeated verdicts or a pairwise reference (DESIGN §15).

    The judge builders return one only when asked for one of these, so a plain scorer keeps
    the fields (and the fingerprints of its cached grades) it always had.
    """

    calibration: tuple[Case, ...] = ()
    """Gold cases: ``metadata`` holds the ``completion`` to grade and its ``label`` (1/0)."""
    judge_samples: int = 1
    """How many times the judge grades each answer (the majority verdict is the score)."""
    against: Model | None = None
    """``pairwise``: the model whose answers this model's are graded against."""

    def grader(self) -> Scorer:
        """This scorer without its gold set, K and reference: what grades one answer.

        The grading steps take this one, so adding gold cases or raising ``judge_samples``
        never changes the inputs of the grades already cached.
        """
        return Scorer(**{name: getattr(self, name) for name in Scorer.__entity_fields__})


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
    calibration: Iterable[Case] | None = None,
    judge_samples: int = 1,
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
        calibration: gold cases: each case's ``metadata`` holds a ``completion`` to grade and
            its right verdict ``label`` (1 pass, 0 fail). The judge grades them too, and the
            report gives its specificity ``q0`` and sensitivity ``q1`` and each group's
            pass rate corrected for them, which the gate then uses (DESIGN §15).
        judge_samples: ask the judge this many times per answer (each a cached step of the
            ``judge_sample`` dimension); the score is the majority verdict (the mean for
            numeric grades) and the report gives the judge's flip rate.

    Raises:
        ValueError: a gold case without ``completion`` or ``label``, a label other than 0 or
            1, or ``judge_samples`` < 1.
    """
    return _judge_scorer(
        "model_graded_qa",
        judge,
        template or _judge.DEFAULT_MODEL_GRADED_QA_TEMPLATE,
        instructions,
        grade_pattern,
        partial_credit,
        calibration,
        judge_samples,
    )


def model_graded_fact(
    judge: Model,
    *,
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str | None = None,
    partial_credit: bool = False,
    calibration: Iterable[Case] | None = None,
    judge_samples: int = 1,
) -> Scorer:
    """A judge model checks that the answer contains the facts of the target.

    The target is the expert answer; inspect_ai's ``model_graded_fact`` template by default;
    the other arguments (``calibration`` and ``judge_samples`` included) are
    ``model_graded_qa``'s.

    Raises:
        ValueError: as ``model_graded_qa``.
    """
    return _judge_scorer(
        "model_graded_fact",
        judge,
        template or _judge.DEFAULT_MODEL_GRADED_FACT_TEMPLATE,
        instructions,
        grade_pattern,
        partial_credit,
        calibration,
        judge_samples,
    )


def _judge_scorer(
    kind: str,
    judge: Model,
    template: str,
    instructions: str | None,
    grade_pattern: str | None,
    partial_credit: bool,
    calibration: Iterable[Case] | None = None,
    judge_samples: int = 1,
) -> Scorer:
    if not isinstance(judge, Model):
        msg = f"{kind}(judge) takes a fxtr.evals.Model, got {judge!r}: write Model({judge!r})."
        raise TypeError(msg)
    gold = check_calibration(kind, calibration)
    samples = check_judge_samples(kind, judge_samples)
    default_instructions = not instructions
    default_pattern = grade_pattern is None
    offered: tuple[str, ...] = ()
    if default_pattern and default_instructions:
        resolved = _judge.WORD_GRADE_PATTERN
        offered = ("C", "P", "I") if partial_credit else ("C", "I")
    else:
        resolved = grade_pattern or _judge.DEFAULT_GRADE_PATTERN
    fields: dict[str, Any] = {
        "kind": kind,
        "judge": judge,
        "template": template,
        "instructions": instructions or _judge.default_instructions(partial_credit),
        "grade_pattern": resolved,
        "grade_words": default_pattern,
        "grades": offered,
    }
    if gold or samples != 1:
        return AuditedScorer(**fields, calibration=gold, judge_samples=samples)
    return Scorer(**fields)


def pairwise(
    judge: Model,
    against: Model,
    *,
    template: str | None = None,
    instructions: str | None = None,
    grade_pattern: str | None = None,
    judge_samples: int = 1,
) -> Scorer:
    """A judge compares each answer with ``against``'s answer to the same case and sample.

    Both orders are asked (this model's answer shown first, then second); the judge ends its
    reply with ``GRADE: A``, ``GRADE: B`` or ``GRADE: TIE`` (A: the answer shown first). The
    score is 1.0 when this model's answer wins in both orders, 0.0 when it loses in both, and
    0.5 for a tie, or when the verdict changes with the order (position bias); the report
    gives the judge's position-inconsistency rate. ``against``'s answers are generated in the
    same job (cached at ``against[case=...,sample=...]``).

    Args:
        judge: the grading model.
        against: the model whose answers are the reference.
        template: the prompt, with ``{question}``, ``{answer_a}``, ``{answer_b}``,
            ``{criterion}`` (the case's target, or "the more correct answer"),
            ``{instructions}`` and any ``Case.metadata`` key.
        instructions: how to answer (default: reason, then ``GRADE: A|B|TIE``).
        grade_pattern: a regex whose first group is ``A``, ``B`` or ``TIE``.
        judge_samples: grade each order this many times; each order's verdict is the most
            common (the report gives the flip rate).

    Raises:
        TypeError: ``judge`` or ``against`` is not a ``Model``.
        ValueError: ``judge_samples`` < 1.
    """
    for name, model in (("judge", judge), ("against", against)):
        if not isinstance(model, Model):
            msg = f"pairwise({name}) takes a fxtr.evals.Model, got {model!r}: write Model(NAME)."
            raise TypeError(msg)
    return AuditedScorer(
        kind=PAIRWISE,
        judge=judge,
        against=against,
        template=template or _judge.DEFAULT_PAIRWISE_TEMPLATE,
        instructions=instructions or _judge.DEFAULT_PAIRWISE_INSTRUCTIONS,
        grade_pattern=grade_pattern or _judge.PAIRWISE_GRADE_PATTERN,
        grades=("A", "B", "TIE"),
        judge_samples=check_judge_samples(PAIRWISE, judge_samples),
    )


def check_judge_samples(kind: str, judge_samples: object) -> int:
    """``judge_samples`` as an int >= 1.

    Raises:
        ValueError: anything else, naming the scorer and the fix.
    """
    if isinstance(judge_samples, bool) or not isinstance(judge_samples, int) or judge_samples < 1:
        msg = (
            f"{kind}(judge_samples={judge_samples!r}): the judge must grade each answer at "
            "least once; give a whole number >= 1 (3 or 5 make a majority)."
        )
        raise ValueError(msg)
    return judge_samples


def check_calibration(kind: str, cases: Iterable[Case] | None) -> tuple[Case, ...]:
    """The gold cases of a judge, checked: each has a ``completion`` and a ``label`` of 0 or 1.

    Raises:
        TypeError: an item that is not a ``Case``.
        ValueError: naming the gold case, what it lacks and the fix.
    """
    if cases is None:
        return ()
    if isinstance(cases, Case):
        cases = [cases]
    gold = tuple(cases)
    seen: set[str] = set()
    for case in gold:
        if not isinstance(case, Case):
            msg = (
                f"{kind}(calibration=...) takes fxtr.evals.Case gold cases, got {case!r}: load "
                "them with load_cases(path) (columns: input, target, completion, label)."
            )
            raise TypeError(msg)
        where = f"{kind}(calibration=...): gold case {case.id!r}"
        metadata = case.metadata or {}
        missing = [k for k in ("completion", "label") if k not in metadata]
        if missing:
            msg = (
                f"{where} has no {' and no '.join(repr(k) for k in missing)} in its metadata; "
                "a gold case holds the completion the judge grades (metadata['completion']) "
                "and the right verdict (metadata['label'], 1 pass or 0 fail): add those "
                "columns to the gold file (load_cases keeps extra columns as metadata)."
            )
            raise ValueError(msg)
        if not isinstance(metadata["completion"], str):
            got = metadata["completion"]
            msg = f"{where}: metadata['completion'] must be the answer's text, not {got!r}."
            raise ValueError(msg)
        label = gold_label(metadata["label"])
        if label is None:
            msg = (
                f"{where} has label {metadata['label']!r}; a gold label is 1 (the completion "
                "passes) or 0 (it fails): relabel it."
            )
            raise ValueError(msg)
        if not case.targets:
            msg = f"{where} has no target; the judge grades against the case's target: add one."
            raise ValueError(msg)
        if case.id in seen:
            msg = f"{where} appears twice; give each gold case its own id."
            raise ValueError(msg)
        seen.add(case.id)
    return gold


def gold_label(value: object) -> int | None:
    """A gold label as 1 or 0 (``1``, ``0``, ``True``, ``"1"``, ``1.0``), else ``None``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    return None
