"""Scorer builders refuse bad settings; numeric() against numbers computed by hand; the
pure grading entry point (``Scorer.grade``) for every kind but the judges."""

from __future__ import annotations

import pytest

from fxtr.evals import (
    Case,
    Model,
    Scorer,
    case_prompt,
    choice,
    exact,
    f1,
    match,
    model_graded_fact,
    model_graded_qa,
    numeric,
    pattern,
)


def _grade(scorer: Scorer, answer: str, target, choices=()):
    return scorer.grade(Case(id="c", input="q", target=target, choices=choices), answer)


def test_builders_refuse_bad_settings_with_the_fix():
    with pytest.raises(ValueError, match="use one of begin, end, any, exact"):
        match(location="middle")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        pattern("(unclosed")
    with pytest.raises(ValueError, match="tolerance >= 0"):
        numeric(tolerance=-1)
    with pytest.raises(TypeError, match=r"write Model\('openai/gpt-5'\)"):
        model_graded_qa("openai/gpt-5")
    with pytest.raises(ValueError, match="Unknown scorer kind 'fuzzy'"):
        Scorer(kind="fuzzy")


@pytest.mark.parametrize(
    ("answer", "target", "tolerance", "value", "read"),
    [
        ("The total is $1,234.50.", "1234.5", 0.0, 1.0, 1234.5),
        ("about 3.14159", "3.14", 0.01, 1.0, 3.14159),
        ("about 3.14159", "3.14", 0.0, 0.0, 3.14159),
        ("first 2, then 7", "7", 0.0, 1.0, 7.0),  # the last number counts
        ("first 7, then 2", "7", 0.0, 0.0, 2.0),
        ("It is \u22127 degrees", "-7", 0.0, 1.0, -7.0),
        ("2e3 metres", "2000", 0.0, 1.0, 2000.0),
        ("no number here", "4", 0.0, 0.0, None),
        ("99", ["100", "99"], 0.0, 1.0, 99.0),
    ],
)
def test_numeric_reads_the_last_number(answer, target, tolerance, value, read):
    score = _grade(numeric(tolerance), answer, target)
    assert score.value == value
    assert score.answer == ("" if read is None else format(read, "g"))


def test_numeric_needs_numeric_targets():
    with pytest.raises(ValueError, match="one number each, got 'Paris'"):
        _grade(numeric(), "4", "Paris")


def test_scores_carry_what_was_extracted():
    assert _grade(pattern(r"ANSWER: (\w+)"), "ANSWER: Rome", "rome").answer == "Rome"
    assert _grade(pattern(r"ANSWER: (\w+)"), "no", "rome").answer is None
    assert _grade(choice(multiple_correct=True), "ANSWER: C, A", ["A", "C"], ("x", "y", "z")).answer == "A, C"
    assert _grade(f1(), "quick brown fox", "the quick brown fox jumps").value == round(2 * 1 * 0.75 / 1.75, 2)
    assert _grade(exact(), "The Paris!", "paris").value == 1.0


def test_judges_and_cases_without_what_a_scorer_needs():
    judge = model_graded_fact(Model("mock/j"))
    with pytest.raises(ValueError, match="calls a model: grade with the fxtr.evals.score step"):
        _grade(judge, "x", "y")
    with pytest.raises(ValueError, match="case 'c' has none"):
        _grade(exact(), "x", None)
    with pytest.raises(ValueError, match="choice\\(\\) needs cases with choices"):
        _grade(choice(), "ANSWER: A", "A")
    assert judge.__fxtr_id__() == "model_graded_fact[mock/j]" and exact().__fxtr_id__() == "exact"


def test_a_multiple_choice_case_is_asked_with_lettered_options():
    single = Case(id="m", input="Pick one.", target="B", choices=("x", "y"))
    assert case_prompt(single).endswith("Pick one.\n\nA) x\nB) y")
    assert "'ANSWER: $LETTER'" in case_prompt(single) and "one of A,B." in case_prompt(single)
    several = Case(id="m", input="Pick all.", target=["A", "B"], choices=("x", "y"))
    assert "multiple answers may be correct" in case_prompt(several)
    assert case_prompt(Case(id="o", input="Open question?")) == "Open question?"
