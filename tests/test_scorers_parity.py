"""fxtr.evals' scorers give inspect_ai's values on the same (answer, target) pairs.

The corpus (``tests/data/scorers/corpus.json``) holds the pairs with the values inspect_ai
computed (``build_corpus.py``), so the default run checks parity without inspect_ai. Where
inspect_ai is importable (``pip install inspect-ai`` in a separate venv), the ``live`` tests
recompute every value with inspect_ai itself and compare case by case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fxtr.evals import (
    Case,
    Model,
    Scorer,
    _judge,
    choice,
    exact,
    f1,
    includes,
    match,
    model_graded_fact,
    model_graded_qa,
    pattern,
)

DATA = Path(__file__).parent / "data" / "scorers"
CORPUS = json.loads((DATA / "corpus.json").read_text(encoding="utf-8"))
JUDGE = Model("mock/judge")

TEXT_SCORERS: dict[str, Scorer] = {
    "exact": exact(),
    "f1": f1(),
    "includes": includes(),
    "includes_case": includes(ignore_case=False),
    "match_end": match(),
    "match_begin": match("begin"),
    "match_any": match("any"),
    "match_exact": match("exact"),
    "match_end_case": match("end", ignore_case=False),
}
CUSTOM_INSTRUCTIONS = "End with 'GRADE: C' if the submission is right, else 'GRADE: I'."
CUSTOM_TEMPLATE = (
    "Topic: {topic}\nQuestion: {question}\nAnswer: {answer}\nWanted: {criterion}\n{instructions}"
)
JUDGES: dict[str, Scorer] = {
    "fact": model_graded_fact(JUDGE),
    "qa": model_graded_qa(JUDGE),
    "qa_partial": model_graded_qa(JUDGE, partial_credit=True),
    "fact_instructions": model_graded_fact(JUDGE, instructions=CUSTOM_INSTRUCTIONS),
    "qa_pattern": model_graded_qa(JUDGE, grade_pattern=r"GRADE:\s*(\w)"),
    "qa_template": model_graded_qa(JUDGE, template=CUSTOM_TEMPLATE),
}


def _case(target: Any, n_choices: int = 0) -> Case:
    choices = tuple(f"option {i}" for i in range(n_choices))
    return Case(id="c", input="question", target=target, choices=choices)


def text_value(name: str, answer: str, target: Any) -> float:
    return TEXT_SCORERS[name].grade(_case(target), answer).value


def pattern_value(
    regex: str, answer: str, target: Any, *, match_all: bool, ignore_case: bool
) -> float:
    scorer = pattern(regex, ignore_case=ignore_case, match_all=match_all)
    return scorer.grade(_case(target), answer).value


def choice_value(answer: str, target: Any, n_choices: int, *, multiple: bool) -> float | str:
    try:
        return choice(multiple_correct=multiple).grade(_case(target, n_choices), answer).value
    except ValueError:
        return "error"


def judge_value(name: str, reply: str) -> float | None:
    scorer = JUDGES[name]
    grade = _judge.read_grade(
        reply,
        grade_pattern=scorer.grade_pattern or "",
        grade_words=scorer.grade_words,
        grades=scorer.grades,
    )
    return None if grade is None else _judge.grade_value(grade)


def judge_prompt(name: str, question: str, answer: str, target: Any, metadata: dict) -> str:
    scorer = JUDGES[name]
    case = Case(id="c", input=question, target=target, metadata=metadata)
    return _judge.grading_prompt(
        scorer.template or "",
        question=case.input,
        answer=answer,
        criterion="".join(case.targets),
        instructions=scorer.instructions or "",
        metadata=case.metadata,
    )


def _show(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k != "inspect"}, ensure_ascii=False)


def test_the_corpus_is_large_and_covers_the_cases_that_matter():
    pairs = CORPUS["pairs"]
    assert len(pairs) >= 150
    answers = " ".join(p["answer"] for p in pairs)
    assert any(isinstance(p["target"], list) for p in pairs)
    for needle in ("the ", "é", "東京", "1,000", "!", "(", "\u2212"):
        assert needle in answers, needle
    values = {v for p in pairs for v in p["inspect"].values()}
    assert {0.0, 1.0} <= values and any(0 < v < 1 for v in values)  # f1 fractions too


@pytest.mark.parametrize("name", sorted(TEXT_SCORERS))
def test_text_scorers_equal_inspect_on_every_pair(name):
    wrong = [
        f"{_show(p)}: fxtr {mine}, inspect {p['inspect'][name]}"
        for p in CORPUS["pairs"]
        if (mine := text_value(name, p["answer"], p["target"])) != p["inspect"][name]
    ]
    assert not wrong, f"{name}: {len(wrong)} of {len(CORPUS['pairs'])} differ:\n" + "\n".join(wrong)


def test_pattern_equals_inspect():
    wrong = []
    for row in CORPUS["patterns"]:
        for config, expected in row["inspect"].items():
            mine = pattern_value(
                row["regex"],
                row["answer"],
                row["target"],
                match_all=row["match_all"],
                ignore_case=config == "ignore_case",
            )
            if mine != expected:
                wrong.append(f"{_show(row)} [{config}]: fxtr {mine}, inspect {expected}")
    assert not wrong, "\n".join(wrong)


def test_choice_equals_inspect_multiple_choice():
    wrong = [
        f"{_show(row)}: fxtr {mine}, inspect {row['inspect']}"
        for row in CORPUS["choices"]
        if (
            mine := choice_value(
                row["answer"], row["target"], row["n_choices"], multiple=row["multiple"]
            )
        )
        != row["inspect"]
    ]
    assert not wrong, "\n".join(wrong)


def test_judge_grades_equal_inspect():
    wrong = [
        f"{row['reply']!r} [{name}]: fxtr {mine}, inspect {expected}"
        for row in CORPUS["judges"]
        for name, expected in row["inspect"].items()
        if (mine := judge_value(name, row["reply"])) != expected
    ]
    assert not wrong, "\n".join(wrong)


def test_judge_prompts_equal_inspect():
    for row in CORPUS["judge_prompts"]:
        for name, expected in row["inspect"].items():
            mine = judge_prompt(
                name, row["question"], row["answer"], row["target"], row["metadata"]
            )
            assert mine == expected, f"{name} on {_show(row)}"


# --- live: inspect_ai itself, where it is installed ------------------------------------


@pytest.fixture(scope="module")
def inspect_values():
    pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (a test-only reference)")
    sys.path.insert(0, str(DATA))
    try:
        import inspect_values as module
    finally:
        sys.path.remove(str(DATA))
    return module


@pytest.mark.parametrize("name", sorted(TEXT_SCORERS))
def test_live_text_scorers_equal_inspect(inspect_values, name):
    for p in CORPUS["pairs"]:
        theirs = inspect_values.text_value(name, p["answer"], p["target"])
        assert text_value(name, p["answer"], p["target"]) == theirs, _show(p)
        assert theirs == p["inspect"][name], (
            f"the corpus is stale: rerun build_corpus.py ({_show(p)})"
        )


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # tenacity's, inside inspect_ai
def test_live_pattern_choice_and_judges_equal_inspect(inspect_values):
    for row in CORPUS["patterns"]:
        for config in ("ignore_case", "case"):
            kwargs = {"match_all": row["match_all"], "ignore_case": config == "ignore_case"}
            theirs = inspect_values.pattern_value(
                row["regex"], row["answer"], row["target"], **kwargs
            )
            assert pattern_value(row["regex"], row["answer"], row["target"], **kwargs) == theirs, (
                _show(row)
            )
    for row in CORPUS["choices"]:
        args = (row["answer"], row["target"], row["n_choices"])
        theirs = inspect_values.choice_value(*args, multiple=row["multiple"])
        assert choice_value(*args, multiple=row["multiple"]) == theirs, _show(row)
    for row in CORPUS["judges"]:
        for name in JUDGES:
            assert judge_value(name, row["reply"]) == inspect_values.judge_value(
                name, row["reply"]
            ), (
                name,
                row["reply"],
            )
    for row in CORPUS["judge_prompts"]:
        for name in JUDGES:
            args = (row["question"], row["answer"], row["target"], row["metadata"])
            assert judge_prompt(name, *args) == inspect_values.judge_prompt(name, *args), name


# Random pairs over an alphabet of the characters the rules treat specially.
_ALPHABET = list("aAbBeEtThHnN019 .,;:!?-'\"()$%éÉß東\t\n\u00a0\u2212")
_TEXTS = st.text(alphabet=_ALPHABET, max_size=24) | st.sampled_from(
    ["the", "a", "an", "The cat", "1.0", "1", "-5", "3.14.", "(3.14)", "nan", "1e3", ""]
)


@pytest.mark.parametrize("name", sorted(TEXT_SCORERS))
def test_live_random_pairs_equal_inspect(inspect_values, name):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(answer=_TEXTS, target=_TEXTS | st.lists(_TEXTS, min_size=1, max_size=3))
    def check(answer, target):
        assert text_value(name, answer, target) == inspect_values.text_value(name, answer, target)

    check()


_PIECES = ["ANSWER", "answer", ":", " ", "A", "b", "C", "D", "E", "1", ",", ".", "$", "**", "(", ")",
           " and ", "\n", "GRADE", "grade", "Correct", "I", "P", "x", "\u200b", "down"]
_REPLIES = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)


def test_live_random_choice_answers_and_judge_replies_equal_inspect(inspect_values):
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        completion=_REPLIES,
        target=st.sampled_from(["A", "B", "C", ["A", "C"], ["B", "D"]]),
        n_choices=st.sampled_from([3, 4]),
    )
    def check_choice(completion, target, n_choices):
        multiple = isinstance(target, list)
        assert choice_value(completion, target, n_choices, multiple=multiple) == (
            inspect_values.choice_value(completion, target, n_choices, multiple=multiple)
        )

    check_choice()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # tenacity's, inside inspect_ai
def test_live_random_judge_replies_equal_inspect(inspect_values):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(reply=_REPLIES, name=st.sampled_from(sorted(JUDGES)))
    def check_judge(reply, name):
        assert judge_value(name, reply) == inspect_values.judge_value(name, reply)

    check_judge()
