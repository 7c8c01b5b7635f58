"""inspect_ai's scorer values for (answer, target) pairs: the reference fxtr.evals matches.

Imported only where inspect_ai is installed (build_corpus.py, and the live parity test).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from inspect_ai.model import ModelName, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import (
    Target,
    choice,
    exact,
    f1,
    includes,
    match,
    model_graded_fact,
    model_graded_qa,
    pattern,
)
from inspect_ai.scorer._metric import value_to_float
from inspect_ai.solver._multiple_choice import (
    parse_answers,
    set_choices_based_on_generated_response,
)
from inspect_ai.solver._task_state import TaskState

TEXT_CONFIGS: dict[str, Any] = {
    "exact": exact,
    "f1": f1,
    "includes": includes,
    "includes_case": lambda: includes(ignore_case=False),
    "match_end": match,
    "match_begin": lambda: match("begin"),
    "match_any": lambda: match("any"),
    "match_exact": lambda: match("exact"),
    "match_end_case": lambda: match("end", ignore_case=False),
}
PATTERN_CONFIGS: dict[str, dict[str, Any]] = {
    "ignore_case": {"ignore_case": True},
    "case": {"ignore_case": False},
}
CUSTOM_INSTRUCTIONS = "End with 'GRADE: C' if the submission is right, else 'GRADE: I'."
CUSTOM_PATTERN = r"(?i)VERDICT:\s*([CPI])|GRADE: ([CPI])"
CUSTOM_TEMPLATE = (
    "Topic: {topic}\nQuestion: {question}\nAnswer: {answer}\nWanted: {criterion}\n{instructions}"
)
JUDGE_CONFIGS: dict[str, dict[str, Any]] = {
    "fact": {"kind": "fact"},
    "qa": {"kind": "qa"},
    "qa_partial": {"kind": "qa", "partial_credit": True},
    "fact_instructions": {"kind": "fact", "instructions": CUSTOM_INSTRUCTIONS},
    "qa_pattern": {"kind": "qa", "grade_pattern": r"GRADE:\s*(\w)"},
    "qa_template": {"kind": "qa", "template": CUSTOM_TEMPLATE},
}
MODEL = "mockllm/model"
_to_float = value_to_float()


def version() -> str:
    from importlib.metadata import version as v

    return v("inspect_ai")


def _state(answer: str, target: str | list[str], **kwargs: Any) -> TaskState:
    return TaskState(
        model=ModelName(MODEL),
        sample_id=1,
        epoch=1,
        input=kwargs.pop("input", "question"),
        messages=[],
        target=Target(target),
        output=ModelOutput.from_content(MODEL, answer),
        **kwargs,
    )


def _value(score: Any) -> float | None:
    if score is None or score.value is None:
        return None
    if isinstance(score.value, float) and math.isnan(score.value):
        return None
    return _to_float(score.value)


def text_value(name: str, answer: str, target: str | list[str]) -> float | None:
    scorer = TEXT_CONFIGS[name]()
    return _value(asyncio.run(scorer(_state(answer, target), Target(target))))


def pattern_value(
    regex: str, answer: str, target: str | list[str], *, match_all: bool, ignore_case: bool
) -> float | None:
    scorer = pattern(regex, ignore_case=ignore_case, match_all=match_all)
    return _value(asyncio.run(scorer(_state(answer, target), Target(target))))


def choice_value(
    answer: str, target: str | list[str], n_choices: int, *, multiple: bool
) -> float | str | None:
    """The value, or ``"error"`` when inspect refuses the target."""
    state = _state(answer, target, choices=[f"option {i}" for i in range(n_choices)])
    set_choices_based_on_generated_response(state, parse_answers(state, multiple))
    try:
        return _value(asyncio.run(choice()(state, Target(target))))
    except ValueError:
        return "error"


def _judge(config: dict[str, Any], reply: str) -> Any:
    cfg = dict(config)
    kind = cfg.pop("kind")
    output = ModelOutput.from_content(MODEL, reply)
    output.usage = ModelUsage(
        input_tokens=1, output_tokens=1, total_tokens=2
    )  # no tokenizer download
    model = get_model(MODEL, custom_outputs=[output])
    factory = model_graded_fact if kind == "fact" else model_graded_qa
    return factory(model=model, **cfg)


def judge_value(name: str, reply: str) -> float | None:
    scorer = _judge(JUDGE_CONFIGS[name], reply)
    state = _state(
        "Paris", "Paris", input="What is the capital of France?", metadata={"topic": "geography"}
    )
    return _value(asyncio.run(scorer(state, Target("Paris"))))


def judge_prompt(
    name: str, question: str, answer: str, target: str | list[str], metadata: dict[str, Any]
) -> str:
    """The prompt inspect_ai sends the judge."""
    scorer = _judge(JUDGE_CONFIGS[name], "GRADE: C")
    state = _state(answer, target, input=question, metadata=metadata)
    score = asyncio.run(scorer(state, Target(target)))
    prompt = score.metadata["grading"][0]
    return str(prompt.text)
